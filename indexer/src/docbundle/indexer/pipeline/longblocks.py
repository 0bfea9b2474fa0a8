"""Cutting a chunk that holds one enormous block of text into pieces of bounded size (issue 31, item 13).

The chunker never cuts inside a block, so a page that is one long paragraph (5 MB of CJK, which has no
spaces, or any other script) was one chunk: its analysis took 2.1 GB at build time and every search that
returned it weighed all of it. ``chunk_markdown`` hands such a chunk here: a chunk over
``MAX_CHUNK_CHARS`` that holds a block (other than a code block) over that bound is cut into pieces of at
most ``MAX_CHUNK_CHARS`` characters. Each cut falls, in order of preference, in the second half of the
piece at:

1. a line end (so a paragraph of many lines is cut between its lines, and blocks between each other);
2. a sentence end (``.``, ``!``, ``?`` and their CJK forms, with the spaces after them);
3. a space;
4. any character, but never between ``\\r`` and ``\\n`` nor before a combining mark or joiner.

Code blocks are never cut (``keep``): a cut that would fall inside one falls before it, and a code block
longer than the bound is a piece of its own, as long as it is (the crawler's page size cap bounds it).
Every other piece is within the bound (a piece that would be whitespace alone joins its neighbour, so
no chunk is blank), and the pieces are exact slices that join to the chunk's text.

The bound is far above any paragraph a person writes (65,536 characters is over 10,000 English words, and
130 times the default ``max_words`` of Han), so ordinary pages chunk exactly as before.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import NamedTuple

__all__ = ["MAX_CHUNK_CHARS", "Piece", "cut_points", "split_chunk"]

#: Characters a chunk may hold before a block in it that is longer than this is cut (see above).
MAX_CHUNK_CHARS = 65_536

# Cut candidates in order of preference; a cut goes at the end of the match.
_LINE_END = re.compile(r"\r\n|\r|\n")
_SENTENCE_END = re.compile(r"[.!?\u3002\uff01\uff1f\uff0e\uff61]+[\s]*")
_SPACE = re.compile(r"\s+")
_CANDIDATES = (_LINE_END, _SENTENCE_END, _SPACE)
# Joiners and selectors that belong to the character before them (a cut before one would split it).
_JOINERS = frozenset("\u200c\u200d\ufe0e\ufe0f")
# How far back from the bound a character cut looks for a character a cut may go before.
_CHAR_LOOKBACK = 32


class Piece(NamedTuple):
    """One piece of a cut chunk: its text, its plain text, code and words, and its line range."""

    text: str
    plain: str
    code: str
    words: int
    start_line: int
    end_line: int


def _inside(keep: Sequence[tuple[int, int]], starts: Sequence[int], cut: int) -> tuple[int, int] | None:
    """The kept range that ``cut`` falls strictly inside, if any (``starts`` are the ranges' starts)."""
    k = bisect.bisect_left(starts, cut) - 1
    if k >= 0 and keep[k][0] < cut < keep[k][1]:
        return keep[k]
    return None


def _splits_crlf(text: str, cut: int) -> bool:
    """Whether ``cut`` falls between the two characters of a ``\\r\\n`` line end."""
    return 0 < cut < len(text) and text[cut] == "\n" and text[cut - 1] == "\r"


def _char_cut(text: str, pos: int, limit: int, allowed: Callable[[int], bool]) -> int:
    """A cut in ``(pos, limit]``, as late as it can be, that splits no character sequence.

    Looks back ``_CHAR_LOOKBACK`` characters for one that is no combining mark or joiner, then
    settles for any cut that is ``allowed`` (so a run of combining marks is cut too).
    """
    for cut in range(limit, max(pos, limit - _CHAR_LOOKBACK), -1):
        ch = text[cut] if cut < len(text) else ""
        if ch not in _JOINERS and not (ch and unicodedata.combining(ch)) and allowed(cut):
            return cut
    return next((cut for cut in range(limit, pos, -1) if allowed(cut)), limit)


def _best_cut(text: str, pos: int, bound: int, keep: Sequence[tuple[int, int]], starts: Sequence[int]) -> int:
    """Where the piece starting at ``pos`` ends (see the module docstring)."""
    limit = pos + bound
    straddled = _inside(keep, starts, limit)
    if straddled is not None:
        # A code block runs past the bound: the piece ends before it, or is that block alone.
        return straddled[0] if straddled[0] > pos else straddled[1]

    def allowed(cut: int) -> bool:
        return not _splits_crlf(text, cut) and _inside(keep, starts, cut) is None

    lo = pos + bound // 2
    for pattern in _CANDIDATES:
        best = -1
        for m in pattern.finditer(text, lo, limit):
            if allowed(m.end()):
                best = m.end()
        if best > pos:
            return best
    return _char_cut(text, pos, limit, allowed)


def cut_points(text: str, bound: int, keep: Sequence[tuple[int, int]] = ()) -> list[int]:
    """Offsets where ``text`` is cut into pieces of at most ``bound`` characters (none when it fits).

    ``keep`` (sorted, disjoint ``(start, end)`` offsets) are never cut inside; a kept range longer than
    ``bound`` becomes a piece of its own.
    """
    bound = max(bound, 2)
    starts = [a for a, _ in keep]
    cuts: list[int] = []
    pos = 0
    while len(text) - pos > bound:
        pos = _best_cut(text, pos, bound, keep, starts)
        if pos >= len(text):
            break  # a kept range longer than the bound ends the text
        cuts.append(pos)
    return cuts


def split_chunk(
    text: str,
    start_line: int,
    keep: Sequence[tuple[int, int]],
    describe: Callable[[str], tuple[str, str, int]],
    bound: int = MAX_CHUNK_CHARS,
) -> list[Piece]:
    """``text`` (a chunk starting at line ``start_line``) cut into ``Piece``s; ``describe`` gives a
    piece's plain text, code and words.

    A piece that ends inside a line shares that line with the next: its ``end_line`` is one past the
    line it ends in, and the next piece starts at that line.
    """
    pieces: list[Piece] = []
    line = start_line
    # A piece of whitespace alone (a run of spaces longer than half the bound) joins the next piece,
    # or the last one before it: a chunk is never blank.
    bounds = [0]
    for cut in [*cut_points(text, bound, keep), len(text)]:
        if text[bounds[-1] : cut].strip() or cut == len(text):
            bounds.append(cut)
    if len(bounds) > 2 and not text[bounds[-2] : bounds[-1]].strip():
        del bounds[-2]
    for lo, hi in pairwise(bounds):
        part = text[lo:hi]
        breaks = len(_LINE_END.findall(part))
        ends_line = part.endswith(("\n", "\r"))
        plain, code, words = describe(part)
        pieces.append(Piece(part, plain, code, words, line, line + breaks + (0 if ends_line else 1)))
        line += breaks
    return pieces
