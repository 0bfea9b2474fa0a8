"""The two command lines in a fresh process, output captured: ``docbundle-index`` and ``docbundle``.

The one way tests run a CLI as a subprocess (``python -m``, so the interpreter and the installed packages
are the test's own; the environment, with its private user folders, inherited unless ``env`` is given).
``serve_http_argv`` is the command line of an HTTP server on a port the kernel picks (``serverkit`` runs
it for the tests, ``benchmarks/http_load.py`` for its load), ``index_build_argv`` that of a build a test
starts itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path


def run_module(
    module: str,
    *args: str,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    stdin: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS``, bounded by ``timeout`` seconds, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
        stdin=stdin,
        check=False,
    )


def serve_http_argv(bundles: Path, *options: str) -> list[str]:
    """``docbundle serve --bundles BUNDLES --transport http --port 0 OPTIONS`` (``python -m``)."""
    serve = ("serve", "--bundles", str(bundles), "--transport", "http", "--port", "0")
    return [sys.executable, "-m", "docbundle.server", *serve, *options]


def index_build_argv(config: Path, out: Path, *options: str) -> list[str]:
    """``docbundle-index build --config CONFIG --out OUT OPTIONS`` (``python -m``), for a test that starts
    it itself (to kill it mid-build, or to watch its output as it comes)."""
    build = ("build", "--config", str(config), "--out", str(out))
    return [sys.executable, "-m", "docbundle.indexer.cli", *build, *options]


#: ``docbundle-index ARGS`` in a fresh process (``python -m docbundle.indexer.cli``), output captured.
index_cli = partial(run_module, "docbundle.indexer.cli")

#: ``docbundle ARGS`` in a fresh process (``python -m docbundle.server``), output captured.
server_cli = partial(run_module, "docbundle.server")


def pull_cli(*args: str, tmp: Path) -> tuple[int, str, str]:
    """``docbundle pull ARGS`` (exit code, stdout, stderr) without ``$DOCBUNDLE_RELEASES``, so only the
    ``--from`` a test names is asked, and with its temporary files in ``tmp`` (made if missing)."""
    env = {k: v for k, v in os.environ.items() if k != "DOCBUNDLE_RELEASES"}
    env["TMPDIR"] = str(tmp)
    tmp.mkdir(exist_ok=True)
    r = server_cli("pull", *args, env=env)
    return r.returncode, r.stdout, r.stderr
