"""``docbundle-index`` ends without the interpreter's teardown (``cli.console``, issue 22, item 5), and
loses nothing by it: the console script's whole output arrives through pipes, with the exit codes of
``main`` (0 built, 1 a library failed, 130 interrupted).

Through the real console script beside the interpreter, with page workers (so the forkserver, which
holds the same pipes, is part of the run).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from docbundle.indexer.pipeline import prepare
from treekit import write_sized_site

SCRIPT = Path(sys.executable).with_name("docbundle-index")
START_WITHIN = 60.0

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="the docbundle-index console script")


def _config(tmp_path: Path, scale: int) -> Path:
    """A local site ``scale`` times PARALLEL_MIN_BYTES (so the build uses workers), plus a library
    whose llms.txt does not exist."""

    def page(i: int) -> tuple[str, str, str]:
        prose = " ".join(f"term{(i * 3 + k) % 211} sets the value number {k}." for k in range(40))
        return f"{i}.md", f"# Page {i}\n\n{prose}\n\n## More {i}\n\n{prose}\n", f"- [Page {i}](pages/{i}.md)"

    write_sized_site(tmp_path, ["# Big\n", "## Pages\n"], prepare.PARALLEL_MIN_BYTES * scale, page)
    config = tmp_path / "libraries.toml"
    config.write_text(
        '[[library]]\nid = "big"\nllms_txt = "site/llms.txt"\n\n'
        '[[library]]\nid = "gone"\nllms_txt = "missing/llms.txt"\n',
        encoding="utf-8",
    )
    return config


def _build(config: Path, *more: str) -> list[str]:
    return [str(SCRIPT), "build", "--config", str(config), "--out", str(config.parent / "out"), *more]


ENV = {**os.environ, "DOCBUNDLE_WORKERS": "2", "DOCBUNDLE_EMBED": "0"}


def test_the_whole_output_arrives_through_pipes_with_the_exit_code(tmp_path: Path) -> None:
    config = _config(tmp_path, 2)
    done = subprocess.run(
        _build(config, "--no-cache", "--json", "--library", "big"),
        capture_output=True, text=True, env=ENV, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # complete: the last byte of the JSON report is there
    assert report["built"] == 1 and report["libraries"][0]["documents"] > 0
    assert "docbundle-index: building big@latest" in done.stderr
    # One library fails: exit 1, and the summary (the last thing printed) is complete.
    failed = subprocess.run(_build(config), capture_output=True, text=True, env=ENV, timeout=300, check=False)
    assert failed.returncode == 1, failed.stderr
    assert failed.stdout.startswith("docbundle-index: 2 library version(s): 0 built, 1 unchanged, 1 failed")
    assert "  failed     gone@latest: " in failed.stdout and failed.stdout.endswith("\n")


def test_an_interrupted_build_exits_130(tmp_path: Path) -> None:
    config = _config(tmp_path, 6)
    proc = subprocess.Popen(
        _build(config, "--no-cache", "--library", "big"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], START_WITHIN)
        assert ready, "the build printed nothing"
        line = proc.stderr.readline()  # "building big@latest ...": the crawl starts now
        assert line.startswith("docbundle-index: building big@latest"), line
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "docbundle-index: interrupted (SIGINT); published bundles are intact" in err
    assert out == ""


def test_a_profiled_run_still_writes_its_profile(tmp_path: Path) -> None:
    # benchmarks/build_speed.py --profile runs the console script under ``python -m cProfile -o FILE``;
    # an os._exit at the end of main would end it before cProfile writes FILE.
    profile = tmp_path / "run.prof"
    done = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(profile), str(SCRIPT), "build", "--config",
         str(tmp_path / "no-such.toml"), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env=ENV, timeout=120, check=False,
    )  # fmt: skip
    assert "config file not found" in done.stderr  # main ran and returned (cProfile swallows its exit)
    assert profile.is_file() and profile.stat().st_size > 0
