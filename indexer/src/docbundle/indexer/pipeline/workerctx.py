"""How the page workers are started: the multiprocessing context, what their forkserver preloads, and how
many there are. Light on purpose (standard library and ``docbundle.common.process`` only), so ``build`` can start the forkserver before it
imports the pipeline: the forkserver's imports (the workers' modules, about 0.25 s) then overlap with the
indexer's own instead of following them.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.context
import os
import sys
from collections.abc import Iterator

from docbundle.common.process import fewer_collections as process_fewer_collections
from docbundle.common.process import main_script_modules

__all__ = [
    "GC_THRESHOLDS",
    "PREPARE_MODULE",
    "context",
    "fewer_collections",
    "start_forkserver",
    "worker_count",
]

GC_THRESHOLDS = (100_000, 50, 1_000)
"""The cyclic collector's thresholds in the page workers and while the indexer builds: both allocate
millions of objects that live to the end of a page or a build, and make little cyclic garbage."""

PREPARE_MODULE = "docbundle.indexer.pipeline.prepare"
"""The workers' package: what the forkserver imports for them (``prepare.worker._serve`` runs in each)."""


def worker_count() -> int:
    """How many worker processes a big build uses (``DOCBUNDLE_WORKERS`` overrides; 0 = none)."""
    env = os.environ.get("DOCBUNDLE_WORKERS", "").strip()
    if env.isdigit():
        return int(env)
    return min(os.cpu_count() or 1, 4)


def context() -> multiprocessing.context.BaseContext:
    """The context the workers are started with."""
    # Never plain fork: the crawler (and test servers) leave threads behind, and forking a
    # threaded process can deadlock. forkserver forks from a clean single-threaded server.
    if not sys.platform.startswith("linux"):
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(preload())  # takes effect when the forkserver starts (once a process)
    return ctx


def preload() -> list[str]:
    """The modules the forkserver imports once, so that the workers it forks start warm.

    The workers' module, and what the main script imports: a worker started by ``multiprocessing`` runs
    the main script again (as ``__mp_main__``) before its target when the program was started from a
    script (a console script such as ``docbundle-index``, whose module has no ``__spec__``), and that
    imported the whole CLI in every worker, about a second each. With those modules already loaded in
    the forkserver (``process.main_script_modules`` names them), the re-run finds them imported and
    costs next to nothing. The CLI module itself imports little (each command imports its modules when
    it runs), so preloading it costs the forkserver a few milliseconds, not the whole indexer's imports.
    """
    return sorted({PREPARE_MODULE, *main_script_modules()})


def start_forkserver() -> None:
    """Start the workers' forkserver now, unless the build uses no workers (or it runs already).

    It returns at once: the forkserver imports its modules in its own process, while this one goes on
    with its own imports and its crawl. A worker started later connects to it (``_Pool._start``).
    """
    if worker_count() < 1 or not sys.platform.startswith("linux"):
        return
    context()
    from multiprocessing import forkserver

    forkserver.ensure_running()


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """The cyclic collector at ``GC_THRESHOLDS`` for the block, with what is alive now (the modules
    imported so far) frozen out of its passes; both undone when the block ends.

    With the default thresholds it ran 1,026 times in the indexer process during a large-en build,
    6 of them full passes over every object, 0.67 s of CPU (html-python: 200 times, 0.10 s), mostly
    while the prepared pages (millions of small tuples, all alive to the end) came back from the
    workers.
    """
    with process_fewer_collections(GC_THRESHOLDS):
        yield
