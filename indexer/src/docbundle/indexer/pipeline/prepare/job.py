"""One page prepared: parsed, chunked and analysed for the index (converted to markdown first when it is
HTML). ``prepare_page`` runs in a worker process (``worker``), or in the indexer's own with
``DOCBUNDLE_WORKERS=0``; its output depends only on its ``PageJob``.
"""

from __future__ import annotations

from importlib.metadata import version

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

from .. import html
from ..chunk import chunk_markdown, parse_page
from ..safety import scan_chunks

#: Field name -> (whoosh posting items, field length). Items are ``(term bytes, freq, weight, value)``.
Analysed = dict[str, FieldPostings]

#: Identity of the parse + chunk rules; part of the content hash (it is in the chunking settings).
CHUNKER_ID = f"docbundle-chunker/2 (markdown-it-py {version('markdown-it-py')})"
#: The error kind of a page that failed in preparation (over its budget, or its worker died).
FAILURE_KIND = "budget"


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


def _body_lines(anchors: dict[int, str], text: str, body: str) -> dict[int, str]:
    """``anchors`` (by line of ``text``) by line of ``body``: the text less what ``parse_page`` took off
    its top (front matter). Empty when the body is not the text's tail (line endings rewritten), as the
    lines would not match."""
    if not anchors or not text.endswith(body):
        return {}
    cut = text[: len(text) - len(body)].count("\n")
    return {line - cut: anchor for line, anchor in anchors.items() if line >= cut}


def prepare_page(job: PageJob) -> Prepared:
    """Parse, chunk and analyse one page (converting it to markdown first when it is HTML)."""
    text = job.text
    html_title = ""
    anchors: dict[int, str] = {}
    if job.html:
        converted = html.convert_html(job.text, job.url, link_text=job.link_title)
        text, html_title, anchors = converted.markdown, converted.title, converted.anchors
    parsed = parse_page(text, mdx=job.mdx)
    chunks = chunk_markdown(
        parsed.body,
        max_depth=job.max_depth,
        min_words=job.min_words,
        max_words=job.max_words,
        mdx=parsed.mdx,
        anchors=_body_lines(anchors, text, parsed.body),
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
        [ChunkRecord(c.text, list(c.heading_path), c.start_line, c.end_line, c.anchor) for c in chunks],
        sum(c.words for c in chunks),
        analysed,
        safety=scan_chunks(c.text for c in chunks),
    )
