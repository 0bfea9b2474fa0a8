"""Issue 9, item 6: readiness tells the truth when a served bundle's files go bad under the server.

Pruning can no longer take files from a running server (it holds leases and reads through the
descriptors it verified: tests/e2e/test_prune_lease.py), but the bytes behind an opened bundle can
still be damaged in place. The library that breaks stops being served and ``/readyz`` names it
(``degraded``), while the other libraries keep answering, across libraries too.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from serverkit import GOLDEN_BUILD, HttpServerProcess, install_golden, readyz


@pytest.mark.anyio
async def test_a_bundle_damaged_while_served_is_reported_and_the_others_answer(tmp_path: Path) -> None:
    root = tmp_path / "bundles"
    install_golden(root)
    install_golden(root, "other")
    (seg,) = (root / "golden" / "latest" / GOLDEN_BUILD / "index").glob("*.seg")
    with HttpServerProcess(root, "--no-auth") as server:
        with anyio.fail_after(60):
            async with Client(server.url) as client:
                first = await client.call_tool(
                    "search_documents", {"query": "useEffect", "libraryId": "golden"}
                )
                assert not first.is_error and (first.structured_content or {})["hits"]
                assert readyz(server.port) == (
                    200,
                    {"status": "ready", "libraries": ["golden", "other"], "failed": []},
                )
                with open(seg, "r+b") as fh:  # damaged in place: the inode the server reads through
                    fh.truncate(0)
                broken = await client.call_tool(
                    "search_documents", {"query": "install", "libraryId": "golden"}
                )
                assert broken.is_error
                status, body = readyz(server.port)
                assert (status, body["status"]) == (200, "degraded")
                assert body["failed"] == [{"libraryId": "golden", "version": "latest"}]
                across = await client.call_tool("search_documents", {"query": "useEffect"})
                data = across.structured_content or {}
                assert not across.is_error and data["hits"]
                assert {h["libraryId"] for h in data["hits"]} == {"other"}
                assert [s["libraryId"] for s in data["skipped"]] == ["golden"]
