"""Issue 31: no request holds the server's event loop, whatever it sends or the bundles folder holds.

Each test runs the server in process (the MCP SDK's own client in memory, or the HTTP app through its
ASGI transport) under ``loopguard.loop_guard``, which fails when one step on the loop took over 100 ms,
and sends one of the hostile inputs of issue 31:

- ``resolve_library`` with a 2,000-character query of words with few distinct letter pairs, at 1,500
  libraries (item 4: each word scanned the whole vocabulary, 4.2 s at 1,000 libraries, on the loop);
- ``list_libraries`` over a catalogue summary whose entries all name another build than ``CURRENT``
  (item 6: one rewrite of the whole summary per library, on the loop);
- cursors that decode to data nested thousands deep (item 9: a generic tool error with a logged
  traceback, and ``resources/list`` answering ``code: 0`` with the exception's text);
- ``/ui/libraries`` and ``/metrics`` over a summary with a made-up build, name, counts and a 2 MB
  content hash (item 10), and the public endpoints, at 1,500 libraries.

Times are never asserted but by the guard's limit; figures are in ``benchmarks/hostile.py --only resolve
summary``.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import logging
import random
import time
from pathlib import Path

import msgspec
import pytest
from asgikit import serving
from docbundle.bundle import summary as summary_module
from docbundle.bundle.manifest import Counts, LibraryInfo, VersionInfo
from docbundle.bundle.summary import SummaryEntry, read_summary, write_summary
from docbundle.server.catalog import Catalog, LibraryEntry, VersionEntry
from docbundle.server.http.options import HttpOptions
from docbundle.server.mcp.server import create_server
from httpkit import MCP_HEADERS, client
from loopguard import loop_guard
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from metricskit import parse, tool_call
from serverkit import GOLDEN_BUILD, call, connect, install_golden

pytestmark = pytest.mark.anyio

LIBRARIES = 1_500  # enough for each old defect to hold the loop far past the limit
STALE = 300  # libraries whose summary entry names another build than CURRENT
OPTIONS = HttpOptions(host="127.0.0.1", rate=None, reload_interval=0)
_WORD_TEXT = (
    "lantern compass harbor quartz meadow falcon ember glacier orchid summit amber cobalt violet silver "
    "copper indigo scarlet ivory olive russet wave stone leaf gate field brook crest forge grove spire "
    "vale cliff marsh ridge shore hollow thorn mill quay fen parser client router cache stream queue "
    "vector matrix tensor graph schema widget render layout signal socket bridge portal kernel shell"
)
_WORDS = _WORD_TEXT.split()


def hostile_query(size: int = 2_000) -> str:
    """Words of two alternating letters (``abababab acacacac ...``), 8 to 16 letters, ``size`` characters."""
    out: list[str] = []
    for n in itertools.cycle(range(8, 17)):
        for x, y in itertools.permutations("abcdefghijklmnopqrstuvwxyz", 2):
            out.append((x + y) * (n // 2) + x * (n % 2))
            if sum(len(w) + 1 for w in out) > size:
                return " ".join(out)[:size]
    raise AssertionError("unreachable")


def _entry(i: int, rng: random.Random) -> SummaryEntry:
    lib_id = f"lib-{i:05d}"
    return SummaryEntry(
        library=LibraryInfo(
            id=lib_id,
            name=f"{rng.choice(_WORDS).title()} {rng.choice(_WORDS)}{rng.choice(_WORDS)} toolkit",
            description=" ".join(rng.choice(_WORDS) + rng.choice(("", "s", "er", "ing")) for _ in range(10)),
            category=rng.choice(("web", "data", "cloud", "ml")),
        ),
        version=VersionInfo(name="latest"),
        build_id=GOLDEN_BUILD,
        content_hash="0" * 64,
        built_at="2026-01-01T00:00:00Z",
        manifest_sha256="0" * 64,
        counts=Counts(documents=3, chunks=9),
        languages=["en"],
    )


@pytest.fixture
def big(tmp_path: Path) -> Catalog:
    """A catalogue of ``LIBRARIES`` libraries as the summary describes them (checked; no bundle is
    opened by the requests these tests send)."""
    rng = random.Random(31)
    libs = {}
    for i in range(LIBRARIES):
        e = _entry(i, rng)
        libs[e.library.id] = LibraryEntry(
            e.library.id, {"latest": VersionEntry(e.library.id, "latest", None, e)}, "latest"
        )
    return Catalog(tmp_path, libs)


async def test_the_guard_fails_a_step_that_works_or_blocks_on_the_loop() -> None:
    """The guard bites: 150 ms of CPU in one step, and a 2.2 s blocking sleep, each fail the block; a
    step that awaits for longer (the loop is free meanwhile) does not."""

    async def spin() -> None:
        started = time.thread_time()
        while time.thread_time() - started < 0.15:
            pass

    async def block() -> None:
        time.sleep(2.2)

    for work in (spin, block):
        with pytest.raises(AssertionError, match="the event loop was held") as caught:
            async with loop_guard():
                await asyncio.create_task(work())  # its own task: named in the failure
        assert work.__name__ in str(caught.value)
    async with loop_guard():
        await asyncio.sleep(0.3)


async def test_a_hostile_resolve_query_at_1500_libraries_holds_no_loop(big: Catalog) -> None:
    query = hostile_query()
    assert len(query) == 2_000
    async with connect(big) as c:
        await call(c, "resolve_library", name="lantern")  # the word index is built (off the loop too)
        async with loop_guard():
            found = await call(c, "resolve_library", name=query)
            # Completions of a libraryId resolve what was typed too.
            typed = await c.complete(
                {"type": "ref/resource", "uri": "library://{libraryId}"},
                {"name": "libraryId", "value": query[:100]},
            )
    assert "Only the first 10 distinct words" in (found.get("message") or ""), found
    assert len(typed.completion.values) <= 100
    # A plain query still finds its library first.
    async with connect(big) as c:
        name = big.libraries()[517].name
        assert (await call(c, "resolve_library", name=name))["matches"][0]["id"] == "lib-00517"


@pytest.fixture
def stale(tmp_path: Path) -> Path:
    """``STALE`` libraries whose catalogue summary names a build CURRENT does not (an older one)."""
    root = tmp_path / "bundles"
    for i in range(STALE):
        install_golden(root, f"lib-{i:04d}")
    Catalog.load(root).close()  # writes the summary
    entries = read_summary(root) or []
    assert len(entries) == STALE
    write_summary(root, [msgspec.structs.replace(e, build_id="20250101-000000000000") for e in entries])
    return root


async def test_a_summary_stale_for_many_libraries_is_rewritten_once_off_the_loop(
    stale: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    write = summary_module.write_summary

    def counted(root: Path, entries: object) -> bool:
        writes.append(1)
        return write(root, entries)  # type: ignore[arg-type]

    monkeypatch.setattr(summary_module, "write_summary", counted)
    catalog = Catalog.load(stale)
    try:
        # Over HTTP in process: the in-memory MCP client would validate the 50,000-token answer with
        # pydantic in the same loop step as the server, and that is the client's work, not the server's.
        async with serving(catalog, OPTIONS) as app, client(app) as http, loop_guard():
            reply = await http.post(
                "/mcp", content=tool_call(1, "list_libraries", maxTokens=50_000), headers=MCP_HEADERS
            )
        listed = reply.json()["result"]["structuredContent"]
        shown = listed["libraries"]
        assert len(shown) > 100, len(shown)  # many libraries checked in this one call
        assert {lib["buildId"] for lib in shown} == {GOLDEN_BUILD}
        assert len(writes) == 1, f"{len(writes)} rewrites of the summary for one listing"
        fixed = {e.key: e.build_id for e in read_summary(stale) or []}
        assert all(fixed[lib["id"], "latest"] == GOLDEN_BUILD for lib in shown)
    finally:
        catalog.close()


def _nested_cursor(depth: int) -> str:
    return base64.urlsafe_b64encode(("[" * depth).encode()).decode().rstrip("=")


async def test_nested_cursors_get_the_invalid_cursor_answer_and_no_traceback(
    big: Catalog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with Client(create_server(big)) as c, loop_guard():
        for depth in (2_000, 20_000):
            result = await c.call_tool("list_libraries", {"cursor": _nested_cursor(depth)})
            assert result.is_error
            text = " ".join(getattr(b, "text", "") for b in result.content)
            assert "is not one list_libraries returned" in text, text
            with pytest.raises(MCPError) as refused:
                await c.list_resources(cursor=_nested_cursor(depth))
            assert refused.value.error.code == INVALID_PARAMS
            assert "is not one resources/list returned" in refused.value.error.message
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert "RecursionError" not in caplog.text


async def test_a_nested_get_document_cursor_is_a_bad_cursor_without_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by the re-run of the attacks: ``get_document``'s own cursor decoder let RecursionError out
    (a generic tool error, a logged traceback, counted as a server error)."""
    caplog.set_level(logging.DEBUG)
    root = tmp_path / "bundles"
    install_golden(root, "golden")
    catalog = Catalog.load(root)
    try:
        async with Client(create_server(catalog)) as c, loop_guard():
            for depth in (2_000, 20_000):
                args = {
                    "libraryId": "golden",
                    "documentId": "guides/tables.md",
                    "cursor": _nested_cursor(depth),
                }
                result = await c.call_tool("get_document", args)
                assert result.is_error
                text = " ".join(getattr(b, "text", "") for b in result.content)
                assert "is not one get_document returned" in text, text
    finally:
        catalog.close()
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert "RecursionError" not in caplog.text


@pytest.fixture
def forged(tmp_path: Path) -> Path:
    """Two libraries whose summary entries claim another build, name and counts, and a 2 MB hash."""
    root = tmp_path / "bundles"
    for lib_id in ("alpha", "beta"):
        install_golden(root, lib_id)
    Catalog.load(root).close()
    entries = read_summary(root) or []
    lie = [
        msgspec.structs.replace(
            e,
            library=msgspec.structs.replace(e.library, name="Trusted Official Docs"),
            build_id="20991231-ffffffffffff",
            content_hash="f" * 2_000_000,
            counts=Counts(documents=123_456, chunks=654_321),
        )
        for e in entries
    ]
    write_summary(root, lie)
    return root


async def test_ui_libraries_and_metrics_show_no_unchecked_claims_and_bounded_labels(forged: Path) -> None:
    catalog = Catalog.load(forged)
    try:
        async with serving(catalog, OPTIONS) as app, client(app) as http:
            async with loop_guard():
                scraped = await http.get("/metrics")  # before anything checked a library
                rows = (await http.get("/ui/libraries")).json()["libraries"]
                for path in ("/healthz", "/readyz", "/info"):
                    assert (await http.get(path)).status_code in (200, 503)
            assert len(scraped.text) < 20_000, len(scraped.text)
            assert "20991231-ffffffffffff" not in scraped.text and "123456" not in scraped.text
            # The page's listing checks the libraries it shows (as a page of list_libraries does: their
            # CURRENT names another build), so its rows are the true builds, never the summary's claims.
            assert {row["buildId"] for row in rows} == {GOLDEN_BUILD}
            assert all(row["checked"] and row["documents"] != 123_456 for row in rows)
            samples = parse((await http.get("/metrics")).text)
    finally:
        catalog.close()
    longest = max(len(v) for _, labels in samples for _, v in labels)
    assert longest <= 64, f"a label value of {longest} characters"
    builds = {
        dict(labels).get("build_id") for (name, labels) in samples if name == "docbundle_library_build_info"
    }
    assert builds == {GOLDEN_BUILD}


async def test_list_libraries_and_the_operator_page_over_1500_libraries_hold_no_loop(big: Catalog) -> None:
    async with serving(big, OPTIONS) as app, client(app) as http, loop_guard():
        listed = await http.post(
            "/mcp", content=tool_call(1, "list_libraries", maxTokens=50_000), headers=MCP_HEADERS
        )
        page = await http.get("/ui/libraries")
        resolved = await http.post(
            "/mcp", content=tool_call(2, "resolve_library", name=hostile_query()), headers=MCP_HEADERS
        )
        scraped = await http.get("/metrics")
    assert listed.json()["result"]["structuredContent"]["total"] == LIBRARIES
    assert page.json()["total"] == LIBRARIES
    assert resolved.json()["result"]["isError"] is False
    assert scraped.status_code == 200
