"""A library's documents: finding one by id, paging through it, its table of contents, a chunk in context.

Each function takes an opened library version (``catalog.OpenedLibrary``) and arguments already checked
against their bounds (``Docs`` checks them for the CLI and resources, the MCP server before a tool's
work starts), and fits its result into ``max_tokens``: a page ends at a chunk boundary, a table of
contents leaves out the documents that do not fit and says which sections to ask for, and a chunk
keeps its target whole before its neighbours. A continuation ``cursor`` is tied to the document and
the build it was made for.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import json
from dataclasses import dataclass
from urllib.parse import quote

import msgspec
from docbundle.bundle.store import DocMeta, DocRecord

from .budget import HEADER_TOKENS, MIN_TEXT_TOKENS, estimate_tokens, fit_text, page_end, share
from .catalog import OpenedLibrary
from .errors import BadCursorError, BadRequestError, UnknownDocumentError, clip, echo
from .models import (
    ChunkContext,
    ChunkView,
    DocumentList,
    DocumentPage,
    NotIndexed,
    Source,
    TocDocument,
    TocSection,
)
from .render import render_document, render_documents, toc_line
from .words import NextStep

_RESERVED = ":/?#[]@!$&'()*+,;="


@dataclass(frozen=True)
class TocEntry:
    """One document as the table of contents lists it (read once per opened library)."""

    number: int
    meta: DocMeta
    chunks: int

    def listed(self) -> TocDocument:
        """Its line in the table of contents: its metadata but the section (the heading it is under)."""
        fields = msgspec.structs.asdict(self.meta)
        del fields["section"]
        return TocDocument(**fields, chunks=self.chunks)


def source(opened: OpenedLibrary) -> Source:
    """The bundle an answer from ``opened`` came from."""
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


def toc(lib: OpenedLibrary) -> list[TocEntry]:
    """Every document's metadata, in store (llms.txt) order (cached on the opened library)."""

    def make() -> list[TocEntry]:
        return [TocEntry(i, d.meta(), len(d.chunks)) for i, d in enumerate(lib.bundle.store)]

    return lib.cached("toc", make)


def find(lib: OpenedLibrary, document_id: str) -> tuple[int, DocRecord]:
    """The document ``document_id`` names (its id, a path spelling of it, or its URL) and its number."""
    store = lib.bundle.store
    wanted = document_id.strip()
    candidates = [wanted, wanted.lstrip("/"), wanted.removeprefix("./")]
    for c in candidates:
        n = store.number_of(c)
        if n is not None:
            return n, store.get(n)
    entries = toc(lib)
    for e in entries:
        # A model often passes the URL it saw in a search hit instead of the id.
        if wanted and (e.meta.url == wanted or e.meta.url.rstrip("/") == wanted.rstrip("/")):
            return e.number, store.get(e.number)
    ids = [e.meta.id for e in entries]
    close = difflib.get_close_matches(wanted, ids, n=5, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    example = f" Ids look like {ids[0]!r}." if ids else ""
    raise UnknownDocumentError(
        f"no document {echo(document_id)} in {lib.entry.library_id}@{lib.entry.version}.{hint}{example}",
        NextStep("find_document", "list_documents", {"libraryId": lib.entry.library_id}),
    )


def document_page(lib: OpenedLibrary, document_id: str, max_tokens: int, cursor: str | None) -> DocumentPage:
    """One page of a document's markdown that fits ``max_tokens``; ``next_cursor`` continues it."""
    src = source(lib)
    _, doc = find(lib, document_id)
    text = doc.text
    start = 0
    if cursor:
        start = decode_cursor(cursor, src, doc.id, len(text))
    boundaries: list[int] = []
    pos = 0
    for c in doc.chunks:
        pos += len(c.text)
        boundaries.append(pos)

    def page(end: int) -> DocumentPage:
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
            next_cursor=encode_cursor(src, doc.id, end) if more else None,
        )

    # What the page costs besides its text: its header and the longest closing note it can get (a
    # cursor and character offsets as long as they can be), measured on the rendering itself.
    frame = page(len(text)).model_copy(
        update={"text": "", "next_cursor": encode_cursor(src, doc.id, len(text)), "start": len(text)}
    )
    overhead = estimate_tokens(render_document(frame)) + 2
    budget = max(max_tokens - overhead, MIN_TEXT_TOKENS)
    return page(page_end(text, start, budget, boundaries))


def document_list(lib: OpenedLibrary, section: str | None, max_tokens: int) -> DocumentList:
    """The table of contents (one ``section`` of it when given) with as many documents as fit."""
    src = source(lib)
    entries = toc(lib)
    wanted = section.strip() if section and section.strip() else None
    order = _toc_sections(lib, entries, wanted, section)
    m = lib.manifest
    not_indexed = [
        NotIndexed(url=d.url, title=d.title, section=d.section, reason=d.error or "not indexed")
        for d in m.documents
        if d.error
    ]
    counts = ", ".join(f"{name or '(no section)'} ({len(group)})" for name, group in order.items())

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
    total = len(entries) if wanted is None else len(order[next(iter(order))])
    skeleton = [TocSection(name=n, documents=[], count=len(e)) for n, e in order.items()]
    budget = max_tokens - estimate_tokens(render_documents(listing(skeleton, total)))
    return listing(*_fit_toc(order, budget))


def chunk_context(
    lib: OpenedLibrary, document_id: str, chunk_id: int, window: int, max_tokens: int
) -> ChunkContext:
    """A chunk with ``window`` chunks either side that fit ``max_tokens``, the target kept whole first."""
    src = source(lib)
    _, doc = find(lib, document_id)
    n = len(doc.chunks)
    if not 0 <= chunk_id < n:
        raise UnknownDocumentError(
            f"document {doc.id!r} has chunks 0..{n - 1}, not {clip(str(chunk_id), 20)}.",
            NextStep("chunk_ids", "search_documents"),
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
        url=cited_url(doc.url, doc.chunks[chunk_id].anchor),
        chunk_id=chunk_id,
        window_size=window,
        chunk_count=n,
        chunks=views,
        truncated=cut,
    )


def cited_url(url: str, anchor: str) -> str:
    """A section's citation (a search hit's, a chunk's in context): its page's URL with the id of the
    section's heading as the fragment (in place of one the page's URL had), or the URL as it is when the
    heading has no id (docs/html.md, "Anchors")."""
    if not anchor:
        return url
    return f"{url.partition('#')[0]}#{anchor}"


def _toc_sections(
    lib: OpenedLibrary, entries: list[TocEntry], wanted: str | None, asked: str | None
) -> dict[str, list[TocEntry]]:
    """The table of contents by section in llms.txt order; only the ``wanted`` one (as ``asked``) when given."""
    order: dict[str, list[TocEntry]] = {}
    for e in entries:
        order.setdefault(e.meta.section, []).append(e)
    if wanted is None:
        return order
    match = next((s for s in order if s.lower() == wanted.lower()), None)
    if match is None:
        names = ", ".join(repr(s or "(no section)") for s in order)
        raise BadRequestError(
            f"{lib.entry.library_id}@{lib.entry.version} has no section {echo(asked)}. Sections: {names}"
        )
    return {match: order[match]}


def _fit_toc(order: dict[str, list[TocEntry]], budget: int) -> tuple[list[TocSection], int]:
    """The sections with the documents whose lines fit ``budget`` tokens (in order), and how many did not."""
    used = 0
    omitted = 0
    sections: list[TocSection] = []
    for name, entries in order.items():
        docs: list[TocDocument] = []
        for e in entries:
            item = e.listed()
            cost = estimate_tokens(toc_line(item)) + 1
            if omitted or used + cost > budget:
                omitted += 1
                continue
            used += cost
            docs.append(item)
        sections.append(TocSection(name=name, documents=docs, count=len(entries)))
    return sections, omitted


# -- cursors ----------------------------------------------------------------------------------------


def encode_cursor(src: Source, doc_id: str, offset: int) -> str:
    """The cursor that continues document ``doc_id`` of build ``src`` at ``offset``."""
    data = json.dumps({"v": 1, "b": src.build_id, "d": doc_id, "o": offset}, separators=(",", ":"))
    return base64.urlsafe_b64encode(data.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, src: Source, doc_id: str, length: int) -> int:
    """The offset ``cursor`` continues at: refused unless made for this document of this build."""
    restart = NextStep("restart", "get_document")
    try:
        raw = base64.urlsafe_b64decode(cursor.strip() + "=" * (-len(cursor.strip()) % 4))
        data = json.loads(raw.decode("utf-8"))
        ok = isinstance(data, dict) and data.get("v") == 1
        build, doc, offset = data["b"], data["d"], data["o"]
    # RecursionError: json.loads of a cursor nested thousands deep (issue 31); it is a bad cursor too.
    except (binascii.Error, ValueError, UnicodeDecodeError, KeyError, TypeError, RecursionError):
        raise BadCursorError(f"cursor {cursor[:40]!r} is not one get_document returned.", restart) from None
    if not ok or not isinstance(offset, int) or not isinstance(doc, str) or not isinstance(build, str):
        raise BadCursorError(f"cursor {cursor[:40]!r} is not one get_document returned.", restart)
    if doc != doc_id:
        raise BadCursorError(f"this cursor continues document {echo(doc)}, not {doc_id!r}.", restart)
    if build != src.build_id:
        raise BadCursorError(
            f"this cursor was made for build {echo(build, 40)} but {src.library_id}@{src.version} serves build "
            f"{src.build_id}.",
            restart,
        )
    if not 0 < offset < length:
        raise BadCursorError(
            f"cursor offset {clip(str(offset), 20)} is outside the document ({length} characters).", restart
        )
    return offset
