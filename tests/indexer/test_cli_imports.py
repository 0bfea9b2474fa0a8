"""``docbundle-index`` imports per command (issue 22, item 5): each handler imports its modules when it
runs, so a ``build`` (and the forkserver its page workers start from) loads neither ``add`` nor the
release tools, and the help texts still show the values of the modules they name.

The build runs through the real console script (``docbundle-index`` beside the interpreter: its
``__main__`` has no ``__spec__``, the case ``prepare._preload`` handles) under ``python -X importtime``,
which every process it starts inherits (the forkserver and the workers get the interpreter's flags),
so stderr lists what each of them imported.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from docbundle.indexer import add, cli
from docbundle.indexer.pipeline import prepare, semantic
from docbundle.indexer.release import export
from treekit import write_sized_site

SCRIPT = Path(sys.executable).with_name("docbundle-index")
WORKERS = 2


def _imported(stderr: str, module: str) -> int:
    """How many processes imported ``module`` (its ``-X importtime`` lines)."""
    return len(re.findall(rf"^import time:.*\|\s*{re.escape(module)}$", stderr, re.MULTILINE))


def _site(root: Path) -> None:
    """A local site a few times PARALLEL_MIN_BYTES, so the build uses its worker processes."""

    def page(i: int) -> tuple[str, str, str]:
        prose = " ".join(f"word{(i * 5 + k) % 499} sets the option number {k}." for k in range(40))
        return f"{i}.md", f"# Page {i}\n\n{prose}\n\n## More {i}\n\n{prose}\n", f"- [Page {i}](pages/{i}.md)"

    write_sized_site(root, ["# Big\n", "## Pages\n"], prepare.PARALLEL_MIN_BYTES * 3, page)


@pytest.mark.skipif(not SCRIPT.exists() or not sys.platform.startswith("linux"), reason="console script")
def _build(tmp_path: Path, command: list[str], workers: int) -> subprocess.CompletedProcess[str]:
    """``command build ...`` of ``_site`` with ``workers`` page workers: it must build the library."""
    _site(tmp_path)
    config = tmp_path / "libraries.toml"
    config.write_text('[[library]]\nid = "big"\nllms_txt = "site/llms.txt"\n', encoding="utf-8")
    env = {**os.environ, "DOCBUNDLE_WORKERS": str(workers), "DOCBUNDLE_EMBED": "0"}
    build = ["build", "--config", str(config), "--out", str(tmp_path / "out"), "--no-cache", "--json"]
    done = subprocess.run(
        [*command, *build], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert '"built": 1' in done.stdout
    return done


def test_a_build_loads_neither_add_nor_the_release_tools_in_any_of_its_processes(tmp_path: Path) -> None:
    done = _build(tmp_path, [sys.executable, "-X", "importtime", str(SCRIPT)], WORKERS)
    loaded = sorted(set(re.findall(r"\|\s*(docbundle\.indexer\.(?:add|release)\S*)$", done.stderr, re.M)))
    assert loaded == []
    # The HTTP client is the crawler's alone: the forkserver the workers start from does not load it.
    assert _imported(done.stderr, "httpx") == 1
    # The workers start warm: prepare is imported by the indexer and by the forkserver only, and the
    # workers forked from it import nothing of it (not even when they re-run the console script).
    assert _imported(done.stderr, "docbundle.indexer.pipeline.prepare") == 2
    assert _imported(done.stderr, "docbundle.indexer.cli") == 2  # the indexer's, and the forkserver's


def test_importing_the_cli_loads_no_command_module() -> None:
    probe = "import sys, docbundle.indexer.cli; print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    modules = set(done.stdout.split())
    heavy = {
        "docbundle.indexer.add",
        "docbundle.indexer.config",
        "docbundle.indexer.pipeline.build",
        "docbundle.indexer.pipeline.prepare",
        "docbundle.indexer.release.nightly",
        "docbundle.indexer.release.export",
        "docbundle.bundle.reader",
        "httpx",
    }
    assert sorted(modules & heavy) == []


def test_the_help_texts_show_the_values_of_the_modules_they_name() -> None:
    assert cli.ENV_EMBED == semantic.ENV_EMBED
    assert cli.DEFAULT_PROBE == add.DEFAULT_PROBE
    assert cli.EXPORT_FORMATS == export.FORMATS


_EARLY = """
import sys
from multiprocessing import forkserver
from docbundle.indexer import cli

started = []
server = forkserver._forkserver  # what a worker's start calls (ForkServer.ensure_running)
real = server.ensure_running


def ensure_running():
    if server._forkserver_pid is None:  # the call that starts it
        started.append("docbundle.indexer.pipeline.build" in sys.modules)
    return real()


forkserver.ensure_running = server.ensure_running = ensure_running
code = cli.main(sys.argv[1:])
print("forkserver started with the pipeline imported:", started[:1], file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the forkserver is Linux's")
@pytest.mark.parametrize("workers", ["2", "0"])
def test_build_starts_the_workers_forkserver_before_it_imports_the_pipeline(
    tmp_path: Path, workers: str
) -> None:
    # The forkserver imports the workers' modules (~0.25 s) while the indexer imports its own, rather
    # than after them: a small site's crawl is over before a late forkserver is ready.
    from docbundle.indexer.pipeline import workerctx

    assert prepare.__name__ == workerctx.PREPARE_MODULE  # what the forkserver preloads
    done = _build(tmp_path, [sys.executable, "-c", _EARLY], int(workers))
    first = "[False]" if workers != "0" else "[]"  # no workers: no forkserver at all
    assert f"forkserver started with the pipeline imported: {first}" in done.stderr


def test_the_indexer_does_not_load_httpx_command_line_client() -> None:
    # httpx imports its CLI (click, rich, pygments: ~45 ms) whenever they are installed; the indexer
    # never runs it, so importing the indexer first keeps httpx from loading it.
    import importlib.util

    if importlib.util.find_spec("click") is None:
        pytest.skip("click is not installed: httpx would not load its client anyway")
    probe = (
        "import sys, docbundle.indexer.cli, docbundle.indexer.pipeline.build, httpx; "
        "print(sorted(m for m in ('click', 'rich', 'pygments') if m in sys.modules)); "
        "print(callable(httpx.main), httpx.Client.__name__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split("\n")[:2] == ["[]", "True Client"], done.stdout
