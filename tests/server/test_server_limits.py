"""The server's CPU and input bounds, attacked through the MCP SDK's own client (in memory) and real HTTP.

Issue 9 items 3, 7, 10 and the cross-library half of 6: a search call with thousands of keywords took
the CPU for minutes; megabyte arguments came back as megabyte replies and errors; the posting cache grew
with every unknown term; one failing library failed every search across libraries; an HTTP client that
disconnected left its search running.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import string
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from attackkit import (
    LONG_BUDGET,
    REPEAT_TREE,
    SEARCH_STARTED,
    install_damaged_store,
    phrase_query,
    wait_for_search,
)
from docbundle.bundle import search as engine
from docbundle.bundle.query import MAX_KEYWORD_CHARS, MAX_QUERY_CHARS
from docbundle.server import bounds, docs
from docbundle.server.catalog import Catalog
from docbundle.server.mcp.server import create_server
from mcp import Client
from mcp.shared.exceptions import MCPError
from serverkit import HttpServerProcess, install_golden
from treekit import build

pytestmark = pytest.mark.anyio

# The longest query the server accepts (MAX_QUERY_CHARS), spelled out so that the attack
# is the same against code without the bound.
QUERY_CHARS = 2000

MEGABYTE = 1_000_000
# A refusal or error quotes back at most MAX_ECHO_CHARS of input: its whole text stays this short.
SHORT = 1_000


def made_up_words(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct lowercase words that no bundle holds."""
    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < n:
        out.add("q" + "".join(rng.choice(string.ascii_lowercase) for _ in range(9)))
    return sorted(out)


@pytest.fixture(scope="module")
def repeat_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Library ``repeat``: the worst case of phrase matching (see attackkit)."""
    base = tmp_path_factory.mktemp("repeat")
    return build(base / "site" / "repeat.toml", base / "bundles", REPEAT_TREE).root


@asynccontextmanager
async def connect(catalog: Catalog) -> AsyncIterator[Client]:
    """An in-memory client session; the whole test is time-boxed (answers instead of hanging)."""
    with anyio.fail_after(60):
        async with Client(create_server(catalog)) as client:
            yield client


async def tool_error(client: Client, tool: str, **args: Any) -> str:
    """Call a tool that must fail; returns the error text."""
    result = await client.call_tool(tool, args)
    assert result.is_error, str(result.structured_content)[:300]
    (block,) = result.content
    assert block.type == "text"
    return block.text


async def test_thousands_of_keywords_are_refused_at_once(catalog: Catalog) -> None:
    async with connect(catalog) as c:
        text = await tool_error(c, "search_documents", keywords=made_up_words(5_000), libraryId="golden")
        assert f"the limit is {bounds.MAX_KEYWORDS}" in text and "5000 items" in text
        assert len(text) < SHORT
        # The comma-separated form is bounded too, and so is each keyword.
        text = await tool_error(c, "search_documents", keywords=",".join(made_up_words(5_000)))
        assert "keywords is too long" in text and len(text) < SHORT
        text = await tool_error(c, "search_documents", keywords=["x" * 10_000], libraryId="golden")
        assert f"the limit is {MAX_KEYWORD_CHARS}" in text and len(text) < SHORT
        # At the bound the call is answered.
        ok = await c.call_tool(
            "search_documents", {"keywords": made_up_words(bounds.MAX_KEYWORDS), "libraryId": "golden"}
        )
        assert not ok.is_error


async def test_a_megabyte_query_is_refused_with_a_short_error(catalog: Catalog) -> None:
    async with connect(catalog) as c:
        text = await tool_error(c, "search_documents", query="word " * (MEGABYTE // 5), libraryId="golden")
        assert f"the limit is {MAX_QUERY_CHARS}" in text and len(text) < SHORT
        for alias in ("question", "q"):
            text = await tool_error(c, "search_documents", **{alias: "w" * MEGABYTE})
            assert "query is too long" in text and len(text) < SHORT


async def test_replies_quote_back_only_a_prefix_of_the_query(catalog: Catalog) -> None:
    query = " ".join(made_up_words(QUERY_CHARS // 11))[:QUERY_CHARS]
    async with connect(catalog) as c:
        result = await c.call_tool(
            "search_documents", {"query": query, "libraryId": "golden", "maxTokens": 500}
        )
        assert not result.is_error
        data = result.structured_content
        assert data is not None
        assert len(data["query"]) <= bounds.MAX_ECHO_CHARS + 1
        assert len(data["dropped"]) <= bounds.MAX_ECHO_ITEMS + 1
        assert all(len(w) <= bounds.MAX_ECHO_CHARS + 1 for w in data["dropped"] + data["terms"])
        (block,) = result.content
        assert block.type == "text"
        assert query not in block.text
        assert len(block.text) < 4 * 500  # the reply fits maxTokens=500 (4 characters a token)
        assert len(json.dumps(data)) < 4 * 500
    assert MAX_QUERY_CHARS == QUERY_CHARS  # the attack above used the whole bound


async def test_long_ids_and_arguments_get_short_refusals(catalog: Catalog) -> None:
    big = "a" * MEGABYTE
    calls: list[tuple[str, dict[str, Any], str]] = [
        ("list_library_versions", {"libraryId": big}, "libraryId"),
        ("list_library_versions", {"library": big}, "libraryId"),
        ("search_documents", {"query": "x", "libraryId": big}, "libraryId"),
        ("search_documents", {"query": "x", "libraryId": "golden", "version": big}, "version"),
        ("get_document", {"libraryId": "golden", "id": big}, "id"),
        ("get_document", {"libraryId": "golden", "path": big}, "id"),
        ("get_document", {"libraryId": big, "id": "x"}, "libraryId"),
        ("get_document", {"libraryId": "golden", "id": "index.md", "cursor": big}, "cursor"),
        ("list_documents", {"libraryId": "golden", "section": big}, "section"),
        ("list_documents", {"libraryId": "golden", "version": big}, "version"),
        ("list_libraries", {"category": big}, "category"),
        ("get_chunk_with_context", {"libraryId": "golden", "documentId": big, "chunkId": 0}, "id"),
        ("search_documents", {"query": "x", "libraryId": "a", "library": big}, "libraryId"),
    ]
    async with connect(catalog) as c:
        for tool, args, named in calls:
            text = await tool_error(c, tool, **args)
            assert named in text, (tool[:40], list(args), text[:200])
            assert len(text) < SHORT, (tool[:40], list(args), len(text))
        with pytest.raises(MCPError) as unknown:  # an unknown tool is a protocol error (-32602)
            await c.call_tool(big, {})
        assert "unknown tool" in unknown.value.error.message and len(unknown.value.error.message) < SHORT
        # A long id under the bound is still an id that does not exist: short error too.
        text = await tool_error(c, "get_document", libraryId="golden", id="d" * bounds.MAX_DOCUMENT_ID_CHARS)
        assert "no document" in text and len(text) < SHORT
        for uri in (
            f"docs://golden/latest/{big}",
            f"library://{big}",
            f"docs://{big}/latest/x",
            f"zz://{big}",
        ):
            with pytest.raises(MCPError) as err:
                await c.read_resource(uri)
            assert len(err.value.error.message) < SHORT
        for name, args in (
            ("search-docs", {"query": big}),
            ("search-docs", {"query": "x", "libraryId": big}),
            ("explain-with-docs", {"topic": big, "libraryId": "golden"}),
            (big, {"query": "x"}),
        ):
            with pytest.raises(MCPError) as err:
                await c.get_prompt(name, args)
            assert len(err.value.error.message) < SHORT


async def test_the_time_budget_answers_the_heaviest_accepted_search(repeat_root: Path) -> None:
    catalog = Catalog.load(repeat_root)
    try:
        async with connect(catalog) as c:
            query = phrase_query(QUERY_CHARS)
            result = await c.call_tool("search_documents", {"query": query, "libraryId": "repeat"})
            assert not result.is_error, result.content
            data = result.structured_content
            assert data is not None and data["stopped"] is True
            assert "time budget" in (data["message"] or "")
            # The server is still there for the next call.
            libs = await c.call_tool("list_libraries", {})
            assert not libs.is_error
    finally:
        catalog.close()


async def test_a_search_across_libraries_skips_a_damaged_one(tmp_path: Path) -> None:
    root = tmp_path / "bundles"
    install_golden(root)
    install_damaged_store(root, "damaged")
    catalog = Catalog.load(root)
    try:
        async with connect(catalog) as c:
            result = await c.call_tool("search_documents", {"query": "useEffect hooks"})
            assert not result.is_error, result.content
            data = result.structured_content
            assert data is not None
            assert [s["libraryId"] for s in data["searched"]] == ["golden"]
            (skipped,) = data["skipped"]
            assert skipped["libraryId"] == "damaged" and "malformed" in skipped["reason"]
            assert data["hits"] and {h["libraryId"] for h in data["hits"]} == {"golden"}
            # Asked for by name, the damaged library is an error that names it, not a crash.
            text = await tool_error(c, "search_documents", query="useEffect hooks", libraryId="damaged")
            assert "'damaged'" in text and "unavailable" in text
    finally:
        catalog.close()


async def test_forty_thousand_unknown_terms_leave_the_caches_bounded(golden_root: Path) -> None:
    catalog = Catalog.load(golden_root)
    try:
        words = made_up_words(40_000, seed=11)
        async with connect(catalog) as c:
            per_call = QUERY_CHARS // 11
            for i in range(0, len(words), per_call):
                result = await c.call_tool(
                    "search_documents", {"query": " ".join(words[i : i + per_call]), "libraryId": "golden"}
                )
                assert not result.is_error, result.content
        searcher = catalog.open("golden").searcher
        cache = searcher._cache
        assert (
            len(cache) <= engine.POSTINGS_CACHE_MAX_ENTRIES and cache.bytes <= engine.POSTINGS_CACHE_MAX_BYTES
        )
        # The engine itself, fed every term: the oldest entries make room.
        for w in words:
            searcher._postings(w)
        assert engine.POSTINGS_CACHE_MAX_ENTRIES // 2 <= len(cache) <= engine.POSTINGS_CACHE_MAX_ENTRIES
        assert cache.bytes <= engine.POSTINGS_CACHE_MAX_BYTES
        for w in words[:5_000]:
            searcher._positions("body", w)
        pos = searcher._pos_cache
        assert (
            len(pos) <= engine.POSITIONS_CACHE_MAX_ENTRIES and pos.bytes <= engine.POSITIONS_CACHE_MAX_BYTES
        )
    finally:
        catalog.close()


def _signal_search_start(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """An event set as soon as a ``BundleSearcher.search`` call starts (in the tool's worker thread)."""
    started = threading.Event()
    real = engine.BundleSearcher.search

    def search(self: engine.BundleSearcher, *args: Any, **kwargs: Any) -> engine.SearchOutcome:
        started.set()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(engine.BundleSearcher, "search", search)
    return started


async def test_a_cancelled_call_stops_its_search(
    repeat_root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A long budget, so the heaviest accepted search is still running when the client gives up.
    monkeypatch.setattr(docs, "SEARCH_TIME_BUDGET", 600)
    caplog.set_level(logging.INFO, logger="docbundle.server.mcp.tools")
    searching = _signal_search_start(monkeypatch)
    catalog = Catalog.load(repeat_root)
    try:
        async with connect(catalog) as c:
            async with anyio.create_task_group() as tg:

                async def cancel_once_searching() -> None:
                    assert await anyio.to_thread.run_sync(searching.wait, 30), "the search never started"
                    tg.cancel_scope.cancel()  # the client cancels: the SDK sends notifications/cancelled

                tg.start_soon(cancel_once_searching)
                await c.call_tool(
                    "search_documents", {"query": phrase_query(QUERY_CHARS), "libraryId": "repeat"}
                )
                raise AssertionError("the search finished before the client could cancel it")
            libs = await c.call_tool("list_libraries", {})
            assert not libs.is_error
            with anyio.fail_after(20):  # the engine saw the cancel (it checks between units of work)
                while not any("cancelled by its caller" in r.getMessage() for r in caplog.records):
                    await anyio.sleep(0.05)
    finally:
        catalog.close()


def test_an_http_client_that_disconnects_stops_its_search(
    repeat_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "search_documents",
            "arguments": {"query": phrase_query(QUERY_CHARS), "libraryId": "repeat"},
        },
    }
    body = json.dumps(call).encode()
    started = tmp_path / "search-started"
    monkeypatch.setenv(SEARCH_STARTED, str(started))  # the server inherits it
    server = HttpServerProcess(repeat_root, "--no-auth", "--rate", "off", "--log-level", "info")
    # The real CLI, with the default search time budget, under a script that says when a search starts.
    server.cmd = [sys.executable, "-c", LONG_BUDGET, str(docs.SEARCH_TIME_BUDGET), *server.cmd[3:]]
    with server:
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(head + body)
            assert server._proc is not None
            wait_for_search(started, server._proc)  # it needs seconds on this bundle
        # The engine saw the cancel: it raised CancelledError at a check, which app logs.
        line = server.wait_for(lambda s: "cancelled by its caller" in s, 20)
        assert "search_documents" in line
