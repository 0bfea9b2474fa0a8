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
exit with the process (``atexit``; or on end-of-file on their pipe, and ``worker._die_with``).

The rooms (issue 33; each imports only those below it, an import-linter contract)::

    ahead.py    ``Ahead``: pages prepared by the workers while the crawl still runs
    pool.py     the budgeted pool: worker processes, per-page CPU and wall-clock budgets, ``prepare_all``
    worker.py   a worker process's side: its main loop, dying with the indexer, the forkserver's preload
    job.py      one page: ``PageJob``, ``Prepared``, ``prepare_page`` (parse, chunk, analyse)

This package is what the workers' forkserver preloads (``workerctx.PREPARE_MODULE``): importing it
imports every room, so a worker forked from it starts warm.
"""

from __future__ import annotations

from .ahead import AHEAD_MAX_CHARS, Ahead
from .job import CHUNKER_ID, FAILURE_KIND, Analysed, PageJob, Prepared, prepare_page
from .pool import (
    PAGE_CPU_SECONDS,
    PARALLEL_MIN_BYTES,
    WORKER_START_SECONDS,
    page_budget,
    page_deadline,
    prepare_all,
    start_workers,
    stop_workers,
)
from .worker import PARENT_POLL_SECONDS

__all__ = [
    "AHEAD_MAX_CHARS",
    "CHUNKER_ID",
    "FAILURE_KIND",
    "PAGE_CPU_SECONDS",
    "PARALLEL_MIN_BYTES",
    "PARENT_POLL_SECONDS",
    "WORKER_START_SECONDS",
    "Ahead",
    "Analysed",
    "PageJob",
    "Prepared",
    "page_budget",
    "page_deadline",
    "prepare_all",
    "prepare_page",
    "start_workers",
    "stop_workers",
]
