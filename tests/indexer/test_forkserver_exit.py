"""The page workers' forkserver skips the interpreter's teardown when it exits (issue 22, item 5), and
only the forkserver does: importing ``prepare`` anywhere else registers nothing.

A fresh process starts a forkserver that preloads a marker module and then ``prepare``, runs one process
through it, and exits; the marker registered an exit handler before ``prepare`` was imported, so it
runs only if the forkserver exits the ordinary way (exit handlers run last-registered first).
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from docbundle.indexer.pipeline.prepare import worker as prepare_worker

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forkserver and /proc (Linux)")

GONE_WITHIN = 30.0

MARKER = """\
import atexit, os
atexit.register(lambda: open(os.environ["TEARDOWN_MARKER"], "w").write("torn down"))
"""

SCRIPT = """\
import multiprocessing, os, sys
from multiprocessing import forkserver
ctx = multiprocessing.get_context("forkserver")
ctx.set_forkserver_preload(sys.argv[1].split(","))
p = ctx.Process(target=os.getpid)
p.start()
p.join()
print(forkserver._forkserver._forkserver_pid, p.exitcode, flush=True)
"""


def _script(tmp_path: Path, script: str, preload: str, **env: str) -> str:
    """``script PRELOAD`` in a fresh interpreter that can import the modules written to ``tmp_path``;
    its output (it must succeed)."""
    paths = [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
    done = subprocess.run(
        [sys.executable, "-c", script, preload],
        capture_output=True,
        text=True,
        env={**os.environ, **env, "PYTHONPATH": os.pathsep.join(paths)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _run_forkserver(tmp_path: Path, preload: str) -> bool:
    """Start a forkserver with ``preload``, let it exit; whether it ran its earlier exit handlers."""
    (tmp_path / "teardown_marker.py").write_text(MARKER, encoding="utf-8")
    marker = tmp_path / f"torn-down-{preload.replace(',', '-')}"
    pid, exitcode = map(int, _script(tmp_path, SCRIPT, preload, TEARDOWN_MARKER=str(marker)).split())
    assert exitcode == 0
    deadline = time.monotonic() + GONE_WITHIN
    while (stat := Path(f"/proc/{pid}/stat")).exists():
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
        except OSError:
            break
        assert time.monotonic() < deadline, "the forkserver did not exit after the program that started it"
        time.sleep(0.02)
    return marker.exists()


def test_the_forkserver_preloading_prepare_exits_without_its_teardown(tmp_path: Path) -> None:
    assert _run_forkserver(tmp_path, "teardown_marker") is True  # the marker works: an ordinary exit
    assert _run_forkserver(tmp_path, "teardown_marker,docbundle.indexer.pipeline.prepare") is False


def test_importing_prepare_outside_the_forkserver_registers_no_exit() -> None:
    before = atexit._ncallbacks()
    prepare_worker._prepare_forkserver()  # what its import runs
    assert atexit._ncallbacks() == before


PROBE = """\
def report(conn):
    # What a worker finds built when it starts, before its first page (imported here, in the worker,
    # unless the forkserver preloaded them).
    from docbundle.indexer.pipeline import nesting
    from docbundle.indexer.pipeline.prepare import job

    conn.send((nesting._leaf_or_token.cache_info().currsize, job._schema is not None))
"""

WARM_SCRIPT = """\
import multiprocessing, sys
ctx = multiprocessing.get_context("forkserver")
ctx.set_forkserver_preload(sys.argv[1].split(","))
import warm_probe
ours, theirs = ctx.Pipe()
p = ctx.Process(target=warm_probe.report, args=(theirs,))
p.start()
print(ours.recv(), flush=True)
p.join()
"""


@pytest.mark.parametrize(
    ("preload", "expected"),
    [("docbundle.indexer.pipeline.prepare", "(1, True)"), ("warm_probe", "(0, False)")],
)
def test_workers_start_with_what_their_first_page_would_build(
    tmp_path: Path, preload: str, expected: str
) -> None:
    # The forkserver builds once what each worker would otherwise build on its first page (the nesting
    # bound's pattern is 18 ms to compile); a forkserver that does not preload prepare builds nothing.
    (tmp_path / "warm_probe.py").write_text(PROBE, encoding="utf-8")
    assert _script(tmp_path, WARM_SCRIPT, preload).strip() == expected
