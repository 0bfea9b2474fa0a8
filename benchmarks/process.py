"""The servers a benchmark starts as subprocesses: stopping one, bounded (``stop``), and reading its memory
(``memory``)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path


def stop(proc: subprocess.Popen[bytes], grace: float) -> None:
    """Terminate ``proc``; kill it when it has not exited within ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def memory(pid: int | str = "self", keys: Iterable[str] = ("VmRSS", "VmHWM")) -> dict[str, float]:
    """The ``keys`` of a process's /proc/<pid>/status (VmRSS, VmHWM, RssAnon, ...) in MB (empty off Linux)."""
    wanted = set(keys)
    out: dict[str, float] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in wanted:
            out[key] = int(rest.split()[0]) / 1024
    return out
