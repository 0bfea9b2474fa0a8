"""The plain text of common inline markdown without markdown-it: a fast path for the chunker.

``fast_inline`` reads inline content (a paragraph's, heading's or table cell's text) and returns what
the chunker would build from markdown-it-py's inline tokens for it: the text pieces (text, escaped
characters, ``"\\n"`` for a line break) with each code span held out as a ``\\0N\\0`` placeholder,
and the code spans. It follows markdown-it-py's rules for the markup it reads:

- a line break drops the spaces before it (only those written since the last token: markdown-it holds
  that text as ``pending``) and the spaces and tabs after it;
- a backslash before a line break is a hard break (spaces before it stay); before ASCII punctuation it
  is that character, before anything else it stays; at the very end it is text;
- a run of N backticks opens a code span closed by the next run of exactly N, else it is text; the
  span's line breaks become spaces and one space is stripped from each end when both ends have one and
  it is not all spaces;
- ``*`` and ``_`` runs are delimiters, flanking as in markdown-it's ``scanDelims``, paired by
  markdown-it's own ``processDelimiters``; a paired marker leaves no text, an unpaired one stays;
- ``[label](dest)`` and ``![label](dest)``, where the destination has no spaces, parentheses,
  backslashes or leading ``<`` and an optional title is in ``"`` or ``'`` without backslashes, are a
  link / image whose text is the label's. A link's label ends at the first "]" that is not escaped or
  inside a code span, and is read like the rest (markdown-it seeing the "[" before it); an image's
  label must be plain text (markdown-it parses it on its own). A ``[`` (or ``![``) that starts
  neither is text (when the page has no reference definitions);
- ``<name>`` and ``</name>`` (no attributes) are inline HTML, which has no text.

Anything else it meets outside a code span or link destination (strikethrough, entities, other HTML or
autolinks, a link inside a label, an image label with markup, a ``[`` that is not an inline link on
a page with reference definitions) makes it return None, and the caller asks markdown-it. A hypothesis test
holds its answers identical to markdown-it's (tests/indexer/test_inline_fast.py), and
``benchmarks/chunk_speed.py --check`` the chunks of every shared corpus.
"""

from __future__ import annotations

import re

from markdown_it.common.utils import isMdAsciiPunct, isPunctChar, isWhiteSpace
from markdown_it.rules_inline.balance_pairs import processDelimiters
from markdown_it.rules_inline.state_inline import Delimiter

__all__ = ["fast_inline"]

# Where the scan must look: escapes, code spans, links, images, and the markup it leaves to
# markdown-it (emphasis, strikethrough, autolinks / HTML, entities; CR and NUL, which markdown-it's
# normalisation would have removed).
_STOP = re.compile(r"[\\`\[*_~<&\r\0]|!\[")
_EMPHASIS = {"*": re.compile(r"\*+"), "_": re.compile(r"_+")}
# Link text it can copy: no markup but line breaks (and no "[" or "]").
_LABEL_STOP = re.compile(r"[\[\]\\`*_~<&!\r\0]")
# Where a link label's scan must look (see _label_end).
_LABEL_SCAN = re.compile(r"[\]\[\\`<*_~&!\r\0]")
# A link destination it can copy: no spaces, controls, parentheses, backslashes.
_DEST = re.compile(r"[^\x00-\x20\x7f()\\]*")
_BACKTICKS = re.compile(r"`+")
# An HTML tag without attributes, <name> or </name>: markdown-it's inline HTML (no autolink: no ":"
# or "@"), which carries no text.
_BARE_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*>")
_SPACE_TAB = re.compile(r"[ \t]*")
_WHITESPACE = re.compile(r"[ \t\n]*")
# markdown-it's escapable characters (ASCII punctuation).
_ESCAPABLE = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _last_runs(src: str) -> dict[int, int]:
    """Where the last backtick run of each length starts (markdown-it's ``backticks`` cache)."""
    return {run.end() - run.start(): run.start() for run in _BACKTICKS.finditer(src)}


def _code_span(src: str, start: int, last_runs: dict[int, int]) -> tuple[int, str | None]:
    """The end of the backtick run or code span at ``start``, and the span's content (None: no span).

    A run with no run of its length after it is text at once, so that many unmatched runs cost linear
    time, as in markdown-it.
    """
    run = _BACKTICKS.match(src, start)
    assert run is not None
    length = run.end() - start
    if last_runs.get(length, -1) >= run.end():
        for closer in _BACKTICKS.finditer(src, run.end()):
            if closer.end() - closer.start() == length:
                content = src[run.end() : closer.start()].replace("\n", " ")
                if content.startswith(" ") and content.endswith(" ") and content.strip(" "):
                    content = content[1:-1]
                return closer.end(), content
    return run.end(), None


def _text(text: str) -> str:
    """Text without markup but line breaks, written since the last token, as markdown-it reads it."""
    if "\n" not in text:
        return text
    # Line by line, not one " *\n" pattern: that one rescans a long run of spaces from each of them.
    lines = text.split("\n")
    last = len(lines) - 1
    for k, line in enumerate(lines):
        if k:
            line = line.lstrip(" \t")
        lines[k] = line.rstrip(" ") if k < last else line
    return "\n".join(lines)


def _link_end(src: str, label_end: int) -> int:
    """Where an inline link whose label ends at ``label_end`` ends; -1: no link; -2: out of scope."""
    n = len(src)
    pos = label_end + 1
    if pos >= n or src[pos] != "(":
        return -1
    pos = _WHITESPACE.match(src, pos + 1).end()  # type: ignore[union-attr]
    if pos >= n:
        return -1
    if src[pos] == "<":
        return -2
    dest_end = _DEST.match(src, pos).end()  # type: ignore[union-attr]
    if dest_end < n and src[dest_end] in "(\\":
        return -2
    pos = _WHITESPACE.match(src, dest_end).end()  # type: ignore[union-attr]
    if pos < n and pos != dest_end and src[pos] in "\"'(":
        # A title (after whitespace only): "..." or '...' without escapes.
        close = src.find(src[pos], pos + 1) if src[pos] != "(" else -1
        if close == -1 or "\\" in src[pos + 1 : close]:
            return -2
        pos = _WHITESPACE.match(src, close + 1).end()  # type: ignore[union-attr]
    if pos < n and src[pos] == ")":
        return pos + 1
    return -1


def _flanking(last: str, nxt: str, split_word: bool) -> tuple[bool, bool]:
    """Whether a run of emphasis markers between ``last`` and ``nxt`` can open, and close (``scanDelims``)."""
    last_punct = isMdAsciiPunct(ord(last)) or isPunctChar(last)
    next_punct = isMdAsciiPunct(ord(nxt)) or isPunctChar(nxt)
    last_space = isWhiteSpace(ord(last))
    next_space = isWhiteSpace(ord(nxt))
    left = not (next_space or (next_punct and not (last_space or last_punct)))
    right = not (last_space or (last_punct and not (next_space or next_punct)))
    return left and (split_word or not right or last_punct), right and (split_word or not left or next_punct)


def _drop_matched(out: list[str], marks: list[int], delimiters: list[Delimiter]) -> None:
    """Pair emphasis markers with markdown-it's own algorithm and blank the ones that pair."""
    # processDelimiters reads only the delimiter list, never the state.
    processDelimiters(None, delimiters)  # type: ignore[arg-type]
    for k, delimiter in enumerate(delimiters):
        if delimiter.end >= 0:
            out[marks[k]] = out[marks[delimiter.end]] = ""


def _label_end(src: str, start: int, last_runs: dict[int, int]) -> int:
    """Where the label of a link starting at ``start`` ends (its "]"); -1: nowhere; -2: out of scope.

    As markdown-it's ``parseLinkLabel`` skips tokens: an escaped "]" or one inside a code span or tag
    does not end it; a nested "[" (a link or image inside) is out of scope.
    """
    pos = start
    while (stop := _LABEL_SCAN.search(src, pos)) is not None:
        at = stop.start()
        char = src[at]
        if char == "]":
            return at
        if char == "\\":
            pos = at + 2
        elif char == "`":
            pos = _code_span(src, at, last_runs)[0]
        elif char == "<":
            tag = _BARE_TAG.match(src, at)
            if tag is None:
                return -2
            pos = tag.end()
        elif char == "*" or char == "_":
            pos = at + 1  # emphasis markers are not skipped as tokens: the scan just passes them
        else:
            return -2
    return -1


def fast_inline(
    src: str, has_references: bool, spans: list[str] | None = None, before: str = " "
) -> tuple[list[str], list[str]] | None:
    """Text pieces (code spans as ``\\0N\\0``) and code spans of inline ``src``; None when out of scope.

    A link's label is read by a nested call that shares ``spans`` (its code spans are numbered with the
    rest); ``before`` is the character markdown-it sees before ``src`` (a label's "[").
    """
    out: list[str] = []
    if spans is None:
        spans = []
    last_runs = _last_runs(src) if "`" in src else {}
    # Emphasis markers: their pieces in ``out`` and their delimiters, numbered like markdown-it's tokens
    # (only whether two are adjacent matters: a run's markers are, two runs never are).
    marks: list[int] = []
    delimiters: list[Delimiter] = []
    n = len(src)
    pos = 0
    # Start of the text markdown-it would hold as pending (written since the last token).
    pending = 0
    while True:
        stop = _STOP.search(src, pos)
        if stop is None:
            out.append(_text(src[pending:]))
            if delimiters:
                _drop_matched(out, marks, delimiters)
            return out, spans
        at = stop.start()
        char = src[at]
        if char == "\\":
            if at + 1 >= n:
                # A backslash at the very end is text.
                pos = n
                continue
            out.append(_text(src[pending:at]))
            nxt = src[at + 1]
            if nxt == "\n":
                out.append("\n")
                pos = pending = _SPACE_TAB.match(src, at + 2).end()  # type: ignore[union-attr]
                continue
            end = at + 2
            if "\ud800" <= nxt <= "\udbff" and end < n and "\udc00" <= src[end] <= "\udfff":
                end += 1
            out.append(src[at + 1 : end] if nxt in _ESCAPABLE else src[at:end])
            pos = pending = end
        elif char == "`":
            end, content = _code_span(src, at, last_runs)
            if content is not None:
                out.append(_text(src[pending:at]))
                out.append(f"\0{len(spans)}\0")
                spans.append(content)
                pending = end
            pos = end
        elif char == "*" or char == "_":
            end = _EMPHASIS[char].match(src, at).end()  # type: ignore[union-attr]
            can_open, can_close = _flanking(
                src[at - 1] if at > 0 else before, src[end] if end < n else " ", char == "*"
            )
            out.append(_text(src[pending:at]))
            token = delimiters[-1].token + 2 if delimiters else 0
            for k in range(end - at):
                marks.append(len(out))
                out.append(char)
                delimiters.append(Delimiter(ord(char), end - at, token + k, -1, can_open, can_close))
            pos = pending = end
        elif char == "[" or char == "!":
            label_start = at + 1 if char == "[" else at + 2
            if char == "[":
                label_end = _label_end(src, label_start, last_runs)
            else:
                # An image's label: plain text only (markdown-it reads it as a separate inline parse).
                label = _LABEL_STOP.search(src, label_start)
                label_end = -1 if label is None else label.start() if src[label.start()] == "]" else -2
            if label_end == -1:
                # No "]" after it: text (an image's "!" too).
                pos = at + 1
                continue
            if label_end == -2:
                return None
            end = _link_end(src, label_end)
            if end == -1 and not has_references:
                # Not a link (nor an image, whose "!" is then text): "[" is text.
                pos = at + 1
                continue
            if end < 0:
                return None
            out.append(_text(src[pending:at]))
            if char == "!":
                out.append(_text(src[label_start:label_end]))
            else:
                label_text = fast_inline(src[label_start:label_end], has_references, spans, "[")
                if label_text is None:
                    return None
                out.extend(label_text[0])
            pos = pending = end
        elif char == "<":
            tag = _BARE_TAG.match(src, at)
            if tag is None:
                return None
            out.append(_text(src[pending:at]))
            pos = pending = tag.end()
        else:
            return None
