"""The last step of writing a bundle: ``publish`` it through ``CURRENT``, and bring the bundles folder's
catalogue summary up to date whenever a ``CURRENT`` moves (``note_current_moved``).

Apart from ``layout`` (paths, ``CURRENT``, locks, fsync) because the summary (``docbundle.bundle.summary``)
reads the folder through ``layout`` and publishing writes the summary: here both run one way,
layout <- summary <- publish, with no import circle (issue 33).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .layout import fsync_dir, fsync_tree, write_current
from .summary import update_summary

__all__ = ["note_current_moved", "publish"]


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


def note_current_moved(vdir: Path) -> None:
    """Bring the bundles folder's catalogue summary up to date after ``vdir``'s CURRENT moved (or a
    prune there): see ``docbundle.bundle.summary``."""
    update_summary(vdir.parent.parent, vdir.parent.name, vdir.name)
