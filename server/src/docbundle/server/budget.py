"""Token estimates and fitting text into a token budget (the time budget is ``bundle.query.Deadline``).

The estimate is deliberately simple and slightly generous, because the server cannot know the client's
tokenizer: ASCII text counts 4 characters per token (English prose in common BPE vocabularies runs at
about 4-4.5), CJK characters (Han, kana, Hangul) one token each, and any other non-ASCII character half
a token. It costs one pass in C over the text (``str.encode`` and a regex count of runs), so pages of
hundreds of kilobytes are measured in well under a millisecond each.

Fitting is linear in the text it keeps, whatever the length of the text or of its lines (issue 31,
item 13): every character counts at least a quarter token, so a text of more than ``4 * n`` characters
cannot fit ``n`` tokens and nothing past that is looked at; the longest prefix that fits is found in one
pass (``_prefix_within``). A 5 MB paragraph on one line cost ~2 s of CPU per hit before, binary-searched
with a regex count over the whole line at every step.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# A hit or neighbour chunk given fewer tokens than this is dropped rather than cut to a stub.
MIN_TEXT_TOKENS = 60
# Room for a result's own header and closing notes in the text rendering.
HEADER_TOKENS = 120
# A document page ending at a section boundary that uses less than this share of its text budget goes
# on into the next section (``page_end``).
PAGE_FILL = 0.9

_CJK_CLASS = (
    "[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]"
)
_CJK_RE = re.compile(_CJK_CLASS)
# Runs, not single characters: counting a CJK text one match per character built a string per
# character (0.5 s for 5 MB of Han); a run is one match.
_CJK_RUN_RE = re.compile(_CJK_CLASS + "+")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")

# Estimates are counted in quarter tokens, so that they are exact integers: an ASCII character weighs
# 1, any other 2, a CJK character 4.
_QUARTERS = 4
_ASCII_WEIGHT, _OTHER_WEIGHT, _CJK_WEIGHT = 1, 2, 4
# Every character weighs at least a quarter token: a text longer than this many characters per token
# cannot fit, which is what bounds every fitting function by the text it keeps.
_MAX_CHARS_PER_TOKEN = _QUARTERS // _ASCII_WEIGHT
# Characters weighed at once (in C) while looking for the longest prefix that fits; only the last
# block is weighed again one character at a time.
_PREFIX_BLOCK = 64


def _quarters(text: str) -> int:
    """The estimate of ``text`` in quarter tokens."""
    if text.isascii():
        return len(text) * _ASCII_WEIGHT
    ascii_chars = len(text.encode("ascii", "ignore"))
    cjk = sum(map(len, _CJK_RUN_RE.findall(text)))
    other = len(text) - ascii_chars - cjk
    return ascii_chars * _ASCII_WEIGHT + cjk * _CJK_WEIGHT + other * _OTHER_WEIGHT


def estimate_tokens(text: str) -> int:
    """Estimated token count of ``text`` (see the module docstring for the rule)."""
    return -(-_quarters(text) // _QUARTERS)


def _fits(text: str, max_tokens: int) -> bool:
    """Whether ``estimate_tokens(text) <= max_tokens``, without weighing a text too long to fit."""
    return len(text) <= _MAX_CHARS_PER_TOKEN * max(max_tokens, 0) and estimate_tokens(text) <= max_tokens


def _prefix_within(text: str, max_tokens: int) -> int:
    """The longest prefix length of ``text`` whose estimate fits ``max_tokens``.

    One pass over at most the prefix it returns plus one block: estimates only grow as the prefix
    does, so blocks are added while they fit and the block that does not is taken a character at a time.
    """
    room = _QUARTERS * max(max_tokens, 0)
    pos = 0
    end = min(len(text), _MAX_CHARS_PER_TOKEN * max(max_tokens, 0))
    while pos < end:
        block = text[pos : pos + _PREFIX_BLOCK]
        weight = _quarters(block)
        if weight <= room:
            room -= weight
            pos += len(block)
            continue
        for ch in block:
            weight = _quarters(ch)
            if weight > room:
                return pos
            room -= weight
            pos += 1
    return pos


def cut_within(text: str, max_tokens: int) -> int:
    """Where to cut ``text`` to fit ``max_tokens``: after the last whole line that fits, else mid-line.

    Returns ``len(text)`` when the whole text fits, and at least 1 for a non-empty text, so a caller
    paging through a document always moves forward.
    """
    if _fits(text, max_tokens):
        return len(text)
    used = 0
    pos = 0
    cut_line = ""
    # Whole lines that fit hold at most 4 characters per token, so the line the loop stops at starts
    # inside this window and what it keeps of that line ends inside it too.
    window = text[: _MAX_CHARS_PER_TOKEN * max(max_tokens, 0) + 1]
    for line in window.splitlines(keepends=True):
        cost = estimate_tokens(line)
        if used + cost > max_tokens:
            cut_line = line
            break
        used += cost
        pos += len(line)
    rest = max_tokens - used
    if cut_line and (pos == 0 or rest >= max(8, max_tokens // 4)):
        # Whole lines leave much of the budget unused (a long paragraph is one line): fill it
        # with the start of the next line, ending at a space when there is one.
        k = _prefix_within(cut_line, rest)
        space = cut_line.rfind(" ", 0, k)
        pos += space + 1 if space > k // 2 else k
    return max(pos, 1) if text else 0


def fit_text(text: str, max_tokens: int) -> tuple[str, bool]:
    """``text`` cut to about ``max_tokens`` at a line boundary; returns (text, whether it was cut).

    A code block left open by the cut is closed again, so the markdown that follows still renders.
    """
    if _fits(text, max_tokens):
        return text, False
    # Keep room for a closing fence.
    kept = text[: cut_within(text, max(max_tokens - 3, 1))]
    fence = open_fence(kept)
    if fence is not None:
        kept = kept + ("" if kept.endswith("\n") else "\n") + fence + "\n"
    return kept, True


def open_fence(markdown: str) -> str | None:
    """The fence marker of a code block ``markdown`` leaves open, or None."""
    fence: str | None = None
    for line in markdown.splitlines():
        m = _FENCE_RE.match(line)
        if not m:
            continue
        marker = m.group(1)
        if fence is None:
            fence = marker
        elif marker[0] == fence[0] and len(marker) >= len(fence) and not line.strip()[len(marker) :].strip():
            fence = None
    return fence


def page_end(text: str, start: int, max_tokens: int, boundaries: Sequence[int]) -> int:
    """End of the page of ``text`` that starts at ``start`` and fits ``max_tokens``.

    The page ends at the last of ``boundaries`` (sorted offsets where a cut is preferred: chunk
    starts; the end of the text is always one) that fits. When that leaves more than a tenth of the
    budget unused (the next section is long), the page goes on into that section and ends at a line
    boundary or, failing that, at a space inside a line (``cut_within``), so a small budget is not
    spent on many small pages. Always past ``start`` when ``start < len(text)``.
    """
    end = start
    used = 0
    for b in (*boundaries, len(text)):
        if b <= end:
            continue
        if b - end > _MAX_CHARS_PER_TOKEN * max(max_tokens - used, 0):
            break  # too long to fit: not weighed
        cost = estimate_tokens(text[end:b])
        if used + cost > max_tokens:
            break
        used += cost
        end = b
    if end >= len(text) or used >= max_tokens * PAGE_FILL:
        return end
    # cut_within looks no further than this (see there), so the rest of a long section is not copied.
    reach = end + _MAX_CHARS_PER_TOKEN * max(max_tokens - used, 0) + 1
    rest = text[end : min(boundaries_next(boundaries, end, len(text)), reach)]
    cut = cut_within(rest, max_tokens - used)
    # cut_within moves at least one character; a page that already holds whole sections takes more
    # only when it fits.
    if end > start and estimate_tokens(rest[:cut]) > max_tokens - used:
        return end
    return end + cut


def boundaries_next(boundaries: Sequence[int], start: int, default: int) -> int:
    """The first boundary after ``start`` (``default`` when there is none)."""
    return next((b for b in boundaries if b > start), default)


def share(needs: Sequence[int], budget: int) -> list[int]:
    """Split ``budget`` among items needing ``needs`` tokens: small items whole, large ones equally cut.

    Water-filling: items are served smallest first, each getting at most an equal share of what is
    left, so one huge item cannot starve the others and nothing is wasted on items that need less.
    """
    if sum(needs) <= budget:
        return list(needs)
    alloc = [0] * len(needs)
    remaining = max(budget, 0)
    left = len(needs)
    for i in sorted(range(len(needs)), key=lambda k: needs[k]):
        give = min(needs[i], remaining // left)
        alloc[i] = give
        remaining -= give
        left -= 1
    return alloc
