"""First-character guards in front of markdown-it-py's block rules: the same tokens, fewer rule calls.

markdown-it tries every block rule in turn at the start of each block, and every terminator rule at
each line of a paragraph (twice: ``lheading`` scans a paragraph's lines for a setext underline before
``paragraph`` does). Most of those calls fail on the line's first character. ``guard_block_rules``
puts a cheap check in front of the rules that can only match on certain characters, so a line of
prose no longer goes through a dozen Python functions (each with its own debug-log call):

- ``fence``, ``blockquote``, ``hr``, ``list``, ``reference``, ``html_block``, ``heading`` and the
  ``:::`` container return False unless the line's first non-blank character (``bMarks + tShift``,
  where each of them looks first) is one of their markers;
- ``table`` returns False unless the line after it starts with ``|``, ``-`` or ``:`` (its delimiter
  row; it checks that character first);
- ``lheading`` fails unless a line after it, before the next blank line, starts with ``-`` or ``=``
  (a superset of the underlines it accepts); it stops looking at the first line that starts with a
  character a paragraph's terminator can match on, and leaves that case to the rule. When it fails after its first check it leaves
  ``state.parentType`` at ``"paragraph"`` (as markdown-it's does), so the guard does too.

Each chain of rules markdown-it tries in turn (at a block's start, and the terminators of a paragraph,
list, quote or reference) then calls one dispatcher for its run of first-character guards, which
tries only the rules whose characters match, in their order.

A guard only answers False where the rule itself would, from the same state; anything else goes to
the rule. A hypothesis test compares the token streams with unguarded parsers
(tests/indexer/test_block_guards.py).
"""

from __future__ import annotations

from collections.abc import Callable

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock

__all__ = ["guard_block_rules"]

BlockRule = Callable[[StateBlock, int, int, bool], bool]

# Rule name -> the characters a block it matches can start with.
_FIRST_CHARS = {
    "fence": "`~",
    "blockquote": ">",
    "hr": "*-_",
    "list": "*-+0123456789",
    "reference": "[",
    "html_block": "<",
    "heading": "#",
}


# What a setext underline starts with, and every character a paragraph's terminator rule can match on
# (the guarded rules' characters, a table's delimiter row, the ":::" container).
_UNDERLINE_OR_TERMINATOR = frozenset("-=|:" + "".join(_FIRST_CHARS.values()))


def _first_char_guard(rule: BlockRule, chars: str) -> BlockRule:
    first = frozenset(chars)

    def guarded(state: StateBlock, line: int, end: int, silent: bool) -> bool:
        pos = state.bMarks[line] + state.tShift[line]
        if pos < state.eMarks[line] and state.src[pos] not in first:
            return False
        return rule(state, line, end, silent)

    return guarded


def _table_guard(rule: BlockRule) -> BlockRule:
    def guarded(state: StateBlock, line: int, end: int, silent: bool) -> bool:
        row = line + 1
        if row < end:
            pos = state.bMarks[row] + state.tShift[row]
            if pos < state.eMarks[row] and state.src[pos] not in "|-:":
                return False
        return rule(state, line, end, silent)

    return guarded


def _lheading_guard(rule: BlockRule) -> BlockRule:
    def guarded(state: StateBlock, line: int, end: int, silent: bool) -> bool:
        src, begins, shifts, ends = state.src, state.bMarks, state.tShift, state.eMarks
        row = line + 1
        while row < end:
            pos = begins[row] + shifts[row]
            if pos >= ends[row]:
                break  # a blank line ends the paragraph
            if src[pos] in _UNDERLINE_OR_TERMINATOR:
                # An underline, or a line that may end the paragraph first: the rule decides. (Scanning
                # on past a paragraph's end would make a page of short paragraphs quadratic.)
                return rule(state, line, end, silent)
            row += 1
        if not state.is_code_block(line):
            state.parentType = "paragraph"
        return False

    return guarded


def _dispatcher(run: list[tuple[frozenset[str], BlockRule]]) -> BlockRule:
    """One call for a run of first-character-guarded rules: only those whose characters match are tried."""
    every = tuple(rule for _, rule in run)
    by_char = {c: tuple(rule for chars, rule in run if c in chars) for chars, _ in run for c in chars}

    def dispatch(state: StateBlock, line: int, end: int, silent: bool) -> bool:
        pos = state.bMarks[line] + state.tShift[line]
        rules = by_char.get(state.src[pos], ()) if pos < state.eMarks[line] else every
        for rule in rules:  # noqa: SIM110 (a generator would cost more than the loop saves)
            if rule(state, line, end, silent):
                return True
        return False

    return dispatch


def guard_block_rules(md: MarkdownIt, *, container: str | None = None) -> None:
    """Put the guards in front of ``md``'s block rules (``container``: the ``:::`` rule's name)."""
    first_chars = dict(_FIRST_CHARS)
    if container is not None:
        first_chars[f"container_{container}"] = ":"
    ruler = md.block.ruler
    # Guard -> (its characters, the rule it guards).
    guards: dict[BlockRule, tuple[frozenset[str], BlockRule]] = {}
    for rule in ruler.__rules__:
        if rule.name in first_chars:
            chars = first_chars[rule.name]
            guard = _first_char_guard(rule.fn, chars)
            guards[guard] = (frozenset(chars), rule.fn)
            rule.fn = guard
        elif rule.name == "table":
            rule.fn = _table_guard(rule.fn)
        elif rule.name == "lheading":
            rule.fn = _lheading_guard(rule.fn)
    # The ruler caches its chains of functions (the main one and each rule's terminators): rebuild them
    # with the guards, then replace each run of first-character guards by one dispatching call. (If the
    # ruler is changed later, it rebuilds its chains from the guards alone: slower, still the same.)
    ruler.__cache__ = None
    ruler.getRules("")
    assert ruler.__cache__ is not None
    for chain, fns in ruler.__cache__.items():
        merged: list[BlockRule] = []
        run: list[BlockRule] = []
        for fn in [*fns, None]:
            if fn is not None and fn in guards:
                run.append(fn)
                continue
            if len(run) > 1:
                merged.append(_dispatcher([guards[guard] for guard in run]))
            else:
                merged.extend(run)
            run = []
            if fn is not None:
                merged.append(fn)
        ruler.__cache__[chain] = merged
