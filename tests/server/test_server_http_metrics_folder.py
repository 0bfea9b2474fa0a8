"""The metrics folder of ``docbundle serve --workers N`` does not outlive the server (issue 31).

It was removed only by the supervisor's clean-up, so a SIGKILLed supervisor left it in the temporary
folder for good (its workers, told by the kernel, exited after it). Now the last of the supervisor and
its workers removes it, and a folder whose processes were all killed is swept by the next server.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path

import pytest
from serverkit import HttpServerProcess

# Generous: the workers drain for at most SHUTDOWN_SECONDS (10) after their parent dies.
HANG_GUARD = 60


def workers_started(server: HttpServerProcess, workers: int = 2) -> None:
    """Wait (bounded) until each worker says it serves: the URL line comes before the fork."""
    hang_guard = time.monotonic() + HANG_GUARD
    while sum("Application startup complete" in line for line in server.lines()) < workers:
        assert time.monotonic() < hang_guard, server.lines()[-20:]
        time.sleep(0.05)


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The servers' temporary folder (``$TMPDIR``): where a server makes its metrics folder."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


def test_a_sigkilled_supervisor_leaves_no_metrics_folder(bundles_root: Path, temp: Path) -> None:
    with HttpServerProcess(bundles_root, "--no-auth", "--workers", "2", "--rate", "off") as server:
        workers_started(server)
        (folder,) = temp.glob("docbundle-metrics-*")
        assert server._proc is not None
        os.kill(server._proc.pid, signal.SIGKILL)
        server._proc.wait(timeout=HANG_GUARD)
        hang_guard = time.monotonic() + HANG_GUARD
        while folder.exists():
            assert time.monotonic() < hang_guard, f"{folder.name} outlived the server: {os.listdir(folder)}"
            time.sleep(0.05)


def test_a_folder_left_by_a_killed_server_is_swept_at_the_next_start(bundles_root: Path, temp: Path) -> None:
    # What a server whose processes were all SIGKILLed leaves: nobody holds its owners file.
    stale = temp / "docbundle-metrics-stale"
    stale.mkdir()
    (stale / ".owners").touch()
    (stale / "counter_12345.db").write_bytes(b"x" * 64)
    # One still in use by a live server (here: this process holds its owners file) stays.
    live = temp / "docbundle-metrics-live"
    live.mkdir()
    with open(live / ".owners", "a+b") as owners:
        fcntl.flock(owners.fileno(), fcntl.LOCK_SH)
        with HttpServerProcess(bundles_root, "--no-auth", "--workers", "2", "--rate", "off") as server:
            workers_started(server)
            names = sorted(p.name for p in temp.iterdir())
    assert not stale.exists() and live.is_dir()
    assert len(names) == 2 and "docbundle-metrics-live" in names  # the live one and the server's own
    assert sorted(p.name for p in temp.iterdir()) == ["docbundle-metrics-live"]
