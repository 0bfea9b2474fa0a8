"""The chunker's fast inline path gives exactly what markdown-it-py's inline parse gives.

``inline.fast_inline`` reads common inline markup (line breaks, escapes, code spans, plain links) without
markdown-it; whenever it answers, its plain text and code spans must equal those the chunker builds from
markdown-it's tokens, on strings drawn from an alphabet rich in markup characters.
"""

from __future__ import annotations

from typing import Any

from docbundle.indexer.pipeline import blocks
from docbundle.indexer.pipeline.chunk import chunk_markdown
from docbundle.indexer.pipeline.inline import fast_inline
from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it.token import Token

# Markup characters, the whitespace markdown-it treats specially, and a few letters / non-ASCII.
ALPHABET = [*list("`*_[]()<>&\\!~ \t\n\"'#:/.-=|{}ab"), "é", "字", "\xa0"]
PIECES = [
    "`",
    "``",
    "[a](b)",
    "[a]( b )",
    "[a](<b>)",
    '[a](b "t")',
    "[a](b\n'c\nd' )",
    "[a](b (c))",
    "](",
    "\\\n",
    "  \n",
    " \n ",
    "![a](b)",
    "&amp;",
    "**",
    "*a*",
    "__a__",
    "_",
    "***",
    " * ",
    "a*",
    "http://x.invalid",
    "<sub>",
    "[`a`](b)",
    "[a\\]](b)",
    "[`]`](c)",
    "[*a*](b)",
    "[* a*](b)",
    "[<b>x</b>](y)",
    "</b>",
    "<a-1>",
    "<x:y>",
    "<a@b>",
    "<1>",
]
inline_text = st.lists(st.sampled_from(ALPHABET) | st.sampled_from(PIECES), max_size=40).map("".join)
# The same without the markup the fast path leaves to markdown-it, so that most strings exercise it.
IN_SCOPE = [c for c in ALPHABET if c not in "&~"]
in_scope_text = st.lists(
    st.sampled_from(IN_SCOPE) | st.sampled_from([p for p in PIECES if not set(p) & set("&~")]),
    max_size=40,
).map("".join)


def _slow(content: str, env: dict[str, Any]) -> tuple[str, list[str]]:
    children: list[Token] = []
    blocks.MD.inline.parse(content, blocks.MD, env, children)
    code: list[str] = []
    return blocks._inline_children_plain(children, code), code


def _fast(content: str, env: dict[str, Any]) -> tuple[str, list[str]] | None:
    fast = fast_inline(content, "references" in env)
    if fast is None:
        return None
    code: list[str] = []
    return blocks._joined_plain(*fast, code), code


@settings(max_examples=3000, deadline=None)
@given(inline_text | in_scope_text)
@example("a `b` c")
@example("x  \n  y `z\nw` [l\n  ink](u/v_w*x) \\*")
@example("[a]  (b) [c]\n(d) [e](f\n) [g](\n) [h]() [i](j k)")
@example("`` a`b `` ` ` `  ` ``x`` \\` `")
@example("tail\\")
@example("[x \n  y  \n\t z ](u) `a\n  b`")
@example("[**.a*](u)")  # markdown-it sees the "[" before the label: "**" may close, so it cannot pair
def test_fast_inline_matches_markdown_it(content: str) -> None:
    fast = _fast(content, {})
    if fast is not None:
        assert fast == _slow(content, {})


@given(inline_text)
def test_with_reference_definitions_links_go_to_markdown_it(content: str) -> None:
    env: dict[str, Any] = {"references": {"A": {"href": "u", "title": ""}}}
    fast = _fast(content, env)
    if fast is not None:
        assert fast == _slow(content, env)


def test_common_markup_takes_the_fast_path() -> None:
    # The test above cannot fail by the fast path declining everything: these it must answer itself.
    for content in ("use `f(x)` here", "see [the guide](guide/start.md#top)\nand \\*more", "a  \n b"):
        assert fast_inline(content, False) is not None
    assert _fast("see [the guide](guide/start.md#top)\nand `x` \\*", {}) == (
        "see the guide\nand x *",
        ["x"],
    )
    assert _fast("a *b* **`c`** snake_case_name 2*3", {}) == ("a b c snake_case_name 2*3", ["c"])
    assert _fast("<sub>a</sub>\n<b> c", {}) == ("a\n c", [])
    assert _fast("see [`f()` and *g*](u) \\[x]", {}) == ("see f() and g [x]", ["f()"])
    assert fast_inline("a <b c='d'>", False) is None
    assert fast_inline("[a]", True) is None


# Paragraphs are parsed whole before a long one is cut (``longblocks``); the tests of long paragraphs read
# the whole paragraph's plain text, so they keep it in one chunk with a bound above any of them.
UNCUT = 10**9


def test_many_unmatched_backtick_runs_take_linear_time() -> None:
    # 1,500 openers that never close (one of each length), then 150,000 code spans they would each
    # scan past: minutes if every opener looked for its closer, as the fast path first did.
    body = "text " + " ".join("`" * length for length in range(2, 1500)) + " " + "`a` " * 150_000 + "\n"
    (chunk,) = chunk_markdown(body, max_chars=UNCUT)
    assert chunk.code.count("a") == 150_000


def test_a_long_run_of_spaces_before_a_line_break_takes_linear_time() -> None:
    # A pattern such as " *\n" rescans the run from each of its spaces: minutes for 1,000,000 of them.
    body = "a" + " " * 1_000_000 + "b\nd *c*\n"
    (chunk,) = chunk_markdown(body, max_chars=UNCUT)
    assert chunk.plain == "a" + " " * 1_000_000 + "b\nd c"
