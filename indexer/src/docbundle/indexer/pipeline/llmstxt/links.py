"""Markdown links inside one line or block: inline links, autolinks, link entries and heading text.

Pure string functions over a single string, with no notion of lines, sections or files (``index.py``
and ``full.py`` decide where they apply). ``find_links`` lists every top-level ``[text](url)``,
``![image](url)`` and ``<http...>`` autolink, skipping code spans; brackets and parentheses are paired in
one pass, so it is linear in its input however bracket-heavy that is.

``entries_from_text`` says whether an item's or a line's content has the shape of a link entry: it
starts with ``[title](url)`` (notes follow ``:``, ``-``, ``—``, several links may share one item), is a
table row whose first cell is a link, ``<url>``, a bare URL, or ``Label: URL`` (``**Label:** URL``,
``Label：URL``); the last three are ``bare``. Badge links (whose text is only an image) are skipped.
``heading_text`` is an ATX heading's text without its closing ``#``s, permalink anchors, badges and
emphasis. Both titles drop MDX comments (``drop_mdx_comments``: ``[Reference {/*reference*/}](...)``, a
heading id that generated files copy into the link text), which a reader of the page never sees.
"""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import unquote, urljoin, urlsplit

__all__ = [
    "FoundLink",
    "LinkEntry",
    "absolute_url",
    "clean_link_text",
    "collapse",
    "drop_mdx_comments",
    "entries_from_text",
    "find_links",
    "heading_text",
    "is_relative",
    "title_from_url",
    "unescape",
]

# Inline patterns
_SPECIAL_RE = re.compile(r"[\[`<\\]")
_PAIR_RE = re.compile(r"[\[\]()`\\]")
_ANGLE_DEST_RE = re.compile(r"[ \t\n]*<([^<>\n]*)>[ \t\n]*(?:\"[^\"]*\"|'[^']*')?[ \t\n]*\)")
_AUTOLINK_RE = re.compile(r"<(https?://[^\s<>]+)>")
_BARE_URL_RE = re.compile(r"https?://[^\s<>\"'`]+")
_LINK_TITLE_RE = re.compile(r"(.*?)\s+(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')\s*$", re.DOTALL)
_SEP_RE = re.compile(r"\s*(?:[:：|]|[-–—](?=\s|$))\s*")
_LINK_GAP_RE = re.compile(r"[ \t\n,|·/]*")
_LABEL_URL_RE = re.compile(
    r"(?:\*\*(?P<bold>[^*\n]{1,60}?)[ \t]*[:：][ \t]*\*\*[ \t]*"
    r"|(?P<label>[^\[\]\n]{1,60}?)[ \t]*(?:[:：]|[ \t][-–—])[ \t]*)"
    r"<?(?P<url>https?://[^\s<>]+?)>?(?P<rest>(?:[\s,;(].*)?)$",
    re.DOTALL,
)
_ESCAPE_RE = re.compile(r"\\([!-/:-@\[-`{-~])")
_IMAGE_RE = re.compile(r"!\[((?:[^\[\]\\]|\\.)*)\]\([^)]*\)")
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_WS_RE = re.compile(r"\s+")
_NO_COMMENT_END_RE = re.compile(r"[^*}]+")  # a run that cannot complete ``{/*`` or ``*/}``
_PERMALINK_TEXT = frozenset({"", "¶", "#", "§", "🔗", "\u200b"})
_URL_TRAILING = ".,;:!?*_'\"`。，、；：！？」』】"

_MAX_LINK_TEXT = 1000
_MAX_LINK_DEST = 4000


class FoundLink(NamedTuple):
    """One link ``find_links`` found: its span in the string, text, destination, and if it is an image."""

    start: int
    end: int
    text: str
    url: str
    image: bool


class LinkEntry(NamedTuple):
    """One link entry of an item or a line (``bare``: no markdown link title)."""

    title: str
    url: str
    notes: str
    bare: bool
    empty_title: bool


def unescape(s: str) -> str:
    """``s`` with markdown backslash escapes removed."""

    return _ESCAPE_RE.sub(r"\1", s) if "\\" in s else s


def collapse(s: str) -> str:
    """``s`` with runs of whitespace made one space, and trimmed."""

    return _WS_RE.sub(" ", s).strip()


def is_relative(url: str) -> bool:
    """Whether ``url`` has no scheme."""

    return _SCHEME_RE.match(url) is None


def absolute_url(url: str, base_url: str | None) -> str:
    """``url`` made absolute against ``base_url`` (as written when that fails)."""

    if base_url is None or not is_relative(url):
        return url
    try:
        return urljoin(base_url, url)
    except ValueError:  # urljoin rejects some malformed hosts (e.g. "http://[x"); keep the text as written
        return url


def _trim_url(url: str) -> str:
    while url:
        last = url[-1]
        if last in _URL_TRAILING or (last == ")" and url.count("(") < url.count(")")):
            url = url[:-1]
        else:
            break
    return url


def title_from_url(url: str) -> str:
    """A title for an untitled link: the URL's last path segment, else its host."""

    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    segment = parts.path.rstrip("/").rsplit("/", 1)[-1]
    if segment:
        return unquote(segment)
    return parts.netloc or url


def _strip_images(text: str) -> str:
    return _IMAGE_RE.sub("", text) if "![" in text else text


def drop_mdx_comments(text: str) -> str:
    """``text`` without its MDX comments: each ``{/*`` up to the first ``*/}`` after it (comments do not
    nest), the ones that dropping another joins (``{/{/*a*/}*b*/}``) too, in one pass. Text with none is
    returned as it is; so is an unclosed ``{/*``."""
    if "{/*" not in text:
        return text
    out: list[str] = []
    start: int | None = None  # where the first comment still open starts in ``out``
    pos, end = 0, len(text)
    while pos < end:
        run = _NO_COMMENT_END_RE.match(text, pos)
        if run is not None:
            out.extend(run.group())
            pos = run.end()
            continue
        ch = text[pos]
        pos += 1
        out.append(ch)
        if ch == "*":
            if start is None and out[-3:] == ["{", "/", "*"]:
                start = len(out) - 3
        elif start is not None and len(out) >= start + 6 and out[-3:] == ["*", "/", "}"]:
            del out[start:]
            start = None
    return "".join(out)


def clean_link_text(text: str) -> str:
    """A link's text as a title: MDX comments and images dropped, escapes removed, whitespace collapsed."""

    return collapse(drop_mdx_comments(unescape(_strip_images(text))))


def heading_text(raw: str) -> str:
    """The text of an ATX heading's raw markdown: MDX comments, closing #s, permalink and badge links,
    emphasis dropped (the comments first, so that their ``*`` is not read as emphasis, and again last, as
    dropping an anchor or an escape can make one)."""
    text = drop_mdx_comments(raw).strip()
    if text.endswith("#"):
        # an ATX closing sequence must be preceded by a space (or be the whole text)
        stripped = text.rstrip("#")
        if not stripped or stripped[-1] in " \t":
            text = stripped.rstrip()
    if "[" in text or "<" in text:
        parts: list[str] = []
        pos = 0
        for found in find_links(text):
            parts.append(text[pos : found.start])
            inner = collapse(_strip_images(found.text))
            if text[found.start] == "<":
                parts.append(found.url)
            elif not found.image and inner not in _PERMALINK_TEXT:
                parts.append(found.text)  # keep the words of a link, drop permalink anchors and badges
            pos = found.end
        parts.append(text[pos:])
        text = "".join(parts).strip()
    for mark in ("**", "__", "*", "_"):
        n = len(mark)
        if len(text) > 2 * n and text.startswith(mark) and text.endswith(mark):
            inner = text[n:-n]
            if mark not in inner and not inner.endswith("\\"):
                text = inner
            break
    return collapse(drop_mdx_comments(unescape(text)))


# --------------------------------------------------------------------------------------------------------
# Inline link scanning


class _Inline:
    """One string prepared for link scanning: bracket and parenthesis pairs matched in a single pass.

    Precomputing the pairs keeps scanning linear; searching forward from every ``[`` is quadratic on
    bracket-heavy text.
    """

    __slots__ = ("brackets", "no_close_after", "parens", "s")

    def __init__(self, s: str) -> None:
        self.s = s
        self.no_close_after: dict[int, int] = {}
        self.brackets: dict[int, int] = {}
        self.parens: dict[int, int] = {}
        open_brackets: list[int] = []
        open_parens: list[int] = []
        j = self.next_special(_PAIR_RE, 0)
        while j >= 0:
            ch = s[j]
            if ch == "[":
                open_brackets.append(j)
            elif ch == "]":
                if open_brackets:
                    self.brackets[open_brackets.pop()] = j
            elif ch == "(":
                open_parens.append(j)
            elif open_parens:
                self.parens[open_parens.pop()] = j
            j = self.next_special(_PAIR_RE, j + 1)

    def next_special(self, pattern: re.Pattern[str], pos: int) -> int:
        """Index of the first character at or after ``pos`` that ``pattern`` matches outside backslash
        escapes and code spans, or -1 (``pattern`` must match backslash and backtick too)."""
        s = self.s
        while True:
            m = pattern.search(s, pos)
            if m is None:
                return -1
            j = m.start()
            ch = s[j]
            if ch == "\\":
                pos = j + 2
            elif ch == "`":
                end = self.code_span_end(j)
                pos = end if end > 0 else _run_end(s, j, len(s))
            else:
                return j

    def code_span_end(self, start: int) -> int:
        """Index just past the code span opening at ``start``, or -1 when it is never closed."""
        s = self.s
        k = _run_end(s, start, len(s))
        run = k - start
        if k >= self.no_close_after.get(run, len(s) + 1):
            return -1
        ticks = "`" * run
        pos = k
        while True:
            found = s.find(ticks, pos)
            if found < 0:
                self.no_close_after[run] = k  # later runs of this length cannot close either
                return -1
            end = _run_end(s, found, len(s))
            if end - found == run:
                return end
            pos = end

    def link_at(self, j: int) -> FoundLink | None:
        """Parse ``[text](dest)`` starting at the ``[`` at ``j`` (an image when preceded by ``!``)."""
        s = self.s
        close = self.brackets.get(j)
        if close is None or close - j > _MAX_LINK_TEXT or close + 1 >= len(s) or s[close + 1] != "(":
            return None
        image = j > 0 and s[j - 1] == "!" and not (j > 1 and s[j - 2] == "\\")
        start = j - 1 if image else j
        text = s[j + 1 : close]
        angle = _ANGLE_DEST_RE.match(s, close + 2)
        if angle is not None:
            return FoundLink(start, angle.end(), text, angle.group(1).strip(), image)
        end = self.parens.get(close + 1)
        if end is None or end - close > _MAX_LINK_DEST:
            return None
        dest = s[close + 2 : end]
        if "\n" in dest.strip():
            return None
        dest = dest.strip()
        titled = _LINK_TITLE_RE.match(dest)
        if titled is not None and titled.group(1):
            dest = titled.group(1).strip()
        return FoundLink(start, end + 1, text, collapse(dest), image)

    def links(self) -> list[FoundLink]:
        """All top-level markdown links, images and ``<http...>`` autolinks, skipping code spans."""
        s = self.s
        out: list[FoundLink] = []
        j = self.next_special(_SPECIAL_RE, 0)
        while j >= 0:
            i = j + 1
            if s[j] == "<":
                auto = _AUTOLINK_RE.match(s, j)
                if auto is not None:
                    out.append(FoundLink(j, auto.end(), "", auto.group(1), False))
                    i = auto.end()
            else:
                found = self.link_at(j)
                if found is not None:
                    out.append(found)
                    i = found.end
            j = self.next_special(_SPECIAL_RE, i)
        return out


def _run_end(s: str, start: int, n: int) -> int:
    ch = s[start]
    k = start
    while k < n and s[k] == ch:
        k += 1
    return k


def find_links(s: str) -> list[FoundLink]:
    """All top-level markdown links, images and ``<http...>`` autolinks of ``s``, skipping code spans."""

    return _Inline(s).links()


def entries_from_text(c: str, *, list_item: bool) -> list[LinkEntry] | None:
    """Link entries when ``c`` (an item's or a line's content) has an entry shape, else None."""
    if not c:
        return None
    first = c[0]
    if first == "[":
        scanner = _Inline(c)
        lead = scanner.link_at(0)
        if lead is None or lead.image:
            return None
        found = [lead]
        pos = lead.end
        while True:
            gap = _LINK_GAP_RE.match(c, pos)
            nxt = gap.end() if gap is not None else pos
            if nxt < len(c) and c[nxt] == "[":
                more = scanner.link_at(nxt)
                if more is not None and not more.image:
                    found.append(more)
                    pos = more.end
                    continue
            break
        rest = c[pos:]
        sep = _SEP_RE.match(rest)
        if not list_item and rest.strip() and sep is None:
            return None
        notes = collapse(rest[sep.end() :] if sep is not None else rest)
        entries: list[LinkEntry] = []
        for f in found:
            raw_text = f.text
            title = clean_link_text(raw_text)
            if not title:
                if "![" in raw_text:
                    continue  # a badge or logo, not a documentation entry
                entries.append(LinkEntry(title_from_url(f.url), f.url, notes, False, True))
            else:
                entries.append(LinkEntry(title, f.url, notes, False, False))
        return entries or None
    if first == "|" and not list_item:
        cells = [cell.strip() for cell in c.strip().strip("|").split("|")]
        head = entries_from_text(cells[0], list_item=False) if cells else None
        if head is None or len(head) != 1 or head[0].notes:
            return None
        notes = " | ".join(cell for cell in cells[1:] if cell)
        return [head[0]._replace(notes=notes)]
    if first == "<":
        auto = _AUTOLINK_RE.match(c)
        if auto is None:
            return None
        rest = c[auto.end() :]
        sep = _SEP_RE.match(rest)
        if not list_item and rest.strip() and sep is None:
            return None
        notes = collapse(rest[sep.end() :] if sep is not None else rest)
        return [LinkEntry(title_from_url(auto.group(1)), auto.group(1), notes, True, False)]
    if c.startswith(("http://", "https://")):
        bare = _BARE_URL_RE.match(c)
        if bare is None:
            return None
        url = _trim_url(bare.group(0))
        rest = c[len(url) :]
        sep = _SEP_RE.match(rest)
        if rest.strip() and sep is None and not rest.lstrip().startswith("("):
            return None
        notes = collapse(rest[sep.end() :] if sep is not None else rest)
        return [LinkEntry(title_from_url(url), url, notes, True, False)]
    if "://" not in c:
        return None
    labelled = _LABEL_URL_RE.match(c)
    if labelled is None:
        return None
    label = labelled.group("bold") or labelled.group("label") or ""
    label = heading_text(label.strip())
    if not label or "://" in label or len(label.split()) > 8:
        return None
    url = _trim_url(labelled.group("url"))
    return [LinkEntry(label, url, collapse(labelled.group("rest").lstrip(" \t,;")), True, False)]
