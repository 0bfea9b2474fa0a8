"""Turn fetched pages into bundle-ready documents: parse, chunk, and analyse for the index.

An HTML page (``PageJob.html``) is first converted to markdown here (``html.convert_html``), so the
conversion runs in the worker processes too, never in the crawler's event loop.

This is the CPU-bound half of a build (markdown-it-py and whoosh analysis are pure Python), so it runs
in worker processes when the job is big enough to repay starting them; the main process meanwhile
feeds the analysed postings to the index writer. A page's output depends only on its inputs, so the
result is the same whichever process computed it.
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
import select
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from importlib.metadata import version

import msgspec
from docbundle.bundle.analysis import iter_terms
from docbundle.bundle.schema import make_schema
from docbundle.bundle.store import ChunkRecord
from docbundle.bundle.whooshio import FieldPostings, frequency_items, index_field, positions_items

from . import html
from .chunk import chunk_markdown, parse_page

#: Field name -> (whoosh posting items, field length). Items are ``(term bytes, freq, weight, value)``.
Analysed = dict[str, FieldPostings]

#: Identity of the parse + chunk rules; part of the content hash (it is in the chunking settings).
CHUNKER_ID = f"docbundle-chunker/1 (markdown-it-py {version('markdown-it-py')})"

# Below this much text, starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 1_000_000
#: How often a worker checks that the indexer that started it still runs, where the kernel cannot
#: tell it (no pidfd): a killed indexer's workers exit within about this long.
PARENT_POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
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
    """One prepared page; ``chunks`` is empty when the page has no text."""

    title: str
    description: str | None
    chunks: list[ChunkRecord]
    words: int
    analysed: list[Analysed]


_schema = None


def _positions_items(text: str) -> FieldPostings:
    return positions_items(iter_terms(text))


def _frequency_items(text: str) -> FieldPostings:
    return frequency_items(iter_terms(text))


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
    )


def _context() -> multiprocessing.context.BaseContext:
    # Never plain fork: the crawler (and test servers) leave threads behind, and forking a
    # threaded process can deadlock. forkserver forks from a clean single-threaded server.
    method = "forkserver" if sys.platform.startswith("linux") else "spawn"
    return multiprocessing.get_context(method)


def _worker_init(indexer_pid: int) -> None:
    # Workers allocate a lot and free it by reference counting; full collections only cost time.
    gc.set_threshold(100_000, 50, 1_000)
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


def worker_count() -> int:
    """How many worker processes a big build uses (``DOCBUNDLE_WORKERS`` overrides; 0 = none)."""
    env = os.environ.get("DOCBUNDLE_WORKERS", "").strip()
    if env.isdigit():
        return int(env)
    return min(os.cpu_count() or 1, 4)


def prepare_all(jobs: list[PageJob], workers: int | None = None) -> Iterator[Prepared]:
    """Prepare every job, in order; in worker processes when the job is big enough."""
    n = worker_count() if workers is None else workers
    size = sum(len(j.text) for j in jobs)
    if n < 2 or size < PARALLEL_MIN_BYTES or len(jobs) < 2 * n:
        yield from map(prepare_page, jobs)
        return
    pool = ProcessPoolExecutor(
        max_workers=n, mp_context=_context(), initializer=_worker_init, initargs=(os.getpid(),)
    )
    with pool:
        chunksize = max(1, min(16, len(jobs) // (n * 8)))
        results: Iterable[Prepared] = pool.map(prepare_page, jobs, chunksize=chunksize)
        yield from results
