"""Issue 9, item 6: a build's pruning never deletes a bundle that a running server holds.

A server leases the bundle ``CURRENT`` names once it uses a library (lists, resolves or opens it: a
shared flock on its manifest). Two
rebuilds with ``keep = 1`` would delete it; the lease keeps it, the server answers from it, and once
the server has exited the next build prunes it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from clikit import index_cli
from docbundle.bundle.layout import BUILD_ID_RE, read_current
from docsite import TOPICS, publish_site, write_config
from mcp import Client, StdioServerParameters
from sitesrv import Site


def _build(config: Path, out: Path) -> dict[str, object]:
    r = index_cli("build", "--config", str(config), "--out", str(out), "--json", "--quiet")
    assert r.returncode == 0, r.stderr + r.stdout
    (lib,) = json.loads(r.stdout)["libraries"]
    return dict(lib)


def _builds(vdir: Path) -> set[str]:
    return {p.name for p in vdir.iterdir() if BUILD_ID_RE.fullmatch(p.name)}


def test_pruning_keeps_what_a_running_server_holds(site: Site, tmp_path: Path) -> None:
    publish_site(site, revision=1)
    config = write_config(tmp_path, site.url("/llms.txt"), "keep = 1")
    out = tmp_path / "bundles"
    vdir = out / "demo" / "latest"
    first = _build(config, out)["build_id"]

    async def serve_while_rebuilding() -> None:
        # Live reload off: this test holds the first build across rebuilds (test_live_reload covers reload).
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "docbundle.server", "serve", "--bundles", str(out), "--reload-interval", "0"],
        )
        with anyio.fail_after(120):
            async with Client(params) as client:
                # The server has listed demo (so it checked demo's CURRENT and holds a lease on the
                # first build) but has not opened it yet: the two rebuilds happen before its first search.
                await client.call_tool("list_libraries", {})
                for revision in (2, 3):
                    publish_site(site, revision=revision)
                    await anyio.to_thread.run_sync(_build, config, out)
                assert first in _builds(vdir), "the build a running server holds was pruned"
                assert read_current(vdir) != first
                result = await client.call_tool(
                    "search_documents", {"query": "useEffect cleanup", "libraryId": "demo"}
                )
                assert not result.is_error, result.content
                data = result.structured_content or {}
                assert data["buildId"] == first and data["hits"], data

    anyio.run(serve_while_rebuilding)
    publish_site(site, revision=4)
    last = _build(config, out)["build_id"]
    assert _builds(vdir) == {last}, "once the server has exited, its build is pruned"
    assert len(TOPICS) > 1
