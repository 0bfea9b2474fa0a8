"""llms-full files (``kind="full"``, one :class:`InlineDoc` per page): detection and page splitting.

``file_shape`` decides whether a file is "full" and where its pages start; ``build_docs`` cuts the pages.
The file is "full" when it has page markers and is not mostly link entries, or when it is large
prose. Precisely, with *entry chars* and *content chars* as ``scan.py`` counts them:

1. ``<doc title=...>...</doc>`` wrappers (``llms_txt2ctx`` output) outside code: full; one doc per
   wrapper, its section is the enclosing wrapper tag (``docs``, ``optional``).
2. Two or more per-page front-matter blocks (``---``/``-----`` delimited ``key: value`` lines with a
   ``title``, ``url`` or ``source`` key, all sharing the most common delimiter length and first key;
   ``Back to top---`` style openers count), at least two of them outside code: full when content
   chars >= entry chars. Such a block closes a code fence left open by the previous page.
3. Two or more page markers of one kind -- ``Source: <url>`` / ``URL: <url>`` lines (optionally
   inside a blockquote) or scraper ``[Skip to content](url)`` lines -- giving two or more pages, with
   content chars >= entry chars: full. A page starts at the heading just before the marker (only
   blank lines, or quote lines for a quoted marker, between) or else at the marker itself. A quoted
   marker in the title's summary describes the whole file; an unquoted one under the title makes the
   title heading the first page too.
4. Otherwise full when content chars >= 10,000 and content chars >= 2 x entry chars. Pages then
   start at headings preceded by a thematic break (when at least two are, at one level), or else at
   every heading at or above the shallowest level (below the title) that occurs twice or more.

A small llms.txt with some prose in its sections therefore stays an index. For full files,
``sections``/``links`` come only from the preamble before the first page (parsed by ``index.py``);
links inside pages stay in the pages' markdown. Page titles come from front matter, the page's heading,
its first H1, or the last segment of its URL.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left
from collections import Counter
from typing import NamedTuple

from .links import absolute_url, collapse, heading_text, title_from_url
from .model import InlineDoc
from .scan import FrontMatter, Head, Scan

__all__ = ["Page", "Shape", "build_docs", "file_shape"]


_DOC_OPEN_RE = re.compile(r"<doc(\s[^<>]*)?>")
_DOC_CLOSE = "</doc>"
_WRAPPER_TAG_RE = re.compile(r"<(/?)([A-Za-z][\w-]*)(\s[^<>]*)?>")
_PROJECT_RE = re.compile(r"<project\s[^<>]*title=\"([^\"]*)\"")
_ATTR_RE = re.compile(r"([A-Za-z_][\w-]*)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")
_FULL_MIN_CONTENT = 10_000


class Page(NamedTuple):
    """Where one page of a full file starts, and what its front matter or marker said."""

    start: int  # first line of the page's text
    title: str
    url: str | None
    description: str


def _marker_pages(lines: list[str], scan: Scan, title_idx: int | None, heads: dict[int, Head]) -> list[Page]:
    counts = Counter(m.kind for m in scan.markers)
    kind = counts.most_common(1)[0][0]
    pages: list[Page] = []
    last_start = -1
    for mk in scan.markers:
        if mk.kind != kind:
            continue
        k = mk.idx - 1
        start = mk.idx
        while k >= 0 and mk.idx - k <= 8:
            line = lines[k]
            if k in heads:
                start = k
                break
            if not line.strip() or (mk.quoted and line.lstrip(" \t").startswith(">")):
                k -= 1
                continue
            break
        if start == title_idx and mk.quoted:
            continue  # a marker inside the summary quote describes the whole file, not a page
        if start <= last_start:
            continue
        last_start = start
        title = heading_text(heads[start].raw) if start in heads else ""
        pages.append(Page(start, title, mk.url, ""))
    return pages


def _heading_pages(scan: Scan, title_idx: int | None) -> list[Page]:
    heads = [h for h in scan.heads if h.idx != title_idx]
    if not heads:
        return []
    hr_levels = Counter(h.level for h in heads if h.after_hr)
    chosen: list[Head] = []
    if hr_levels:
        level, count = hr_levels.most_common(1)[0]
        if count >= 2:
            first_hr = next(h.idx for h in heads if h.after_hr and h.level == level)
            chosen = [h for h in heads if h.after_hr and h.level == level]
            lead = next((h for h in heads if h.level <= level), None)
            if lead is not None and lead.idx < first_hr:
                chosen.insert(0, lead)
    if not chosen:
        levels = Counter(h.level for h in heads)
        repeated = [lvl for lvl, cnt in levels.items() if cnt >= 2]
        page_level = min(repeated) if repeated else min(levels)
        chosen = [h for h in heads if h.level <= page_level]
    return [Page(h.idx, heading_text(h.raw), None, "") for h in chosen]


def build_docs(
    lines: list[str],
    pages: list[tuple[Page, int]],
    scan: Scan,
    fm: dict[int, FrontMatter],
    base_url: str | None,
) -> list[InlineDoc]:
    """One doc per page span ``(page, end line)``: its text, title and URL."""
    docs: list[InlineDoc] = []
    marker_idx = [m.idx for m in scan.markers]
    head_idx = [h.idx for h in scan.heads]
    n = len(lines)
    for page, stop in pages:
        body_start = page.start
        block = fm.get(page.start)
        if block is not None:
            body_start = block.close_idx + 1
        nxt = fm.get(stop)
        body = lines[body_start:stop]
        if nxt is not None and nxt.glued and stop < n and body:
            # "Back to top---": the dashes open the next page's front matter; the words stay here
            body = [*body, lines[stop][: len(lines[stop].rstrip()) - 3].rstrip()]
        text = "\n".join(body).strip("\n")
        first_head = bisect_left(head_idx, body_start)
        in_page = scan.heads[first_head : bisect_left(head_idx, stop, first_head)]
        title = page.title or next((heading_text(h.raw) for h in in_page if h.level == 1), "")
        url = page.url
        if url is None:
            lo = bisect_left(marker_idx, body_start)
            if lo < len(marker_idx) and marker_idx[lo] < stop:
                url = scan.markers[lo].url
        if not title and url:
            title = title_from_url(url)
        if not title and in_page:
            title = heading_text(in_page[0].raw)
        if not text and not title:
            continue
        docs.append(
            InlineDoc(
                title=title,
                text=text,
                url=absolute_url(url, base_url) if url else None,
                description=page.description,
                line=page.start + 1,
            )
        )
    return docs


def _fm_pages(fm: dict[int, FrontMatter]) -> list[Page]:
    pages: list[Page] = []
    for start in sorted(fm):
        f = fm[start].fields
        url = f.get("url") or f.get("source") or None
        pages.append(Page(start, collapse(f.get("title", "")), url, collapse(f.get("description", ""))))
    return pages


def _doc_tags(text: str, in_fence: bytearray, base_url: str | None) -> tuple[int, list[InlineDoc]] | None:
    """Docs in ``<doc ...>`` wrappers: (offset of the first wrapper, docs), or None when there are none."""
    docs: list[InlineDoc] = []
    pos = 0
    first = -1
    stack: list[str] = []
    while True:
        opener = _DOC_OPEN_RE.search(text, pos)
        if opener is None:
            break
        attrs = {
            m.group(1).lower(): html.unescape(m.group(2) or m.group(3) or "")
            for m in _ATTR_RE.finditer(opener.group(1) or "")
        }
        closer = text.find(_DOC_CLOSE, opener.end())
        if "title" not in attrs or closer < 0:
            pos = opener.end()
            continue
        if first < 0:
            if in_fence[text.count("\n", 0, opener.start())]:
                return None  # an example inside a code block, not a wrapper
            first = opener.start()
        for tag in _WRAPPER_TAG_RE.finditer(text, pos, opener.start()):
            name = tag.group(2).lower()
            if name in ("project", "doc"):
                continue
            if tag.group(1):
                if name in stack:
                    del stack[len(stack) - 1 - stack[::-1].index(name) :]
            else:
                stack.append(name)
        section = stack[-1] if stack else ""
        url = attrs.get("url") or attrs.get("href") or attrs.get("source")
        docs.append(
            InlineDoc(
                title=collapse(attrs["title"]),
                text=text[opener.end() : closer].strip("\n"),
                section=section,
                url=absolute_url(url, base_url) if url else None,
                description=collapse(attrs.get("desc") or attrs.get("description") or ""),
                line=text.count("\n", 0, opener.start()) + 1,
            )
        )
        pos = closer + len(_DOC_CLOSE)
    if first < 0:
        return None
    return first, docs


class Shape(NamedTuple):
    """What ``file_shape`` decided: index or full, and where a full file's pages are."""

    kind: str  # "index" or "full"
    pages: list[Page]  # where the pages of a full file start (not for <doc> wrappers)
    docs: list[InlineDoc]  # the docs of <doc> wrappers
    preamble_text: str | None  # with <doc> wrappers: the text before the first one, parsed on its own
    shift: int  # lines the preamble text has that the file has not (a synthetic title)


def file_shape(
    text: str,
    lines: list[str],
    scan: Scan,
    fm: dict[int, FrontMatter],
    title_idx: int | None,
    base_url: str | None,
) -> Shape:
    """Index or full, and where a full file's pages start: rules 1 to 4 of the module docstring."""
    content = scan.content_chars
    tagged = _doc_tags(text, scan.in_fence, base_url) if "<doc" in text else None
    if tagged is not None:
        offset, docs = tagged
        preamble_text = _WRAPPER_TAG_RE.sub("", text[:offset])
        project = _PROJECT_RE.search(text, 0, offset)
        if project is not None and not any(h.startswith("# ") for h in preamble_text.split("\n")):
            # the synthetic title line is not in the file
            return Shape("full", [], docs, f"# {html.unescape(project.group(1))}\n{preamble_text}", 1)
        return Shape("full", [], docs, preamble_text, 0)
    if fm and content >= scan.entry_chars:
        return Shape("full", _fm_pages(fm), [], None, 0)
    if _marker_kind_count(scan) >= 2 and content >= scan.entry_chars:
        pages = _marker_pages(lines, scan, title_idx, {h.idx: h for h in scan.heads})
        if len(pages) >= 2:
            return Shape("full", pages, [], None, 0)
    if content >= _FULL_MIN_CONTENT and content >= 2 * scan.entry_chars:
        pages = _heading_pages(scan, title_idx) or [Page(_body_start(lines, title_idx), "", None, "")]
        return Shape("full", pages, [], None, 0)
    return Shape("index", [], [], None, 0)


def _marker_kind_count(scan: Scan) -> int:
    if not scan.markers:
        return 0
    return Counter(m.kind for m in scan.markers).most_common(1)[0][1]


def _body_start(lines: list[str], title_idx: int | None) -> int:
    if title_idx is None:
        return 0
    k = title_idx + 1
    while k < len(lines) and (not lines[k].strip() or lines[k].lstrip().startswith(">")):
        k += 1
    return k
