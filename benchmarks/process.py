"""The servers a benchmark starts as subprocesses: stopping one, bounded (``stop``), and reading its memory
(``memory``) and CPU time (``cpu_seconds``)."""

from __future__ import annotations

import os
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


def cpu_seconds(pid: int | str = "self") -> float:
    """The user + system CPU time a process has used so far, in seconds (nan off Linux): a figure that a
    loaded machine inflates less than wall time."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
