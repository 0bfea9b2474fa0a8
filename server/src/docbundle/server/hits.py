"""Searching the catalogue: hits gathered from each library version, the best fitted into ``maxTokens``.

``search`` takes arguments already checked (``Docs.search`` checks them) and a ``Deadline`` that holds
both the caller's cancellation and the time budget. A search across libraries skips (and reports) a
library that fails, whatever the failure; a bundle whose data turns out damaged is marked failed in
the catalogue. No hits is a normal answer, with a message and next steps (``words.NextStep``).
"""

from __future__ import annotations

import logging
import pickle
import struct
import zlib
from dataclasses import dataclass, field

from docbundle.bundle.errors import BundleError
from docbundle.bundle.query import Cancelled, Deadline, Mode
from docbundle.bundle.store import DocRecord

from .budget import MIN_TEXT_TOKENS, estimate_tokens, fit_text, share
from .catalog import Catalog, OpenedLibrary, VersionEntry
from .comments import without_html_comments
from .documents import doc_uri, source
from .errors import (
    BadRequestError,
    CancelledError,
    LibraryUnavailableError,
    ServerError,
    clip,
    clip_list,
    echo,
)
from .models import SearchHit, SearchResult, SkippedLibrary
from .render import STOPPED_NOTE, cut_note, hit_header, omitted_note, search_head
from .words import MODEL, NextStep

log = logging.getLogger(__name__)

PER_DOC = 2  # hits per document, at most

# A hit before fitting: (score, library, document number, chunk number, the document's record).
RawHit = tuple[float, OpenedLibrary, int, int, DocRecord]

# Errors that mean an opened bundle's data is damaged (not a bug, not a bad request).
_DAMAGE = (BundleError, OSError, EOFError, struct.error, zlib.error, pickle.UnpicklingError)


@dataclass(frozen=True)
class SearchCall:
    """What one search asks of every library it searches (arguments checked and trimmed)."""

    query: str | None
    keywords: list[str]
    mode: Mode
    limit: int
    max_tokens: int
    deadline: Deadline
    budget: float  # the time budget in seconds, which ``deadline`` holds (for the messages)


@dataclass
class _Gathered:
    """What a search collected over its libraries, before the best hits are fitted to the budget."""

    searched: list[OpenedLibrary] = field(default_factory=list)
    raw: list[RawHit] = field(default_factory=list)
    skipped: list[SkippedLibrary] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    stopped: bool = False

    def skip(self, entry: VersionEntry, reason: str) -> None:
        """Record a library version that was not searched, and why."""
        self.skipped.append(SkippedLibrary(library_id=entry.library_id, version=entry.version, reason=reason))


def search(catalog: Catalog, call: SearchCall, library_id: str | None, version: str | None) -> SearchResult:
    """Search one library (or every library's default version when ``library_id`` is None)."""
    if library_id is not None:
        targets = [catalog.resolve(library_id, version)]
    else:
        targets = [lib.default for lib in catalog.libraries()]
    got = _Gathered()
    for entry in targets:
        if call.deadline.cancelled:
            raise CancelledError()
        if got.stopped or call.deadline.expired():
            got.stopped = True
            if library_id is None:
                got.skip(entry, f"not searched: the search's time budget ({call.budget:g} s) ran out")
            continue
        _search_entry(catalog, entry, call, got, single=library_id is not None)
    got.raw.sort(key=lambda r: (-r[0], r[1].entry.library_id, r[2], r[3]))
    return _result(got, call, library_id)


def _search_entry(
    catalog: Catalog, entry: VersionEntry, call: SearchCall, got: _Gathered, *, single: bool
) -> None:
    """Search one library version into ``got``; a failure skips it (or, searching ``single``, raises)."""
    try:
        lib = catalog.open_entry(entry)
        outcome = lib.searcher.search(
            call.query,
            keywords=call.keywords,
            mode=call.mode,
            limit=call.limit,
            per_doc=PER_DOC,
            deadline=call.deadline,
        )
        # Read the hits' records here, so a damaged store fails this library only.
        found = [(h.score, lib, h.doc, h.chunk, lib.bundle.store.get(h.doc)) for h in outcome.hits]
        if any(not 0 <= chunk < len(record.chunks) for _, _, _, chunk, record in found):
            raise BundleError("the search index and the document store disagree")
    except CancelledError:
        raise
    except Cancelled as exc:  # the engine's own: say it in the server's terms
        raise CancelledError() from exc
    except BadRequestError:
        raise
    except Exception as exc:
        if isinstance(exc, LibraryUnavailableError):
            reason = exc.reason
        else:
            reason = _failure(entry, exc, catalog)
            if isinstance(exc, _DAMAGE):
                # The bundle's bytes went bad under the server: stop serving it, tell /readyz.
                catalog.mark_failed(entry, reason)
        if single:
            raise LibraryUnavailableError(entry.library_id, entry.version, reason) from exc
        got.skip(entry, reason)
        return
    got.searched.append(lib)
    got.stopped = got.stopped or outcome.stopped
    got.terms = got.terms or list(outcome.terms)
    got.dropped = got.dropped or list(outcome.dropped)
    got.raw.extend(found)


def _failure(entry: VersionEntry, exc: Exception, catalog: Catalog) -> str:
    """Why searching a library failed (logged with its traceback when it is not a bundle problem)."""
    if isinstance(exc, ServerError):
        return str(exc)
    log.error(
        "search in %s/%s failed: %s: %s",
        entry.library_id,
        entry.version,
        type(exc).__name__,
        exc,
        exc_info=not isinstance(exc, OSError),
    )
    text = clip(str(exc), 200).replace(str(catalog.root), "<bundles>")
    return f"the search failed in this bundle ({type(exc).__name__}: {text})"


def _result(got: _Gathered, call: SearchCall, library_id: str | None) -> SearchResult:
    """The result of a search: the best hits fitted to ``call.max_tokens``, or advice when there are none."""
    raw = got.raw[: call.limit]
    searched = got.searched
    single = searched[0] if library_id is not None and searched else None
    base = SearchResult(
        query=clip(call.query) if call.query is not None else None,
        keywords=clip_list(call.keywords),
        mode=call.mode,
        library_id=single.entry.library_id if single else None,
        version=single.entry.version if single else None,
        build_id=single.manifest.build.build_id if single else None,
        content_hash=single.manifest.build.content_hash if single else None,
        searched=[source(o) for o in searched],
        skipped=got.skipped,
        terms=clip_list(got.terms),
        dropped=clip_list(got.dropped),
        stopped=got.stopped,
        hits=[],
        truncated=False,
        omitted_hits=0,
        max_tokens=call.max_tokens,
    )
    if not raw:
        message, steps = _empty_advice(base, searched, library_id, call.budget)
        return base.model_copy(
            update={"message": message, "suggestions": MODEL.advice(steps), "next_steps": steps}
        )
    if got.stopped:
        base = base.model_copy(update={"message": STOPPED_NOTE})
    # The header, and the closing note should hits be left out, come out of the same budget.
    fixed = estimate_tokens(search_head(base)) + estimate_tokens(omitted_note(len(raw), call.max_tokens))
    hits, omitted = _fit_hits(raw, call.max_tokens - fixed)
    return base.model_copy(
        update={
            "hits": hits,
            "truncated": omitted > 0 or any(h.truncated for h in hits),
            "omitted_hits": omitted,
        }
    )


def _fit_hits(raw: list[RawHit], available: int) -> tuple[list[SearchHit], int]:
    """The hits with their texts fitted into ``available`` tokens, and how many were left out."""
    full: list[SearchHit] = []
    for rank, (score, lib, _doc_no, chunk_no, doc) in enumerate(raw, start=1):
        chunk = doc.chunks[chunk_no]
        full.append(
            SearchHit(
                rank=rank,
                library_id=lib.entry.library_id,
                version=lib.entry.version,
                build_id=lib.manifest.build.build_id,
                document_id=doc.id,
                chunk_id=chunk_no,
                title=doc.title,
                heading_path=list(chunk.heading_path),
                section=doc.section,
                url=doc.url,
                uri=doc_uri(lib.entry.library_id, lib.entry.version, doc.id),
                score=round(score, 4),
                text=without_html_comments(chunk.text),
                truncated=False,
            )
        )
    # What each hit costs besides its text: its header, and the note added when it is cut.
    overheads = [estimate_tokens(hit_header(h)) + estimate_tokens(cut_note(h)) + 4 for h in full]
    # Leave out the lowest-ranked hits until every kept one can show a useful amount of text.
    kept = len(full)
    while kept > 1 and sum(overheads[:kept]) + kept * MIN_TEXT_TOKENS > available:
        kept -= 1
    needs = [estimate_tokens(h.text) for h in full[:kept]]
    alloc = share(needs, available - sum(overheads[:kept]))
    hits: list[SearchHit] = []
    for h, need, give in zip(full[:kept], needs, alloc, strict=True):
        if give >= need:
            hits.append(h)
        else:
            text, _ = fit_text(h.text, give)
            hits.append(h.model_copy(update={"text": text, "truncated": True}))
    return hits, len(full) - kept


def _empty_advice(
    result: SearchResult, opened: list[OpenedLibrary], library_id: str | None, budget: float
) -> tuple[str, tuple[NextStep, ...]]:
    """Why a search found nothing, and what to try next."""
    where = f"{result.library_id}@{result.version}" if result.library_id else "any library"
    asked = echo(result.query or ", ".join(result.keywords))
    if result.stopped and not result.terms:
        return (
            f"The search ran out of its time budget ({budget:g} s) before it could score any word.",
            (NextStep("faster", "search_documents"),),
        )
    if not opened:
        return (
            "No library could be searched: every one failed to open (see skipped).",
            (NextStep("statuses", "list_libraries"),),
        )
    steps: list[NextStep] = []
    if not result.terms:
        message = (
            f"Nothing to search for in {asked}: every word is a stop word or a question word. "
            "Name the topic: an API, a feature, an error message."
        )
    else:
        message = f"No results for {asked} in {where}."
        if result.stopped:
            message += " " + STOPPED_NOTE
        if result.mode != "broad":
            steps.append(NextStep("broad", "search_documents", {"mode": "broad"}))
        steps.append(NextStep("other_words", "search_documents"))
    lib = {"libraryId": clip(library_id)} if library_id else {}
    steps.append(NextStep("toc", "list_documents", lib))
    if library_id is not None:
        steps.append(NextStep("everywhere", "search_documents"))
    return message, tuple(steps)
