"""Turn fetched pages into bundle-ready documents: parse, chunk, and analyse for the index.

An HTML page (``PageJob.html``) is first converted to markdown here (``html.convert_html``), so the
conversion runs in the worker processes too, never in the crawler's event loop.

This is the CPU-bound half of a build (markdown-it-py and whoosh analysis are pure Python), so it runs
in worker processes; the main process meanwhile feeds the analysed postings to the index writer. A
page's output depends only on its inputs, so the result is the same whichever process computed it.

Every page is untrusted input, so each one gets a budget (issue 19): ``PAGE_CPU_SECONDS`` of CPU time
(``DOCBUNDLE_PAGE_SECONDS`` overrides) for its conversion, chunking and analysis. A worker sets its
``RLIMIT_CPU`` to what it has used so far plus the budget before each page, so the kernel ends a worker
that overruns it even inside native code (the HTML parser, the converter), and the indexer ends one
that has not answered ``page_deadline(budget)`` seconds of wall-clock time after it took the page (a
worker hung without using CPU). Either way the page comes back as ``Prepared.failure`` (the build
records it as failed, with the reason, and goes on) and a fresh worker takes the next page. So a build
with worker processes can never be held by one page longer than its deadline.
``DOCBUNDLE_WORKERS=0`` prepares every page in the indexer's own process: no budget applies then.

The workers belong to the process, not to one build: ``start_workers`` (called by a build before its
crawl) starts the first one in the background, and every later run gives its pages to the workers
already started (one run at a time; a run in another thread meanwhile gets a pool of its own). They
exit with the process (``atexit``; or on end-of-file on their pipe, and ``_die_with``).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import heapq
import math
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from multiprocessing.connection import Connection, wait
from types import FrameType
from typing import Any, overload

import msgspec
from docbundle.bundle.analysis import term_positions
from docbundle.bundle.schema import make_schema
from docbundle.bundle.store import ChunkRecord
from docbundle.bundle.whooshio import (
    FieldPostings,
    grouped_frequency_items,
    grouped_positions_items,
    index_field,
)

from . import html
from .chunk import chunk_markdown, parse_page
from .safety import scan_chunks
from .workerctx import GC_THRESHOLDS, worker_count
from .workerctx import context as _context

#: Field name -> (whoosh posting items, field length). Items are ``(term bytes, freq, weight, value)``.
Analysed = dict[str, FieldPostings]

#: Identity of the parse + chunk rules; part of the content hash (it is in the chunking settings).
CHUNKER_ID = f"docbundle-chunker/2 (markdown-it-py {version('markdown-it-py')})"

# Below this much text, starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 1_000_000
#: How often a worker checks that the indexer that started it still runs, where the kernel cannot
#: tell it (no pidfd): a killed indexer's workers exit within about this long.
PARENT_POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
#: CPU seconds one page may take to be converted, chunked and analysed (``DOCBUNDLE_PAGE_SECONDS``
#: overrides). Real pages take milliseconds; the largest measured (a 5 MB page) about 10 s.
PAGE_CPU_SECONDS = 60.0
#: The error kind of a page that failed in preparation (over its budget, or its worker died).
FAILURE_KIND = "budget"
#: How long a new worker may take to start (import its modules) before it is taken for hung.
WORKER_START_SECONDS = 120.0
_READY = "ready"
_TEXT_FIELDS = ("title", "headings", "body", "code", "section")


class PageJob(msgspec.Struct, frozen=True, array_like=True):
    """What a worker needs to prepare one page."""

    text: str
    mdx: bool
    link_title: str
    fallback_title: str
    section: str
    prefer_page_title: bool
    max_depth: int
    min_words: int
    max_words: int
    html: bool = False  # ``text`` is decoded HTML, converted to markdown before parsing
    url: str = ""  # the page's address, that an HTML page's relative links are resolved against


class Prepared(msgspec.Struct, array_like=True):
    """One prepared page; ``chunks`` is empty when the page has no text (or ``failure`` says why not)."""

    title: str
    description: str | None
    chunks: list[ChunkRecord]
    words: int
    analysed: list[Analysed]
    failure: str | None = None
    """Why the page could not be prepared (over its budget, its worker died); ``None`` when it was."""
    safety: list[tuple[int, str, str]] = msgspec.field(default_factory=list)
    """Its content-safety findings, ``(chunk, kind, detail)`` (``safety.scan_chunks``)."""


def _failed(reason: str) -> Prepared:
    return Prepared("", None, [], 0, [], failure=reason)


_schema = None


def _positions_items(text: str) -> FieldPostings:
    return grouped_positions_items(term_positions(text))


def _frequency_items(text: str) -> FieldPostings:
    return grouped_frequency_items(term_positions(text))


# whoosh runs its analysis through generator layers and Token objects; for the fields that use our
# analyzer the same postings are computed straight from the terms (``whooshio.positions_items``; a
# test checks they equal whoosh's ``FieldType.index``).
_FAST = {
    "title": _positions_items,
    "headings": _positions_items,
    "body": _positions_items,
    "code": _frequency_items,
}


def _analyse(values: dict[str, str]) -> Analysed:
    """Each field's whoosh analysis, exactly as ``IndexWriter.add_document`` would compute it."""
    global _schema
    if _schema is None:
        _schema = make_schema()
    out: Analysed = {}
    for name, value in values.items():
        fast = _FAST.get(name)
        if fast is not None:
            out[name] = fast(value)
            continue
        out[name] = index_field(_schema, name, value)
    return out


def prepare_page(job: PageJob) -> Prepared:
    """Parse, chunk and analyse one page (converting it to markdown first when it is HTML)."""
    text = job.text
    html_title = ""
    if job.html:
        converted = html.convert_html(job.text, job.url, link_text=job.link_title)
        text, html_title = converted.markdown, converted.title
    parsed = parse_page(text, mdx=job.mdx)
    chunks = chunk_markdown(
        parsed.body, max_depth=job.max_depth, min_words=job.min_words, max_words=job.max_words, mdx=parsed.mdx
    )
    # A folder listing only knows file names; a page's own title is better there.
    page_title = html_title or parsed.title
    if job.prefer_page_title:
        title = page_title or job.link_title or job.fallback_title
    else:
        title = job.link_title or page_title or job.fallback_title
    if not chunks:
        return Prepared(title, parsed.description, [], 0, [])
    # Title and section are analysed again for every chunk, not shared: pickle writes a shared value
    # object once and refers to it after, so sharing would change the index bytes.
    analysed = [
        _analyse(
            {
                "title": title,
                "section": job.section,
                "headings": " \u203a ".join(c.heading_path),
                "body": c.plain,
                "code": c.code,
            }
        )
        for c in chunks
    ]
    return Prepared(
        title,
        parsed.description,
        [ChunkRecord(c.text, list(c.heading_path), c.start_line, c.end_line) for c in chunks],
        sum(c.words for c in chunks),
        analysed,
        safety=scan_chunks(c.text for c in chunks),
    )


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
        warming = _shared.warming
        if warming is not None:
            warming.join(WORKER_START_SECONDS)
        if _shared.lock.acquire(blocking=False):
            return _shared.pool
        self._own_pool = True  # another thread prepares with the shared pool now
        return _Pool()

    def _workers(self) -> int:
        """How many workers the run may use now: one until there is enough text to share."""
        return worker_count() if self._chars >= PARALLEL_MIN_BYTES else 1

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
                    page_budget(),
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
                _shared.lock.release()
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
                        got = next(prepare_all([job], workers))
                    else:
                        self.taken += 1
                    yield got
                    continue
                if rest is None:
                    self._join()  # the shared pool is free once the thread has ended
                    rest = prepare_all(missing, workers)
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


# --------------------------------------------------------------------------------------------------
# The budgeted pool


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
    global _schema
    _schema = make_schema()
    from .nesting import compile_patterns

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
