"""A page worker's side of the pool: its main loop (a page within its CPU budget, the result sent back),
dying with the indexer that started it, and what the forkserver does once for every worker it forks.
"""

from __future__ import annotations

import math
import signal
from functools import partial
from multiprocessing.connection import Connection

from docbundle.bundle.schema import make_schema
from docbundle.common.process import (
    die_with_parent,
    exit_now,
    in_forkserver_preload,
    set_collector_thresholds,
    skip_teardown_at_exit,
    watch_process,
)

from ..workerctx import GC_THRESHOLDS
from . import job as page_job
from .job import PageJob, _failed, prepare_page

#: How often a worker checks that the indexer that started it still runs, where the kernel cannot
#: tell it (no pidfd): a killed indexer's workers exit within about this long.
PARENT_POLL_SECONDS = 0.5
_READY = "ready"


def _worker_init(indexer_pid: int) -> None:
    # Workers allocate a lot and free it by reference counting; full collections only cost time.
    set_collector_thresholds(GC_THRESHOLDS)
    _die_with(indexer_pid)


def _die_with(indexer_pid: int) -> None:
    """Make this worker exit as soon as the indexer process that started it is gone.

    A worker blocks on its task queue, whose write end the worker itself (and the other workers)
    also hold, so a ``kill -9`` of the indexer left the workers waiting forever; they in turn kept
    the forkserver and the resource tracker alive (issue 9, item 12). Two guards:

    - ``PR_SET_PDEATHSIG`` (Linux, ``process.die_with_parent``): the kernel sends SIGKILL when this
      process's parent (the forkserver, or the indexer itself with the spawn method) exits;
    - a watcher on the indexer's pid (``process.watch_process``): under forkserver the indexer is not
      the parent, so it waits on a pidfd (woken by the kernel when the indexer exits) or, without
      pidfd support, polls every ``PARENT_POLL_SECONDS``, and ends the worker with ``exit_now``.

    Once the workers are gone the forkserver sees EOF on its "alive" pipe and exits, and the
    resource tracker follows.
    """
    die_with_parent(signal.SIGKILL)
    watch_process(indexer_pid, partial(exit_now, 1), poll_seconds=PARENT_POLL_SECONDS)


def _serve(conn: Connection, indexer_pid: int) -> None:
    """A worker's main loop: receive a job and its CPU budget, prepare it within it, send the result."""
    _worker_init(indexer_pid)
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a worker killed over its budget dumps no core
    except (ImportError, ValueError, OSError):
        resource = None  # type: ignore[assignment]
    try:
        conn.send(_READY)  # imports done: the indexer starts this worker's page clock now
    except (OSError, ValueError):
        return  # the indexer is gone already (it ended while this worker started): nothing to say
    while True:
        try:
            task: tuple[float, PageJob] | None = conn.recv()
        except (EOFError, OSError):
            return  # the indexer is done (or gone)
        if task is None:
            return
        budget, job = task
        if resource is not None:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            used = usage.ru_utime + usage.ru_stime
            # Whole seconds only: the kernel sends SIGXCPU (which ends the process) at the soft limit.
            soft = math.ceil(used + budget)
            _hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
            if _hard == resource.RLIM_INFINITY or soft < _hard:
                resource.setrlimit(resource.RLIMIT_CPU, (soft, _hard))
        try:
            result = prepare_page(job)
        except RecursionError:
            result = _failed("its structure is nested too deeply to be parsed")
        except Exception as exc:  # a page must not end the build: it is recorded as failed
            result = _failed(f"could not be prepared: {type(exc).__name__}: {str(exc)[:200]}")
        try:
            conn.send(result)
        except (OSError, ValueError):
            return


def _prepare_forkserver() -> None:
    """What the forkserver does once for all its workers, run by this package's import: exit without
    teardown, and build now what a worker would otherwise build on its first page (each worker paid it
    again: the nesting bound's pattern alone is 18 ms to compile).

    The forkserver exits once the indexer is gone (end-of-file on its "alive" pipe), after its workers,
    holding the indexer's stdout and stderr until its teardown ends (``process.skip_teardown_at_exit``
    says what that cost, issue 22, item 5). Only the forkserver does this: an import anywhere else (the
    indexer, a worker, a test) does nothing (``process.in_forkserver_preload``). Its workers never run
    exit handlers (the forkserver ends each with ``os._exit``).
    """
    if not in_forkserver_preload():
        return
    skip_teardown_at_exit()
    page_job._schema = make_schema()
    from ..nesting import compile_patterns

    compile_patterns()


_prepare_forkserver()
