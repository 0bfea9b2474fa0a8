"""The chunker's guarded markdown-it parsers give exactly the tokens of unguarded ones.

``blockguards.guard_block_rules`` answers "no match" for block rules from a line's first character;
on documents built from every block marker (fences, quotes, lists, tables, HTML, headings, setext
underlines, ``:::`` containers, reference definitions, indentation), the token stream must not change,
for markdown and for MDX (no indented code).
"""

from __future__ import annotations

from typing import Any

import pytest
from docbundle.indexer.pipeline import blocks
from docbundle.indexer.pipeline.chunk import chunk_markdown
from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock

LINE_STARTS = [
    "",
    " ",
    "  ",
    "    ",
    "\t",
    "# ",
    "## ",
    "#",
    "> ",
    ">",
    "- ",
    "* ",
    "+ ",
    "1. ",
    "2) ",
    "-",
    "---",
    "***",
    "___",
    "===",
    "= ",
    "```",
    "~~~",
    ":::",
    "::: note ",
    ":::tip[T]",
    "| ",
    "|",
    ":",
    "<div>",
    "</div>",
    "<!-- ",
    "<pre>",
    "<x-y a='1'>",
    "[a]: ",
    "[a]",
    "a",
    "text",
]
LINE_ENDS = ["", "a", " b", "|", " | c |", "---|---", ":-:", "-->", "</pre>", " -->", "```", " *", " #", "  "]
line = st.tuples(st.sampled_from(LINE_STARTS), st.sampled_from(LINE_ENDS)).map("".join)
document = st.lists(line, max_size=25).map("\n".join)

PARSERS = {
    mdx: (blocks.make_parser(mdx=mdx), blocks.make_parser(mdx=mdx, guarded=False)) for mdx in (False, True)
}


def _tokens(md: MarkdownIt, text: str) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
    env: dict[str, Any] = {}
    tokens = md.parse(text, env)
    return [
        (t.type, t.tag, t.nesting, t.level, t.map, t.content, t.info, t.markup, t.block, t.hidden)
        for t in tokens
    ], env


@pytest.mark.parametrize("mdx", [False, True])
@settings(max_examples=1500, deadline=None)
@given(text=document)
@example(text="a\n---\nb\n===\n\n> q\nlazy\n- i\n\n  - j\n    k\n| a | b |\n|---|---|\n| c | d |")
@example(text="para\n    indented\n= x\n:::note\n# h\n:::\n[a]: /u\n[a]\n<div>\nx\n</div>")
@example(text="a | b\n:-|-:\nc | d")
@example(text=">  *\n> \n> ")
def test_guarded_parser_gives_the_same_tokens(text: str, mdx: bool) -> None:
    guarded, plain = PARSERS[mdx]
    assert _outcome(guarded, text) == _outcome(plain, text)


def _outcome(md: MarkdownIt, text: str) -> object:
    """``_tokens``, or the error it raised: mdit_py_plugins' container rule itself raises IndexError on
    a few texts (``'>  *\n> \n> '``; the chunker then indexes the page as one text block,
    ``blocks.analyse``), and the guarded parser must then raise the same."""
    try:
        return _tokens(md, text)
    except IndexError as exc:
        return ("raised", type(exc).__name__, str(exc))


@pytest.mark.parametrize("text", ["para\nmore\n\nnext", "    code\nx", "para\n---", "a\n> b"])
def test_a_failing_guarded_rule_leaves_the_state_as_the_rule_does(text: str) -> None:
    # lheading leaves parentType at "paragraph" when it finds no underline; its guard must too.
    guarded, plain = PARSERS[False]
    states = []
    for md in (guarded, plain):
        state = StateBlock(text, md, {}, [])
        lheading = next(r.fn for r in md.block.ruler.__rules__ if r.name == "lheading")
        states.append(
            (lheading(state, 0, state.lineMax, False), state.parentType, state.line, len(state.tokens))
        )
    assert states[0] == states[1]


def test_the_chunker_parsers_are_guarded() -> None:
    # The test above compares two parsers; it only means something if the chunker uses the guarded one.
    for md in (blocks.MD, blocks.MDX):
        rule = next(r for r in md.block.ruler.__rules__ if r.name == "fence")
        assert rule.fn.__name__ == "guarded"
        assert "dispatch" in [fn.__name__ for fn in md.block.ruler.getRules("")]
        assert "dispatch" in [fn.__name__ for fn in md.block.ruler.getRules("paragraph")]


def test_a_page_of_short_paragraphs_takes_linear_time() -> None:
    # 20,000 one-line paragraphs, each ended by a heading and no blank line: a minute if the setext
    # heading guard looked past each paragraph's end for an underline, as it first did.
    body = "text\n# heading\n" * 20_000
    chunks = chunk_markdown(body, max_depth=1, min_words=1)
    assert len(chunks) == 20_001  # the first paragraph, then each heading with the paragraph after it
