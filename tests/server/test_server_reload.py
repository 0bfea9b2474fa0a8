"""Live reload (issue 13): a new build, a new library or a removed one is served without a restart.

Builds are real (``build_target`` over a small local site), so CURRENT, leases and pruning are the
indexer's own. Requests in flight keep the build they resolved; a replaced build stays open and leased
for the catalogue's grace time, so a prune running meanwhile cannot delete it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from docbundle.server.catalog import Catalog, CatalogChange, CatalogSettings
from docbundle.server.errors import UnknownLibraryError
from treekit import build, builds, one_page


@dataclass(frozen=True)
class Served:
    """A catalogue over a bundles folder holding alpha (one page on aardvarks), and where to build more."""

    catalog: Catalog
    root: Path
    work: Path


@pytest.fixture
def alpha(tmp_path: Path) -> Iterator[Served]:
    root, work = tmp_path / "bundles", tmp_path / "work"
    build(work / "alpha.toml", root, one_page("alpha", "aardvarks"))
    catalog = Catalog.load(root)
    try:
        yield Served(catalog, root, work)
    finally:
        catalog.close()


def _titles(catalog: Catalog, library: str, query: str) -> list[str]:
    opened = catalog.open(library)
    return [opened.bundle.store.get(h.doc).title for h in opened.searcher.search(query).hits]


def test_a_new_build_is_served_without_restart_and_the_old_one_finishes_its_requests(tmp_path: Path) -> None:
    root, work = tmp_path / "bundles", tmp_path / "work"
    first = build(work / "demo.toml", root, one_page("demo", "aardvarks", keep=1)).build_id
    catalog = Catalog.load(root, settings=CatalogSettings(retire_after=3600))
    try:
        assert _titles(catalog, "demo", "aardvarks") == ["Guide to aardvarks"]
        in_flight = catalog.open("demo")  # a request that resolved the old build before the reload
        assert not catalog.changed()

        # keep = 1: the prune wants `first` gone
        second = build(work / "demo.toml", root, one_page("demo", "zebras", keep=1)).build_id
        assert catalog.changed()
        change = catalog.reload()
        assert change.updated == (("demo", "latest"),) and not change.added and not change.removed
        assert catalog.version_entry("demo").build_id == second
        assert _titles(catalog, "demo", "zebras") == ["Guide to zebras"]
        assert _titles(catalog, "demo", "aardvarks") == []

        # The request in flight finishes on the build it started with, and the lease kept its files.
        assert [h.doc for h in in_flight.searcher.search("aardvarks").hits] == [0]
        assert first in builds(root / "demo" / "latest")

        # After the grace time the old build is closed and its lease released: the next prune deletes it.
        assert catalog.expire(now=float("inf")) == 2  # the opened bundle and the lease
        build(work / "demo.toml", root, one_page("demo", "yaks", keep=1))
        assert first not in builds(root / "demo" / "latest")
        assert catalog.reload().updated == (("demo", "latest"),)
        assert _titles(catalog, "demo", "yaks") == ["Guide to yaks"]
    finally:
        catalog.close()


def test_libraries_that_appear_or_go_are_listed_after_a_reload(alpha: Served) -> None:
    catalog, root, work = alpha.catalog, alpha.root, alpha.work
    assert catalog.library_ids() == ["alpha"]
    build(work / "beta.toml", root, one_page("beta", "beetles"))
    change = catalog.reload()
    assert change.added == ("beta",) and not change.updated
    assert catalog.library_ids() == ["alpha", "beta"]
    assert _titles(catalog, "beta", "beetles") == ["Guide to beetles"]

    catalog.open("alpha")
    (root / "alpha" / "latest" / "CURRENT").unlink()  # an operator took alpha's build away
    change = catalog.reload()
    assert change.updated == (("alpha", "latest"),)
    assert catalog.state(catalog.version_entry("alpha"))[0] == "failed"

    shutil.rmtree(root / "alpha")
    assert catalog.reload().removed == ("alpha",)
    with pytest.raises(UnknownLibraryError):
        catalog.version_entry("alpha")
    assert catalog.reload().describe() == "no change"


def test_an_unchanged_reload_keeps_opened_bundles_and_takes_no_new_leases(alpha: Served) -> None:
    catalog = alpha.catalog
    opened = catalog.open("alpha")
    fds = len(list(Path("/proc/self/fd").iterdir()))
    for _ in range(20):
        assert not catalog.reload()
    assert catalog.open("alpha") is opened  # same bundle object: nothing reopened or re-verified
    assert len(list(Path("/proc/self/fd").iterdir())) == fds  # duplicate leases are closed


def test_the_watcher_reloads_on_its_own_and_reports_the_change(tmp_path: Path) -> None:
    import threading

    root, work = tmp_path / "bundles", tmp_path / "work"
    build(work / "alpha.toml", root, one_page("alpha", "aardvarks"))
    catalog = Catalog.load(root)
    seen: list[object] = []
    got = threading.Event()

    def on_change(change: object) -> None:
        seen.append(change)
        got.set()

    stop = catalog.watch(0.05, on_change)
    try:
        build(work / "beta.toml", root, one_page("beta", "beetles"))
        assert got.wait(30), "the watcher never reloaded"
        assert catalog.library_ids() == ["alpha", "beta"]
        assert getattr(seen[0], "added", ()) == ("beta",)
    finally:
        stop()
        catalog.close()


def test_a_server_catalog_warms_each_bundle_it_opens_in_the_background(tmp_path: Path) -> None:
    import time

    root, work = tmp_path / "bundles", tmp_path / "work"
    build(work / "alpha.toml", root, one_page("alpha", "aardvarks"))
    plain, server = Catalog.load(root), Catalog.load(root, settings=CatalogSettings.serving())
    try:
        assert len(plain.open("alpha").searcher._cache) == 0  # one-shot commands read on demand
        searcher = server.open("alpha").searcher
        deadline = time.monotonic() + 30
        while len(searcher._cache) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(searcher._cache) > 0, "the server's catalogue never warmed the bundle it opened"
    finally:
        plain.close()
        server.close()


def test_both_reload_loops_share_one_step_that_logs_a_failure_and_keeps_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The HTTP watcher thread and the stdio task run ``Catalog.refresh``: one log line, one logger."""
    import threading

    import anyio
    from docbundle.server import catalog as catalog_module
    from docbundle.server.catalog.watch import watch_bundles

    root, work = tmp_path / "bundles", tmp_path / "work"
    build(work / "alpha.toml", root, one_page("alpha", "aardvarks"))
    catalog = Catalog.load(root)
    looked = threading.Event()

    def half_written(*args: object) -> object:
        looked.set()
        raise OSError("a half-written folder")

    monkeypatch.setattr(catalog_module, "scan", half_written)
    caplog.set_level("ERROR", logger="docbundle.server.catalog")
    failed = "reloading the bundles folder failed; still serving the previous catalogue"
    try:
        build(work / "beta.toml", root, one_page("beta", "beetles"))
        stop = catalog.watch(0.01)  # the HTTP server's loop (a thread)
        try:
            assert looked.wait(30), "the watcher never looked"
        finally:
            stop()

        async def stdio_loop() -> None:  # the stdio server's loop (a task), stopped after its first look
            looked.clear()
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch_bundles, catalog, 0.01)
                with anyio.fail_after(30):
                    await anyio.to_thread.run_sync(looked.wait)
                    while sum(r.getMessage() == failed for r in caplog.records) < 2:
                        await anyio.sleep(0.01)
                tg.cancel_scope.cancel()

        anyio.run(stdio_loop)
        assert {r.name for r in caplog.records if r.getMessage() == failed} == {"docbundle.server.catalog"}
        assert catalog.library_ids() == ["alpha"]  # the previous catalogue still serves
    finally:
        catalog.close()


# -- a reload during a publish ----------------------------------------------------------------------
#
# The writer's steps (``docbundle.bundle.layout``): take the version lock (the version folder and its
# ``.lock`` appear), write a ``.tmp-*`` folder, fsync it, rename it to the build id, then write CURRENT.
# The hooks below stop a real build at each step and let the catalogue look at the folder right then.


def _publish_steps(monkeypatch: pytest.MonkeyPatch, look: Callable[[str], None]) -> None:
    """Call ``look(step)`` at each intermediate state of every publish the indexer runs from now on."""
    from docbundle.bundle import layout, publish

    lock, temp, tree, current = (
        layout.version_lock,
        layout.new_temp_dir,
        publish.fsync_tree,
        publish.write_current,
    )

    @contextmanager
    def version_lock(vdir: Path) -> Iterator[None]:
        with lock(vdir):
            look("locked")
            yield

    def new_temp_dir(vdir: Path, name: str) -> Path:
        tmp = temp(vdir, name)
        look("temp folder")
        return tmp

    def fsync_tree(root: Path) -> None:
        tree(root)
        look("bundle written, not renamed")

    def write_current(vdir: Path, build_id: str) -> None:
        look("renamed, CURRENT not written")
        current(vdir, build_id)

    monkeypatch.setattr(layout, "version_lock", version_lock)
    monkeypatch.setattr(layout, "new_temp_dir", new_temp_dir)
    monkeypatch.setattr(publish, "fsync_tree", fsync_tree)  # ``publish.publish``'s own names
    monkeypatch.setattr(publish, "write_current", write_current)


def test_a_library_being_built_is_listed_only_once_published(
    alpha: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, root, work = alpha.catalog, alpha.root, alpha.work
    seen: dict[str, tuple[CatalogChange, list[str]]] = {}

    def look(step: str) -> None:
        seen[step] = (catalog.refresh(), catalog.library_ids())

    _publish_steps(monkeypatch, look)
    build(work / "beta.toml", root, one_page("beta", "beetles"))
    assert list(seen) == [
        "locked",
        "temp folder",
        "bundle written, not renamed",
        "renamed, CURRENT not written",
    ]
    for step, (change, ids) in seen.items():
        assert not change and ids == ["alpha"], f"{step}: {change.describe()}, listed {ids}"
    # Published: announced once, listed, and it answers (nothing from the looks above was kept).
    assert catalog.refresh().added == ("beta",)
    assert catalog.state(catalog.version_entry("beta")) == ("available", None)
    assert _titles(catalog, "beta", "beetles") == ["Guide to beetles"]
    assert not catalog.refresh()


def test_a_new_build_being_published_keeps_the_served_one_until_current_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, work = tmp_path / "bundles", tmp_path / "work"
    first = build(work / "alpha.toml", root, one_page("alpha", "aardvarks", keep=1)).build_id
    catalog = Catalog.load(root)
    seen: dict[str, tuple[CatalogChange, str | None, list[str]]] = {}

    def look(step: str) -> None:
        change = catalog.refresh()
        seen[step] = (change, catalog.version_entry("alpha").build_id, _titles(catalog, "alpha", "aardvarks"))

    try:
        _publish_steps(monkeypatch, look)
        second = build(work / "alpha.toml", root, one_page("alpha", "zebras", keep=1)).build_id
        assert len(seen) == 4
        for step, (change, served, titles) in seen.items():
            assert not change and served == first and titles == ["Guide to aardvarks"], step
        assert catalog.refresh().updated == (("alpha", "latest"),)
        assert catalog.version_entry("alpha").build_id == second
        assert _titles(catalog, "alpha", "zebras") == ["Guide to zebras"]
    finally:
        catalog.close()


def test_a_version_whose_current_moves_while_it_is_read_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catalogue reads beta's CURRENT (build X) on beta's first use; before it takes its lease on X,
    a second build of beta publishes Y and its prune (keep = 1) deletes X. That reading describes the
    race, not beta."""
    from docbundle.server.catalog import entries as entries_module

    root, work = tmp_path / "bundles", tmp_path / "work"
    build(work / "alpha.toml", root, one_page("alpha", "aardvarks"))
    catalog = Catalog.load(root)
    first = build(work / "beta.toml", root, one_page("beta", "beetles", keep=1)).build_id
    take_lease = entries_module.take_lease
    raced: list[str] = []

    def lease_after_a_publish(bundle: Path) -> int | None:
        if bundle.name == first and not raced:
            raced.append(build(work / "beta.toml", root, one_page("beta", "bees", keep=1)).build_id)
            assert not bundle.exists(), "the prune kept the build the race needs gone"
        return take_lease(bundle)

    monkeypatch.setattr(entries_module, "take_lease", lease_after_a_publish)
    try:
        change = catalog.refresh()
        assert change.added == ("beta",) and not change.updated
        assert catalog.state(catalog.version_entry("beta")) == ("available", None)
        assert raced, "the catalogue never read beta's first build"
        assert catalog.version_entry("beta").build_id == raced[0]
        assert _titles(catalog, "beta", "bees") == ["Guide to bees"]
        assert not catalog.refresh()
    finally:
        catalog.close()
