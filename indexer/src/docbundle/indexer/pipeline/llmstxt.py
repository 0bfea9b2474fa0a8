"""Lenient parser and renderer for ``llms.txt`` / ``llms-full.txt`` files (https://llmstxt.org).

``parse_llms_txt`` never raises: every deviation from the spec becomes a :class:`ConformanceIssue`.
Beyond the shared interface, ``LlmsLink.line`` and ``InlineDoc.line`` give the 1-based source line and
``InlineDoc.description`` the page description a file gave (front matter ``description:``, ``desc=``).

Structure (index files)
    The first heading, when it is an H1, is the title; a ``>`` blockquote right after it is the summary;
    everything up to the first section heading is ``details``. Every later heading starts a section.
    Section names are the heading path below the title joined with ``" / "``: an H3 under ``## Build`` is
    the section ``"Build / Reference"``, an H2 under a second H1 ``# Package index`` is
    ``"Package index / Read data"``. So H3-only files (``h3-as-section``) and several H1s
    (``multiple-h1``) need no special casing. A file with no H2 and several H1s whose first H1 is directly
    followed by links uses its H1s as sections and has no title (``h1-as-section``). A section is optional
    when the first part of its path is ``Optional`` (case-insensitive, trimmed).
    Link entries are list items or lines that start with ``[title](url)`` (notes follow ``:``, ``-``, ``—``,
    several links may share one item), table rows whose first cell is a link, ``<url>``, a bare URL, or
    ``Label: URL`` (``**Label:** URL``, ``Label：URL``); the last three yield ``bare-url``. Inside sections,
    other content is kept as the section's ``text`` (``text-in-section``) and the markdown links in it are
    extracted too; links in the free ``details`` prose are not. Badge links (whose text is only an image)
    are skipped. Headings and links inside fenced code (backtick or tilde fences) do not count. Setext
    headings are not recognised (``---`` is always a rule). ``render_llms_txt`` writes every section as
    an H2 and a section's optional flag only survives when its name is ``Optional``.

Detection of llms-full files (``kind="full"``, one :class:`InlineDoc` per page)
    The file is "full" when it has page markers and is not mostly link entries, or when it is large
    prose. Precisely, with *entry chars* = characters on link-entry lines and *content chars* = those of
    all other non-blank lines except headings and rules (code included):

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
    ``sections``/``links`` come only from the preamble before the first page; links inside pages stay in
    the pages' markdown. Page titles come from front matter, the page's heading, its first H1, or the
    last segment of its URL.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left
from collections import Counter
from typing import NamedTuple
from urllib.parse import unquote, urljoin, urlsplit

import msgspec

from .page import FIELD_RE, field, leading_block_end, scalar

__all__ = [
    "ConformanceIssue",
    "InlineDoc",
    "LlmsLink",
    "LlmsSection",
    "LlmsTxt",
    "parse_llms_txt",
    "render_llms_txt",
]


class ConformanceIssue(msgspec.Struct, frozen=True):
    """A deviation from the llms.txt spec (informational; parsing never fails)."""

    code: str
    line: int
    message: str


class LlmsLink(msgspec.Struct, frozen=True):
    """One link entry of an llms.txt file."""

    title: str
    url: str
    notes: str = ""
    section: str = ""
    optional: bool = False
    line: int = 0


class LlmsSection(msgspec.Struct, frozen=True):
    """A headed section (or the unnamed run of links before the first heading)."""

    name: str
    links: list[LlmsLink]
    optional: bool = False
    text: str = ""


class InlineDoc(msgspec.Struct, frozen=True):
    """A documentation page carried inline by an llms-full style file."""

    title: str
    text: str
    section: str = ""
    url: str | None = None
    description: str = ""
    line: int = 0


class LlmsTxt(msgspec.Struct, frozen=True):
    """A parsed llms.txt file."""

    title: str | None
    summary: str | None
    details: str
    sections: list[LlmsSection]
    inline_docs: list[InlineDoc]
    issues: list[ConformanceIssue]
    kind: str

    @property
    def links(self) -> list[LlmsLink]:
        """All links in file order."""
        return [link for section in self.sections for link in section.links]


# --------------------------------------------------------------------------------------------------------
# Line-level patterns

_HR_RE = re.compile(r"[ \t]{0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
_BULLET_RE = re.compile(r"([ \t]*)(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_FM_DELIM_RE = re.compile(r"-{3,}[ \t]*$")
_FM_OPEN_RE = re.compile(rf"^.*---[ \t]*\n(?={FIELD_RE.pattern})", re.MULTILINE)
_SOURCE_MARKER_RE = re.compile(r"(>[ \t]*)?(?:Source|URL|Url)[ \t]*:[ \t]*<?([^\s<>]+)>?[ \t]*$")
_SKIP_MARKER_RE = re.compile(r"\[Skip to (?:main )?content\]\(([^\s()]+)\)[ \t]*$")
_DOC_OPEN_RE = re.compile(r"<doc(\s[^<>]*)?>")
_DOC_CLOSE = "</doc>"
_WRAPPER_TAG_RE = re.compile(r"<(/?)([A-Za-z][\w-]*)(\s[^<>]*)?>")
_PROJECT_RE = re.compile(r"<project\s[^<>]*title=\"([^\"]*)\"")
_ATTR_RE = re.compile(r"([A-Za-z_][\w-]*)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")

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
_PERMALINK_TEXT = frozenset({"", "¶", "#", "§", "🔗", "\u200b"})
_URL_TRAILING = ".,;:!?*_'\"`。，、；：！？」』】"

_MAX_LINK_TEXT = 1000
_MAX_LINK_DEST = 4000
_FULL_MIN_CONTENT = 10_000


class _Head(NamedTuple):
    idx: int
    level: int
    raw: str
    after_hr: bool


class _Marker(NamedTuple):
    idx: int
    url: str
    kind: str  # "source" or "skip"
    quoted: bool


class _FrontMatter(NamedTuple):
    open_idx: int
    close_idx: int
    glued: bool
    signature: tuple[int, str]
    fields: dict[str, str]


class _Scan(NamedTuple):
    in_fence: bytearray
    heads: list[_Head]
    markers: list[_Marker]
    entry_chars: int
    content_chars: int
    unclosed_fence: int  # line index of a fence still open at the end, or -1
    fm_in_fence: int  # accepted front-matter blocks that began inside a fence


class _Found(NamedTuple):
    start: int
    end: int
    text: str
    url: str
    image: bool


class _Entry(NamedTuple):
    title: str
    url: str
    notes: str
    bare: bool
    empty_title: bool


# --------------------------------------------------------------------------------------------------------
# Small helpers


def _issue(issues: list[ConformanceIssue], code: str, idx: int, message: str) -> None:
    issues.append(ConformanceIssue(code=code, line=idx + 1, message=message))


def _unescape(s: str) -> str:
    return _ESCAPE_RE.sub(r"\1", s) if "\\" in s else s


def _collapse(s: str) -> str:
    return _WS_RE.sub(" ", s).strip()


def _is_relative(url: str) -> bool:
    return _SCHEME_RE.match(url) is None


def _resolve(url: str, base_url: str | None) -> str:
    if base_url is None or not _is_relative(url):
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


def _title_from_url(url: str) -> str:
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


def _clean_link_text(text: str) -> str:
    return _collapse(_unescape(_strip_images(text)))


def _heading_text(raw: str) -> str:
    """The text of an ATX heading's raw markdown: closing #s, permalink and badge links, emphasis dropped."""
    text = raw.strip()
    if text.endswith("#"):
        # an ATX closing sequence must be preceded by a space (or be the whole text)
        stripped = text.rstrip("#")
        if not stripped or stripped[-1] in " \t":
            text = stripped.rstrip()
    if "[" in text or "<" in text:
        parts: list[str] = []
        pos = 0
        for found in _find_links(text):
            parts.append(text[pos : found.start])
            inner = _collapse(_strip_images(found.text))
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
    return _collapse(_unescape(text))


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
        n = len(s)
        pos = 0
        while True:
            m = _PAIR_RE.search(s, pos)
            if m is None:
                break
            j = m.start()
            ch = s[j]
            if ch == "\\":
                pos = j + 2
            elif ch == "`":
                end = self.code_span_end(j)
                pos = end if end > 0 else _run_end(s, j, n)
            elif ch == "[":
                open_brackets.append(j)
                pos = j + 1
            elif ch == "]":
                if open_brackets:
                    self.brackets[open_brackets.pop()] = j
                pos = j + 1
            elif ch == "(":
                open_parens.append(j)
                pos = j + 1
            else:
                if open_parens:
                    self.parens[open_parens.pop()] = j
                pos = j + 1

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

    def link_at(self, j: int) -> _Found | None:
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
            return _Found(start, angle.end(), text, angle.group(1).strip(), image)
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
        return _Found(start, end + 1, text, _collapse(dest), image)

    def links(self) -> list[_Found]:
        """All top-level markdown links, images and ``<http...>`` autolinks, skipping code spans."""
        s = self.s
        out: list[_Found] = []
        n = len(s)
        i = 0
        while i < n:
            m = _SPECIAL_RE.search(s, i)
            if m is None:
                break
            j = m.start()
            ch = s[j]
            if ch == "\\":
                i = j + 2
            elif ch == "`":
                end = self.code_span_end(j)
                i = end if end > 0 else _run_end(s, j, n)
            elif ch == "<":
                auto = _AUTOLINK_RE.match(s, j)
                if auto is not None:
                    out.append(_Found(j, auto.end(), "", auto.group(1), False))
                    i = auto.end()
                else:
                    i = j + 1
            else:
                found = self.link_at(j)
                if found is None:
                    i = j + 1
                else:
                    out.append(found)
                    i = found.end
        return out


def _run_end(s: str, start: int, n: int) -> int:
    ch = s[start]
    k = start
    while k < n and s[k] == ch:
        k += 1
    return k


def _find_links(s: str) -> list[_Found]:
    return _Inline(s).links()


def _entries_from_text(c: str, *, list_item: bool) -> list[_Entry] | None:
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
        notes = _collapse(rest[sep.end() :] if sep is not None else rest)
        entries: list[_Entry] = []
        for f in found:
            raw_text = f.text
            title = _clean_link_text(raw_text)
            if not title:
                if "![" in raw_text:
                    continue  # a badge or logo, not a documentation entry
                entries.append(_Entry(_title_from_url(f.url), f.url, notes, False, True))
            else:
                entries.append(_Entry(title, f.url, notes, False, False))
        return entries or None
    if first == "|" and not list_item:
        cells = [cell.strip() for cell in c.strip().strip("|").split("|")]
        head = _entries_from_text(cells[0], list_item=False) if cells else None
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
        notes = _collapse(rest[sep.end() :] if sep is not None else rest)
        return [_Entry(_title_from_url(auto.group(1)), auto.group(1), notes, True, False)]
    if c.startswith(("http://", "https://")):
        bare = _BARE_URL_RE.match(c)
        if bare is None:
            return None
        url = _trim_url(bare.group(0))
        rest = c[len(url) :]
        sep = _SEP_RE.match(rest)
        if rest.strip() and sep is None and not rest.lstrip().startswith("("):
            return None
        notes = _collapse(rest[sep.end() :] if sep is not None else rest)
        return [_Entry(_title_from_url(url), url, notes, True, False)]
    if "://" not in c:
        return None
    labelled = _LABEL_URL_RE.match(c)
    if labelled is None:
        return None
    label = labelled.group("bold") or labelled.group("label") or ""
    label = _heading_text(label.strip())
    if not label or "://" in label or len(label.split()) > 8:
        return None
    url = _trim_url(labelled.group("url"))
    return [_Entry(label, url, _collapse(labelled.group("rest").lstrip(" \t,;")), True, False)]


# --------------------------------------------------------------------------------------------------------
# Pass 1: fences, headings, markers and size metrics over every line


def _front_matter(text: str, lines: list[str]) -> dict[int, _FrontMatter]:
    """Per-page front-matter blocks sharing the dominant signature (empty unless there are two or more)."""
    n = len(lines)
    found: list[_FrontMatter] = []
    line_no = 0
    counted_to = 0
    resume = 0
    # a whole-text search finds the few candidate openers without a Python-level loop over every line
    for cand_match in _FM_OPEN_RE.finditer(text):
        line_no += text.count("\n", counted_to, cand_match.start())
        counted_to = cand_match.start()
        i = line_no
        if i < resume:
            continue
        line = lines[i]
        stripped = line.strip()
        standalone = _FM_DELIM_RE.match(stripped) is not None
        fields: dict[str, str] = {}
        first_key = ""
        close = -1
        for j in range(i + 1, min(n, i + 60)):
            cand = lines[j]
            if _FM_DELIM_RE.match(cand):
                close = j
                break
            if cand.startswith("#"):
                break
            kv = field(cand)
            if kv is not None:
                name = kv[0].lower()
                first_key = first_key or name
                fields.setdefault(name, scalar(kv[1]))
        if close < 0 or not ({"title", "url", "source"} & fields.keys()):
            continue
        width = len(stripped) if standalone else 3
        found.append(_FrontMatter(i, close, not standalone, (width, first_key), fields))
        resume = close + 1
    if len(found) < 2:
        return {}
    dominant, count = Counter(fm.signature for fm in found).most_common(1)[0]
    if count < 2:
        return {}
    return {fm.open_idx: fm for fm in found if fm.signature == dominant}


def _scan(lines: list[str], fm: dict[int, _FrontMatter]) -> _Scan:
    # one pass over every line, so it uses plain string tests rather than a regex per line
    n = len(lines)
    in_fence = bytearray(n)
    heads: list[_Head] = []
    markers: list[_Marker] = []
    entry_chars = 0
    content_chars = 0
    fence_char = ""
    fence_marker = ""
    fence_open = -1
    fm_in_fence = 0
    after_hr = False
    prev_entry = False
    fm_starts = sorted(fm)
    fm_pos = 0
    fm_next = fm_starts[0] if fm_starts else n
    i = 0
    while i < n:
        if i == fm_next:
            if fence_marker:
                fm_in_fence += 1
                fence_char, fence_marker, fence_open = "", "", -1  # a runaway fence cannot cross a page
            i = fm[i].close_idx + 1
            fm_pos += 1
            fm_next = fm_starts[fm_pos] if fm_pos < len(fm_starts) else n
            after_hr = prev_entry = False
            continue
        idx = i
        line = lines[i]
        i += 1
        if fence_marker:
            in_fence[idx] = 1
            if line:
                content_chars += len(line)
                s = line.lstrip(" \t") if line[0] in " \t" else line
                if s.startswith(fence_marker):
                    rest = s.lstrip(fence_char)
                    if not rest.strip():
                        fence_char, fence_marker, fence_open = "", "", -1
            continue
        if not line or line.isspace():
            prev_entry = False
            continue
        first = line[0]
        if first == " " or first == "\t":
            s = line.lstrip(" \t")
            indent = len(line) - len(s)
        else:
            s = line
            indent = 0
        c = s[0]
        if c == "`" or c == "~":
            rest = s.lstrip(c)
            if len(s) - len(rest) >= 3 and (c == "~" or "`" not in rest):
                fence_char, fence_marker, fence_open = c, s[: len(s) - len(rest)], idx
                in_fence[idx] = 1
                content_chars += len(line)
                after_hr = prev_entry = False
                continue
        elif c == "#" and indent <= 3:
            rest = s.lstrip("#")
            level = len(s) - len(rest)
            if level <= 6 and (not rest or rest[0] in " \t"):
                heads.append(_Head(idx, level, rest.strip(), after_hr))
                after_hr = prev_entry = False
                continue
        if c in "-*_" and _HR_RE.match(line):
            after_hr = True
            prev_entry = False
            continue
        after_hr = False
        if c in ">SUu" and ("Source" in s or "URL" in s or "Url" in s):
            mk = _SOURCE_MARKER_RE.match(s)
            if mk is not None:
                markers.append(_Marker(idx, mk.group(2), "source", mk.group(1) is not None))
        elif c == "[" and s.startswith("[Skip to "):
            sk = _SKIP_MARKER_RE.match(s)
            if sk is not None:
                markers.append(_Marker(idx, sk.group(1).split("#", 1)[0], "skip", False))
        is_entry = False
        if c in "-*+" and len(s) > 2 and s[1] in " \t":
            rest = s[2:].lstrip()
            is_entry = rest.startswith(("[", "<http", "http")) or ("://" in rest and len(rest) < 300)
            prev_entry = is_entry
        elif c == "[":
            is_entry = "](" in s
            prev_entry = is_entry
        elif c == "|":
            is_entry = s[1:].lstrip().startswith("[") and "](" in s
            prev_entry = False
        elif prev_entry:
            is_entry = True  # a wrapped entry continues on this line
        if is_entry:
            entry_chars += len(line)
        else:
            content_chars += len(line)
    return _Scan(in_fence, heads, markers, entry_chars, content_chars, fence_open, fm_in_fence)


# --------------------------------------------------------------------------------------------------------
# Index (link list) parsing


class _SectionBuilder:
    __slots__ = ("idx", "last", "links", "name", "optional", "text")

    def __init__(self, name: str, optional: bool, idx: int) -> None:
        self.name = name
        self.optional = optional
        self.idx = idx
        self.links: list[LlmsLink] = []
        self.text: list[str] = []
        self.last = -1  # line index just past the last text block


class _IndexResult(NamedTuple):
    title: str | None
    summary: str | None
    details: str
    sections: list[LlmsSection]


class _IndexParser:
    """Block-level walk over the index part of a file producing title, summary, details and sections."""

    def __init__(
        self,
        lines: list[str],
        in_fence: bytearray,
        heads: list[_Head],
        base_url: str | None,
        issues: list[ConformanceIssue],
    ) -> None:
        self.lines = lines
        self.in_fence = in_fence
        self.heads = {h.idx: h for h in heads}
        self.base_url = base_url
        self.issues = issues
        self.relative_reported = False
        self.outside_reported = False
        self.has_sections = False
        self.pre = _SectionBuilder("", False, -1)
        self.current: _SectionBuilder | None = None
        self.sections: list[_SectionBuilder] = []
        self.text_reported: set[int] = set()
        self.title: str | None = None
        self.summary: str | None = None
        self.stack: list[tuple[int, str]] = []  # (level, text) of the open headings below the title
        self.expect_summary = False
        self.seen_content = False

    def parse(self, end: int, title_idx: int | None, h1_sections: bool, skip_to: int) -> _IndexResult:
        """Walk ``lines[skip_to:end]``; ``title_idx`` is the title heading's line, if any."""
        section_heads = [h for i, h in self.heads.items() if i < end and i != title_idx]
        self.has_sections = bool(section_heads)
        if section_heads and not h1_sections and min(h.level for h in section_heads) >= 3:
            first = min(section_heads, key=lambda h: h.idx)
            _issue(
                self.issues, "h3-as-section", first.idx, "no H2 sections: deeper headings used as sections"
            )
        self.expect_summary = title_idx is None
        self._walk(skip_to, end, title_idx)
        return _IndexResult(self.title, self.summary, _join_text(self.pre.text), self._finish())

    def _walk(self, i: int, end: int, title_idx: int | None) -> None:
        lines = self.lines
        in_fence = self.in_fence
        while i < end:
            line = lines[i]
            if in_fence[i]:
                j = i
                while j < end and in_fence[j]:
                    j += 1
                self._text(lines[i:j], i)
                self.expect_summary = False
                self.seen_content = True
                i = j
                continue
            if not line.strip():
                i += 1
                continue
            head = self.heads.get(i)
            if head is not None:
                if i == title_idx:
                    self.title = _heading_text(head.raw)
                    self.expect_summary = True
                else:
                    stack = self.stack
                    while stack and stack[-1][0] >= head.level:
                        stack.pop()
                    stack.append((head.level, _heading_text(head.raw)))
                    name = " / ".join(part for _, part in stack)
                    optional = stack[0][1].lower() == "optional"
                    self.current = _SectionBuilder(name, optional, i)
                    self.sections.append(self.current)
                    self.expect_summary = False
                self.seen_content = True
                i += 1
                continue
            if line.lstrip(" \t").startswith(">"):
                j = i
                while j < end and not in_fence[j] and lines[j].lstrip(" \t").startswith(">"):
                    j += 1
                if (
                    self.expect_summary
                    and self.summary is None
                    and (self.title is not None or not self.seen_content)
                ):
                    self.summary = _quote_text(lines[i:j])
                else:
                    self._text(lines[i:j], i)
                self.expect_summary = False
                self.seen_content = True
                i = j
                continue
            self.expect_summary = False
            self.seen_content = True
            if _HR_RE.match(line):
                i += 1
            elif _BULLET_RE.match(line):
                i = self._list_item(i, end)
            else:
                i = self._paragraph(i, end)

    def _is_block_start(self, k: int) -> bool:
        line = self.lines[k]
        if self.in_fence[k] or k in self.heads or not line.strip():
            return True
        s = line.lstrip(" \t")
        return s.startswith(">") or _HR_RE.match(line) is not None or _BULLET_RE.match(line) is not None

    def _list_item(self, i: int, end: int) -> int:
        lines = self.lines
        bullet = _BULLET_RE.match(lines[i])
        indent = len(bullet.group(1)) if bullet is not None else 0
        parts = [lines[i][bullet.end() :] if bullet is not None else lines[i]]
        j = i + 1
        while j < end:
            if not self._is_block_start(j):
                parts.append(lines[j])
                j += 1
                continue
            # after blank lines, deeper-indented plain lines still belong to the item
            k = j
            while k < end and not lines[k].strip() and not self.in_fence[k]:
                k += 1
            if k > j and k < end and not self._is_block_start(k):
                nxt = lines[k]
                if len(nxt) - len(nxt.lstrip(" \t")) > indent:
                    parts.extend(lines[j : k + 1])
                    j = k + 1
                    continue
            break
        content = " ".join(p.strip() for p in parts).strip()
        entries = _entries_from_text(content, list_item=True)
        if entries is not None:
            self._add_entries(entries, i)
        else:
            self._prose(lines[i:j], content, i)
        return j

    def _paragraph(self, i: int, end: int) -> int:
        lines = self.lines
        j = i
        prose: list[str] = []
        prose_start = -1
        while j < end and (j == i or not self._is_block_start(j)):
            line = lines[j]
            entries = _entries_from_text(line.strip(), list_item=False)
            if entries is not None:
                if prose:
                    self._prose(prose, "\n".join(p.strip() for p in prose), prose_start)
                    prose = []
                self._add_entries(entries, j)
            else:
                if not prose:
                    prose_start = j
                prose.append(line)
            j += 1
        if prose:
            self._prose(prose, "\n".join(p.strip() for p in prose), prose_start)
        return j

    def _prose(self, block: list[str], content: str, idx: int) -> None:
        self._text(block, idx)
        if self.current is None:
            return  # links in free details prose are commentary, not file-list entries
        for found in _find_links(content):
            if found.image:
                continue
            if found.text:
                title = _clean_link_text(found.text)
                if not title:
                    continue
            else:
                title = _title_from_url(found.url)
            if not found.url:
                _issue(self.issues, "empty-link-url", idx, f"link {title!r} has an empty URL")
                continue
            self._add_link(title, found.url, "", idx)

    def _text(self, block: list[str], idx: int) -> None:
        target = self.current or self.pre
        if target.text:
            # keep a tight list tight: separate blocks only where the source had a blank line
            gap = self.lines[target.last : idx]
            if any(not line.strip() for line in gap):
                target.text.append("")
        target.text.extend(block)
        target.last = idx + len(block)
        if target is not self.pre and target.idx not in self.text_reported:
            self.text_reported.add(target.idx)
            _issue(
                self.issues,
                "text-in-section",
                idx,
                f"section {target.name!r} contains content other than a link list",
            )

    def _add_entries(self, entries: list[_Entry], idx: int) -> None:
        for e in entries:
            if not e.url:
                _issue(self.issues, "empty-link-url", idx, f"link {e.title!r} has an empty URL")
                continue
            if e.bare:
                _issue(self.issues, "bare-url", idx, f"URL {e.url!r} has no markdown link title")
            if e.empty_title:
                _issue(self.issues, "empty-link-title", idx, f"link to {e.url!r} has no title")
            self._add_link(e.title, e.url, e.notes, idx)

    def _add_link(self, title: str, url: str, notes: str, idx: int) -> None:
        if _is_relative(url) and not self.relative_reported:
            self.relative_reported = True
            _issue(
                self.issues, "relative-link", idx, f"relative link {url!r} (resolved against the base URL)"
            )
        target = self.current or self.pre
        if target is self.pre and self.has_sections and not self.outside_reported:
            self.outside_reported = True
            _issue(self.issues, "link-outside-section", idx, "links before the first section heading")
        target.links.append(
            LlmsLink(
                title=title,
                url=_resolve(url, self.base_url),
                notes=notes,
                section=target.name,
                optional=target.optional,
                line=idx + 1,
            )
        )

    def _finish(self) -> list[LlmsSection]:
        out: list[LlmsSection] = []
        if self.pre.links:
            out.append(LlmsSection(name="", links=self.pre.links))
        for b in self.sections:
            out.append(LlmsSection(name=b.name, links=b.links, optional=b.optional, text=_join_text(b.text)))
        return out


def _quote_text(block: list[str]) -> str:
    paragraphs: list[list[str]] = [[]]
    for line in block:
        body = line.lstrip(" \t")[1:]
        if body.startswith(" "):
            body = body[1:]
        if body.strip():
            paragraphs[-1].append(body.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    # line breaks are kept: some files put one fact per quoted line
    return "\n\n".join("\n".join(p) for p in paragraphs if p)


def _join_text(block: list[str]) -> str:
    return "\n".join(block).strip("\n")


# --------------------------------------------------------------------------------------------------------
# Full (inline docs) splitting


class _Page(NamedTuple):
    start: int  # first line of the page's text
    title: str
    url: str | None
    description: str


def _marker_pages(
    lines: list[str], scan: _Scan, title_idx: int | None, heads: dict[int, _Head]
) -> list[_Page]:
    counts = Counter(m.kind for m in scan.markers)
    kind = counts.most_common(1)[0][0]
    pages: list[_Page] = []
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
        title = _heading_text(heads[start].raw) if start in heads else ""
        pages.append(_Page(start, title, mk.url, ""))
    return pages


def _heading_pages(scan: _Scan, title_idx: int | None) -> list[_Page]:
    heads = [h for h in scan.heads if h.idx != title_idx]
    if not heads:
        return []
    hr_levels = Counter(h.level for h in heads if h.after_hr)
    chosen: list[_Head] = []
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
    return [_Page(h.idx, _heading_text(h.raw), None, "") for h in chosen]


def _build_docs(
    lines: list[str],
    pages: list[tuple[_Page, int]],
    scan: _Scan,
    fm: dict[int, _FrontMatter],
    base_url: str | None,
) -> list[InlineDoc]:
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
        title = page.title or next((_heading_text(h.raw) for h in in_page if h.level == 1), "")
        url = page.url
        if url is None:
            lo = bisect_left(marker_idx, body_start)
            if lo < len(marker_idx) and marker_idx[lo] < stop:
                url = scan.markers[lo].url
        if not title and url:
            title = _title_from_url(url)
        if not title and in_page:
            title = _heading_text(in_page[0].raw)
        if not text and not title:
            continue
        docs.append(
            InlineDoc(
                title=title,
                text=text,
                url=_resolve(url, base_url) if url else None,
                description=page.description,
                line=page.start + 1,
            )
        )
    return docs


def _fm_pages(fm: dict[int, _FrontMatter]) -> list[_Page]:
    pages: list[_Page] = []
    for start in sorted(fm):
        f = fm[start].fields
        url = f.get("url") or f.get("source") or None
        pages.append(_Page(start, _collapse(f.get("title", "")), url, _collapse(f.get("description", ""))))
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
                title=_collapse(attrs["title"]),
                text=text[opener.end() : closer].strip("\n"),
                section=section,
                url=_resolve(url, base_url) if url else None,
                description=_collapse(attrs.get("desc") or attrs.get("description") or ""),
                line=text.count("\n", 0, opener.start()) + 1,
            )
        )
        pos = closer + len(_DOC_CLOSE)
    if first < 0:
        return None
    return first, docs


# --------------------------------------------------------------------------------------------------------
# Entry points


def parse_llms_txt(text: str, base_url: str | None = None) -> LlmsTxt:
    """Parse an llms.txt or llms-full.txt file leniently; never raises on any str input."""
    issues: list[ConformanceIssue] = []
    text = _normalise(text, issues)
    lines = text.split("\n")
    if not text.strip():
        _issue(issues, "empty-file", 0, "file is empty")
        _issue(issues, "no-h1", 0, "no H1 title")
        return LlmsTxt(None, None, "", [], [], issues, "index")
    if not text.endswith("\n"):
        _issue(issues, "missing-trailing-newline", len(lines) - 1, "file does not end with a newline")

    fm = _front_matter(text, lines)
    scan = _scan(lines, fm)
    if fm and len(fm) - scan.fm_in_fence < 2:
        # front-matter look-alikes inside code blocks are examples, not page boundaries
        fm = {}
        scan = _scan(lines, fm)
    title_idx, h1_sections = _title_heading(lines, scan)
    shape = _shape(text, lines, scan, fm, title_idx, base_url)
    docs = shape.docs
    preamble_end = len(lines)
    if shape.kind == "full" and shape.pages:
        h1_sections = False  # the H1s open pages
        pages = shape.pages
        preamble_end = pages[0].start
        if title_idx == preamble_end:
            preamble_end += 1  # the title heading also opens the first page
        elif title_idx is not None and title_idx > preamble_end:
            title_idx = None
        spans = [(p, pages[k + 1].start if k + 1 < len(pages) else len(lines)) for k, p in enumerate(pages)]
        docs = _build_docs(lines, spans, scan, fm, base_url)
        if not docs:
            docs = [InlineDoc(title="", text=text.strip("\n"), line=1)]

    if shape.preamble_text is not None:
        head = _tagged_preamble(shape.preamble_text, shape.shift, base_url, issues)
    else:
        skip_to = 0
        if 0 in fm:
            skip_to = fm[0].close_idx + 1
        elif leading_block_end(lines) > 0 and shape.kind == "index":
            skip_to = leading_block_end(lines)
            _issue(issues, "front-matter", 0, "file starts with a YAML front-matter block")
        parser = _IndexParser(lines, scan.in_fence, scan.heads, base_url, issues)
        head = parser.parse(preamble_end, title_idx, h1_sections, skip_to)
        _structure_issues(issues, lines, scan, title_idx, h1_sections, preamble_end, shape.kind, skip_to)

    if scan.unclosed_fence >= 0:
        _issue(issues, "unclosed-fence", scan.unclosed_fence, "code fence is never closed")
    if head.title is None and not any(i.code in ("no-h1", "h1-as-section") for i in issues):
        _issue(issues, "no-h1", 0, "no H1 title")
    issues.sort(key=lambda i: i.line)
    return LlmsTxt(
        title=head.title,
        summary=head.summary,
        details=head.details,
        sections=head.sections,
        inline_docs=docs,
        issues=issues,
        kind=shape.kind,
    )


def _normalise(text: str, issues: list[ConformanceIssue]) -> str:
    """Drop a BOM and turn CR/CRLF into LF, reporting each (and NUL characters)."""
    if text.startswith("\ufeff"):
        text = text[1:]
        _issue(issues, "bom", 0, "file starts with a byte order mark")
    if "\r" in text:
        _issue(issues, "crlf-line-endings", 0, "file uses CR or CRLF line endings")
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in text:
        _issue(
            issues, "nul-character", text[: text.index("\x00")].count("\n"), "file contains NUL characters"
        )
    return text


def _title_heading(lines: list[str], scan: _Scan) -> tuple[int | None, bool]:
    """(line of the title H1 or None, whether the H1s are sections): ``h1-as-section`` files have no title."""
    heads = scan.heads
    if not heads or heads[0].level != 1:
        return None, False
    title_idx = heads[0].idx
    h1s = [h for h in heads if h.level == 1]
    if len(h1s) >= 2 and len(h1s) == len(heads) and _followed_by_links(lines, scan.in_fence, title_idx):
        return None, True
    return title_idx, False


class _Shape(NamedTuple):
    kind: str  # "index" or "full"
    pages: list[_Page]  # where the pages of a full file start (not for <doc> wrappers)
    docs: list[InlineDoc]  # the docs of <doc> wrappers
    preamble_text: str | None  # with <doc> wrappers: the text before the first one, parsed on its own
    shift: int  # lines the preamble text has that the file has not (a synthetic title)


def _shape(
    text: str,
    lines: list[str],
    scan: _Scan,
    fm: dict[int, _FrontMatter],
    title_idx: int | None,
    base_url: str | None,
) -> _Shape:
    """Index or full, and where a full file's pages start: rules 1 to 4 of the module docstring."""
    content = scan.content_chars
    tagged = _doc_tags(text, scan.in_fence, base_url) if "<doc" in text else None
    if tagged is not None:
        offset, docs = tagged
        preamble_text = _WRAPPER_TAG_RE.sub("", text[:offset])
        project = _PROJECT_RE.search(text, 0, offset)
        if project is not None and not any(h.startswith("# ") for h in preamble_text.split("\n")):
            # the synthetic title line is not in the file
            return _Shape("full", [], docs, f"# {html.unescape(project.group(1))}\n{preamble_text}", 1)
        return _Shape("full", [], docs, preamble_text, 0)
    if fm and content >= scan.entry_chars:
        return _Shape("full", _fm_pages(fm), [], None, 0)
    if _marker_kind_count(scan) >= 2 and content >= scan.entry_chars:
        pages = _marker_pages(lines, scan, title_idx, {h.idx: h for h in scan.heads})
        if len(pages) >= 2:
            return _Shape("full", pages, [], None, 0)
    if content >= _FULL_MIN_CONTENT and content >= 2 * scan.entry_chars:
        pages = _heading_pages(scan, title_idx) or [_Page(_body_start(lines, title_idx), "", None, "")]
        return _Shape("full", pages, [], None, 0)
    return _Shape("index", [], [], None, 0)


def _tagged_preamble(
    preamble_text: str, shift: int, base_url: str | None, issues: list[ConformanceIssue]
) -> _IndexResult:
    """Title, summary, details and sections of the text before the first ``<doc>`` wrapper."""
    sub = parse_llms_txt(preamble_text, base_url)
    issues.extend(
        ConformanceIssue(i.code, max(1, i.line - shift), i.message)
        for i in sub.issues
        if i.code not in ("missing-trailing-newline", "empty-file", "no-h1", "no-sections")
    )
    return _IndexResult(sub.title, sub.summary, sub.details, sub.sections)


def _marker_kind_count(scan: _Scan) -> int:
    if not scan.markers:
        return 0
    return Counter(m.kind for m in scan.markers).most_common(1)[0][1]


def _followed_by_links(lines: list[str], in_fence: bytearray, idx: int) -> bool:
    for k in range(idx + 1, min(len(lines), idx + 20)):
        line = lines[k]
        if not line.strip():
            continue
        if in_fence[k]:
            return False
        if _SOURCE_MARKER_RE.match(line.strip()):
            return False  # a page's source line, not a link list
        bullet = _BULLET_RE.match(line)
        content = line[bullet.end() :].strip() if bullet is not None else line.strip()
        return _entries_from_text(content, list_item=bullet is not None) is not None
    return False


def _body_start(lines: list[str], title_idx: int | None) -> int:
    if title_idx is None:
        return 0
    k = title_idx + 1
    while k < len(lines) and (not lines[k].strip() or lines[k].lstrip().startswith(">")):
        k += 1
    return k


def _structure_issues(
    issues: list[ConformanceIssue],
    lines: list[str],
    scan: _Scan,
    title_idx: int | None,
    h1_sections: bool,
    end: int,
    kind: str,
    skip_to: int,
) -> None:
    heads = [h for h in scan.heads if h.idx < end]
    if h1_sections and heads:
        _issue(issues, "h1-as-section", heads[0].idx, "no title: H1 headings are used as sections")
    elif title_idx is None:
        _issue(issues, "no-h1", heads[0].idx if heads else 0, "the file does not start with an H1 title")
    else:
        extra = [h for h in heads if h.level == 1 and h.idx != title_idx]
        if extra:
            _issue(
                issues, "multiple-h1", extra[0].idx, f"{len(extra) + 1} H1 headings; later ones are sections"
            )
        before = next((k for k in range(skip_to, title_idx) if lines[k].strip()), None)
        if before is not None:
            _issue(issues, "text-before-h1", before, "content before the H1 title")
    if kind == "index" and not any(h.idx != title_idx for h in heads):
        _issue(issues, "no-sections", title_idx or 0, "no section headings")


def _escape_inline(text: str, chars: str) -> str:
    out = text.replace("\\", "\\\\")
    for ch in chars:
        out = out.replace(ch, "\\" + ch)
    return out


def _render_heading(text: str) -> str:
    flat = _collapse(text)
    return _escape_inline(flat, "*_`[]<>#")


def _render_url(url: str) -> str:
    flat = url.replace("\n", "%0A")
    # the <...> form allows spaces and unbalanced parentheses, and a trailing backslash cannot escape ")"
    if any(ch in flat for ch in " \t()<>\\"):
        return "<" + flat.replace("<", "%3C").replace(">", "%3E") + ">"
    return flat


def render_llms_txt(doc: LlmsTxt) -> str:
    """Render title, summary, details and sections as a spec-conformant llms.txt."""
    out: list[str] = []
    if doc.title is not None:
        out += [f"# {_render_heading(doc.title)}", ""]
    if doc.summary:
        out += [("> " + line) if line.strip() else ">" for line in doc.summary.split("\n")]
        out.append("")
    if doc.details.strip():
        out += [doc.details.strip("\n"), ""]
    for k, section in enumerate(doc.sections):
        # only a leading unnamed section can be written without a heading
        if section.name or k > 0:
            out += [f"## {_render_heading(section.name)}", ""]
        if section.text.strip():
            out += [section.text.strip("\n"), ""]
        for link in section.links:
            title = _escape_inline(_collapse(link.title), "[]`")
            entry = f"- [{title}]({_render_url(link.url)})"
            notes = _collapse(link.notes)
            if notes:
                entry += f": {notes}"
            out.append(entry)
        if section.links:
            out.append("")
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n"
