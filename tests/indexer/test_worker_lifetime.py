"""``kill -9`` of a building indexer takes its worker processes with it (issue 9, item 12).

A real ``docbundle-index build`` subprocess builds a local site big enough to use worker processes;
once they run, the indexer is killed with SIGKILL and every process it had started (the forkserver,
the workers, the resource tracker) must be gone within a generous bound.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from buildkit import record_worker_starts
from docbundle.indexer.pipeline import prepare
from prockit import alive as _alive
from prockit import descendants as _descendants
from prockit import stat as _stat
from treekit import build, write_site, write_sized_site

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")

WORKERS = 2
# Generous: the children must notice and exit, not merely be signalled (measured: well under 1 s).
GONE_WITHIN = 15.0
# "Answers instead of hanging": waiting for the workers to start.
START_WITHIN = 60.0


def _site(root: Path) -> Path:
    """A local site a few times PARALLEL_MIN_BYTES, so the build uses workers for a while."""

    def page(i: int) -> tuple[str, str, str]:
        prose = " ".join(f"word{(i * 7 + k) % 997} configures the widget number {k}." for k in range(40))
        text = f"# Page {i}\n\n{prose}\n\n## Details {i}\n\n{prose}\n\n```python\nx = {i}\n```\n"
        return f"{i}.md", text, f"- [Page {i}](pages/{i}.md)"

    return write_sized_site(root, ["# Big\n", "## Pages\n"], prepare.PARALLEL_MIN_BYTES * 4, page)


def _busy_workers(root: int) -> list[int]:
    """The pool workers under indexer ``root`` (the forkserver's children) that have used CPU time."""
    busy = []
    for pid in _descendants(root):
        try:
            raw = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = raw[raw.rindex(")") + 2 :].split()  # fields[0] is field 3 of proc(5): the state
        parent, utime, stime = int(fields[1]), int(fields[11]), int(fields[12])
        if parent != root and utime + stime > 0:
            busy.append(pid)
    return busy


def test_kill_9_of_the_indexer_takes_its_workers_with_it(tmp_path: Path) -> None:
    _site(tmp_path)
    config = tmp_path / "libraries.toml"
    config.write_text('[[library]]\nid = "big"\nllms_txt = "site/llms.txt"\n', encoding="utf-8")
    env = {**os.environ, "DOCBUNDLE_WORKERS": str(WORKERS)}
    cmd = [sys.executable, "-m", "docbundle.indexer.cli", "build", "--config", str(config)]
    proc = subprocess.Popen(
        [*cmd, "--out", str(tmp_path / "out"), "--no-cache", "--quiet"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    children: dict[int, int] = {}
    try:
        deadline = time.monotonic() + START_WITHIN
        while True:
            children = _descendants(proc.pid)
            # The forkserver plus its workers (the resource tracker may or may not be there yet).
            if len(children) >= WORKERS + 1 or proc.poll() is not None:
                break
            assert time.monotonic() < deadline, "the build never started its workers"
            time.sleep(0.02)
        assert proc.poll() is None, "the build finished before its workers could be seen"
        # Kill only once every worker is at work (has run on a CPU), not after a guessed pause.
        while len(_busy_workers(proc.pid)) < WORKERS:
            assert proc.poll() is None, "the build finished before its workers were all running"
            assert time.monotonic() < deadline, "the workers never got to work"
            time.sleep(0.02)
        children = _descendants(proc.pid)
        assert len(children) >= WORKERS + 1, children
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + GONE_WITHIN
        while (left := {pid for pid, start in children.items() if _alive(pid, start)}) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert not left, f"still running {GONE_WITHIN} s after kill -9: {sorted(left)}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        # Whatever this test started and is still there (after a failure) goes now.
        for pid, start in {**children, **_descendants(proc.pid)}.items():
            if _alive(pid, start):
                os.kill(pid, signal.SIGKILL)
        if proc.stderr is not None:
            proc.stderr.close()


def test_one_pool_of_workers_serves_every_build_of_a_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two libraries built one after the other by one process: their pages go to one worker process,
    started once (before the first crawl), not one per build; it exits when asked (as at exit)."""
    prepare.stop_workers()  # whatever earlier tests of this process left
    monkeypatch.setenv("DOCBUNDLE_WORKERS", "1")
    started = record_worker_starts(monkeypatch)
    config = ""
    for name in ("one", "two"):
        page = f"# {name.title()}\n\nWords about the {name} widget and how it configures things.\n"
        write_site(tmp_path / name, {"a.md": page}, f"# {name}\n\n## Pages\n\n- [A](a.md)\n")
        config += f'[[library]]\nid = "{name}"\nllms_txt = "{name}/llms.txt"\n'
    outcomes = build(tmp_path / "libraries.toml", tmp_path / "out", config).outcomes
    assert [o.documents for o in outcomes] == [1, 1]
    assert len(started) == 1 and started[0] != os.getpid()
    (pid,) = started
    start_time = _stat(pid)
    assert start_time is not None and start_time[1] != "Z", "the worker did not stay for the next build"
    prepare.stop_workers()
    deadline = time.monotonic() + GONE_WITHIN
    while _alive(pid, start_time[2]):
        assert time.monotonic() < deadline, f"worker {pid} still running {GONE_WITHIN} s after stop_workers"
        time.sleep(0.05)
