"""``--save`` / ``--check`` of a benchmark's per-page outputs: write them, or compare them with a file
written before (``chunk_speed.py``, ``prepare_speed.py``). Outputs are ``{folder: {page: output}}``."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

Outputs = Mapping[str, Mapping[str, Any]]


def differences(saved: Outputs, now: Outputs, differ: Callable[[Any, Any], Iterable[str]]) -> list[str]:
    """One line per difference: a folder or page on one side only, or what ``differ(old, new)`` says."""
    problems: list[str] = []
    for folder, pages in now.items():
        before = saved.get(folder)
        if before is None:
            problems.append(f"{folder}: not in the saved file")
            continue
        for rel in sorted(pages.keys() | before.keys()):
            if rel not in before or rel not in pages:
                problems.append(f"{folder}/{rel}: present on one side only")
                continue
            problems.extend(f"{folder}/{rel}: {line}" for line in differ(before[rel], pages[rel]))
    return problems


def save_or_check(
    now: Outputs,
    save: Path | None,
    check: Path | None,
    differ: Callable[[Any, Any], Iterable[str]],
    what: str,
) -> int:
    """Write ``now`` to ``save``, or compare it with ``check`` and print the differences (at most 50);
    1 when any, else 0. ``what`` ends the line that reports a match ("3,260 pages, every field")."""
    if save:
        save.write_bytes(pickle.dumps(now, protocol=pickle.HIGHEST_PROTOCOL))
        print(f"saved      {sum(len(p) for p in now.values())} pages to {save}")
    if check:
        # Only ever a file a benchmark wrote (--save).
        problems = differences(pickle.loads(check.read_bytes()), now, differ)
        for line in problems[:50]:
            print(f"DIFFERS    {line}")
        if problems:
            print(f"check      {len(problems)} differences ({what})")
            return 1
        print(f"check      identical: {what}")
    return 0
