"""Searching the catalogue: hits gathered from each library version, the best fitted into ``maxTokens``.

``search`` takes arguments already checked (``Docs.search`` checks them) and the caller's cancellation
token. When the call may run hybrid or semantic search (asked for, or the default) and a library
searched has vectors, it first waits for the query encoder (``encoder.QueryEncoder.get``: bounded,
cancellable, outside the time budget); then the ``Deadline`` of the time budget starts. Each library
runs the mode ``semantic.choose`` picks for it, and the answer says which ran and why. Across libraries,
each ranks (and fuses) its own pages, then the lists are merged by score: as they are when every
library scored the same way, else by reciprocal rank of each library's pages (``semantic.rescale``).

A search across libraries searches the libraries ``routing.Router`` chooses (the K the route index ranks
best, or every one of a small catalogue), ``WORKERS`` at a time, and starts none once its time budget is
spent: those are counted (``notReached``), never blamed on the question. It skips (and reports) a
library that fails, whatever the failure; a bundle whose
data turns out damaged is marked failed in the catalogue. No hits is a normal answer, with a message
and next steps (``words.NextStep``).
"""

from __future__ import annotations

import itertools
import logging
import pickle
import struct
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from docbundle.bundle.errors import BundleError
from docbundle.bundle.query import MAX_QUERY_CHARS, Cancelled, Deadline, RanMode, SearchMode, WordMatch
from docbundle.bundle.store import DocRecord

from .budget import MIN_TEXT_TOKENS, estimate_tokens, fit_text, share
from .catalog import Catalog, OpenedLibrary, VersionEntry
from .comments import without_html_comments
from .documents import doc_uri, source
from .encoder import QUERY_TOKENS
from .errors import (
    BadRequestError,
    CancelledError,
    LibraryUnavailableError,
    ServerError,
    clip,
    clip_list,
    echo,
)
from .models import MAX_SEARCHED_LISTED, RoutingSummary, SearchHit, SearchResult, SkippedLibrary
from .render import STOPPED_NOTE, cut_note, hit_header, omitted_note, search_head
from .routing import MAX_ROUTE_WORDS, SHOWN, Route, Router
from .semantic import SEMANTIC_MODES, Choice, QueryVector, Ranking, choose, keywords_instead, rank, rescale
from .words import MODEL, NextStep

log = logging.getLogger(__name__)

PER_DOC = 2  # hits per document, at most
WORKERS = 4  # libraries a search across libraries searches at once
# How much of a list or a message a result's notes quote, in characters (then "…"): enough to read,
# never so much that a note crowds out the hits inside maxTokens.
FAILURE_CHARS = 200  # a failed bundle's error text, in the line that says the search failed there
HELD_CHARS = 200  # the terms a no-topic question's hits merely hold
WORDS_CHARS = 300  # the informative words no section holds, in a weak match's note
MODE_NOTE_CHARS = 600  # where each mode ran and why, across libraries (a line per mode and problem)
# Tokens a hit costs beyond its header, text and cut note: the four newlines ``render_search`` puts
# around it (a blank line and three joins), a token each at most, so the fitting never falls short.
HIT_JOIN_TOKENS = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class RawHit:
    """A hit before fitting, built by keyword (``kw_only``): three of its five fields are numbers."""

    score: float
    lib: OpenedLibrary
    chunk: int  # the chunk number within ``doc``
    doc: DocRecord
    seq: int  # its place in its library's ranking: the last tie-break, so merging is stable


# Errors that mean an opened bundle's data is damaged (not a bug, not a bad request).
_DAMAGE = (BundleError, OSError, EOFError, struct.error, zlib.error, pickle.UnpicklingError)


@dataclass(frozen=True)
class SearchCall:
    """What one search asks of every library it searches (arguments checked and trimmed)."""

    query: str | None
    keywords: list[str]
    mode: SearchMode | None  # None: the default (hybrid where a library's vectors can be searched)
    limit: int
    max_tokens: int
    cancel: Deadline  # the caller's cancellation token; the time budget starts after the encoder wait
    budget: float  # the time budget in seconds (for the messages)


@dataclass
class _Gathered:
    """What a search collected over its libraries, before the best hits are fitted to the budget."""

    searched: list[OpenedLibrary] = field(default_factory=list)
    rankings: list[tuple[OpenedLibrary, Ranking, dict[int, DocRecord]]] = field(default_factory=list)
    choices: list[tuple[str, Choice]] = field(default_factory=list)  # (library id, mode it ran)
    raw: list[RawHit] = field(default_factory=list)
    skipped: list[SkippedLibrary] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    informative: list[str] = field(default_factory=list)
    word_matches: list[WordMatch] = field(default_factory=list)  # one per library its keywords searched
    stopped: bool = False  # a library's scoring ran out of the time budget
    route: Route | None = None  # across libraries: how the libraries were chosen
    not_reached: int = 0  # libraries not started before the time budget ran out

    def add(self, found: _One) -> None:
        """Fold one library's outcome in (in the order the libraries were chosen)."""
        entry = found.entry
        if found.skipped is not None or found.lib is None or found.ranking is None or found.choice is None:
            reason = found.skipped or "not searched"
            self.skipped.append(
                SkippedLibrary(library_id=entry.library_id, version=entry.version, reason=reason)
            )
            return
        ranking = found.ranking
        self.searched.append(found.lib)
        self.choices.append((entry.library_id, found.choice))
        self.rankings.append((found.lib, ranking, found.records))
        self.stopped = self.stopped or ranking.stopped
        self.terms = self.terms or list(ranking.terms)
        self.dropped = self.dropped or list(ranking.dropped)
        if ranking.word_match is not None:
            self.word_matches.append(ranking.word_match)
            self.informative = self.informative or list(ranking.informative)


@dataclass
class _One:
    """What searching one library gave: its ranking and the hits' records, or why it was skipped."""

    entry: VersionEntry
    lib: OpenedLibrary | None = None
    choice: Choice | None = None
    ranking: Ranking | None = None
    records: dict[int, DocRecord] = field(default_factory=dict)
    skipped: str | None = None


def _wait_for_encoder(catalog: Catalog, call: SearchCall, targets: list[VersionEntry]) -> bool:
    """Wait for the query encoder when this call may use it; returns whether it waited."""
    if call.mode not in (None, *SEMANTIC_MODES) or not catalog.encoder.installed():
        return False
    if not any(e.meta is not None and e.meta.vectors is not None and not e.problem for e in targets):
        return False
    try:
        catalog.encoder.get(call.cancel)
    except Cancelled as exc:
        raise CancelledError() from exc
    return True


def search(
    catalog: Catalog,
    call: SearchCall,
    library_id: str | None,
    version: str | None,
    router: Router | None = None,
) -> SearchResult:
    """Search one library, or across libraries: those ``router`` chooses (every one without a router)."""
    route: Route | None = None
    if library_id is not None:
        targets = [catalog.version_entry(library_id, version)]
    else:
        # Imported here: the engine (and whoosh behind it) is not loaded by a server that never searches.
        from docbundle.bundle.search import query_words

        router = router or Router(catalog)
        route = router.route(query_words(call.query, call.keywords, MAX_ROUTE_WORDS), call.cancel)
        targets = route.targets
    waited = _wait_for_encoder(catalog, call, targets)
    deadline = call.cancel.within(call.budget)
    text = " ".join([(call.query or "")[:MAX_QUERY_CHARS], *call.keywords]).strip()
    vector = QueryVector(catalog.encoder, text)
    got = _Gathered(route=route)

    def one(entry: VersionEntry) -> _One:
        return _search_entry(catalog, entry, call, deadline, vector, waited, single=library_id is not None)

    for found in _run(targets, one, deadline):
        if found is None:
            got.not_reached += 1
        else:
            got.add(found)
    _merge(got)
    encoded = vector.encoded
    return _result(got, call, library_id, encoded.kept if encoded is not None and encoded.cut else None)


def _run(
    targets: list[VersionEntry], one: Callable[[VersionEntry], _One], deadline: Deadline
) -> list[_One | None]:
    """``one`` of each target, ``WORKERS`` at a time, none started once ``deadline`` expired (None)."""
    results: list[_One | None] = [None] * len(targets)
    picks = itertools.count()
    lock = threading.Lock()

    def work() -> None:
        while True:
            if deadline.cancelled:
                raise CancelledError()
            if deadline.expired():
                return
            with lock:
                i = next(picks)
            if i >= len(targets):
                return
            results[i] = one(targets[i])

    workers = min(WORKERS, len(targets))
    if workers <= 1:
        work()
        return results
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="docbundle-search") as pool:
        futures = [pool.submit(work) for _ in range(workers)]
        for f in futures:
            f.result()
    return results


def _merge(got: _Gathered) -> None:
    """Every library's hits in one list, best first (rescaled when libraries scored differently)."""
    mixed = len({r.scale for _, r, _ in got.rankings}) > 1
    for lib, ranking, records in got.rankings:
        hits = rescale(ranking) if mixed else ranking.hits
        got.raw.extend(
            RawHit(score=score, lib=lib, chunk=chunk, doc=records[doc], seq=seq)
            for seq, (score, doc, chunk) in enumerate(hits)
        )
    got.raw.sort(key=lambda r: (-r.score, r.lib.entry.library_id, r.seq))


def _search_entry(
    catalog: Catalog,
    entry: VersionEntry,
    call: SearchCall,
    deadline: Deadline,
    vector: QueryVector,
    waited: bool,
    *,
    single: bool,
) -> _One:
    """Search one library version; a failure is returned as its skip reason (searching ``single``, raised)."""
    try:
        lib = catalog.open_entry(entry, warm=single)  # one the route index chose: warmed if asked again
        choice = choose(call.mode, entry.library_id, lib.manifest, catalog.encoder, waited)
        ranking = rank(lib, choice.ran, call.query, call.keywords, call.limit, PER_DOC, deadline, vector.get)
        if ranking.fallback is not None:  # the query's encoding was refused: keywords ran, say why
            choice = keywords_instead(call.mode, entry.library_id, ranking.fallback)
        # Read the hits' records here, so a damaged store fails this library only.
        records = {doc: lib.bundle.store.get(doc) for _, doc, _ in ranking.hits}
        if any(not 0 <= chunk < len(records[doc].chunks) for _, doc, chunk in ranking.hits):
            raise BundleError("the search index and the document store disagree")
    except CancelledError:
        raise
    except Cancelled as exc:  # the engine's own: say it in the server's terms
        raise CancelledError() from exc
    except BadRequestError:
        raise
    except Exception as exc:
        if isinstance(exc, LibraryUnavailableError):
            if single:
                raise  # as the catalogue said it, with its advice (a lock pin is fixed in the lock file)
            reason = exc.reason
        else:
            reason = _failure(entry, exc, catalog)
            if isinstance(exc, _DAMAGE):
                # The bundle's bytes went bad under the server: stop serving it, tell /readyz.
                catalog.mark_failed(entry, reason)
        if single:
            raise LibraryUnavailableError(entry.library_id, entry.version, reason) from exc
        return _One(entry, skipped=reason)
    return _One(entry, lib, choice, ranking, records)


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
    text = clip(str(exc), FAILURE_CHARS).replace(str(catalog.root), "<bundles>")
    return f"the search failed in this bundle ({type(exc).__name__}: {text})"


def _result(
    got: _Gathered, call: SearchCall, library_id: str | None, encoded_chars: int | None = None
) -> SearchResult:
    """The result of a search: the best hits fitted to ``call.max_tokens``, or advice when there are none.

    ``encoded_chars``: the characters of the query encoded for meaning, when it was cut to the model's
    window; the answer's ``message`` says so (``query_cut_note``), as it carries the other notes."""
    raw = got.raw[: call.limit]
    searched = got.searched
    single = searched[0] if library_id is not None and searched else None
    if library_id is not None and got.not_reached:
        got.stopped = True  # the budget ran out before the one library was searched
    ran, reason = _mode_of(got, call.mode)
    base = SearchResult(
        query=clip(call.query) if call.query is not None else None,
        keywords=clip_list(call.keywords),
        mode=ran,
        requested_mode=call.mode,
        mode_reason=reason,
        library_id=single.entry.library_id if single else None,
        version=single.entry.version if single else None,
        build_id=single.manifest.build.build_id if single else None,
        content_hash=single.manifest.build.content_hash if single else None,
        searched=[source(o) for o in searched[:MAX_SEARCHED_LISTED]],
        routing=_routing(got),
        skipped=got.skipped,
        terms=clip_list(got.terms),
        dropped=clip_list(got.dropped),
        stopped=got.stopped or got.not_reached > 0,
        hits=[],
        truncated=False,
        omitted_hits=0,
        max_tokens=call.max_tokens,
    )
    cut = [query_cut_note(encoded_chars)] if encoded_chars is not None else []
    if not raw:
        message, steps = _empty_advice(base, searched, library_id, call.budget)
        message = " ".join([message, *cut])
        return base.model_copy(
            update={"message": message, "suggestions": MODEL.advice(steps), "next_steps": steps}
        )
    word_match = _word_match(got)
    notes = [STOPPED_NOTE] if got.stopped else []
    if base.routing is not None and base.routing.not_reached:
        notes.append(unreached_note(base.routing, call.budget))
    if word_match in ("weak", "no_topic"):
        notes.append(_match_note(word_match, got, ran, library_id is not None))
    notes.extend(cut)
    base = base.model_copy(update={"word_match": word_match, "message": " ".join(notes) or None})
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


def _routing(got: _Gathered) -> RoutingSummary | None:
    """How a search across libraries chose its libraries (None for a search of one library)."""
    route = got.route
    if route is None:
        return None
    return RoutingSummary(
        method=route.method,
        libraries=route.total,
        searched=len(got.searched),
        chosen=[o.entry.library_id for o in got.searched[:SHOWN]],
        reason=route.reason,
        not_reached=got.not_reached,
    )


def unreached_note(routing: RoutingSummary, budget: float) -> str:
    """The truth about a search across libraries that the time budget stopped before every library."""
    if routing.method == "unrouted":
        return (
            f"The time budget ({budget:g} s) ran out before {routing.not_reached} of the {routing.libraries} "
            f"libraries were reached: without routing ({routing.reason}) a search takes the libraries in "
            "turn, so that is the size of the catalogue, not the question. Name a library (libraryId) to "
            "search it whole."
        )
    return (
        f"The time budget ({budget:g} s) ran out before {routing.not_reached} of the libraries chosen were "
        "searched: the ones searched took it (opening them, scoring the words). Ask again "
        "(opened libraries answer faster), or name a library (libraryId)."
    )


def query_cut_note(kept: int) -> str:
    """The note that says the query was cut for meaning (``encoder.QUERY_TOKENS``)."""
    return (
        f"Query cut for meaning: only its first {kept} characters (the query, then the keywords) fit the "
        f"model's window of {QUERY_TOKENS} tokens and were encoded; keyword search is not cut."
    )


def _word_match(got: _Gathered) -> WordMatch | None:
    """Whether any library's keyword hits hold the question's words (None: only semantic ranking ran)."""
    for verdict in ("matched", "no_topic", "weak"):
        if verdict in got.word_matches:
            return verdict  # type: ignore[return-value]
    return None


def _match_note(verdict: WordMatch, got: _Gathered, ran: RanMode, single: bool) -> str:
    """The one line that says the hits may not be about the question (``verdict`` weak or no_topic)."""
    hybrid = ran == "hybrid"
    if verdict == "no_topic":
        held = clip(", ".join(got.terms) or "nothing", HELD_CHARS)
        return (
            "Weak match: the question has no informative word (only stop words and question words), so "
            + ("these hits were ranked by meaning alone" if hybrid else f"these hits merely hold {held}")
            + "; name the topic (an API, a feature, an error message)."
        )
    words = clip(", ".join(got.informative), WORDS_CHARS)
    if len(got.informative) > 1:
        what = f"no section holds most of the question's words ({words}; rarer words count more)"
    else:
        what = f"no section holds the question's word {words}"
    if hybrid:
        return (
            f"Weak match: {what}, so these hits were ranked by meaning: check that they answer the question."
        )
    scope = "this library" if single else "the libraries searched"
    return f"Weak match: {what}; {scope} may not cover it."


def _mode_of(got: _Gathered, requested: SearchMode | None) -> tuple[RanMode, str | None]:
    """The mode the search ran (the semantic one where any library ran it) and why, in one line."""
    if not got.choices:
        return ("balanced" if requested in (None, "fulltext") else requested), None  # type: ignore[return-value]
    ran = [c.ran for _, c in got.choices]
    mode = next((m for m in ran if m in ("hybrid", "semantic")), ran[0])
    explain = [(lib_id, c) for lib_id, c in got.choices if c.reason and (requested is None or c.fell_back)]
    if not explain:
        return mode, None
    if len(got.choices) == 1:
        return mode, explain[0][1].reason
    # A search across libraries: where each mode ran, and why hybrid could not where it did not.
    by_mode: dict[str, list[str]] = {}
    for lib_id, c in got.choices:
        by_mode.setdefault(c.ran, []).append(lib_id)
    where = "; ".join(f"{m} in {', '.join(libs)}" for m, libs in by_mode.items())
    why = "; ".join(f"{lib_id}: {c.problem}" for lib_id, c in explain if c.problem)
    head = "default" if requested is None else f"{requested} was asked for"
    return mode, clip(f"{head}: {where}" + (f" ({why})" if why else ""), MODE_NOTE_CHARS)


def _fit_hits(raw: list[RawHit], available: int) -> tuple[list[SearchHit], int]:
    """The hits with their texts fitted into ``available`` tokens, and how many were left out."""
    full: list[SearchHit] = []
    for place, r in enumerate(raw, start=1):
        lib, doc, chunk_no = r.lib, r.doc, r.chunk
        chunk = doc.chunks[chunk_no]
        full.append(
            SearchHit(
                rank=place,
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
                score=round(r.score, 4),
                text=without_html_comments(chunk.text),
                truncated=False,
            )
        )
    # What each hit costs besides its text: its header, and the note added when it is cut.
    overheads = [
        estimate_tokens(hit_header(h)) + estimate_tokens(cut_note(h)) + HIT_JOIN_TOKENS for h in full
    ]
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
    if not opened and result.routing is not None and result.routing.not_reached:
        return (unreached_note(result.routing, budget), (NextStep("statuses", "list_libraries"),))
    if result.stopped and not result.terms:
        return (
            f"The search ran out of its time budget ({budget:g} s) before it could score any word.",
            (NextStep("faster", "search_documents"),),
        )
    if not opened and result.routing is not None and result.routing.method == "routed" and not result.skipped:
        return (
            f"No library holds any word of {asked}: {result.routing.reason}.",
            (NextStep("other_words", "search_documents"), NextStep("statuses", "list_libraries")),
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
