"""Ranking one library by meaning: which mode a search runs there, and the hybrid and semantic rankings.

**Which mode.** ``choose`` decides per library. Asked for ``balanced``, ``broad`` or ``precise`` (or
``fulltext``, which is ``balanced``), that runs. Asked for ``hybrid`` or ``semantic``, or for nothing
(the default is ``hybrid`` when it can run), the library needs vectors (``manifest.vectors``), the server
the semantic extra, a loaded query encoder, and that encoder must be the one that made the vectors (the
same embedder key). When one is missing the library is searched by keywords (``balanced``), and the
reason says which (``vector_problem``, also what ``list_libraries`` shows).

**hybrid** fuses two scored lists of pages with ``docbundle.bundle.hybrid.fuse_scores`` (α and the depth
read from there; α by ``hybrid.alpha_for`` the question's script): today's ``balanced`` ranking (a
page's best hit score) and the pages by their best section's cosine similarity to the query over
*every* section of the library (never a pool a keyword search chose), each list ``hybrid.DEPTH`` pages
deep, or ``limit`` when a call asks for more hits than that. A page found by keywords shows its keyword
hits; a page only the vectors found shows its best sections. Each hit's score is ``1 / (K + place)`` of
its page, the scale a search across libraries merges by (``rescale``), for the page's first section, a
step lower for each further one (``section_score``).
**semantic** ranks sections by cosine similarity alone (at most ``per_doc`` per page).

**Encoding** the query (``QueryVector``) happens once per call, cut to the model's window and in one of
the encoder's slots (``encoder.QueryEncoder.encode``). A search whose query waited too long for a slot
(``EncoderBusy``) is searched by keywords, and the answer says why (``Ranking.fallback``, then
``keywords_instead``), as for any other reason hybrid cannot run.

Bounds: scoring a query is one pass over the vector file (1 ms for 5,500 sections), ranking pages one
more; the keyword side keeps every bound of ``docbundle.bundle.search`` and the call's ``Deadline``.
numpy is imported by the functions that score, which run only for a library whose vectors are usable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from docbundle.bundle import hybrid
from docbundle.bundle.manifest import Manifest, VectorsInfo
from docbundle.bundle.query import Deadline, OutOfTime, RanMode, SearchMode, WordMatch, rank_pool

from .encoder import Encoded, EncoderBusy, QueryEncoder, describe

if TYPE_CHECKING:
    from docbundle.bundle.search import SearchOutcome

    from .catalog import OpenedLibrary

Scale = Literal["keyword", "fused", "vector"]
SEMANTIC_MODES: tuple[SearchMode, ...] = ("hybrid", "semantic")


@dataclass(frozen=True)
class Choice:
    """The mode one library runs, and why (``reason``: the default's choice, or why not the one asked)."""

    ran: RanMode
    reason: str | None = None
    fell_back: bool = False  # the mode asked for (not the default) could not run here
    problem: str | None = None  # why hybrid could not run here (the vectors, the extra, the encoder)


@dataclass(frozen=True, kw_only=True)
class Ranking:
    """One library's hits, best first: (score, store record, chunk), and how the scores compare.

    Built by keyword only (``kw_only``): eight fields, four of them lists, are too many to keep apart by
    position."""

    hits: list[tuple[float, int, int]]
    terms: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    stopped: bool = False
    scale: Scale = "keyword"
    # Whether the keyword side's hits hold the query's informative words (None: semantic ranking alone,
    # where every hit is near by meaning and no word is checked).
    word_match: WordMatch | None = None
    informative: list[str] = field(default_factory=list)  # the keyword side's informative words
    # Why the mode chosen fell back to keyword search while ranking (the encoder was busy); None if not.
    fallback: str | None = None


def vector_problem(vectors: VectorsInfo | None, encoder: QueryEncoder) -> str | None:
    """Why this server cannot search a library version's vectors (None: it can, or may once loaded).

    Cheap: reads the manifest and the encoder's state, loads nothing.
    """
    if vectors is None:
        return "it has no semantic vectors"
    missing = encoder.problem()
    if missing is not None:
        return missing
    key = encoder.key()
    made = vectors.embedder
    if key is not None and key != made.key:
        return (
            f"its vectors were made by {describe(made)} (key {made.key[:12]}), and this server's query "
            f"encoder is {encoder.identity_text()} (key {key[:12]})"
        )
    expected = encoder.expected() if key is None else None
    if expected is not None and expected != (made.backend, made.model, made.version):
        return (
            f"its vectors were made by {describe(made)}, and this server's query encoder would be "
            f"{' '.join(expected)}"
        )
    return None


def choose(
    requested: SearchMode | None, lib_id: str, manifest: Manifest, encoder: QueryEncoder, waited: bool
) -> Choice:
    """The mode a library runs for ``requested`` (None: the default). ``waited``: the call already waited
    for the encoder, so one still loading is reported as such."""
    if requested not in (None, *SEMANTIC_MODES):
        return Choice("balanced" if requested == "fulltext" else requested)  # type: ignore[arg-type]
    problem = vector_problem(manifest.vectors, encoder)
    if problem is None and encoder.status() != "ready":
        problem = (
            "the query encoder was still loading"
            if waited and encoder.status() == "loading"
            else "the query encoder is not loaded"
        )
    if problem is not None:
        return keywords_instead(requested, lib_id, problem)
    if requested is None:
        return Choice("hybrid", f"default: {lib_id} has vectors this server can search")
    return Choice(requested)  # type: ignore[arg-type]


def keywords_instead(requested: SearchMode | None, lib_id: str, problem: str) -> Choice:
    """The choice of keyword search (``balanced``) for a library where hybrid or semantic search was
    asked for (``requested``, None: the default) and cannot run, and why (``problem``)."""
    if requested is None:
        return Choice("balanced", f"default: {lib_id} is searched by keywords, as {problem}", problem=problem)
    why = f"{requested} was asked for, but in {lib_id} {problem}: searched by keywords (balanced)"
    return Choice("balanced", why, True, problem)


class QueryVector:
    """The query's vector, encoded once per call on first need (checked against the call's deadline).

    The libraries of one call share it: the first to need it encodes, the others wait for that (one
    cut query's encoding at most) rather than encode again; a refusal (``EncoderBusy``) is kept too.
    """

    def __init__(self, encoder: QueryEncoder, text: str) -> None:
        self._encoder = encoder
        self._text = text
        self._lock = threading.Lock()
        self._busy: EncoderBusy | None = None
        self.encoded: Encoded | None = None

    def get(self, deadline: Deadline) -> Any:
        """The vector; raises ``Cancelled`` or ``OutOfTime`` from the deadline, ``EncoderBusy`` when no
        encoder slot freed up in time."""
        with self._lock:
            if self.encoded is None:
                if self._busy is not None:
                    raise self._busy
                deadline.check()
                embedder = self._encoder.get(deadline, timeout=0)
                if embedder is None:
                    raise RuntimeError("the query encoder is not loaded")
                try:
                    self.encoded = self._encoder.encode(embedder, self._text, deadline)
                except EncoderBusy as exc:
                    self._busy = exc
                    raise
            return self.encoded.vector


def rank(
    lib: OpenedLibrary,
    ran: RanMode,
    query: str | None,
    keywords: list[str],
    limit: int,
    per_doc: int,
    deadline: Deadline,
    vector: Callable[[Deadline], Any],
) -> Ranking:
    """Rank one library's sections in mode ``ran``; hybrid and semantic call ``vector`` for the query's."""
    searcher = lib.searcher
    if ran != "hybrid" and ran != "semantic":
        out = searcher.search(
            query, keywords=keywords, mode=ran, limit=limit, per_doc=per_doc, deadline=deadline
        )
        return _keyword_side([(h.score, h.doc, h.chunk) for h in out.hits], out, "keyword")
    if ran == "semantic":
        try:
            scores = lib.bundle.vector_file().scores(vector(deadline))
        except EncoderBusy as busy:
            ranking = rank(lib, "balanced", query, keywords, limit, per_doc, deadline, vector)
            return replace(ranking, fallback=str(busy))
        except OutOfTime:
            return Ranking(hits=[], stopped=True, scale="vector")
        return Ranking(hits=_best_sections(scores, searcher, limit, per_doc), scale="vector")
    depth = max(hybrid.DEPTH, limit)  # pages per side; the default limit (5) and up to 20: as tuned
    kw = searcher.search(
        query, keywords=keywords, mode="balanced", limit=depth * per_doc, per_doc=per_doc, deadline=deadline
    )
    by_page: dict[int, list[int]] = {}
    kw_best: dict[int, float] = {}  # page -> its best keyword score (the hits come best first)
    for h in kw.hits:
        by_page.setdefault(h.doc, []).append(h.chunk)
        kw_best.setdefault(h.doc, h.score)
    keyword_pages = list(kw_best.items())[:depth]
    try:
        scores = lib.bundle.vector_file().scores(vector(deadline))
    except OutOfTime as exc:
        refused = isinstance(exc, EncoderBusy)  # searched by keywords, and said so; else out of time
        return _keyword_side(
            [(h.score, h.doc, h.chunk) for h in kw.hits[:limit]],
            kw,
            "keyword",
            stopped=kw.stopped if refused else True,
            fallback=str(exc) if refused else None,
        )
    from docbundle.bundle.vectors import rank_documents

    starts = searcher.starts
    semantic_pages = rank_documents(scores, starts, depth)
    alpha = hybrid.alpha_for(" ".join([query or "", *keywords]))
    hits: list[tuple[float, int, int]] = []
    pages = hybrid.fuse_scores(keyword_pages, semantic_pages, alpha, depth)
    for n, (page, _) in enumerate(pages):
        chunks = by_page.get(page) or _page_sections(scores, starts, searcher.chunk_count, page, per_doc)
        # shown on the scale a search across libraries merges by: 1 / (K + place), as ``rescale``
        shown, below = 1.0 / (hybrid.K + n + 1), 1.0 / (hybrid.K + n + 2)
        for j, chunk in enumerate(chunks):
            hits.append((section_score(shown, below, j, len(chunks)), page, chunk))
            if len(hits) >= limit:
                return _keyword_side(hits, kw, "fused")
    return _keyword_side(hits, kw, "fused")


def section_score(page: float, below: float, place: int, sections: int) -> float:
    """The score a hit shows: its page's score (``page``: ``1 / (K + place)`` of the page in hybrid and in
    ``rescale``) for the page's first section (``place`` 0), then lower by an equal step for each further
    one of the page's ``sections`` hits, every step a share of the gap down to ``below`` (the next
    place's score).

    So two hits of one page never show the same score, the order of the hits is the fused order of
    their pages (a page's sections stay above the next page), and the first hit of a page still shows
    the page's own score, the scale a search across libraries merges by."""
    return round(page - (page - below) * place / max(sections, 1), 6)


def _keyword_side(
    hits: list[tuple[float, int, int]],
    kw: SearchOutcome,
    scale: Scale,
    *,
    stopped: bool | None = None,
    fallback: str | None = None,
) -> Ranking:
    """A ranking of ``hits`` that reports what its keyword search ``kw`` saw (terms, dropped and
    informative words, the word match); ``stopped`` (None: ``kw``'s) says whether scoring ran out of time."""
    return Ranking(
        hits=hits,
        terms=kw.terms,
        dropped=kw.dropped,
        stopped=kw.stopped if stopped is None else stopped,
        scale=scale,
        word_match=kw.word_match,
        informative=kw.informative,
        fallback=fallback,
    )


def _page_sections(scores: Any, starts: list[int], total: int, page: int, per_doc: int) -> list[int]:
    """A page's best ``per_doc`` sections by score (chunk numbers within the page), best first."""
    import numpy as np

    a = starts[page]
    b = starts[page + 1] if page + 1 < len(starts) else total
    order = np.argsort(-scores[a:b], kind="stable")[:per_doc]
    return [int(i) for i in order]


def _best_sections(scores: Any, searcher: Any, limit: int, per_doc: int) -> list[tuple[float, int, int]]:
    """The best sections by score, at most ``per_doc`` per page, ``limit`` in all (ties: section order)."""
    import numpy as np

    n = int(scores.shape[0])
    size = min(n, rank_pool(limit))  # the keyword engine's pool size (query.rank_pool)
    if size == 0:
        return []
    pool = np.argpartition(-scores, size - 1)[:size] if n > size else np.arange(n)
    ranked = sorted((-float(scores[i]), int(i)) for i in pool)
    hits: list[tuple[float, int, int]] = []
    per: dict[int, int] = {}
    for neg, i in ranked:
        doc, chunk = searcher.locate(i)
        if per.get(doc, 0) >= per_doc:
            continue
        per[doc] = per.get(doc, 0) + 1
        hits.append((round(-neg, 6), doc, chunk))
        if len(hits) >= limit:
            break
    return hits


def rescale(ranking: Ranking) -> list[tuple[float, int, int]]:
    """A ranking's hits scored by reciprocal rank of their page, ``1 / (K + rank)``, for merging with
    libraries whose scores are on another scale (fused scores are kept: they are on this one); a page's
    further sections a step lower (``section_score``, down towards the next rank's), as in hybrid."""
    if ranking.scale == "fused":
        return ranking.hits
    rank_of: dict[int, int] = {}
    sections: dict[int, int] = {}
    for _, doc, _ in ranking.hits:
        rank_of.setdefault(doc, len(rank_of) + 1)
        sections[doc] = sections.get(doc, 0) + 1
    out: list[tuple[float, int, int]] = []
    seen: dict[int, int] = {}
    for _, doc, chunk in ranking.hits:
        place = seen.get(doc, 0)
        seen[doc] = place + 1
        r = rank_of[doc]
        score = section_score(1.0 / (hybrid.K + r), 1.0 / (hybrid.K + r + 1), place, sections[doc])
        out.append((score, doc, chunk))
    return out
