"""Tests for docbundle.indexer.pipeline.chunk: front matter, plain text extraction, and the chunking rules."""

from __future__ import annotations

import itertools
import textwrap

from docbundle.indexer.pipeline.blocks import MD as _MD
from docbundle.indexer.pipeline.blocks import MDX as _MDX
from docbundle.indexer.pipeline.chunk import Chunk, chunk_markdown, parse_page
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it.token import Token


def md(text: str) -> str:
    """Dedent an inline fixture and drop its leading newline."""
    return textwrap.dedent(text).lstrip("\n")


def words(n: int, word: str = "word") -> str:
    """A paragraph of ``n`` distinct-ish words."""
    return " ".join(f"{word}{i}" for i in range(n))


def line_count(body: str) -> int:
    """Lines as markdown-it counts them: \\r\\n, \\r and \\n end a line; a final break adds no line."""
    text = body.replace("\r\n", "\n").replace("\r", "\n")
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def assert_tiles(body: str, chunks: list[Chunk]) -> None:
    """Chunks are contiguous, in order, and cover the body exactly."""
    assert "".join(c.text for c in chunks) == body
    assert chunks[0].start_line == 0
    assert chunks[-1].end_line == line_count(body)
    for before, after in itertools.pairwise(chunks):
        assert before.end_line == after.start_line
    for c in chunks:
        assert c.start_line < c.end_line
        assert c.text.strip()


# --- front matter ---------------------------------------------------------------------------------


def test_yaml_front_matter_is_parsed_and_removed_from_body() -> None:
    page = parse_page(
        md("""
        ---
        title: Install
        description: How to install it.
        tags: [a, b]
        ---
        # Ignored H1

        Text.
        """)
    )
    assert page.front_matter == {"title": "Install", "description": "How to install it.", "tags": ["a", "b"]}
    assert page.title == "Install"
    assert page.description == "How to install it."
    assert page.body == "# Ignored H1\n\nText.\n"


def test_toml_front_matter_is_parsed() -> None:
    page = parse_page('+++\ntitle = "Hugo page"\nweight = 3\n+++\nBody text.\n')
    assert page.front_matter == {"title": "Hugo page", "weight": 3}
    assert page.title == "Hugo page"
    assert page.body == "Body text.\n"


def test_broken_yaml_front_matter_does_not_raise_and_keeps_body() -> None:
    page = parse_page("---\ntitle: Setup: the hard way\ntags: [unclosed\n---\n# Heading\n\nBody.\n")
    assert page.front_matter == {}
    assert page.body == "# Heading\n\nBody.\n"
    # The unquoted colon breaks YAML, but the title line itself is still readable.
    assert page.title == "Setup: the hard way"


def test_broken_toml_front_matter_does_not_raise() -> None:
    page = parse_page("+++\ntitle = \n+++\n# From H1\n")
    assert page.front_matter == {}
    assert page.title == "From H1"
    assert page.body == "# From H1\n"


def test_dashes_around_prose_are_thematic_breaks_not_front_matter() -> None:
    text = "---\nJust a sentence\n---\n\nMore.\n"
    page = parse_page(text)
    assert page.front_matter == {}
    assert page.body == text


def test_unclosed_front_matter_fence_stays_in_body() -> None:
    text = "---\ntitle: x\n\n# Real title\n"
    page = parse_page(text)
    assert page.front_matter == {}
    assert page.body == text
    assert page.title == "Real title"


def test_bom_and_crlf_are_normalised() -> None:
    page = parse_page("\ufeff---\r\ntitle: T\r\n---\r\nline one\r\nline two\rthree\r\n")
    assert page.title == "T"
    assert page.body == "line one\nline two\nthree\n"


def test_title_falls_back_to_first_h1_then_sidebar_label_then_none() -> None:
    assert parse_page("Intro.\n\n## Not a title\n\nTitle Here\n==========\n").title == "Title Here"
    assert parse_page("# `code` *and* [link](x)\n").title == "code and link"
    assert parse_page("---\nsidebar_label: Short\n---\n## Only H2\n").title == "Short"
    page = parse_page("## Only H2\n\ntext\n")
    assert page.title is None
    assert page.description is None


def test_non_string_title_is_stringified_and_empty_title_ignored() -> None:
    assert parse_page("---\ntitle: 2024\n---\nx\n").title == "2024"
    assert parse_page("---\ntitle: ''\n---\n# H1\n").title == "H1"


# --- MDX ------------------------------------------------------------------------------------------


MDX_PAGE = md("""
    ---
    title: Tabs page
    ---
    import Tabs from '@theme/Tabs';
    import {
      TabItem,
    } from '@theme/TabItem';
    export const meta = {
      answer: 42,
    };

    <Intro>
    Atmos reads **stacks** from [the stacks folder](/core-concepts/stacks).
    </Intro>

    ## Install {/*install*/}

    <Tabs>
      <TabItem value="mac" label="macOS">

        #### Homebrew

        Run `brew install atmos` to install <Link to="/x">the binary</Link>.

        ```shell
        export PATH=$PATH:/opt/bin
        ```

      </TabItem>
    </Tabs>

    :::tip Pro Tip
    Prefer the *package manager*.
    :::

    ## Usage {#usage}

    Some text.
    """)


def test_mdx_import_and_export_paragraphs_are_removed() -> None:
    page = parse_page(MDX_PAGE, mdx=True)
    assert "import" not in page.body
    assert "export const" not in page.body
    assert "answer: 42" not in page.body
    # An `export` line inside a code fence is content, not ESM.
    assert "export PATH" in page.body
    assert page.body.startswith("\n<Intro>")
    assert page.mdx


def test_import_lines_are_kept_when_not_parsing_mdx() -> None:
    page = parse_page(MDX_PAGE)
    assert "import Tabs from '@theme/Tabs';" in page.body


def test_jsx_html_and_admonition_markup_are_stripped_from_plain() -> None:
    page = parse_page(MDX_PAGE, mdx=True)
    chunks = chunk_markdown(page.body, min_words=0, mdx=True)
    plain = "\n".join(c.plain for c in chunks)
    for markup in ("<", ">", "TabItem", "Intro", "{/*", "{#", ":::", "**", "/core-concepts", "value=", "=>"):
        assert markup not in plain
    for text in ("Atmos reads stacks from the stacks folder.", "Homebrew", "the binary", "Pro Tip"):
        assert text in plain
    assert "Prefer the package manager." in plain
    assert [c.heading_path for c in chunks] == [[], ["Install"], ["Usage"]]


def test_jsx_with_expression_attributes_is_stripped_from_paragraph_text() -> None:
    body = '<Player url={"https://v.example"} onEnd={() => go()} />Watch `<Player />` *now*.\n'
    (chunk,) = chunk_markdown(body, mdx=True)
    assert chunk.plain == "Watch <Player /> now."
    assert chunk.code == "<Player />"


def test_mdx_indented_jsx_children_are_markdown_not_code() -> None:
    body = parse_page(MDX_PAGE, mdx=True).body
    chunks = chunk_markdown(body, min_words=0, max_depth=4, mdx=True)
    assert ["Install", "Homebrew"] in [c.heading_path for c in chunks]
    homebrew = next(c for c in chunks if c.heading_path == ["Install", "Homebrew"])
    assert homebrew.code == "brew install atmos\nexport PATH=$PATH:/opt/bin"
    # As CommonMark, the same indentation makes an indented code block, so no heading is found.
    plain_md = chunk_markdown(body, min_words=0, max_depth=4)
    assert ["Install", "Homebrew"] not in [c.heading_path for c in plain_md]


# --- plain text and code --------------------------------------------------------------------------


def test_link_and_image_urls_are_absent_from_plain() -> None:
    body = md("""
        See [the guide](https://example.com/guide "Guide title") and [ref link][r].
        ![diagram of flow](img/flow.png) and <https://auto.example.org/x>.
        <img src="pic.png" alt="x"> &amp; done\\_here

        [r]: https://ref.example.net/page
        """)
    (chunk,) = chunk_markdown(body)
    assert "example" not in chunk.plain
    assert ".png" not in chunk.plain
    assert "See the guide and ref link." in chunk.plain
    assert "diagram of flow and ." in chunk.plain
    assert "& done_here" in chunk.plain


def test_emphasis_is_dropped_and_code_is_collected() -> None:
    body = md("""
        Use **bold**, _em_, ~~gone~~ and `inline()` here.

        ```python
        def f():
            return "*not emphasis*"
        ```

            indented code
        """)
    (chunk,) = chunk_markdown(body)
    assert "Use bold, em, gone and inline() here." in chunk.plain
    assert 'return "*not emphasis*"' in chunk.plain
    assert "```" not in chunk.plain
    assert chunk.code == 'inline()\ndef f():\n    return "*not emphasis*"\nindented code'


def test_chunk_without_code_has_empty_code() -> None:
    (chunk,) = chunk_markdown("Only *prose* here.\n")
    assert chunk.code == ""
    assert chunk.plain == "Only prose here."


def test_tables_contribute_cell_text() -> None:
    (chunk,) = chunk_markdown("| Name | Kind |\n| --- | --- |\n| `foo` | [bar](u) |\n")
    assert chunk.plain.split("\n") == ["Name", "Kind", "foo", "bar"]
    assert chunk.code == "foo"


# --- heading paths --------------------------------------------------------------------------------


def test_heading_paths_follow_nesting() -> None:
    body = md("""
        Preamble text.

        # Guide

        Intro.

        ## Install

        Install text.

        ### Linux

        Linux text.

        ## Configure

        Configure text.

        # Reference

        Ref text.
        """)
    chunks = chunk_markdown(body, min_words=0)
    assert [c.heading_path for c in chunks] == [
        [],
        ["Guide"],
        ["Guide", "Install"],
        ["Guide", "Install", "Linux"],
        ["Guide", "Configure"],
        ["Reference"],
    ]
    assert chunks[3].text == "### Linux\n\nLinux text.\n\n"
    assert chunks[3].plain == "Linux\nLinux text."
    assert_tiles(body, chunks)


def test_setext_headings_split_sections() -> None:
    body = "Top\n===\n\nA.\n\nSub *one*\n---------\n\nB.\n"
    chunks = chunk_markdown(body, min_words=0)
    assert [c.heading_path for c in chunks] == [["Top"], ["Top", "Sub one"]]
    assert chunks[1].text == "Sub *one*\n---------\n\nB.\n"


def test_headings_inside_code_fences_html_blocks_and_lists_do_not_split() -> None:
    body = md("""
        # Real

        ```bash
        # not a heading
        ## nor this
        ```

        ~~~
        # still code
        ~~~

        <div>
        # inside html
        </div>

        - # heading inside a list item
        """)
    chunks = chunk_markdown(body, min_words=0)
    assert len(chunks) == 1
    assert chunks[0].heading_path == ["Real"]
    assert "# not a heading" in chunks[0].code


def test_explicit_heading_ids_are_not_part_of_heading_text() -> None:
    chunks = chunk_markdown("## Setup {#setup}\n\nx\n\n## Run {/*run*/}\n\ny\n", min_words=0)
    assert [c.heading_path for c in chunks] == [["Setup"], ["Run"]]


def test_headings_deeper_than_max_depth_stay_in_their_section() -> None:
    body = "# A\n\na\n\n## B\n\nb\n\n### C\n\nc\n\n#### D\n\nd\n"
    assert [c.heading_path for c in chunk_markdown(body, min_words=0, max_depth=2)] == [["A"], ["A", "B"]]
    assert [c.heading_path for c in chunk_markdown(body, min_words=0, max_depth=6)] == [
        ["A"],
        ["A", "B"],
        ["A", "B", "C"],
        ["A", "B", "C", "D"],
    ]
    deep = chunk_markdown(body, min_words=0, max_depth=2)[1]
    assert deep.plain == "B\nb\nC\nc\nD\nd"


def test_admonition_headings_still_split() -> None:
    body = ":::note\n## Inside\n\ntext\n:::\n\nafter\n"
    chunks = chunk_markdown(body, min_words=0)
    assert [c.heading_path for c in chunks] == [[], ["Inside"]]
    assert_tiles(body, chunks)


# --- merging and splitting ------------------------------------------------------------------------


def test_small_sections_merge_into_the_next_with_common_path() -> None:
    body = f"# Page\n\n## Small A\n\n{words(5)}\n\n## Big B\n\n{words(100)}\n"
    chunks = chunk_markdown(body, min_words=60)
    assert len(chunks) == 1
    assert chunks[0].heading_path == ["Page"]
    assert chunks[0].text == body


def test_bare_heading_merges_into_child_and_takes_its_path() -> None:
    body = f"## Install\n\n### macOS\n\n{words(80)}\n\n### Linux\n\n{words(80)}\n"
    chunks = chunk_markdown(body, min_words=20)
    assert [c.heading_path for c in chunks] == [["Install", "macOS"], ["Install", "Linux"]]
    assert chunks[0].text.startswith("## Install\n\n### macOS")


def test_leading_html_comment_does_not_hide_the_first_heading() -> None:
    body = f"<!-- loio123 -->\n\n# Title\n\n{words(80)}\n"
    (chunk,) = chunk_markdown(body)
    assert chunk.heading_path == ["Title"]
    assert chunk.text == body


def test_tiny_trailing_section_joins_the_previous_one() -> None:
    body = f"## A\n\n{words(100)}\n\n## B\n\n{words(100)}\n\n## See also\n\nlinks\n"
    chunks = chunk_markdown(body, min_words=20)
    assert [c.heading_path for c in chunks] == [["A"], []]
    assert chunks[1].text.endswith("## See also\n\nlinks\n")


def test_oversized_section_splits_at_block_boundaries() -> None:
    paragraphs = [words(40, f"p{k}w") for k in range(30)]  # 1200 words
    body = "# Big\n\n" + "\n\n".join(paragraphs) + "\n"
    chunks = chunk_markdown(body, max_words=500, min_words=60)
    assert len(chunks) == 3
    assert all(c.heading_path == ["Big"] for c in chunks)
    assert all(c.words <= 500 for c in chunks)
    # Each piece starts at a paragraph, never inside one.
    assert all(c.text.startswith(("# Big", "p")) for c in chunks)
    for c in chunks:
        assert all(line == "" or line.startswith(("# Big", "p")) for line in c.text.split("\n"))
    assert_tiles(body, chunks)


def test_giant_code_block_is_kept_whole() -> None:
    code = "\n".join(f"line_{i} = {i}  # {words(10)}" for i in range(300))
    body = f"## Example\n\nLead in:\n\n```python\n{code}\n```\n\n{words(100)}\n"
    chunks = chunk_markdown(body, max_words=200, min_words=10)
    holding = [c for c in chunks if "```python" in c.text]
    assert len(holding) == 1
    assert holding[0].text.count("```") == 2
    # The short lead-in stays with the block it introduces.
    assert holding[0].text.startswith("## Example\n\nLead in:")
    assert holding[0].words > 200
    assert_tiles(body, chunks)


def test_oversized_list_splits_between_items() -> None:
    items = "\n".join(f"- {words(30, f'i{k}w')}" for k in range(40))  # 1200 words
    body = f"## List\n\n{items}\n"
    chunks = chunk_markdown(body, max_words=500)
    assert len(chunks) == 3
    for c in chunks:
        assert c.words <= 500
        assert all(line.startswith(("- ", "## List")) for line in c.text.splitlines() if line)
    assert_tiles(body, chunks)


def test_cjk_text_splits_into_reasonably_sized_chunks() -> None:
    sentence = "这是一个关于组件状态管理的句子。"  # 15 Han characters, no spaces
    paragraphs = "\n\n".join(sentence * 4 for _ in range(40))  # ~2400 Han characters
    body = f"# 状态\n\n{paragraphs}\n"
    chunks = chunk_markdown(body, max_words=500)
    assert 4 <= len(chunks) <= 6
    assert all(c.words <= 500 for c in chunks)
    assert all(len(c.text) < 1000 for c in chunks)


def test_korean_is_counted_by_spaces() -> None:
    (chunk,) = chunk_markdown("컴포넌트는 상태를 가질 수 있습니다.\n")
    assert chunk.words == 5


# --- edge cases -----------------------------------------------------------------------------------


def test_blank_body_gives_no_chunks() -> None:
    assert chunk_markdown("") == []
    assert chunk_markdown("\n \t\n\u3000\n") == []


def test_link_definitions_only_still_cover_the_body() -> None:
    body = "[a]: https://example.com\n"
    (chunk,) = chunk_markdown(body)
    assert chunk.text == body
    assert chunk.plain == ""


def test_chunk_texts_are_exact_slices_of_crlf_input() -> None:
    body = "# A\r\n\r\ntext a\r\n\r\n# B\rtext b\r\n"
    chunks = chunk_markdown(body, min_words=0)
    assert [c.text for c in chunks] == ["# A\r\n\r\ntext a\r\n\r\n", "# B\rtext b\r\n"]
    assert [(c.start_line, c.end_line) for c in chunks] == [(0, 4), (4, 6)]


def test_ideographic_space_paragraph_is_not_a_chunk_of_its_own() -> None:
    body = "# A\n\ntext\n\n# B\n\n\u3000\n"
    chunks = chunk_markdown(body, min_words=0, max_depth=0)
    assert_tiles(body, chunks)


def test_unclosed_markup_is_handled_in_linear_time() -> None:
    # Each of these would take minutes if a stripping pattern rescanned the rest of the text per match.
    # (Not "<![CDATA[": markdown-it's own inline HTML pattern is quadratic on unclosed CDATA.)
    for unit in ('<a "', "<a {", "<!x ", "<? ", "{/* ", "<!-- "):
        body = "text " + unit * 20_000 + "\n"
        # Over MAX_CHUNK_CHARS, so cut into pieces (tests/indexer/test_longblocks.py).
        chunks = chunk_markdown(body)
        assert "".join(c.text for c in chunks) == body
        assert chunks[0].plain.startswith("text")


def test_deep_nesting_does_not_raise() -> None:
    body = "> " * 200 + "deep\n" + "- " * 200 + "list\n" + "[" * 5000 + "\n"
    chunks = chunk_markdown(body)
    assert_tiles(body, chunks)


# --- properties -----------------------------------------------------------------------------------

_WORD = st.text(alphabet="abcdefghij xyz_*`[]()#<>!\\-|:", min_size=1, max_size=12)
_CJK_TEXT = st.text(alphabet="状态组件管理これはテスト컴포넌트", min_size=1, max_size=40)
_LINES = st.lists(st.one_of(_WORD, _CJK_TEXT), min_size=1, max_size=4).map(" ".join)

_FRAGMENTS = st.one_of(
    st.builds(lambda n, t: "#" * n + " " + t, st.integers(1, 6), _LINES),
    st.builds(lambda t, u: f"{t}\n{u * 3}", _LINES, st.sampled_from("=-")),
    _LINES,
    st.lists(_LINES, min_size=1, max_size=3).map("\n".join),
    st.builds(
        lambda f, body, close: f"{f}py\n# comment\n{body}\n## also code\n" + (f if close else ""),
        st.sampled_from(["```", "~~~", "````"]),
        _LINES,
        st.booleans(),
    ),
    st.lists(_LINES, min_size=1, max_size=4).map(lambda items: "\n".join(f"- {i}" for i in items)),
    st.builds(lambda t: f"1. item\n\n   ```\n   # in list\n   {t}\n   ```\n2. next", _LINES),
    st.builds(lambda t: f"> ```\n> # quoted code\n> {t}\n> ```", _LINES),
    st.builds(lambda t: f":::tip {t}\n# in admonition\n:::", _LINES),
    st.builds(lambda t: f"<div>\n# in html\n{t}\n</div>", _LINES),
    st.builds(lambda t: f"| a | b |\n| - | - |\n| {t} | x |", _LINES),
    st.builds(lambda t: f"    indented {t}\n    # code", _LINES),
    st.just(""),
    st.just("   "),
    st.text(max_size=30),
)
_BODIES = st.lists(
    st.tuples(_FRAGMENTS, st.sampled_from(["\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "\r"])), max_size=25
).map(lambda parts: "".join(fragment + sep for fragment, sep in parts))
# (max_depth, min_words, max_words, mdx); small sizes so that merging and splitting both happen.
_PARAMS = st.tuples(st.integers(0, 6), st.integers(0, 30), st.integers(1, 40), st.booleans())
Params = tuple[int, int, int, bool]


def _chunk(body: str, params: Params) -> list[Chunk]:
    max_depth, min_words, max_words, mdx = params
    return chunk_markdown(body, max_depth=max_depth, min_words=min_words, max_words=max_words, mdx=mdx)


def _walk(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    for tok in tokens:
        out.append(tok)
        if tok.children:
            out.extend(_walk(tok.children))
    return out


@settings(max_examples=300, deadline=None)
@given(_BODIES, _PARAMS)
def test_chunks_reassemble_the_body_exactly(body: str, params: Params) -> None:
    chunks = _chunk(body, params)
    if body.strip():
        assert "".join(c.text for c in chunks) == body
    else:
        assert chunks == []


@settings(max_examples=300, deadline=None)
@given(_BODIES, _PARAMS)
def test_no_chunk_is_blank(body: str, params: Params) -> None:
    for c in _chunk(body, params):
        assert c.text.strip() != ""


@settings(max_examples=300, deadline=None)
@given(_BODIES, _PARAMS)
def test_chunk_line_ranges_tile_the_body(body: str, params: Params) -> None:
    chunks = _chunk(body, params)
    if not body.strip():
        return
    assert_tiles(body, chunks)
    for c in chunks:
        assert line_count(c.text) == c.end_line - c.start_line


@settings(max_examples=300, deadline=None)
@given(_BODIES, _PARAMS)
def test_fenced_code_blocks_are_never_split(body: str, params: Params) -> None:
    chunks = _chunk(body, params)
    parser = _MDX if params[3] else _MD
    for tok in _walk(parser.parse(body, {})):
        if tok.type == "fence" and tok.map:
            lo, hi = tok.map
            assert any(c.start_line <= lo and hi <= c.end_line for c in chunks), (tok.map, chunks)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.booleans())
def test_parse_page_never_raises(text: str, mdx: bool) -> None:
    page = parse_page(text, mdx=mdx)
    assert isinstance(page.front_matter, dict)
    chunks = chunk_markdown(page.body, mdx=mdx)
    if page.body.strip():
        assert "".join(c.text for c in chunks) == page.body


_FRONT_MATTER_LINES = st.sampled_from(
    ["---", "+++", "...", "a: b", ": [", "title = 1", "import x", "", "# h"]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_FRONT_MATTER_LINES, max_size=8).map("\n".join))
def test_parse_page_never_raises_on_front_matter_like_text(text: str) -> None:
    page = parse_page(text)
    assert text.endswith(page.body)
    mdx_page = parse_page(text, mdx=True)
    assert set(mdx_page.body.split("\n")) <= {"", *text.split("\n")}


def test_a_chunk_records_the_explicit_id_of_the_deepest_heading_of_its_path_that_has_one() -> None:
    body = md(
        f"""
        # Guide {{#guide}}

        {words(10)}

        ## Install {{#install .cls}}

        ## macOS

        {words(10)}

        ## Usage {{#usage}}

        {words(10)}

        ### `run(x)` {{#mod.run}}

        {words(10)}
        """
    )
    chunks = chunk_markdown(body, min_words=5, max_words=100)
    got = [(c.heading_path, c.anchor) for c in chunks]
    assert got == [
        (["Guide"], "guide"),
        # The bare heading ## Install joins what follows it and takes its path: macOS has no id, so
        # the chunk cites the nearest heading above it that has one.
        (["Guide", "macOS"], "guide"),
        # An API entry stays one with an id beside its code span: Usage's lead joins it (rule 3).
        (["Guide", "Usage", "run(x)"], "mod.run"),
    ]


def test_anchors_given_by_line_name_headings_without_an_id_in_their_text() -> None:
    body = md(
        f"""
        # Guide

        {words(10)}

        ## Install

        {words(10)}
        """
    )
    chunks = chunk_markdown(body, min_words=5, max_words=100, anchors={4: "install"})
    assert [(c.heading_path, c.anchor) for c in chunks] == [
        (["Guide"], ""),
        (["Guide", "Install"], "install"),
    ]


def test_a_chunk_under_no_heading_with_an_id_records_none() -> None:
    body = md(
        f"""
        {words(10)}

        # Guide

        {words(10)}
        """
    )
    assert [c.anchor for c in chunk_markdown(body, min_words=5, max_words=100)] == ["", ""]
