"""A serving catalogue warms its bundles without starving the searches (issue 35, finding 6).

``docbundle serve`` warms the bundles it opens (``CatalogSettings.serving``). Every bundle a search
across libraries opened used to start its own warm-up thread: over 1,000 small libraries sharing one
vocabulary, 49 ran at once and most searches stopped at their time budget. Now one thread warms one
bundle at a time, a bundle the route index chose is warmed only when a request uses it again, and one
closed past ``--max-open`` is not warmed. Through the MCP SDK client in memory, over a catalogue of
copies of the golden bundle (so every question's words are in every library), with serve's settings.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from docbundle.bundle.reader import open_bundle
from docbundle.bundle.search import BundleSearcher
from docbundle.server.catalog import Catalog, CatalogSettings
from docbundle.server.catalog.warmup import WARM_CPU_SHARE, WARM_THREAD_NAME
from docbundle.server.mcp.server import create_server
from mcp import Client
from serverkit import GOLDEN_BUILD, install_golden, private_copy, search_text

pytestmark = pytest.mark.anyio

LIBRARIES = 40  # more than a search across libraries routes to (10), fewer than --max-open (32) twice over
QUESTIONS = ("routing table", "useEffect cleanup", "결제위젯 연동", "sap.m.Table rows", "hooks effect")
HANG_GUARD_SECONDS = 120.0  # how long a test waits for the warm-up it expects (a hang guard only)
WARMED = re.compile(r"^(\S+)/latest: \d+ terms' postings cached")


@pytest.fixture(scope="module")
def many_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``LIBRARIES`` copies of the golden bundle under their own ids."""
    root = tmp_path_factory.mktemp("warm") / "bundles"
    for i in range(LIBRARIES):
        install_golden(root, f"lib{i:02d}")
    return root


@pytest.fixture
def root(many_root: Path, tmp_path: Path) -> Path:
    """A private copy (the server writes its route index)."""
    return private_copy(many_root, tmp_path)


@asynccontextmanager
async def serve(root: Path, settings: CatalogSettings) -> AsyncIterator[Client]:
    """An in-memory client on a server over ``root`` with ``settings``; time-boxed."""
    catalog = Catalog.load(root, settings=settings)
    try:
        with anyio.fail_after(300):
            async with Client(create_server(catalog)) as client:
                yield client
    finally:
        catalog.close()


def _warm_threads() -> int:
    return sum(t.name == WARM_THREAD_NAME for t in threading.enumerate())


def _warmed(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The libraries the warm-up finished, in order (its debug lines)."""
    return [m[1] for r in caplog.records if (m := WARMED.match(r.getMessage()))]


async def _until(done: Callable[[], bool]) -> None:
    """Wait until ``done()`` (a hang guard only: the warm-up's pace is not what a test asserts)."""
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while not done() and time.monotonic() < deadline:
        await anyio.sleep(0.05)


async def test_searches_across_many_libraries_never_run_two_warm_ups_at_once(
    root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="docbundle.server.catalog")
    most = 0
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        nonlocal most
        if thread.name == WARM_THREAD_NAME:
            most = max(most, _warm_threads() + 1)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    async with serve(root, CatalogSettings.serving()) as client:
        for _ in range(3):
            for question in QUESTIONS:
                data, _text = await search_text(client, query=question)
                assert data["routing"]["method"] == "routed" and data["routing"]["searched"] == 10
                most = max(most, _warm_threads())
        # The libraries asked again while open were warmed, by one thread.
        await _until(lambda: bool(_warmed(caplog)))
        assert _warmed(caplog)
    assert most == 1, f"{most} warm-up threads ran at once"


async def test_a_bundle_the_route_index_chose_is_warmed_only_when_asked_again(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="docbundle.server.catalog")
    async with serve(root, CatalogSettings.serving()) as client:
        data, _text = await search_text(client, query="routing table")
        routed = {s["libraryId"] for s in data["searched"]}
        assert len(routed) == 10
        named = next(f"lib{i:02d}" for i in range(LIBRARIES) if f"lib{i:02d}" not in routed)
        await search_text(client, query="routing table", libraryId=named)
        # One thread warms in the order asked: once the library searched by name is warmed, any routed
        # one asked to be warmed before it would have been.
        await _until(lambda: named in _warmed(caplog))
        assert _warmed(caplog) == [named]
        await search_text(client, query="routing table")  # the same ten, asked again while open
        await _until(lambda: routed <= set(_warmed(caplog)))
        assert set(_warmed(caplog)) == routed | {named}


async def test_a_bundle_closed_past_max_open_is_not_warmed(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="docbundle.server.catalog")
    async with serve(root, CatalogSettings.serving(max_open=2)) as client:
        for lib in ("lib00", "lib01", "lib02"):  # lib00 closed past --max-open 2 when lib02 opens
            await search_text(client, query="routing table", libraryId=lib)
        await _until(lambda: "lib02" in _warmed(caplog))
        assert "lib00" not in _warmed(caplog) and "lib02" in _warmed(caplog)


def test_the_warm_up_sleeps_in_proportion_to_the_cpu_each_term_cost(
    many_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two terms it waits (1 / share - 1) times the term's CPU: at most ``share`` of a core."""
    from docbundle.bundle import search as search_module

    ticks = iter(range(10_000))
    monkeypatch.setattr(search_module.time, "thread_time", lambda: 0.01 * next(ticks))  # 10 ms a term

    class Stop(threading.Event):
        """Never set; records how long each pause between two terms would wait."""

        def __init__(self) -> None:
            super().__init__()
            self.waits: list[float] = []

        def wait(self, timeout: float | None = None) -> bool:
            self.waits.append(timeout or 0.0)
            return False

    bundle = open_bundle(many_root / "lib00" / "latest" / GOLDEN_BUILD)
    try:
        stop = Stop()
        done = BundleSearcher(bundle).warm(4, stop, pause=0.002, share=WARM_CPU_SHARE)
    finally:
        bundle.close()
    assert done == 4
    assert stop.waits == pytest.approx([0.01 * (1 / WARM_CPU_SHARE - 1)] * 3)  # after terms 1, 2 and 3
