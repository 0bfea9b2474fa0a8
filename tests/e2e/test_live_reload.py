"""Live reload (issue 13) through the real entry point: ``docbundle serve`` over stdio, driven by the
MCP SDK's own client, sees a library appear and a new build of another without a restart, announces
``notifications/resources/list_changed``, and keeps the replaced build's files while it may be in use.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import anyio.to_thread
import mcp.types as types
from mcp import Client, StdioServerParameters
from treekit import build, builds, one_page


def test_a_running_stdio_server_serves_new_builds_and_libraries(tmp_path: Path) -> None:
    root, work = tmp_path / "bundles", tmp_path / "work"
    first = build(work / "alpha.toml", root, one_page("alpha", "aardvarks", keep=1)).build_id
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceListChangedNotification):
            changed.set()

    async def scenario() -> None:
        nonlocal changed
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "docbundle.server", "serve", "--bundles", str(root), "--reload-interval", "0.2"],
        )
        with anyio.fail_after(120):
            # Handshake era (2025-11-25), as desktop clients speak today: list changes arrive as plain
            # notifications. (2026-07-28 clients get them only on subscriptions/listen, not served yet.)
            async with Client(params, message_handler=on_message, mode="legacy") as client:
                resources = client.server_capabilities.resources
                assert resources is not None and resources.list_changed
                hit = await client.call_tool("search_documents", {"query": "aardvarks", "libraryId": "alpha"})
                assert (hit.structured_content or {})["buildId"] == first

                # A new library appears: announced, listed, searchable.
                await anyio.to_thread.run_sync(
                    lambda: build(work / "beta.toml", root, one_page("beta", "beetles", keep=1))
                )
                await changed.wait()
                listed = await client.call_tool("list_libraries", {})
                ids = [lib["id"] for lib in (listed.structured_content or {})["libraries"]]
                assert ids == ["alpha", "beta"], ids
                # Announced only once published: the first search answers (no "no bundle built yet").
                hit = await client.call_tool("search_documents", {"query": "beetles", "libraryId": "beta"})
                assert (hit.structured_content or {}).get("hits"), hit.content

                # A new build of alpha (keep = 1): served at once, the old one kept while leased.
                changed = anyio.Event()
                second = await anyio.to_thread.run_sync(
                    lambda: build(work / "alpha.toml", root, one_page("alpha", "zebras", keep=1)).build_id
                )
                await changed.wait()
                hit = await client.call_tool("search_documents", {"query": "zebras", "libraryId": "alpha"})
                data = hit.structured_content or {}
                assert data["buildId"] == second and data["hits"], data
                assert first in builds(root / "alpha" / "latest"), (
                    "the replaced build was pruned while the server still leased it"
                )

    anyio.run(scenario)
