"""Pages prepared by the workers while the crawl still fetches the others (``Ahead``, issue 22)."""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
import threading
from collections.abc import Generator, Iterator, Sequence
from typing import overload

from ..workerctx import worker_count
from . import pool as budgeted
from .job import PageJob, Prepared
from .pool import _Pool

#: Page text (characters) a build may prepare while its crawl still runs (``Ahead``); past it, the rest
#: waits for the crawl's end, so what is held ahead of the index stays bounded: a prepared page holds
#: about 16 bytes per character of its text (large-en: 12.9 million characters, 201 MB), so at most
#: about 250 MB.
AHEAD_MAX_CHARS = 16_000_000


class Ahead:
    """Pages prepared by the workers while the crawl still fetches the others.

    The crawl is network- and event-loop-bound: it leaves the workers idle. ``offer`` hands them a page
    as soon as it is fetched (its job computed from what is known then: ``build`` guesses the document
    id before the crawl's end numbers colliding ids), and ``results`` yields the build's final jobs in
    order: a page prepared ahead with exactly its final job is taken as it is (a page's output depends
    only on its job), any other is prepared then. So the output is the same as without it.

    A thread drives the workers (the crawl runs on an event loop in the calling thread), at most
    ``AHEAD_MAX_CHARS`` of page text in all. A page offered while the workers are busy with earlier
    ones joins their run at once (``_Pool.run`` over a growing list, woken by ``offer``): it does not
    wait for a whole earlier batch to end, the last page of which left one worker idle while the other
    finished it. ``close`` abandons what is not needed (a build that stops early, or keeps its current
    bundle).
    """

    def __init__(self, limit: int = AHEAD_MAX_CHARS) -> None:
        self._cond = threading.Condition()
        # Every page offered, in order; ``_given`` of them were handed to a run of the workers.
        self._keys: list[str] = []
        self._jobs: list[PageJob] = []
        self._given = 0
        self._offered: dict[str, PageJob] = {}
        self._done: dict[str, Prepared] = {}
        self._chars = 0
        self._limit = limit
        self._closed = False  # nothing more will be offered
        self._abandoned = False  # results are not wanted any more: stop after the page in hand
        self._error: BaseException | None = None
        self._pool: _Pool | None = None
        self._own_pool = False
        self._thread: threading.Thread | None = None
        self.taken = 0
        """How many pages ``results`` gave as prepared ahead."""
        if worker_count() >= 1:
            # offer -> a run waiting; closed by the thread when it ends
            self._wake_r, self._wake_w = multiprocessing.Pipe(duplex=False)
            self._thread = threading.Thread(target=self._loop, daemon=True, name="docbundle-prepare-ahead")
            self._thread.start()

    @property
    def active(self) -> bool:
        """Whether pages are prepared ahead at all (not with ``DOCBUNDLE_WORKERS=0``)."""
        return self._thread is not None

    def offer(self, key: str, job: PageJob) -> None:
        """Prepare ``job`` (the page ``key``) in the background, unless over the limit or offered before."""
        with self._cond:
            if self._thread is None or self._closed or key in self._offered:
                return
            if self._chars + len(job.text) > self._limit:
                return
            self._chars += len(job.text)
            self._offered[key] = job
            self._keys.append(key)
            self._jobs.append(job)
            self._cond.notify_all()
            with contextlib.suppress(OSError, ValueError):
                self._wake_w.send_bytes(b"")  # a run in progress takes it as soon as a worker is free

    def _acquire(self) -> _Pool:
        warming = budgeted._shared.warming
        if warming is not None:
            warming.join(budgeted.WORKER_START_SECONDS)
        if budgeted._shared.lock.acquire(blocking=False):
            return budgeted._shared.pool
        self._own_pool = True  # another thread prepares with the shared pool now
        return _Pool()

    def _workers(self) -> int:
        """How many workers the run may use now: one until there is enough text to share."""
        return worker_count() if self._chars >= budgeted.PARALLEL_MIN_BYTES else 1

    def _loop(self) -> None:
        pool = self._pool = self._acquire()
        try:
            while True:
                with self._cond:
                    while self._given == len(self._jobs) and not self._closed:
                        self._cond.wait()
                    if self._abandoned or self._given == len(self._jobs):
                        return
                    start = self._given
                # The run goes on over pages offered meanwhile (``_Tail``), with no window: what was
                # offered is bounded by ``AHEAD_MAX_CHARS`` already, and a long page must not leave
                # the other workers idle behind it.
                results = pool.run(
                    _Tail(self._jobs, start),
                    self._workers,
                    budgeted.page_budget(),
                    ahead=sys.maxsize,
                    wake=self._wake_r,
                    longest_first=True,
                )
                try:
                    for result in results:
                        with self._cond:
                            self._done[self._keys[self._given]] = result
                            self._given += 1
                            self._cond.notify_all()
                            if self._abandoned:
                                return
                finally:
                    results.close()  # an abandoned run ends its busy workers (``_Pool.run``)
        except BaseException as exc:  # told to the consumer, which raises it in the build's thread
            with self._cond:
                self._error = exc
                self._cond.notify_all()
        finally:
            if self._own_pool:
                pool.close()
            else:
                budgeted._shared.lock.release()
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._wake_r.close()
            self._wake_w.close()

    def _finish(self) -> None:
        """No more offers: the thread prepares what was offered, then ends (and frees the pool)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _wait_for(self, key: str) -> Prepared | None:
        with self._cond:
            while key not in self._done:
                if self._error is not None:
                    raise self._error
                if self._thread is None or not self._thread.is_alive():
                    return None
                self._cond.wait()
            return self._done.pop(key)

    def results(self, final: list[tuple[str, PageJob]], workers: int | None = None) -> Iterator[Prepared]:
        """The prepared pages of ``final`` (``(key, job)``, in the build's order), as ``prepare_all`` would
        give them: each one prepared ahead with this very job, the others prepared now."""
        self._finish()
        # Which pages it did not prepare (or prepared from another job: a document id that a collision
        # numbered, say): prepared now, in order, by ``prepare_all`` once the thread has freed the pool.
        missing = [job for key, job in final if self._offered.get(key) != job]
        rest: Generator[Prepared, None, None] | None = None
        try:
            for key, job in final:
                if self._offered.get(key) == job:
                    got = self._wait_for(key)
                    if got is None:  # not prepared after all (cut short): prepared on its own now
                        self._join()
                        got = next(budgeted.prepare_all([job], workers))
                    else:
                        self.taken += 1
                    yield got
                    continue
                if rest is None:
                    self._join()  # the shared pool is free once the thread has ended
                    rest = budgeted.prepare_all(missing, workers)
                yield next(rest)
        finally:
            if rest is not None:
                rest.close()
            self.close()

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error

    def close(self, *, now: bool = False) -> None:
        """Stop preparing ahead and free the workers; idempotent. The page in hand is finished first
        (milliseconds, as a rule), or, with ``now`` (the build is interrupted), its worker is ended: a
        hostile page may take its whole budget."""
        with self._cond:
            self._abandoned = self._closed = True
            self._cond.notify_all()
        if now and self._pool is not None:
            for worker in list(self._pool.workers):
                if worker.job >= 0:
                    worker.process.kill()  # the thread reads its death as the page's end
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()


class _Tail(Sequence[PageJob]):
    """``items[start:]`` as it is when asked: a live view of a list that grows (``Ahead``'s pages)."""

    def __init__(self, items: list[PageJob], start: int) -> None:
        self._items = items
        self._start = start

    def __len__(self) -> int:
        return len(self._items) - self._start

    @overload
    def __getitem__(self, i: int) -> PageJob: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[PageJob]: ...

    def __getitem__(self, i: int | slice) -> PageJob | Sequence[PageJob]:
        if isinstance(i, slice):
            return self._items[self._start :][i]
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._items[self._start + i]
