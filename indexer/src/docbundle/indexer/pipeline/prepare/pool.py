"""The budgeted pool: worker processes that prepare pages, each page within its CPU budget and a
wall-clock deadline, a worker over either replaced; the pool of this process, started early by a build
(``start_workers``) and kept for every later run; ``prepare_all``.
"""

from __future__ import annotations

import atexit
import contextlib
import heapq
import math
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from ..workerctx import context as _context
from ..workerctx import worker_count
from .job import PageJob, Prepared, _failed, prepare_page
from .worker import _serve

# Below this much text, starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 1_000_000
#: CPU seconds one page may take to be converted, chunked and analysed (``DOCBUNDLE_PAGE_SECONDS``
#: overrides). Real pages take milliseconds; the largest measured (a 5 MB page) about 10 s.
PAGE_CPU_SECONDS = 60.0
#: How long a new worker may take to start (import its modules) before it is taken for hung.
WORKER_START_SECONDS = 120.0


def page_budget() -> float:
    """CPU seconds each page may take (``DOCBUNDLE_PAGE_SECONDS`` overrides ``PAGE_CPU_SECONDS``)."""
    env = os.environ.get("DOCBUNDLE_PAGE_SECONDS", "").strip()
    try:
        value = float(env) if env else PAGE_CPU_SECONDS
    except ValueError:
        value = PAGE_CPU_SECONDS
    return value if math.isfinite(value) and value > 0 else PAGE_CPU_SECONDS


def page_deadline(budget: float) -> float:
    """Wall-clock seconds after which a worker that has not answered for its page is killed.

    Generous next to the CPU budget (which the kernel enforces): on a busy machine a page gets only a
    share of a core, and this only has to catch a worker that hangs without using CPU.
    """
    return 4 * budget + 10


def prepare_all(jobs: list[PageJob], workers: int | None = None) -> Generator[Prepared, None, None]:
    """Prepare every job, in order, in worker processes with a per-page budget (see the module docstring).

    Small jobs use one worker (parallelism would not repay starting more); ``workers=0`` (or
    ``DOCBUNDLE_WORKERS=0``) prepares them in this process, with no budget.
    """
    n = worker_count() if workers is None else workers
    if n < 1 or not jobs:
        yield from map(prepare_page, jobs)
        return
    size = sum(len(j.text) for j in jobs)
    if size < PARALLEL_MIN_BYTES or len(jobs) < 2 * n:
        n = 1
    warming = _shared.warming
    if warming is not None:
        warming.join(WORKER_START_SECONDS)  # the worker it starts is this run's first
    if _shared.lock.acquire(blocking=False):
        try:
            yield from _shared.pool.run(jobs, n, page_budget())
        finally:
            _shared.lock.release()
    else:  # another thread prepares with the shared pool now: this run gets its own
        pool = _Pool()
        try:
            yield from pool.run(jobs, n, page_budget())
        finally:
            pool.close()


def start_workers() -> None:
    """Start a worker of this process's pool now, in the background, unless one is there already.

    A build calls this before its crawl, so the worker (and the forkserver, the first time) starts
    while the pages are fetched rather than after. The pool lives as long as this process: every later
    build (the next library of a ``build`` or ``nightly`` run, the next test) finds its workers started.
    """
    if worker_count() < 1 or not _shared.lock.acquire(blocking=False):
        return

    def start() -> None:
        try:
            if not _shared.pool.workers:
                _shared.pool._start()
        except Exception:
            pass  # the run starts its worker itself, and reports what fails then
        finally:
            _shared.lock.release()

    thread = threading.Thread(target=start, daemon=True, name="docbundle-prepare-start")
    _shared.warming = thread
    thread.start()


def stop_workers() -> None:
    """End this process's idle workers (the next run starts new ones); also run when the process exits."""
    warming = _shared.warming
    if warming is not None and warming is not threading.current_thread():
        warming.join(WORKER_START_SECONDS)
    if _shared.lock.acquire(timeout=1):
        try:
            _shared.pool.close()
        finally:
            _shared.lock.release()


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    job: int = -1  # the index of the job it holds, -1 when idle
    deadline: float = 0.0
    ready: bool = False  # it has started (its first message), so its page clock runs

    def stop(self) -> None:
        """End the process now (it may be stuck in native code) and reap it."""
        self.conn.close()
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)


@dataclass
class _Pool:
    """Worker processes; each page goes to an idle one, and a worker over budget is replaced.

    Its workers outlive a run: the next run (of this process) gives its pages to them.
    """

    workers: list[_Worker] = field(default_factory=list)
    budget: float = PAGE_CPU_SECONDS  # the budget of the run going on

    def _start(self) -> _Worker:
        ctx = _context()
        ours, theirs = ctx.Pipe(duplex=True)
        process = ctx.Process(  # type: ignore[attr-defined]
            target=_serve, args=(theirs, os.getpid()), daemon=True, name="docbundle-prepare"
        )
        process.start()
        theirs.close()  # only the worker holds its end now: its death reads as EOF here
        worker = _Worker(process, ours)
        self.workers.append(worker)
        return worker

    def _replace(self, worker: _Worker) -> None:
        worker.stop()
        self.workers.remove(worker)

    def _death(self, worker: _Worker) -> str:
        worker.process.join(5)
        code = worker.process.exitcode
        if code is not None and code < 0:
            sig = -code
            if sig == getattr(signal, "SIGXCPU", -1) or sig == signal.SIGKILL:
                return f"over its CPU budget of {self.budget:g} s (its worker process was ended)"
            return f"its worker process died ({signal.Signals(sig).name})"
        return f"its worker process exited (code {code})"

    def close(self) -> None:
        """Ask every worker to exit, and end those that do not at once."""
        for worker in self.workers:
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send(None)
        for worker in self.workers:
            worker.process.join(1 if worker.job < 0 else 0)
            worker.stop()
        self.workers.clear()

    def run(
        self,
        jobs: Sequence[PageJob],
        n: int | Callable[[], int],
        budget: float,
        *,
        ahead: int | None = None,
        wake: Connection | None = None,
        longest_first: bool = False,
    ) -> Generator[Prepared, None, None]:
        """Prepare ``jobs`` on at most ``n`` workers at once (``n()`` asked each time a page is handed
        out, when a function), each page within ``budget`` CPU seconds.

        Results come in order; at most ``ahead`` (default ``8 * n``) are computed ahead of the one the
        consumer waits for, which bounds what they hold, but a long page in front leaves the other
        workers idle once they are that far ahead. ``jobs`` may grow while the run goes on: a message
        on ``wake`` says it did, so a free worker takes the new page at once. ``longest_first`` hands
        out the longest page waiting first, with no window (``ahead`` is then not used): a long page
        taken last would end the run alone on one worker."""
        self.budget = budget
        done: dict[int, Prepared] = {}
        sent = 0
        out = 0
        waiting_pages: list[tuple[int, int]] = []  # (-length, index) not handed out yet (longest_first)
        seen = 0  # jobs[:seen] are in waiting_pages or handed out (longest_first)
        if ahead is None:
            ahead = 8 * (n() if callable(n) else n)  # results computed ahead of the consumer, at most
        deadline = page_deadline(budget)
        try:
            while out < len(jobs):
                while out in done:
                    yield done.pop(out)
                    out += 1
                if out >= len(jobs):
                    break
                busy = [w for w in self.workers if w.job >= 0]
                idle = [w for w in self.workers if w.job < 0]
                limit = n() if callable(n) else n
                if longest_first:
                    while seen < len(jobs):
                        heapq.heappush(waiting_pages, (-len(jobs[seen].text), seen))
                        seen += 1
                while len(busy) < limit:
                    if longest_first:
                        if not waiting_pages:
                            break
                        index = waiting_pages[0][1]
                    elif sent < len(jobs) and sent < out + ahead:
                        index = sent
                    else:
                        break
                    worker = idle.pop() if idle else self._start()
                    try:
                        worker.conn.send((budget, jobs[index]))
                    except (OSError, ValueError):
                        self._replace(worker)  # died while idle: the job goes to a fresh one
                        continue
                    if longest_first:
                        heapq.heappop(waiting_pages)
                    else:
                        sent += 1
                    worker.job = index
                    worker.deadline = time.monotonic() + (deadline if worker.ready else WORKER_START_SECONDS)
                    busy.append(worker)
                if not busy:
                    continue  # pages were offered since the check above: handed out at the loop's top
                soonest = min(w.deadline for w in busy)
                waiting: list[Any] = [w.conn for w in busy]
                if wake is not None:
                    waiting.append(wake)
                ready = wait(waiting, timeout=max(0.0, soonest - time.monotonic()))
                if wake is not None and wake in ready:
                    while wake.poll():  # pages were offered: handed out at the loop's top
                        wake.recv_bytes()
                for worker in busy:
                    if worker.conn in ready:
                        try:
                            result: Prepared | str = worker.conn.recv()
                        except (EOFError, OSError):
                            result = _failed(self._death(worker))
                            self._replace(worker)
                        if isinstance(result, str):  # _READY: its page's clock starts now
                            worker.ready = True
                            worker.deadline = time.monotonic() + deadline
                            continue
                        done[worker.job] = result
                        worker.job = -1
                    elif time.monotonic() >= worker.deadline:
                        done[worker.job] = _failed(
                            f"no answer within {deadline:g} s (its worker process was ended)"
                        )
                        self._replace(worker)
        finally:
            # A run left early (its consumer stopped) leaves workers busy with pages no one wants:
            # they go; the idle ones stay for the next run.
            for worker in [w for w in self.workers if w.job >= 0]:
                self._replace(worker)


@dataclass
class _Shared:
    """This process's pool: the one a run uses unless another thread's run has it."""

    pool: _Pool = field(default_factory=_Pool)
    lock: threading.Lock = field(default_factory=threading.Lock)  # held by the run using ``pool``
    warming: threading.Thread | None = None  # the thread ``start_workers`` started, if any


_shared = _Shared()


@atexit.register
def _at_exit() -> None:
    # Without waiting: a worker still starting, or busy for another thread, ends by itself once this
    # process is gone (its pipe reads EOF, and ``_die_with``).
    if _shared.lock.acquire(blocking=False):
        try:
            _shared.pool.close()
        finally:
            _shared.lock.release()
