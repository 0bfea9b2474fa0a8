"""Issue 22, item 1: a server starts from the catalogue summary alone and checks each library on its
first use (listed, named, searched): its CURRENT read, its lease taken, and the build CURRENT names
served, whatever the summary said. The live-reload watcher looks at the folder and the summary, not at
every CURRENT.

Whether a CURRENT file was read is not visible to a client when the summary is right (the answers are
the same), so the tests that say "not read" count the reads through the module's own two readers of
``CURRENT`` (``entries._current_text`` and ``entries.read_current``), and the leases by the process's
open descriptors.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.to_thread
import msgspec
import pytest
from docbundle.bundle.layout import read_current, write_current
from docbundle.bundle.summary import SUMMARY_NAME, read_summary, write_summary
from docbundle.server.catalog import Catalog
from docbundle.server.catalog import entries as entries_module
from mcp import Client, StdioServerParameters
from serverkit import install_golden
from treekit import build, one_page

pytestmark = pytest.mark.anyio

LIBRARIES = 12


def _count_current_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read of a CURRENT file by the catalogue from now on (the version folders read)."""
    reads: list[str] = []

    def counted(read: Callable[[Path], object]) -> Callable[[Path], object]:
        def wrapper(vdir: Path) -> object:
            reads.append(f"{vdir.parent.name}/{vdir.name}")
            return read(vdir)

        return wrapper

    monkeypatch.setattr(entries_module, "_current_text", counted(entries_module._current_text))
    monkeypatch.setattr(entries_module, "read_current", counted(entries_module.read_current))
    return reads


def _open_fds() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


@pytest.fixture
def shelf(tmp_path: Path) -> Path:
    """A bundles folder of ``LIBRARIES`` copies of the golden bundle, with its summary written."""
    root = tmp_path / "bundles"
    for i in range(LIBRARIES):
        install_golden(root, f"lib-{i:02d}", name=f"Library {i}")
    Catalog.load(root).close()  # no writer ran: the first load rebuilds the summary
    assert len(read_summary(root) or []) == LIBRARIES
    return root


def test_a_start_from_the_summary_reads_no_current_and_takes_no_lease(
    shelf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _count_current_reads(monkeypatch)
    fds = _open_fds()
    catalog = Catalog.load(shelf)
    try:
        assert catalog.library_ids() == [f"lib-{i:02d}" for i in range(LIBRARIES)]
        assert reads == [], f"start-up read CURRENT of {reads}"
        assert _open_fds() == fds, "start-up took leases"
        # The first use of one library reads its CURRENT (and leases its build), and only its.
        assert catalog.version_entry("lib-03").build_id == read_current(shelf / "lib-03" / "latest")
        assert set(reads) == {"lib-03/latest"}
        assert _open_fds() == fds + 1
        catalog.version_entry("lib-03")
        assert set(reads) == {"lib-03/latest"} and _open_fds() == fds + 1, "checked twice"
    finally:
        catalog.close()


def test_a_library_first_used_after_its_current_moved_is_served_from_the_new_build(tmp_path: Path) -> None:
    """Started, not used; a new build publishes (no reload runs): the first use gets the new build."""
    root, work = tmp_path / "bundles", tmp_path / "work"
    build(work / "alpha.toml", root, one_page("alpha", "lanterns"))
    catalog = Catalog.load(root)
    try:
        new = build(work / "alpha.toml", root, one_page("alpha", "compasses")).build_id
        assert catalog.version_entry("alpha").build_id == new
        opened = catalog.open("alpha")
        assert [opened.bundle.store.get(h.doc).title for h in opened.searcher.search("compasses").hits] == [
            "Guide to compasses"
        ]
    finally:
        catalog.close()


async def test_a_served_current_moved_by_hand_after_the_summary_was_written_is_what_is_served(
    tmp_path: Path,
) -> None:
    """The summary names build B; an operator moved CURRENT back to A by hand (no writer, so the summary
    still says B): ``docbundle serve`` lists and searches A, and the summary is corrected."""
    root, work = tmp_path / "bundles", tmp_path / "work"
    old = await anyio.to_thread.run_sync(
        lambda: build(work / "alpha.toml", root, one_page("alpha", "lanterns")).build_id
    )
    new = await anyio.to_thread.run_sync(
        lambda: build(work / "alpha.toml", root, one_page("alpha", "compasses")).build_id
    )
    await anyio.to_thread.run_sync(
        lambda: build(work / "beta.toml", root, one_page("beta", "kettles")).build_id
    )
    write_current(root / "alpha" / "latest", old)
    assert {e.key: e.build_id for e in read_summary(root) or []}[("alpha", "latest")] == new
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "docbundle.server", "serve", "--bundles", str(root), "--reload-interval", "0"],
    )
    with anyio.fail_after(120):
        async with Client(params) as client:
            listed = (await client.call_tool("list_libraries", {})).structured_content or {}
            assert {lib["id"]: lib["buildId"] for lib in listed["libraries"]}["alpha"] == old
            found = await client.call_tool("search_documents", {"query": "lanterns", "libraryId": "alpha"})
            data = found.structured_content or {}
            assert data["buildId"] == old and data["hits"], found.content
            gone = await client.call_tool("search_documents", {"query": "compasses", "libraryId": "alpha"})
            assert not (gone.structured_content or {})["hits"]
    assert {e.key: e.build_id for e in read_summary(root) or []}[("alpha", "latest")] == old


async def test_a_corrupt_bundle_is_refused_at_its_first_use_while_the_others_serve(shelf: Path) -> None:
    damaged = shelf / "lib-05" / "latest" / (read_current(shelf / "lib-05" / "latest") or "")
    data = bytearray((damaged / "docs.bin").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (damaged / "docs.bin").write_bytes(bytes(data))
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "docbundle.server", "serve", "--bundles", str(shelf)]
    )
    with anyio.fail_after(120):
        async with Client(params) as client:
            listed = (await client.call_tool("list_libraries", {})).structured_content or {}
            states = {lib["id"]: lib["status"] for lib in listed["libraries"]}
            assert len(states) == LIBRARIES and states["lib-05"] == "available"
            refused = await client.call_tool(
                "search_documents", {"query": "useEffect cleanup", "libraryId": "lib-05"}
            )
            assert refused.is_error and "docs.bin" in str(refused.content), refused.content
            for lib in ("lib-04", "lib-06"):
                ok = await client.call_tool(
                    "search_documents", {"query": "useEffect cleanup", "libraryId": lib}
                )
                assert not ok.is_error and (ok.structured_content or {})["hits"], ok.content
            listed = (await client.call_tool("list_libraries", {})).structured_content or {}
            states = {lib["id"]: lib["status"] for lib in listed["libraries"]}
            assert states["lib-05"] == "failed" and states["lib-04"] == "ready"


def test_the_watcher_sees_a_new_library_without_reading_every_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, work = tmp_path / "bundles", tmp_path / "work"
    for i in range(LIBRARIES):
        install_golden(root, f"lib-{i:02d}")
    Catalog.load(root).close()
    catalog = Catalog.load(root)
    seen = threading.Event()
    catalog.open("lib-01")  # in use: a reload looks at its CURRENT again
    reads = _count_current_reads(monkeypatch)
    try:
        for _ in range(5):
            assert not catalog.refresh()
        assert reads == [], f"an unchanged folder cost reads of {reads}"
        stop = catalog.watch(0.02, lambda change: seen.set())
        try:
            build(work / "gamma.toml", root, one_page("gamma", "gophers"))
            assert seen.wait(30), "the watcher never saw gamma"
        finally:
            stop()
        assert "gamma" in catalog.library_ids()
        # Only the library in use, and gamma while its folder was there before the summary named it.
        assert set(reads) <= {"lib-01/latest", "gamma/latest"}, f"a reload read {sorted(set(reads))}"
        opened = catalog.open("gamma")
        assert [h.doc for h in opened.searcher.search("gophers").hits] == [0]
    finally:
        catalog.close()


def test_a_summary_entry_whose_names_are_not_folder_names_is_not_followed(tmp_path: Path) -> None:
    """A summary that sends a library's version outside its folder ("../..") is rebuilt, never followed."""
    root = tmp_path / "bundles"
    install_golden(root, "lib-a", description="the one inside")
    install_golden(tmp_path / "outside", "lib-a", description="the one outside")
    Catalog.load(root).close()
    (entry,) = read_summary(root) or []
    escaped = msgspec.structs.replace(
        entry, version=msgspec.structs.replace(entry.version, name="../../outside/lib-a/latest")
    )
    write_summary(root, [entry, escaped])
    catalog = Catalog.load(root)
    try:
        lib = catalog.library("lib-a")
        assert list(lib.versions) == ["latest"]
        assert lib.description == "the one inside"
        assert [e.key for e in read_summary(root) or []] == [("lib-a", "latest")], "not rebuilt"
        assert (root / SUMMARY_NAME).exists()
    finally:
        catalog.close()
