"""Pass 1 over every line of a file: fences, headings, page markers, front matter and size metrics.

One pass over the lines (plain string tests, not a regex per line) records which lines are inside
fenced code (backtick or tilde fences; headings and links in them do not count), the ATX headings
(setext headings are not recognised: ``---`` is always a rule), the page markers (``Source: <url>`` /
``URL: <url>`` lines, optionally quoted, and scraper ``[Skip to content](url)`` lines), and the
*entry chars* (characters on link-entry lines) and *content chars* (those of all other non-blank lines
except headings and rules, code included) that ``full.py`` weighs. ``front_matter`` finds the
per-page front-matter blocks (the key: value lines are read by ``page.py``, the one front-matter
parser); an accepted block closes a code fence left open by the previous page. What the lines mean is
decided by ``index.py`` and ``full.py``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import NamedTuple

from ..page import FIELD_RE, field, scalar

__all__ = [
    "BULLET_RE",
    "HR_RE",
    "SOURCE_MARKER_RE",
    "FrontMatter",
    "Head",
    "Marker",
    "Scan",
    "front_matter",
    "scan_lines",
]


HR_RE = re.compile(r"[ \t]{0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
BULLET_RE = re.compile(r"([ \t]*)(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_FM_DELIM_RE = re.compile(r"-{3,}[ \t]*$")
_FM_OPEN_RE = re.compile(rf"^.*---[ \t]*\n(?={FIELD_RE.pattern})", re.MULTILINE)
SOURCE_MARKER_RE = re.compile(r"(>[ \t]*)?(?:Source|URL|Url)[ \t]*:[ \t]*<?([^\s<>]+)>?[ \t]*$")
_SKIP_MARKER_RE = re.compile(r"\[Skip to (?:main )?content\]\(([^\s()]+)\)[ \t]*$")


class Head(NamedTuple):
    """An ATX heading: its line, level, raw text, and whether a thematic break precedes it."""

    idx: int
    level: int
    raw: str
    after_hr: bool


class Marker(NamedTuple):
    """A page marker line: ``Source:``/``URL:`` (``source``) or ``[Skip to content]`` (``skip``)."""

    idx: int
    url: str
    kind: str  # "source" or "skip"
    quoted: bool


class FrontMatter(NamedTuple):
    """One per-page front-matter block (``glued``: opened by ``...---`` at the end of a line)."""

    open_idx: int
    close_idx: int
    glued: bool
    signature: tuple[int, str]
    fields: dict[str, str]


class Scan(NamedTuple):
    """What the line pass found."""

    in_fence: bytearray
    heads: list[Head]
    markers: list[Marker]
    entry_chars: int
    content_chars: int
    unclosed_fence: int  # line index of a fence still open at the end, or -1
    fm_in_fence: int  # accepted front-matter blocks that began inside a fence


# --------------------------------------------------------------------------------------------------------
# Pass 1: fences, headings, markers and size metrics over every line


def front_matter(text: str, lines: list[str]) -> dict[int, FrontMatter]:
    """Per-page front-matter blocks sharing the dominant signature (empty unless there are two or more)."""
    n = len(lines)
    found: list[FrontMatter] = []
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
        found.append(FrontMatter(i, close, not standalone, (width, first_key), fields))
        resume = close + 1
    if len(found) < 2:
        return {}
    dominant, count = Counter(fm.signature for fm in found).most_common(1)[0]
    if count < 2:
        return {}
    return {fm.open_idx: fm for fm in found if fm.signature == dominant}


def scan_lines(lines: list[str], fm: dict[int, FrontMatter]) -> Scan:
    """Pass 1 over every line (skipping the front-matter blocks ``fm``)."""
    # one pass over every line, so it uses plain string tests rather than a regex per line
    n = len(lines)
    in_fence = bytearray(n)
    heads: list[Head] = []
    markers: list[Marker] = []
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
                heads.append(Head(idx, level, rest.strip(), after_hr))
                after_hr = prev_entry = False
                continue
        if c in "-*_" and HR_RE.match(line):
            after_hr = True
            prev_entry = False
            continue
        after_hr = False
        if c in ">SUu" and ("Source" in s or "URL" in s or "Url" in s):
            mk = SOURCE_MARKER_RE.match(s)
            if mk is not None:
                markers.append(Marker(idx, mk.group(2), "source", mk.group(1) is not None))
        elif c == "[" and s.startswith("[Skip to "):
            sk = _SKIP_MARKER_RE.match(s)
            if sk is not None:
                markers.append(Marker(idx, sk.group(1).split("#", 1)[0], "skip", False))
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
    return Scan(in_fence, heads, markers, entry_chars, content_chars, fence_open, fm_in_fence)
