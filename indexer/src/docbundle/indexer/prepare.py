"""Turn fetched pages into bundle-ready documents: parse, chunk, and analyse for the index.

This is the CPU-bound half of a build (markdown-it-py and whoosh analysis are pure Python), so it runs
in worker processes when the job is big enough to repay starting them; the main process meanwhile
feeds the analysed postings to the index writer. A page's output depends only on its inputs, so the
result is the same whichever process computed it.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import sys
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from importlib.metadata import version

import msgspec
from docbundle.bundle.analysis import iter_terms
from docbundle.bundle.schema import make_schema
from docbundle.bundle.store import ChunkRecord
from whoosh.system import pack_uint

from .chunk import chunk_markdown, parse_page

#: Field name -> (whoosh posting items, field length). Items are ``(term bytes, freq, weight, value)``.
Analysed = dict[str, tuple[list[tuple[bytes, int, float, bytes]], int]]

#: Identity of the parse + chunk rules; part of the content hash (it is in the chunking settings).
CHUNKER_ID = f"docbundle-chunker/1 (markdown-it-py {version('markdown-it-py')})"

# Below this much text, starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 1_000_000
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


class Prepared(msgspec.Struct, array_like=True):
    """One prepared page; ``chunks`` is empty when the page has no text."""

    title: str
    description: str | None
    chunks: list[ChunkRecord]
    words: int
    analysed: list[Analysed]


_schema = None


def _positions_items(text: str) -> tuple[list[tuple[bytes, int, float, bytes]], int]:
    """Exactly what whoosh's ``Positions.word_values`` + ``FieldType.index`` yield for ``text``."""
    poses: dict[str, list[int]] = {}
    for term, pos, _, _ in iter_terms(text):
        found = poses.get(term)
        if found is None:
            poses[term] = [pos]
        else:
            found.append(pos)
    items = []
    length = 0
    for term, poslist in poses.items():
        deltas = []
        base = 0
        for pos in poslist:
            deltas.append(pos - base)
            base = pos
        n = len(poslist)
        length += n
        items.append((term.encode("utf-8"), n, float(n), pack_uint(n) + pickle.dumps(deltas, 2)))
    return items, length


def _frequency_items(text: str) -> tuple[list[tuple[bytes, int, float, bytes]], int]:
    """Exactly what whoosh's ``Frequency.word_values`` + ``FieldType.index`` yield for ``text``."""
    freqs: dict[str, int] = {}
    for term, _, _, _ in iter_terms(text):
        freqs[term] = freqs.get(term, 0) + 1
    items = [(term.encode("utf-8"), n, float(n), pack_uint(n)) for term, n in freqs.items()]
    return items, sum(freqs.values())


# whoosh runs its analysis through generator layers and Token objects; for the fields that use our
# analyzer the same items are computed directly (a test checks they are identical).
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
        field = _schema[name]
        items = list(field.index(value))
        length = sum(freq for _, freq, _, _ in items) if field.scorable else 0
        out[name] = (items, length)
    return out


def prepare_page(job: PageJob) -> Prepared:
    """Parse, chunk and analyse one page."""
    parsed = parse_page(job.text, mdx=job.mdx)
    chunks = chunk_markdown(
        parsed.body, max_depth=job.max_depth, min_words=job.min_words, max_words=job.max_words, mdx=parsed.mdx
    )
    # A folder listing only knows file names; a page's own title is better there.
    if job.prefer_page_title:
        title = parsed.title or job.link_title or job.fallback_title
    else:
        title = job.link_title or parsed.title or job.fallback_title
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


def _worker_init() -> None:
    # Workers allocate a lot and free it by reference counting; full collections only cost time.
    gc.set_threshold(100_000, 50, 1_000)


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
    with ProcessPoolExecutor(max_workers=n, mp_context=_context(), initializer=_worker_init) as pool:
        chunksize = max(1, min(16, len(jobs) // (n * 8)))
        results: Iterable[Prepared] = pool.map(prepare_page, jobs, chunksize=chunksize)
        yield from results
