"""A page worker's side of the pool: its main loop (a page within its CPU budget, the result sent back),
dying with the indexer that started it, and what the forkserver does once for every worker it forks.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import math
import os
import select
import signal
import sys
import threading
from multiprocessing.connection import Connection
from types import FrameType

from docbundle.bundle.schema import make_schema

from ..workerctx import GC_THRESHOLDS
from . import job as page_job
from .job import PageJob, _failed, prepare_page

#: How often a worker checks that the indexer that started it still runs, where the kernel cannot
#: tell it (no pidfd): a killed indexer's workers exit within about this long.
PARENT_POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_READY = "ready"


def _worker_init(indexer_pid: int) -> None:
    # Workers allocate a lot and free it by reference counting; full collections only cost time.
    gc.set_threshold(*GC_THRESHOLDS)
    _die_with(indexer_pid)


def _die_with(indexer_pid: int) -> None:
    """Make this worker exit as soon as the indexer process that started it is gone.

    A worker blocks on its task queue, whose write end the worker itself (and the other workers)
    also hold, so a ``kill -9`` of the indexer left the workers waiting forever; they in turn kept
    the forkserver and the resource tracker alive (issue 9, item 12). Two guards:

    - ``PR_SET_PDEATHSIG`` (Linux): the kernel sends SIGKILL when this process's parent (the
      forkserver, or the indexer itself with the spawn method) exits;
    - a watchdog thread on the indexer's pid: under forkserver the indexer is not the parent, so
      the thread waits on a pidfd (woken by the kernel when the indexer exits) or, without pidfd
      support, polls every ``PARENT_POLL_SECONDS``, and ends the worker with ``os._exit``.

    Once the workers are gone the forkserver sees EOF on its "alive" pipe and exits, and the
    resource tracker follows.
    """
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # no prctl here: the watchdog alone still ends the worker
    pidfd: int | None = None
    try:
        pidfd = os.pidfd_open(indexer_pid)
    except ProcessLookupError:
        os._exit(1)  # the indexer died before this worker started
    except (AttributeError, OSError):
        pidfd = None  # not Linux >= 5.3: poll
    threading.Thread(target=_watch, args=(indexer_pid, pidfd), daemon=True, name="indexer-watchdog").start()


def _watch(indexer_pid: int, pidfd: int | None) -> None:
    """Block until the indexer process is gone, then end this worker at once."""
    if pidfd is not None:
        select.select([pidfd], [], [])  # readable once the process has exited
    else:
        while True:
            try:
                os.kill(indexer_pid, 0)
            except ProcessLookupError:
                break
            except PermissionError:
                pass  # it exists (owned by another user after pid reuse: then it is not ours, but rare)
            threading.Event().wait(PARENT_POLL_SECONDS)
    os._exit(1)


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


def _exit_now() -> None:
    """End this process at once, its streams flushed (``os._exit``: no interpreter teardown)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(0)


def _in_forkserver() -> bool:
    """Whether this import runs in ``multiprocessing.forkserver.main``'s preload: the forkserver itself,
    not one of the processes it forked (whose stacks descend from ``main`` too, through ``_serve_one``)."""
    forkserver = sys.modules.get("multiprocessing.forkserver")
    if forkserver is None:
        return False
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code is forkserver._serve_one.__code__:
            return False
        if frame.f_code is forkserver.main.__code__:
            return True
        frame = frame.f_back
    return False


def _prepare_forkserver() -> None:
    """What the forkserver does once for all its workers: exit without teardown, and build now what a
    worker would otherwise build on its first page (each worker paid it again: the nesting bound's
    pattern alone is 18 ms to compile)."""
    if not _in_forkserver():
        return
    _exit_promptly_if_forkserver()
    page_job._schema = make_schema()
    from ..nesting import compile_patterns

    compile_patterns()


def _exit_promptly_if_forkserver() -> None:
    """In the forkserver, skip the interpreter's teardown when it exits (issue 22, item 5).

    The forkserver exits once the indexer is gone (end-of-file on its "alive" pipe), after its workers;
    freeing the modules it preloaded then took ~0.07 s, during which it still held the indexer's stdout
    and stderr, so a caller reading them through pipes waited that long after the indexer had ended.
    It holds nothing else to write by then. Only the forkserver registers this: the import running in
    ``multiprocessing.forkserver.main`` (its preload) is what marks it; an import anywhere else (the
    indexer, a test) registers nothing. Its workers never run exit handlers (the forkserver ends each
    with ``os._exit``).
    """
    atexit.register(_exit_now)


_prepare_forkserver()
