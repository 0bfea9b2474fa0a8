"""The processes a test's subprocess started, read from ``/proc`` (Linux): who descends from it, and
whether one of them still runs (by pid and start time, so a reused pid is not mistaken for it)."""

from __future__ import annotations

import os
from pathlib import Path


def stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, start time) of a process, or None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[1]), fields[0], int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every live descendant of ``root``: pid -> start time (so a reused pid is not mistaken)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := stat(int(entry))) is not None and st[1] != "Z":
            children.setdefault(st[0], []).append(int(entry))
            starts[int(entry)] = st[2]
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = starts[child]
            todo.append(child)
    return found


def alive(pid: int, start: int) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (a zombie does not)."""
    st = stat(pid)
    return st is not None and st[2] == start and st[1] != "Z"
