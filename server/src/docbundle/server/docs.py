"""What the tools do, independent of MCP: catalogue lookups, search, documents and their budgets.

Both front ends call the ``Docs`` operations: the MCP server (``mcp/``) wraps each in a tool, resource or
prompt, and the CLI (``cli.py``) calls the same ones for ``docbundle search`` and ``info`` without
importing the MCP SDK. Each operation returns a result model (``models``); ``render`` turns it into the
markdown a model reads, and this module counts that markdown against the caller's ``maxTokens``.

Errors are raised as ``docbundle.server.errors`` exceptions with messages that say what to do next.

Bounds: every string argument is checked against its ``MAX_*`` bound (defined in ``errors``) and
refused when longer (``check_ids``, ``check_search_input``); results quote back at most
``MAX_ECHO_CHARS`` characters of any input and ``MAX_ECHO_ITEMS`` items of any list; a search spends at
most ``SEARCH_TIME_BUDGET`` seconds scoring (then answers with what it found and says so) and stops when
its ``Deadline`` is cancelled. A search across libraries skips (and reports) a library that fails,
whatever the failure.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import json
import logging
import pickle
import struct
import zlib
from dataclasses import dataclass, field
from urllib.parse import quote

from docbundle.bundle.errors import BundleError
from docbundle.bundle.manifest import SourceDocument
from docbundle.bundle.query import MAX_KEYWORD_CHARS, MAX_QUERY_CHARS, Cancelled, Deadline, Mode
from docbundle.bundle.store import DocRecord

from .budget import estimate_tokens, fit_text, page_end, share
from .catalog import Catalog, LibraryEntry, OpenedLibrary, VersionEntry
from .comments import without_html_comments
from .errors import (
    MAX_CATEGORY_CHARS,
    MAX_CURSOR_CHARS,
    MAX_DOCUMENT_ID_CHARS,
    MAX_ECHO_CHARS,
    MAX_ECHO_ITEMS,
    MAX_KEYWORDS,
    MAX_LIBRARY_ID_CHARS,
    MAX_SECTION_CHARS,
    MAX_VERSION_CHARS,
    BadCursorError,
    BadRequestError,
    CancelledError,
    InputTooLongError,
    LibraryUnavailableError,
    ServerError,
    UnknownDocumentError,
    check_length,
    clip,
    clip_list,
    echo,
)
from .models import (
    DEFAULT_LIMIT,
    DEFAULT_MAX_TOKENS,
    DEFAULT_WINDOW,
    MAX_LIMIT,
    MAX_MAX_TOKENS,
    MAX_WINDOW,
    MIN_MAX_TOKENS,
    SEARCH_TIME_BUDGET,
    ChunkContext,
    ChunkView,
    DocumentList,
    DocumentPage,
    LibraryList,
    LibraryMatch,
    LibraryMatches,
    LibrarySummary,
    NotIndexed,
    SearchHit,
    SearchResult,
    SkippedLibrary,
    Source,
    TocDocument,
    TocSection,
    VersionList,
    VersionSummary,
)
from .render import (
    STOPPED_NOTE,
    cut_note,
    doc_header,
    hit_header,
    omitted_note,
    render_documents,
    search_head,
    toc_line,
)
from .resolve import Resolver

# The logger keeps the name it had before the module split: it is part of every log line.
log = logging.getLogger(__name__)

PER_DOC = 2
# A hit or neighbour chunk given fewer tokens than this is dropped rather than cut to a stub.
MIN_TEXT_TOKENS = 60
# Room for a result's own header and closing notes in the text rendering.
HEADER_TOKENS = 120
_RESERVED = ":/?#[]@!$&'()*+,;="


# A hit before fitting: (score, library, document number, chunk number, the document's record).
_RawHit = tuple[float, OpenedLibrary, int, int, DocRecord]


def _obtained_mix(documents: list[SourceDocument]) -> dict[str, int]:
    """Indexed documents counted by how their text was obtained (as the manifest records it)."""
    mix: dict[str, int] = {}
    for d in documents:
        if d.chunks and d.obtained:
            mix[d.obtained] = mix.get(d.obtained, 0) + 1
    return dict(sorted(mix.items()))


@dataclass(frozen=True)
class _SearchCall:
    """What one search asks of every library it searches."""

    query: str | None
    keywords: list[str]
    mode: Mode
    limit: int
    deadline: Deadline


@dataclass
class _Gathered:
    """What a search collected over its libraries, before the best hits are fitted to the budget."""

    searched: list[OpenedLibrary] = field(default_factory=list)
    raw: list[_RawHit] = field(default_factory=list)
    skipped: list[SkippedLibrary] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    stopped: bool = False

    def skip(self, entry: VersionEntry, reason: str) -> None:
        """Record a library version that was not searched, and why."""
        self.skipped.append(SkippedLibrary(library_id=entry.library_id, version=entry.version, reason=reason))


@dataclass(frozen=True)
class _TocEntry:
    number: int
    id: str
    url: str
    title: str
    description: str
    section: str
    optional: bool
    chunks: int


def _source(opened: OpenedLibrary) -> Source:
    b = opened.manifest.build
    return Source(
        library_id=opened.entry.library_id,
        version=opened.entry.version,
        build_id=b.build_id,
        content_hash=b.content_hash,
    )


def doc_uri(library_id: str, version: str, doc_id: str) -> str:
    """The ``docs://`` resource URI of a document."""
    return f"docs://{library_id}/{quote(version, safe='')}/{quote(doc_id, safe=_RESERVED)}"


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise BadRequestError(f"{name} must be between {low} and {high}, not {clip(str(value), 20)}")


_LIBRARY_ADVICE = "Library ids are short: call list_libraries to see them."
_VERSION_ADVICE = "Call list_library_versions for the version names, or omit version for the default."
_DOCUMENT_ADVICE = "Pass a documentId from search_documents or an id from list_documents."


def check_ids(library_id: str | None, version: str | None = None, document_id: str | None = None) -> None:
    """Refuse a libraryId, version or document id over its bound (InputTooLongError)."""
    check_length("libraryId", library_id, MAX_LIBRARY_ID_CHARS, _LIBRARY_ADVICE)
    check_length("version", version, MAX_VERSION_CHARS, _VERSION_ADVICE)
    check_length("id", document_id, MAX_DOCUMENT_ID_CHARS, _DOCUMENT_ADVICE)


def check_search_input(
    query: str | None,
    keywords: list[str] | None,
    library_id: str | None = None,
    version: str | None = None,
) -> None:
    """Refuse a search whose query, keywords, libraryId or version is over its bound."""
    check_length(
        "query",
        query,
        MAX_QUERY_CHARS,
        "Ask with the words that matter (an API name, an error message); at most "
        f"{MAX_QUERY_CHARS} characters.",
    )
    if keywords is not None and len(keywords) > MAX_KEYWORDS:
        raise InputTooLongError(
            "keywords",
            len(keywords),
            MAX_KEYWORDS,
            "items",
            f"Pass at most {MAX_KEYWORDS} keywords: the most specific ones (only the rarest "
            "words are searched anyway).",
        )
    for k in keywords or []:
        check_length(
            "a keyword",
            k,
            MAX_KEYWORD_CHARS,
            f"Each keyword is a term of at most {MAX_KEYWORD_CHARS} characters.",
        )
    check_ids(library_id, version)


# Errors that mean an opened bundle's data is damaged (not a bug, not a bad request).
_DAMAGE = (BundleError, OSError, EOFError, struct.error, zlib.error, pickle.UnpicklingError)


def _search_failure(entry: VersionEntry, exc: Exception, catalog: Catalog) -> str:
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


class Docs:
    """The operations behind the tools, over one catalogue."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.resolver = Resolver(catalog)

    # -- catalogue ----------------------------------------------------------------------------------

    def _summary(self, lib: LibraryEntry) -> LibrarySummary:
        entry = lib.default
        state, reason = self.catalog.state(entry)
        m = entry.manifest
        return LibrarySummary(
            id=lib.id,
            name=lib.name,
            description=lib.description,
            category=lib.category,
            versions=list(lib.versions),
            default_version=lib.default_version,
            documents=m.counts.documents if m else None,
            built_at=m.build.built_at if m else None,
            build_id=m.build.build_id if m else None,
            content_hash=m.build.content_hash if m else None,
            status=state,
            reason=reason,
            safety_findings=len(m.safety) if m else 0,
            safety_kinds=sorted({f.kind for f in m.safety}) if m else [],
            obtained=_obtained_mix(m.documents) if m else {},
        )

    def list_libraries(self, category: str | None = None) -> LibraryList:
        """Every library (optionally of one category), with its status."""
        check_length("category", category, MAX_CATEGORY_CHARS, "Categories are short: see list_libraries.")
        libs = self.catalog.libraries()
        categories = sorted({lib.category for lib in libs if lib.category})
        wanted = category.strip().lower() if category and category.strip() else None
        chosen = [lib for lib in libs if wanted is None or lib.category.lower() == wanted]
        message = None
        if not libs:
            message = "No libraries are installed: the bundles directory holds no built bundle."
        elif not chosen:
            message = (
                f"No library has category {echo(category)}. Categories: {', '.join(categories) or '(none)'}."
            )
        return LibraryList(
            libraries=[self._summary(lib) for lib in chosen],
            category=wanted,
            categories=categories,
            message=message,
        )

    def resolve_library(self, name: str, limit: int = DEFAULT_LIMIT) -> LibraryMatches:
        """The libraries that match what a person calls one (``resolve``), best first, at most ``limit``."""
        check_length("name", name, MAX_QUERY_CHARS, "Give the library's name in a few words.")
        _check_range("limit", limit, 1, MAX_LIMIT)
        if not name.strip():
            raise BadRequestError("give name: what the library is called, e.g. 'react' or 'sapui5'")
        found = self.resolver.resolve(name)
        matches = [
            LibraryMatch(
                id=m.library.id,
                name=m.library.name,
                description=m.library.description,
                versions=list(m.library.versions),
                default_version=m.library.default_version,
                languages=list(m.languages),
                score=m.score,
                why=m.why,
            )
            for m in found[:limit]
        ]
        message = None
        if not matches:
            ids = self.catalog.library_ids()
            shown = ", ".join(ids[:MAX_ECHO_ITEMS]) + (", ..." if len(ids) > MAX_ECHO_ITEMS else "")
            message = (
                f"No library matches {echo(name)}. Installed: {shown or '(none)'}. "
                "Call list_libraries to see them all with their descriptions."
            )
        elif len(found) > limit:
            message = f"{len(found) - limit} more match(es) left out: raise limit to see them."
        return LibraryMatches(query=clip(name, MAX_ECHO_CHARS), matches=matches, message=message)

    def list_versions(self, library_id: str) -> VersionList:
        """A library and every version of it, with lifecycle status and availability."""
        check_ids(library_id)
        lib = self.catalog.library(library_id)
        versions = []
        for v in lib.versions.values():
            state, reason = self.catalog.state(v)
            m = v.manifest
            versions.append(
                VersionSummary(
                    version=v.version,
                    status=m.version.status if m else None,
                    latest=m.version.latest if m else False,
                    lts=m.version.lts if m else False,
                    default=v.version == lib.default_version,
                    availability=state,
                    reason=reason,
                    build_id=v.build_id,
                    content_hash=v.content_hash,
                    built_at=m.build.built_at if m else None,
                    documents=m.counts.documents if m else None,
                )
            )
        return VersionList(library=self._summary(lib), versions=versions)

    # -- search -------------------------------------------------------------------------------------

    def search(
        self,
        query: str | None = None,
        *,
        keywords: list[str] | None = None,
        library_id: str | None = None,
        version: str | None = None,
        mode: Mode = "balanced",
        limit: int = DEFAULT_LIMIT,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        cancel: Deadline | None = None,
    ) -> SearchResult:
        """Search one library (or every library when ``library_id`` is None), fitted to ``max_tokens``.

        ``cancel`` is the caller's cancellation token; the search also stops after
        ``SEARCH_TIME_BUDGET`` seconds and answers with what it found.
        """
        _check_range("limit", limit, 1, MAX_LIMIT)
        _check_range("maxTokens", max_tokens, MIN_MAX_TOKENS, MAX_MAX_TOKENS)
        check_search_input(query, keywords, library_id, version)
        query = query.strip() if query and query.strip() else None
        keywords = [k.strip() for k in keywords or [] if k and k.strip()]
        if query is None and not keywords:
            raise BadRequestError(
                "give query (words or a question, e.g. 'useEffect cleanup') or keywords (a list of terms)"
            )
        if library_id is None and version:
            raise BadRequestError("version needs libraryId: versions belong to one library")
        deadline = (cancel or Deadline()).within(SEARCH_TIME_BUDGET)
        if library_id is not None:
            targets = [self.catalog.resolve(library_id, version)]
        else:
            targets = [lib.default for lib in self.catalog.libraries()]
        call = _SearchCall(query, keywords, mode, limit, deadline)
        got = _Gathered()
        for entry in targets:
            if deadline.cancelled:
                raise CancelledError()
            if got.stopped or deadline.expired():
                got.stopped = True
                if library_id is None:
                    got.skip(
                        entry, f"not searched: the search's time budget ({SEARCH_TIME_BUDGET:g} s) ran out"
                    )
                continue
            self._search_entry(entry, call, got, single=library_id is not None)
        got.raw.sort(key=lambda r: (-r[0], r[1].entry.library_id, r[2], r[3]))
        return self._search_result(got, got.raw[:limit], query, keywords, mode, library_id, max_tokens)

    def _search_entry(
        self, entry: VersionEntry, search: _SearchCall, got: _Gathered, *, single: bool
    ) -> None:
        """Search one library version into ``got``; a failure skips it (or, searching ``single``, raises)."""
        try:
            lib = self.catalog.open_entry(entry)
            outcome = lib.searcher.search(
                search.query,
                keywords=search.keywords,
                mode=search.mode,
                limit=search.limit,
                per_doc=PER_DOC,
                deadline=search.deadline,
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
                reason = _search_failure(entry, exc, self.catalog)
                if isinstance(exc, _DAMAGE):
                    # The bundle's bytes went bad under the server: stop serving it, tell /readyz.
                    self.catalog.mark_failed(entry, reason)
            if single:
                raise LibraryUnavailableError(entry.library_id, entry.version, reason) from exc
            got.skip(entry, reason)
            return
        got.searched.append(lib)
        got.stopped = got.stopped or outcome.stopped
        got.terms = got.terms or list(outcome.terms)
        got.dropped = got.dropped or list(outcome.dropped)
        got.raw.extend(found)

    def _search_result(
        self,
        got: _Gathered,
        raw: list[_RawHit],
        query: str | None,
        keywords: list[str],
        mode: Mode,
        library_id: str | None,
        max_tokens: int,
    ) -> SearchResult:
        """The result of a search: the best ``raw`` hits fitted to ``max_tokens``, or advice when none."""
        searched = got.searched
        single = searched[0] if library_id is not None and searched else None
        base = SearchResult(
            query=clip(query) if query is not None else None,
            keywords=clip_list(keywords),
            mode=mode,
            library_id=single.entry.library_id if single else None,
            version=single.entry.version if single else None,
            build_id=single.manifest.build.build_id if single else None,
            content_hash=single.manifest.build.content_hash if single else None,
            searched=[_source(o) for o in searched],
            skipped=got.skipped,
            terms=clip_list(got.terms),
            dropped=clip_list(got.dropped),
            stopped=got.stopped,
            hits=[],
            truncated=False,
            omitted_hits=0,
            max_tokens=max_tokens,
        )
        if not raw:
            return base.model_copy(update=_empty_advice(base, searched, library_id))
        if got.stopped:
            base = base.model_copy(update={"message": STOPPED_NOTE})
        # The header, and the closing note should hits be left out, come out of the same budget.
        fixed = estimate_tokens(search_head(base)) + estimate_tokens(omitted_note(len(raw), max_tokens))
        hits, omitted = self._fit_hits(raw, max_tokens - fixed)
        return base.model_copy(
            update={
                "hits": hits,
                "truncated": omitted > 0 or any(h.truncated for h in hits),
                "omitted_hits": omitted,
            }
        )

    def _fit_hits(self, raw: list[_RawHit], available: int) -> tuple[list[SearchHit], int]:
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

    # -- documents ----------------------------------------------------------------------------------

    def _toc(self, lib: OpenedLibrary) -> list[_TocEntry]:
        def make() -> list[_TocEntry]:
            """Every document's metadata, in store (llms.txt) order."""
            return [
                _TocEntry(i, d.id, d.url, d.title, d.description, d.section, d.optional, len(d.chunks))
                for i, d in enumerate(lib.bundle.store)
            ]

        return lib.cached("toc", make)

    def _find(self, lib: OpenedLibrary, document_id: str) -> tuple[int, DocRecord]:
        check_ids(None, None, document_id)
        store = lib.bundle.store
        wanted = document_id.strip()
        candidates = [wanted, wanted.lstrip("/"), wanted.removeprefix("./")]
        for c in candidates:
            n = store.number_of(c)
            if n is not None:
                return n, store.get(n)
        toc = self._toc(lib)
        for e in toc:
            # A model often passes the URL it saw in a search hit instead of the id.
            if wanted and (e.url == wanted or e.url.rstrip("/") == wanted.rstrip("/")):
                return e.number, store.get(e.number)
        ids = [e.id for e in toc]
        close = difflib.get_close_matches(wanted, ids, n=5, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        example = f" Ids look like {ids[0]!r}." if ids else ""
        raise UnknownDocumentError(
            f"no document {echo(document_id)} in {lib.entry.library_id}@{lib.entry.version}.{hint}{example} "
            f"Call list_documents(libraryId={lib.entry.library_id!r}) for every document id, or "
            "search_documents to find pages by topic."
        )

    def get_document(
        self,
        library_id: str,
        document_id: str,
        *,
        version: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        cursor: str | None = None,
    ) -> DocumentPage:
        """One page of a document's markdown; ``next_cursor`` continues it."""
        _check_range("maxTokens", max_tokens, MIN_MAX_TOKENS, MAX_MAX_TOKENS)
        check_ids(library_id, version, document_id)
        check_length(
            "cursor",
            cursor,
            MAX_CURSOR_CHARS,
            "Pass the nextCursor of the previous page unchanged, or no cursor.",
        )
        lib = self.catalog.open(library_id, version)
        src = _source(lib)
        _, doc = self._find(lib, document_id)
        text = doc.text
        start = 0
        if cursor:
            start = _decode_cursor(cursor, src, doc.id, len(text))
        boundaries: list[int] = []
        pos = 0
        for c in doc.chunks:
            pos += len(c.text)
            boundaries.append(pos)
        header = doc_header(doc, src)
        budget = max(max_tokens - estimate_tokens(header) - HEADER_TOKENS, MIN_TEXT_TOKENS)
        end = page_end(text, start, budget, boundaries)
        more = end < len(text)
        return DocumentPage(
            **src.model_dump(),
            document_id=doc.id,
            title=doc.title,
            url=doc.url,
            section=doc.section,
            description=doc.description,
            text=text[start:end],
            start=start,
            end=end,
            total_chars=len(text),
            chunks=len(doc.chunks),
            truncated=more,
            next_cursor=_encode_cursor(src, doc.id, end) if more else None,
        )

    def page_markdown(self, library_id: str, version: str, path: str) -> str:
        """A whole document's markdown (the ``docs://`` resource)."""
        check_ids(library_id, version, path)
        lib = self.catalog.open(library_id, version)
        _, doc = self._find(lib, path)
        return doc.text

    def list_documents(
        self,
        library_id: str,
        *,
        version: str | None = None,
        section: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> DocumentList:
        """The table of contents: sections in llms.txt order, each with its documents."""
        _check_range("maxTokens", max_tokens, MIN_MAX_TOKENS, MAX_MAX_TOKENS)
        check_ids(library_id, version)
        check_length("section", section, MAX_SECTION_CHARS, "Pass a section name list_documents shows.")
        lib = self.catalog.open(library_id, version)
        src = _source(lib)
        toc = self._toc(lib)
        wanted = section.strip() if section and section.strip() else None
        order = _toc_sections(lib, toc, wanted, section)
        m = lib.manifest
        not_indexed = [
            NotIndexed(url=d.url, title=d.title, section=d.section, reason=d.error or "not indexed")
            for d in m.documents
            if d.error
        ]
        counts = ", ".join(f"{name or '(no section)'} ({len(entries)})" for name, entries in order.items())

        def listing(sections: list[TocSection], omitted: int) -> DocumentList:
            """The result for these sections, with the message when documents were left out."""
            message = None
            if omitted:
                message = (
                    f"{omitted} documents not shown to fit maxTokens. Call list_documents with section= "
                    f"one of: {counts}; or raise maxTokens."
                )
            return DocumentList(
                **src.model_dump(),
                title=m.source.title,
                summary=m.source.summary,
                section=next(iter(order)) if wanted is not None else None,
                sections=sections,
                documents=sum(s.count for s in sections),
                not_indexed=not_indexed,
                truncated=omitted > 0,
                omitted_documents=omitted,
                message=message,
            )

        # What the answer costs with every document left out (headings, notes, the message) is fixed.
        total = len(toc) if wanted is None else len(order[next(iter(order))])
        skeleton = [TocSection(name=n, documents=[], count=len(e)) for n, e in order.items()]
        budget = max_tokens - estimate_tokens(render_documents(listing(skeleton, total)))
        return listing(*_fit_toc(order, budget))

    def chunk_with_context(
        self,
        library_id: str,
        document_id: str,
        chunk_id: int,
        *,
        version: str | None = None,
        window: int = DEFAULT_WINDOW,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> ChunkContext:
        """A chunk with ``window`` chunks either side, the target kept whole first."""
        _check_range("windowSize", window, 0, MAX_WINDOW)
        _check_range("maxTokens", max_tokens, MIN_MAX_TOKENS, MAX_MAX_TOKENS)
        check_ids(library_id, version, document_id)
        lib = self.catalog.open(library_id, version)
        src = _source(lib)
        _, doc = self._find(lib, document_id)
        n = len(doc.chunks)
        if not 0 <= chunk_id < n:
            raise UnknownDocumentError(
                f"document {doc.id!r} has chunks 0..{n - 1}, not {clip(str(chunk_id), 20)}. chunkId comes from a "
                "search_documents hit; get_document returns the whole document."
            )
        lo, hi = max(0, chunk_id - window), min(n, chunk_id + window + 1)
        available = max_tokens - HEADER_TOKENS - estimate_tokens(doc.title + doc.url)
        numbers = list(range(lo, hi))
        overhead = {i: estimate_tokens(" › ".join(doc.chunks[i].heading_path)) + 12 for i in numbers}
        available -= sum(overhead.values())
        need = {i: estimate_tokens(doc.chunks[i].text) for i in numbers}
        give = {chunk_id: min(need[chunk_id], max(available, MIN_TEXT_TOKENS))}
        others = [i for i in numbers if i != chunk_id]
        for i, g in zip(others, share([need[i] for i in others], available - give[chunk_id]), strict=True):
            give[i] = g
        views: list[ChunkView] = []
        cut = False
        for i in numbers:
            c = doc.chunks[i]
            if i != chunk_id and give[i] < min(need[i], MIN_TEXT_TOKENS):
                cut = True  # a neighbour squeezed below a useful size is left out
                continue
            text, was_cut = fit_text(c.text, give[i])
            cut = cut or was_cut
            views.append(
                ChunkView(
                    chunk_id=i,
                    heading_path=list(c.heading_path),
                    text=text,
                    is_target=i == chunk_id,
                    truncated=was_cut,
                )
            )
        return ChunkContext(
            **src.model_dump(),
            document_id=doc.id,
            title=doc.title,
            url=doc.url,
            chunk_id=chunk_id,
            window_size=window,
            chunk_count=n,
            chunks=views,
            truncated=cut,
        )


def _toc_sections(
    lib: OpenedLibrary, toc: list[_TocEntry], wanted: str | None, asked: str | None
) -> dict[str, list[_TocEntry]]:
    """The table of contents by section in llms.txt order; only the ``wanted`` one (as ``asked``) when given."""
    order: dict[str, list[_TocEntry]] = {}
    for e in toc:
        order.setdefault(e.section, []).append(e)
    if wanted is None:
        return order
    match = next((s for s in order if s.lower() == wanted.lower()), None)
    if match is None:
        names = ", ".join(repr(s or "(no section)") for s in order)
        raise BadRequestError(
            f"{lib.entry.library_id}@{lib.entry.version} has no section {echo(asked)}. Sections: {names}"
        )
    return {match: order[match]}


def _fit_toc(order: dict[str, list[_TocEntry]], budget: int) -> tuple[list[TocSection], int]:
    """The sections with the documents whose lines fit ``budget`` tokens (in order), and how many did not."""
    used = 0
    omitted = 0
    sections: list[TocSection] = []
    for name, entries in order.items():
        docs: list[TocDocument] = []
        for e in entries:
            item = TocDocument(
                id=e.id,
                title=e.title,
                url=e.url,
                description=e.description,
                optional=e.optional,
                chunks=e.chunks,
            )
            cost = estimate_tokens(toc_line(item)) + 1
            if omitted or used + cost > budget:
                omitted += 1
                continue
            used += cost
            docs.append(item)
        sections.append(TocSection(name=name, documents=docs, count=len(entries)))
    return sections, omitted


def _empty_advice(
    result: SearchResult, opened: list[OpenedLibrary], library_id: str | None
) -> dict[str, object]:
    where = f"{result.library_id}@{result.version}" if result.library_id else "any library"
    asked = echo(result.query or ", ".join(result.keywords))
    if result.stopped and not result.terms:
        return {
            "message": f"The search ran out of its time budget ({SEARCH_TIME_BUDGET:g} s) before it could "
            "score any word.",
            "suggestions": ["Search again with fewer, more specific words."],
        }
    if not opened:
        return {
            "message": "No library could be searched: every one failed to open (see skipped).",
            "suggestions": ["Call list_libraries to see each library's status and reason."],
        }
    suggestions: list[str] = []
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
            suggestions.append("Retry with mode='broad' (any word may match instead of most of them).")
        suggestions.append(
            "Use fewer or different words: the library's own names for things, or an identifier."
        )
    lib_arg = f"libraryId={clip(library_id)!r}" if library_id else "libraryId=..."
    suggestions.append(f"Browse the table of contents with list_documents({lib_arg}).")
    if library_id is not None:
        suggestions.append("Search every library by omitting libraryId.")
    return {"message": message, "suggestions": suggestions}


# -- cursors ----------------------------------------------------------------------------------------


def _encode_cursor(src: Source, doc_id: str, offset: int) -> str:
    data = json.dumps({"v": 1, "b": src.build_id, "d": doc_id, "o": offset}, separators=(",", ":"))
    return base64.urlsafe_b64encode(data.encode("utf-8")).decode("ascii").rstrip("=")


def _decode_cursor(cursor: str, src: Source, doc_id: str, length: int) -> int:
    restart = "Call get_document without cursor to start at the beginning."
    try:
        raw = base64.urlsafe_b64decode(cursor.strip() + "=" * (-len(cursor.strip()) % 4))
        data = json.loads(raw.decode("utf-8"))
        ok = isinstance(data, dict) and data.get("v") == 1
        build, doc, offset = data["b"], data["d"], data["o"]
    except (binascii.Error, ValueError, UnicodeDecodeError, KeyError, TypeError):
        raise BadCursorError(f"cursor {cursor[:40]!r} is not one get_document returned. {restart}") from None
    if not ok or not isinstance(offset, int) or not isinstance(doc, str) or not isinstance(build, str):
        raise BadCursorError(f"cursor {cursor[:40]!r} is not one get_document returned. {restart}")
    if doc != doc_id:
        raise BadCursorError(f"this cursor continues document {echo(doc)}, not {doc_id!r}. {restart}")
    if build != src.build_id:
        raise BadCursorError(
            f"this cursor was made for build {echo(build, 40)} but {src.library_id}@{src.version} serves build "
            f"{src.build_id}. {restart}"
        )
    if not 0 < offset < length:
        raise BadCursorError(
            f"cursor offset {clip(str(offset), 20)} is outside the document ({length} characters). {restart}"
        )
    return offset


# -- text renderings --------------------------------------------------------------------------------
