"""Live reload (issue 13): a new build, a new library or a removed one is served without a restart.

Builds are real (``build_target`` over a small local site), so CURRENT, leases and pruning are the
indexer's own. Requests in flight keep the build they resolved; a replaced build stays open and leased
for the catalogue's grace time, so a prune running meanwhile cannot delete it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from docbundle.bundle.layout import BUILD_ID_RE, read_current
from docbundle.indexer.config import load_config
from docbundle.indexer.pipeline.build import build_target
from docbundle.server.catalog import Catalog
from docbundle.server.errors import UnknownLibraryError


def _build(root: Path, work: Path, library: str, word: str, *, keep: int = 3) -> str:
    """Build a one-page library whose page is about ``word``; returns the new build id."""
    site = work / library
    site.mkdir(parents=True, exist_ok=True)
    (site / "page.md").write_text(
        f"# Guide to {word}\n\nThis page explains {word} in detail, with {word} examples.\n", encoding="utf-8"
    )
    (site / "llms.txt").write_text(
        f"# {library}\n\n## Docs\n\n- [Guide to {word}](page.md)\n", encoding="utf-8"
    )
    config = work / f"{library}.toml"
    config.write_text(
        f'[[library]]\nid = "{library}"\nllms_txt = "{library}/llms.txt"\nkeep = {keep}\n'
        "[library.chunking]\nmin_words = 3\n",
        encoding="utf-8",
    )
    catalogue = load_config(config)
    (target,) = catalogue.targets(catalogue.libraries[0])
    outcome = build_target(target, root)
    assert outcome.status == "built", outcome.message
    build = read_current(root / library / "latest")
    assert build is not None
    return build


def _titles(catalog: Catalog, library: str, query: str) -> list[str]:
    opened = catalog.open(library)
    return [opened.bundle.store.get(h.doc).title for h in opened.searcher.search(query).hits]


def _builds(vdir: Path) -> set[str]:
    return {p.name for p in vdir.iterdir() if BUILD_ID_RE.fullmatch(p.name)}


def test_a_new_build_is_served_without_restart_and_the_old_one_finishes_its_requests(tmp_path: Path) -> None:
    root, work = tmp_path / "bundles", tmp_path / "work"
    first = _build(root, work, "demo", "aardvarks", keep=1)
    catalog = Catalog.load(root, retire_after=3600)
    try:
        assert _titles(catalog, "demo", "aardvarks") == ["Guide to aardvarks"]
        in_flight = catalog.open("demo")  # a request that resolved the old build before the reload
        assert not catalog.changed()

        second = _build(root, work, "demo", "zebras", keep=1)  # keep = 1: the prune wants `first` gone
        assert catalog.changed()
        change = catalog.reload()
        assert change.updated == (("demo", "latest"),) and not change.added and not change.removed
        assert catalog.resolve("demo").build_id == second
        assert _titles(catalog, "demo", "zebras") == ["Guide to zebras"]
        assert _titles(catalog, "demo", "aardvarks") == []

        # The request in flight finishes on the build it started with, and the lease kept its files.
        assert [h.doc for h in in_flight.searcher.search("aardvarks").hits] == [0]
        assert first in _builds(root / "demo" / "latest")

        # After the grace time the old build is closed and its lease released: the next prune deletes it.
        assert catalog.expire(now=float("inf")) == 2  # the opened bundle and the lease
        _build(root, work, "demo", "yaks", keep=1)
        assert first not in _builds(root / "demo" / "latest")
        assert catalog.reload().updated == (("demo", "latest"),)
        assert _titles(catalog, "demo", "yaks") == ["Guide to yaks"]
    finally:
        catalog.close()


def test_libraries_that_appear_or_go_are_listed_after_a_reload(tmp_path: Path) -> None:
    root, work = tmp_path / "bundles", tmp_path / "work"
    _build(root, work, "alpha", "aardvarks")
    catalog = Catalog.load(root)
    try:
        assert catalog.library_ids() == ["alpha"]
        _build(root, work, "beta", "beetles")
        change = catalog.reload()
        assert change.added == ("beta",) and not change.updated
        assert catalog.library_ids() == ["alpha", "beta"]
        assert _titles(catalog, "beta", "beetles") == ["Guide to beetles"]

        catalog.open("alpha")
        (root / "alpha" / "latest" / "CURRENT").unlink()  # an operator took alpha's build away
        change = catalog.reload()
        assert change.updated == (("alpha", "latest"),)
        assert catalog.state(catalog.resolve("alpha"))[0] == "failed"

        import shutil

        shutil.rmtree(root / "alpha")
        assert catalog.reload().removed == ("alpha",)
        with pytest.raises(UnknownLibraryError):
            catalog.resolve("alpha")
        assert catalog.reload().describe() == "no change"
    finally:
        catalog.close()


def test_an_unchanged_reload_keeps_opened_bundles_and_takes_no_new_leases(tmp_path: Path) -> None:
    root, work = tmp_path / "bundles", tmp_path / "work"
    _build(root, work, "alpha", "aardvarks")
    catalog = Catalog.load(root)
    try:
        opened = catalog.open("alpha")
        fds = len(list(Path("/proc/self/fd").iterdir()))
        for _ in range(20):
            assert not catalog.reload()
        assert catalog.open("alpha") is opened  # same bundle object: nothing reopened or re-verified
        assert len(list(Path("/proc/self/fd").iterdir())) == fds  # duplicate leases are closed
    finally:
        catalog.close()


def test_the_watcher_reloads_on_its_own_and_reports_the_change(tmp_path: Path) -> None:
    import threading

    root, work = tmp_path / "bundles", tmp_path / "work"
    _build(root, work, "alpha", "aardvarks")
    catalog = Catalog.load(root)
    seen: list[object] = []
    got = threading.Event()

    def on_change(change: object) -> None:
        seen.append(change)
        got.set()

    stop = catalog.watch(0.05, on_change)
    try:
        _build(root, work, "beta", "beetles")
        assert got.wait(30), "the watcher never reloaded"
        assert catalog.library_ids() == ["alpha", "beta"]
        assert getattr(seen[0], "added", ()) == ("beta",)
    finally:
        stop()
        catalog.close()
