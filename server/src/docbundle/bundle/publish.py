"""The last step of writing a bundle: ``publish`` it through ``CURRENT``, and bring what a server reads
of the whole bundles folder up to date after it: the summary ``catalog.json`` whenever the builds of a
version change (``note_builds_changed``: a publish, a prune, a discarded build), and also the route index
``routing.idx`` whenever a ``CURRENT`` moves (``note_current_moved``).

This is the one place that work happens (issue 33): whoever publishes (``build_target``, ``install``,
the nightly putting a ``CURRENT`` back) leaves both files current, without a second step for its caller
to forget. A route index rebuild reads every served bundle's routing record (seconds at 10,000
libraries), so work that moves many ``CURRENT`` files at once runs inside ``batch(root)``: the route index
of ``root`` is then rebuilt once, when the outermost batch ends, if anything moved.

Apart from ``layout`` (paths, ``CURRENT``, locks, fsync) because the summary (``docbundle.bundle.summary``)
reads the folder through ``layout`` and publishing writes the summary: here both run one way,
layout <- summary <- publish, with no import circle (issue 33).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .layout import fsync_dir, fsync_tree, write_current
from .routeindex import refresh_index
from .summary import update_summary

__all__ = ["batch", "note_builds_changed", "note_current_moved", "publish"]

_lock = threading.Lock()
_open: dict[Path, int] = {}  # bundles folder -> batches open on it (``batch``)
_moved: set[Path] = set()  # bundles folders with a CURRENT moved inside an open batch


def publish(vdir: Path, tmp: Path, build_id: str) -> tuple[Path, bool]:
    """fsync ``tmp``, rename it to ``build_id`` and point ``CURRENT`` at it (with the version lock held).

    Returns the bundle path and whether that build was already there (same build id, same content:
    the copy in place is kept and ``tmp`` discarded).
    """
    final = vdir / build_id
    present = final.exists()
    if present:
        shutil.rmtree(tmp)
    else:
        fsync_tree(tmp)
        os.rename(tmp, final)
    fsync_dir(vdir)
    write_current(vdir, build_id)
    note_current_moved(vdir)
    return final, present


def note_builds_changed(vdir: Path) -> None:
    """Bring the bundles folder's catalogue summary up to date after the builds of ``vdir`` changed (a
    prune, a discarded build): see ``docbundle.bundle.summary``."""
    update_summary(vdir.parent.parent, vdir.parent.name, vdir.name)


def note_current_moved(vdir: Path) -> None:
    """After ``vdir``'s CURRENT moved: the summary, and the route index of the bundles folder (now, or
    when the batch open on the folder ends)."""
    note_builds_changed(vdir)
    root = vdir.parent.parent
    key = root.resolve()
    with _lock:
        if key in _open:
            _moved.add(key)
            return
    refresh_index(root)  # logs instead of failing: a server rebuilds what is missing


@contextmanager
def batch(root: Path) -> Iterator[None]:
    """Within the block, a CURRENT moved under ``root`` defers the rebuild of its route index to the end
    of the outermost batch, which rebuilds it once (when something moved), however the block ends."""
    key = root.resolve()
    with _lock:
        _open[key] = _open.get(key, 0) + 1
    try:
        yield
    finally:
        with _lock:
            _open[key] -= 1
            last = _open[key] == 0
            if last:
                del _open[key]
            moved = last and key in _moved
            if moved:
                _moved.discard(key)
        if moved:
            refresh_index(root)
