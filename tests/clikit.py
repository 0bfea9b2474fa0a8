"""The two command lines in a fresh process, output captured: ``docbundle-index`` and ``docbundle``.

The one way tests run a CLI as a subprocess (``python -m``, so the interpreter and the installed packages
are the test's own; the environment, with its private user folders, inherited unless ``env`` is given).
"""

from __future__ import annotations

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


#: ``docbundle-index ARGS`` in a fresh process (``python -m docbundle.indexer.cli``), output captured.
index_cli = partial(run_module, "docbundle.indexer.cli")

#: ``docbundle ARGS`` in a fresh process (``python -m docbundle.server``), output captured.
server_cli = partial(run_module, "docbundle.server")
