"""The servers a benchmark starts as subprocesses: stopping one, bounded (``stop``)."""

from __future__ import annotations

import subprocess


def stop(proc: subprocess.Popen[bytes], grace: float) -> None:
    """Terminate ``proc``; kill it when it has not exited within ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
