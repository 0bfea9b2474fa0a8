"""Unit and property tests for the lenient llms.txt parser and renderer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from docbundle.indexer.pipeline.llmstxt import (
    ConformanceIssue,
    LlmsLink,
    LlmsSection,
    LlmsTxt,
    parse_llms_txt,
    render_llms_txt,
)
from docbundle.indexer.pipeline.llmstxt.links import (
    clean_link_text,
    collapse,
    drop_mdx_comments,
    heading_text,
    unescape,
)
from hypothesis import given, settings
from hypothesis import strategies as st

BASE = "https://docs.example.org/v2/llms.txt"


def codes(doc: LlmsTxt) -> list[str]:
    return [issue.code for issue in doc.issues]


def issue(doc: LlmsTxt, code: str) -> ConformanceIssue:
    found = [i for i in doc.issues if i.code == code]
    assert len(found) == 1, doc.issues
    return found[0]


def triples(doc: LlmsTxt) -> list[tuple[str, str, str]]:
    return [(link.title, link.url, link.notes) for link in doc.links]


def parse_full(text: str, base_url: str | None = None) -> LlmsTxt:
    """``text`` parsed, checked to be a full llms.txt (its pages inline)."""
    doc = parse_llms_txt(text, base_url)
    assert doc.kind == "full"
    return doc


def pages(doc: LlmsTxt) -> list[tuple[str, str]]:
    """Title and URL of each inline page."""
    return [(d.title, d.url) for d in doc.inline_docs]


# ------------------------------------------------------------------------------------------------ structure

CANONICAL = """\
# FastHTML

> FastHTML is a python library which brings together Starlette, Uvicorn, HTMX, and fastcore.

Important notes:

- Although parts of its API are inspired by FastAPI, it is *not* compatible with FastAPI syntax

## Docs

- [FastHTML quick start](https://fastht.ml/docs/tutorials/quickstart_for_web_devs.html.md): A brief overview
- [HTMX reference](https://github.com/bigskysoftware/htmx/blob/master/www/reference.md): All attributes

## Optional

- [Starlette full documentation](https://gist.githubusercontent.com/starlette.md): A subset
"""


def test_canonical_file_yields_title_summary_details_and_sections() -> None:
    doc = parse_llms_txt(CANONICAL)
    assert doc.kind == "index"
    assert doc.title == "FastHTML"
    assert doc.summary == (
        "FastHTML is a python library which brings together Starlette, Uvicorn, HTMX, and fastcore."
    )
    assert doc.details == (
        "Important notes:\n\n"
        "- Although parts of its API are inspired by FastAPI, it is *not* compatible with FastAPI syntax"
    )
    assert [(s.name, s.optional) for s in doc.sections] == [("Docs", False), ("Optional", True)]
    assert doc.sections[0].links[1] == LlmsLink(
        title="HTMX reference",
        url="https://github.com/bigskysoftware/htmx/blob/master/www/reference.md",
        notes="All attributes",
        section="Docs",
        line=12,
    )
    assert doc.issues == []
    assert doc.inline_docs == []


def test_links_property_lists_every_section_in_file_order() -> None:
    doc = parse_llms_txt(CANONICAL)
    assert [link.title for link in doc.links] == [
        "FastHTML quick start",
        "HTMX reference",
        "Starlette full documentation",
    ]
    assert [link.optional for link in doc.links] == [False, False, True]


def test_optional_section_is_case_insensitive_and_trimmed() -> None:
    doc = parse_llms_txt(
        "# T\n\n##   OPTIONAL  \n\n- [a](https://a.example/)\n\n## Optional extras\n- [b](b)\n"
    )
    assert [(s.name, s.optional) for s in doc.sections] == [("OPTIONAL", True), ("Optional extras", False)]
    assert doc.links[0].optional is True
    assert doc.links[0].section == "OPTIONAL"


def test_multiline_summary_keeps_its_line_breaks() -> None:
    doc = parse_llms_txt("# T\n\n> first line\n> second line\n>\n> new paragraph\n\n## S\n")
    assert doc.summary == "first line\nsecond line\n\nnew paragraph"


def test_blockquote_after_other_content_is_details_not_summary() -> None:
    doc = parse_llms_txt("# T\n\nSome text.\n\n> a quote\n")
    assert doc.summary is None
    assert doc.details == "Some text.\n\n> a quote"


def test_summary_without_blank_line_after_title() -> None:
    doc = parse_llms_txt("# Vest 6\n> Form validation.\n\n- [Docs](/llms-full.txt)\n")
    assert doc.summary == "Form validation."
    assert triples(doc) == [("Docs", "/llms-full.txt", "")]


# ------------------------------------------------------------------------------------------- link entries


def test_note_separators_colon_dash_em_dash_and_none() -> None:
    doc = parse_llms_txt(
        "# T\n## S\n"
        "- [a](https://x/a): colon note\n"
        "- [b](https://x/b) - dash note\n"
        "- [c](https://x/c) — em dash note\n"
        "- [d](https://x/d) – en dash note\n"
        "- [e](https://x/e)\n"
        "- [f](https://x/f) (beta) trailing words\n"
    )
    assert [link.notes for link in doc.links] == [
        "colon note",
        "dash note",
        "em dash note",
        "en dash note",
        "",
        "(beta) trailing words",
    ]


def test_star_plus_and_ordered_bullets_are_entries() -> None:
    doc = parse_llms_txt(
        "# T\n## S\n* [a](https://x/a)\n+ [b](https://x/b)\n1. [c](https://x/c)\n2) [d](https://x/d)\n"
    )
    assert [link.title for link in doc.links] == ["a", "b", "c", "d"]


def test_angle_bracket_url_may_contain_spaces() -> None:
    doc = parse_llms_txt("# T\n## S\n- [Spec](<https://x/my file.md>): the spec\n")
    assert triples(doc) == [("Spec", "https://x/my file.md", "the spec")]


def test_unbracketed_url_with_spaces_is_kept_as_written() -> None:
    doc = parse_llms_txt("# T\n## S\n- [Web UI](https://x/Morphir Web UI/): ui\n")
    assert triples(doc) == [("Web UI", "https://x/Morphir Web UI/", "ui")]


def test_link_title_attribute_in_quotes_is_not_part_of_the_url() -> None:
    doc = parse_llms_txt("# T\n## S\n- [a](https://x/a \"Title A\"): n\n- [b](https://x/b 'Title B')\n")
    assert [link.url for link in doc.links] == ["https://x/a", "https://x/b"]


def test_titles_with_nested_brackets_escapes_and_code() -> None:
    doc = parse_llms_txt(
        "# T\n## S\n- [Foo [beta]](https://x/foo)\n- [a \\] b \\[c](https://x/ab)\n- [`list[int]`](https://x/l)\n"
    )
    assert [link.title for link in doc.links] == ["Foo [beta]", "a ] b [c", "`list[int]`"]


def test_url_with_balanced_parentheses() -> None:
    doc = parse_llms_txt("# T\n## S\n- [Foo](https://en.wikipedia.org/wiki/Foo_(bar)): article\n")
    assert triples(doc) == [("Foo", "https://en.wikipedia.org/wiki/Foo_(bar)", "article")]


def test_wrapped_list_item_continues_notes() -> None:
    doc = parse_llms_txt(
        "# T\n## S\n- [Guide](guide.md) — the contract. Use\n  the sync endpoint.\n"
        "- [Ref](ref.md): lazily\nwrapped note\n- [`f()`](f.md)\n  : Fit a model\n"
    )
    assert [link.notes for link in doc.links] == [
        "the contract. Use the sync endpoint.",
        "lazily wrapped note",
        "Fit a model",
    ]


def test_several_links_in_one_item_share_the_notes() -> None:
    doc = parse_llms_txt("# T\n## S\n- [`a()`](a.md)\n  [`b()`](a.md)\n  : Create a data frame\n")
    assert triples(doc) == [
        ("`a()`", "a.md", "Create a data frame"),
        ("`b()`", "a.md", "Create a data frame"),
    ]


def test_table_rows_whose_first_cell_is_a_link_are_entries() -> None:
    doc = parse_llms_txt(
        "# T\n## Source\n\n| File | Description |\n|---|---|\n| [src/a.ts](https://g/a.ts) | Entry point |\n"
    )
    assert triples(doc) == [("src/a.ts", "https://g/a.ts", "Entry point")]
    assert doc.sections[0].text == "| File | Description |\n|---|---|"


def test_badge_links_whose_text_is_only_an_image_are_skipped() -> None:
    doc = parse_llms_txt(
        "# T\n## S\n[![](https://badge/x.svg)](https://cran.example/x)\n- [![logo](l.png) Docs](https://x/docs)\n"
    )
    assert triples(doc) == [("Docs", "https://x/docs", "")]


def test_empty_url_is_reported_and_skipped() -> None:
    doc = parse_llms_txt("# T\n## S\n- [Latest]()\n- [ok](https://x/ok)\n")
    assert [link.title for link in doc.links] == ["ok"]
    assert issue(doc, "empty-link-url").line == 3


def test_empty_title_is_derived_from_the_url_and_reported() -> None:
    doc = parse_llms_txt("# T\n## S\n- [](https://x/docs/install.md)\n")
    assert triples(doc) == [("install.md", "https://x/docs/install.md", "")]
    assert issue(doc, "empty-link-title").line == 3


def test_bare_url_items_and_lines_get_titles_from_the_last_path_segment() -> None:
    doc = parse_llms_txt(
        "# T\n## S\n- https://x.org/docs/getting-started/\n- <https://x.org/api%20ref>\n\nhttps://x.org/\n"
    )
    assert triples(doc) == [
        ("getting-started", "https://x.org/docs/getting-started/", ""),
        ("api ref", "https://x.org/api%20ref", ""),
        ("x.org", "https://x.org/", ""),
    ]
    assert codes(doc).count("bare-url") == 3


def test_label_colon_url_lines_use_the_label_as_title() -> None:
    doc = parse_llms_txt(
        "# T\n\nDocumentation: https://x.org/docs/\n官方站点：https://cn.x.org/\n\n## Contact\n"
        "- **Web:** https://x.org (since 2010)\n- GitHub Repository: https://github.com/x/y.\n"
        "- Email: hola@x.org\n"
    )
    assert triples(doc) == [
        ("Documentation", "https://x.org/docs/", ""),
        ("官方站点", "https://cn.x.org/", ""),
        ("Web", "https://x.org", "(since 2010)"),
        ("GitHub Repository", "https://github.com/x/y", ""),
    ]
    assert [link.section for link in doc.links] == ["", "", "Contact", "Contact"]


def test_url_in_running_prose_is_not_an_entry() -> None:
    doc = parse_llms_txt(
        "# T\n## S\nThe complete schema for all the configuration options is available at: https://x/s.ts\n"
    )
    assert doc.links == []
    assert "text-in-section" in codes(doc)


def test_markdown_links_inside_section_paragraphs_are_extracted() -> None:
    doc = parse_llms_txt(
        "# T\n\nSee the [spec](https://llmstxt.org/) first.\n\n## Guides\n"
        "Read [the guide](guide.md) and\n[the API](<api ref.md>) too.\n\n- [x](x.md)\n"
    )
    # links in free details prose are commentary; in a section they are kept
    assert triples(doc) == [("the guide", "guide.md", ""), ("the API", "api ref.md", ""), ("x", "x.md", "")]
    assert doc.sections[0].text == "Read [the guide](guide.md) and\n[the API](<api ref.md>) too."
    assert issue(doc, "text-in-section").line == 6


def test_links_inside_code_spans_are_not_links() -> None:
    doc = parse_llms_txt("# T\n## S\nUse `[x](y)` syntax, not [z](https://z/).\n")
    assert triples(doc) == [("z", "https://z/", "")]


def test_non_link_list_items_in_a_section_are_text() -> None:
    doc = parse_llms_txt("# T\n## Features\n- Fast\n- Small\n\n- [Docs](d.md)\n")
    assert doc.sections[0].text == "- Fast\n- Small"
    assert triples(doc) == [("Docs", "d.md", "")]


def test_cjk_titles_and_sections() -> None:
    doc = parse_llms_txt(
        "# 1Panel 文档\n\n> 运维面板\n\n## 官方入口\n\n- [文档首页](https://1panel.cn/docs/)：首页\n"
    )
    assert doc.title == "1Panel 文档"
    assert doc.sections[0].name == "官方入口"
    assert triples(doc) == [("文档首页", "https://1panel.cn/docs/", "首页")]


def test_mdx_comments_are_dropped_from_link_titles_and_headings() -> None:
    # The Korean, Chinese and Japanese React docs' llms.txt copy heading ids into sixteen link texts.
    doc = parse_llms_txt(
        "# React {/*top*/}\n\n## API {/*api*/}\n\n"
        "- [레퍼런스 {/*reference*/}](pages/form.md): 내장 브라우저 컴포넌트\n"
        "- [参考 {/*reference*/}](pages/input.md)\n"
        "- [Use{/*x*/}State  {/*y*/} hook](pages/state.md)\n"
        "- [`{/*`](pages/open.md)\n"
    )
    assert doc.title == "React" and doc.sections[0].name == "API"
    assert triples(doc) == [
        ("레퍼런스", "pages/form.md", "내장 브라우저 컴포넌트"),
        ("参考", "pages/input.md", ""),
        ("UseState hook", "pages/state.md", ""),
        ("`{/*`", "pages/open.md", ""),  # no comment: an opener alone stays
    ]


def _has_comment(text: str) -> bool:
    """Whether ``text`` holds ``{/*`` with a ``*/}`` after it (not overlapping it)."""
    start = text.find("{/*")
    return start >= 0 and text.find("*/}", start + 3) >= 0


COMMENTISH = st.lists(
    st.sampled_from(["{", "/", "*", "}", "{/*", "*/}", "\\", "a", "状", " ", "\n", "![i](u)", "[a](u)", "#"]),
    max_size=40,
).map("".join)


@given(COMMENTISH)
@settings(max_examples=400)
def test_dropping_mdx_comments_leaves_none_is_idempotent_and_keeps_text_without_them(text: str) -> None:
    dropped = drop_mdx_comments(text)
    assert not _has_comment(dropped)
    assert drop_mdx_comments(dropped) == dropped
    if not _has_comment(text):
        assert dropped == text
    for title in (clean_link_text(text), heading_text(text)):
        assert not _has_comment(title)
        assert title == collapse(title)  # the whitespace a comment leaves is collapsed too
    if not _has_comment(text) and "\\" not in text:
        assert clean_link_text(text) == collapse(unescape(text.replace("![i](u)", "")))


def test_dropping_mdx_comments_is_linear_in_nested_openers() -> None:
    # Each comment dropped joins the next one's halves: ``{/`` * n + ``*x*/}`` * n drops to nothing (a pass
    # per comment, as a regular expression applied until nothing changes, would take n passes).
    n = 100_000
    assert drop_mdx_comments("{/" * n + "*x*/}" * n) == ""
    assert heading_text("Title " + "{/" * n + "*x*/}" * n) == "Title"


# --------------------------------------------------------------------------------------------- headings


def test_h3_under_h2_is_named_with_the_h2_path() -> None:
    doc = parse_llms_txt(
        "# T\n## Build\n- [a](a)\n### Reference\n- [b](b)\n#### Deep\n- [c](c)\n## Run\n- [d](d)\n"
    )
    assert [s.name for s in doc.sections] == ["Build", "Build / Reference", "Build / Reference / Deep", "Run"]
    assert [link.section for link in doc.links] == [
        "Build",
        "Build / Reference",
        "Build / Reference / Deep",
        "Run",
    ]
    assert "h3-as-section" not in codes(doc)


def test_h3_under_optional_h2_is_optional() -> None:
    doc = parse_llms_txt("# T\n## Optional\n### Extras\n- [a](a)\n")
    assert doc.links[0].section == "Optional / Extras"
    assert doc.links[0].optional is True


def test_h3_sections_without_any_h2_are_reported() -> None:
    doc = parse_llms_txt("# T\n\n### Core\n- [a](a)\n### API\n- [b](b)\n")
    assert [s.name for s in doc.sections] == ["Core", "API"]
    assert issue(doc, "h3-as-section").line == 3


def test_links_before_the_first_section_have_an_empty_section_name() -> None:
    doc = parse_llms_txt("# T\n\n- [Full](https://x/llms-full.txt)\n\n## Docs\n- [a](https://x/a)\n")
    assert doc.sections[0] == LlmsSection(
        name="", links=[LlmsLink(title="Full", url="https://x/llms-full.txt", line=3)]
    )
    assert issue(doc, "link-outside-section").line == 3


def test_file_without_sections_is_reported_once() -> None:
    doc = parse_llms_txt("# https://docs.x.ai/ llms.txt\n\n- [A](https://x/a): a\n- [B](https://x/b): b\n")
    assert doc.title == "https://docs.x.ai/ llms.txt"
    assert [link.section for link in doc.links] == ["", ""]
    assert codes(doc) == ["no-sections"]


def test_several_h1_later_ones_act_as_sections() -> None:
    doc = parse_llms_txt(
        "# Disclaimer\n\nProse.\n\n# Package index\n\n## Fitting\n- [f](f.md)\n\n# Articles\n- [a](a.md)\n"
    )
    assert doc.title == "Disclaimer"
    assert [s.name for s in doc.sections] == ["Package index", "Package index / Fitting", "Articles"]
    assert issue(doc, "multiple-h1").line == 5


def test_h1_headings_directly_followed_by_links_are_sections_without_title() -> None:
    doc = parse_llms_txt("\n# Guides\n\n- [a](https://x/a)\n\n# Examples\n- [b](https://x/b)\n")
    assert doc.title is None
    assert [s.name for s in doc.sections] == ["Guides", "Examples"]
    assert issue(doc, "h1-as-section").line == 2
    assert "no-h1" not in codes(doc)


def test_missing_h1_is_reported() -> None:
    doc = parse_llms_txt("## Docs\n- [a](https://x/a)\n")
    assert doc.title is None
    assert issue(doc, "no-h1").line == 1
    assert [s.name for s in doc.sections] == ["Docs"]


def test_heading_markup_is_cleaned() -> None:
    doc = parse_llms_txt(
        '# **Title** #\n## Agents [¶](https://x/#agents "Permanent link")\n## [Get started](#get-started)\n'
        "### **2\\. Setup**\n"
    )
    assert doc.title == "Title"
    assert [s.name for s in doc.sections] == ["Agents", "Get started", "Get started / 2. Setup"]


def test_autolink_in_a_heading_keeps_its_url() -> None:
    doc = parse_llms_txt("# Docs for <https://docs.x.ai/>\n")
    assert doc.title == "Docs for https://docs.x.ai/"


def test_headings_inside_backtick_and_tilde_fences_do_not_count() -> None:
    doc = parse_llms_txt(
        "# T\n\n```bash\n# install\n## not a section\n- [x](https://x/)\n```\n\n"
        "~~~~md\n## also not\n```\n~~~~\n\n## Real\n- [a](https://x/a)\n"
    )
    assert [s.name for s in doc.sections] == ["Real"]
    assert triples(doc) == [("a", "https://x/a", "")]
    assert "```bash\n# install" in doc.details


def test_unclosed_fence_is_reported_and_swallows_the_rest() -> None:
    doc = parse_llms_txt("# T\n## S\n```\n## hidden\n- [a](a)\n")
    assert [s.name for s in doc.sections] == ["S"]
    assert doc.links == []
    assert issue(doc, "unclosed-fence").line == 3


def test_content_before_the_title_is_reported() -> None:
    doc = parse_llms_txt("<SYSTEM>full docs</SYSTEM>\n\n# Hono\n")
    assert doc.title == "Hono"
    assert issue(doc, "text-before-h1").line == 1


def test_leading_front_matter_is_skipped_in_an_index() -> None:
    doc = parse_llms_txt("---\ntitle: X\n---\n# X\n\n## S\n- [a](https://x/a)\n")
    assert doc.title == "X"
    assert doc.details == ""
    assert "front-matter" in codes(doc)


# ------------------------------------------------------------------------------------------ URLs


def test_relative_links_resolve_against_http_base_and_are_reported_once() -> None:
    doc = parse_llms_txt("# T\n## S\n- [a](/docs/a)\n- [b](b.md)\n- [c](../c.md)\n- [d](#anchor)\n", BASE)
    assert [link.url for link in doc.links] == [
        "https://docs.example.org/docs/a",
        "https://docs.example.org/v2/b.md",
        "https://docs.example.org/c.md",
        "https://docs.example.org/v2/llms.txt#anchor",
    ]
    assert issue(doc, "relative-link").line == 3


def test_relative_links_resolve_against_file_base() -> None:
    doc = parse_llms_txt("# T\n## S\n- [a](guides/a.md)\n", "file:///srv/repo/docs/llms.txt")
    assert doc.links[0].url == "file:///srv/repo/docs/guides/a.md"


def test_relative_links_stay_as_written_without_base() -> None:
    doc = parse_llms_txt("# T\n## S\n- [a](guides/a.md)\n- [b](https://x/b)\n")
    assert [link.url for link in doc.links] == ["guides/a.md", "https://x/b"]
    assert "relative-link" in codes(doc)


def test_absolute_links_produce_no_relative_issue() -> None:
    doc = parse_llms_txt("# T\n## S\n- [a](https://x/a)\n- [m](mailto:a@x.org)\n", BASE)
    assert "relative-link" not in codes(doc)


def test_malformed_url_does_not_break_resolution() -> None:
    doc = parse_llms_txt("# T\n## S\n- [a](//[broken/x)\n", BASE)
    assert doc.links[0].title == "a"


# ----------------------------------------------------------------------------------- encodings & oddities


def test_crlf_line_endings_and_bom() -> None:
    doc = parse_llms_txt("\ufeff# T\r\n\r\n> S\r\n\r\n## D\r\n- [a](https://x/a): n\r\n")
    assert (doc.title, doc.summary) == ("T", "S")
    assert triples(doc) == [("a", "https://x/a", "n")]
    assert "bom" in codes(doc)
    assert "crlf-line-endings" in codes(doc)


def test_missing_trailing_newline_is_reported_on_the_last_line() -> None:
    doc = parse_llms_txt("# T\n## S\n- [a](https://x/a)")
    assert triples(doc) == [("a", "https://x/a", "")]
    assert issue(doc, "missing-trailing-newline").line == 3


def test_empty_and_whitespace_only_input() -> None:
    for text in ("", "   ", "\n\n\t\n"):
        doc = parse_llms_txt(text)
        assert (doc.title, doc.sections, doc.inline_docs, doc.kind) == (None, [], [], "index")
        assert codes(doc) == ["empty-file", "no-h1"]


def test_nul_and_control_characters_do_not_break_parsing() -> None:
    doc = parse_llms_txt("# T\x00itle\n## S\x01\n- [a\x00](https://x/\x7f)\n\x0b\x0c\x1c\u2028\n")
    assert doc.title == "T\x00itle"
    assert len(doc.links) == 1
    assert "nul-character" in codes(doc)


# --------------------------------------------------------------------------------------- full detection


def _prose(words: int, seed: str) -> str:
    return " ".join(f"{seed}{i % 17}" for i in range(words))


def test_source_lines_after_h1_split_pages() -> None:
    text = (
        "# Intuition - Complete Documentation\n\n> Everything.\n\n## Routing\n\n- SDK: https://x/sdk/\n\n"
        f"# Contribution Guidelines\n\nSource: https://x/docs/contrib\n\n{_prose(50, 'c')}\n\n"
        "## General\n\nMore.\n\n"
        f"# Farcaster Frames\n\nSource: /docs/frames\n\n{_prose(50, 'f')}\n"
    )
    doc = parse_full(text, BASE)
    assert doc.title == "Intuition - Complete Documentation"
    assert doc.summary == "Everything."
    assert triples(doc) == [("SDK", "https://x/sdk/", "")]
    assert [(d.title, d.url, d.line) for d in doc.inline_docs] == [
        ("Contribution Guidelines", "https://x/docs/contrib", 9),
        ("Farcaster Frames", "https://docs.example.org/docs/frames", 19),
    ]
    first = doc.inline_docs[0].text
    assert first.startswith("# Contribution Guidelines\n\nSource: https://x/docs/contrib\n")
    assert first.endswith("## General\n\nMore.")


def test_title_heading_directly_above_a_source_line_also_opens_the_first_page() -> None:
    text = (
        f"# Zod\n\nSource: https://zod.dev/basics\n\n{_prose(30, 'a')}\n\n"
        f"# Errors\n\nSource: https://zod.dev/errors\n\n{_prose(30, 'b')}\n"
    )
    doc = parse_full(text)
    assert (doc.title, doc.details) == ("Zod", "")
    assert [(d.title, d.url, d.line) for d in doc.inline_docs] == [
        ("Zod", "https://zod.dev/basics", 1),
        ("Errors", "https://zod.dev/errors", 7),
    ]


def test_source_line_before_the_page_heading_starts_the_page() -> None:
    text = (
        "# Drizzle\n\n> ORM.\n\nSource: https://orm.x/docs/arktype\n\nimport Npm from 'npm';\n\n"
        f"# drizzle-arktype\n\n{_prose(30, 'a')}\n\n\nSource: https://orm.x/docs/column-types/mysql\n\n"
        f"## bigint\n\n{_prose(30, 'b')}\n"
    )
    doc = parse_full(text)
    assert (doc.title, doc.summary) == ("Drizzle", "ORM.")
    assert pages(doc) == [
        ("drizzle-arktype", "https://orm.x/docs/arktype"),
        ("mysql", "https://orm.x/docs/column-types/mysql"),
    ]
    assert doc.inline_docs[0].text.startswith("Source: https://orm.x/docs/arktype\n\nimport Npm")


def test_quoted_source_markers_and_the_title_block_marker() -> None:
    text = (
        "# Smithers\n\n> Workflows in JSX.\n> Source: https://smithers.sh\n> GitHub: https://github.com/x\n\n"
        "---\n\n## Introduction\n\n> Deterministic runs.\n> Source: https://smithers.sh/introduction\n\n"
        f"{_prose(40, 'i')}\n\n---\n\n## Installation\n\n> Install it.\n> Source: https://smithers.sh/installation\n\n"
        f"{_prose(40, 'n')}\n"
    )
    doc = parse_full(text)
    assert doc.title == "Smithers"
    assert doc.summary == "Workflows in JSX.\nSource: https://smithers.sh\nGitHub: https://github.com/x"
    assert pages(doc) == [
        ("Introduction", "https://smithers.sh/introduction"),
        ("Installation", "https://smithers.sh/installation"),
    ]


def test_front_matter_pages_with_long_dash_delimiters() -> None:
    rule = "-" * 80
    text = (
        "# Next.js Documentation\n\n@doc-version: >=15.0.0\n\n"
        f'{rule}\ntitle: "Getting Started"\ndescription: "Learn it."\nsource: "https://nextjs.org/docs/gs"\n{rule}\n\n'
        f"# Getting Started\n\n{_prose(30, 'g')}\n\n"
        f'{rule}\ntitle: "Installation"\nsource: "https://nextjs.org/docs/install"\n{rule}\n\n'
        "# Installation\n\n```mdx\n---\ntitle: My Post\n---\n```\n"
    )
    doc = parse_full(text)
    assert (doc.title, doc.details) == ("Next.js Documentation", "@doc-version: >=15.0.0")
    assert [(d.title, d.url, d.description) for d in doc.inline_docs] == [
        ("Getting Started", "https://nextjs.org/docs/gs", "Learn it."),
        ("Installation", "https://nextjs.org/docs/install", ""),
    ]
    assert doc.inline_docs[0].text.startswith("# Getting Started")
    assert doc.inline_docs[1].text.endswith("---\ntitle: My Post\n---\n```")


def test_front_matter_closes_a_runaway_fence_and_glued_openers_count() -> None:
    text = (
        '---\nurl: "https://adk.dev/"\ntitle: "ADK"\n---\n\n# Agent Development Kit\n\n'
        "````\nan unbalanced fence opener\n\nBack to top---\n"
        'url: "https://adk.dev/agents/"\ntitle: "Agents - ADK"\n---\n\n# Agents\n\nText.\n\nBack to top---\n'
        'url: "https://adk.dev/tools/"\ntitle: "Tools - ADK"\n---\n\n# Tools\n'
    )
    doc = parse_full(text)
    assert doc.title is None
    assert "no-h1" in codes(doc)
    assert pages(doc) == [
        ("ADK", "https://adk.dev/"),
        ("Agents - ADK", "https://adk.dev/agents/"),
        ("Tools - ADK", "https://adk.dev/tools/"),
    ]
    assert doc.inline_docs[0].text.endswith("an unbalanced fence opener\n\nBack to top")
    assert doc.inline_docs[1].text == "# Agents\n\nText.\n\nBack to top"


def test_front_matter_examples_inside_code_blocks_do_not_split_an_index() -> None:
    example = "```mdx\n---\ntitle: Post\n---\n```\n"
    text = f"# Blog kit\n\n## Docs\n- [Posts](https://x/posts)\n\n{example}\n{example}"
    doc = parse_llms_txt(text)
    assert doc.kind == "index"
    assert triples(doc) == [("Posts", "https://x/posts", "")]


def test_doc_wrappers_from_llms_txt2ctx() -> None:
    text = (
        '<project title="llms.txt" summary="x">> A proposal for LLM-friendly content.'
        '<docs><doc title="llms.txt proposal" desc="The proposal"># The /llms.txt file\n\nBody one.\n'
        '</doc><doc title="ed demo" desc="A &amp; B" url="ed.md"># ed\n\nBody two.</doc></docs>'
        '<optional><doc title="Extra" desc="more">Extra body</doc></optional></project>\n'
    )
    doc = parse_full(text, BASE)
    assert (doc.title, doc.summary) == ("llms.txt", "A proposal for LLM-friendly content.")
    assert [(d.title, d.section, d.description, d.url) for d in doc.inline_docs] == [
        ("llms.txt proposal", "docs", "The proposal", None),
        ("ed demo", "docs", "A & B", "https://docs.example.org/v2/ed.md"),
        ("Extra", "optional", "more", None),
    ]
    assert doc.inline_docs[0].text == "# The /llms.txt file\n\nBody one."


def test_doc_wrapper_example_inside_a_code_block_keeps_an_index() -> None:
    text = '# ctx tool\n\n## Docs\n- [CLI](https://x/cli)\n\n```xml\n<doc title="a">body</doc>\n```\n'
    doc = parse_llms_txt(text)
    assert doc.kind == "index"
    assert doc.inline_docs == []
    assert triples(doc) == [("CLI", "https://x/cli", "")]


def test_skip_to_content_lines_mark_scraped_pages() -> None:
    text = (
        "# https://docs.litellm.ai/ llms-full.txt\n\n## LiteLLM Overview\n"
        "[Skip to main content](https://docs.litellm.ai/#__docusaurus_skipToContent_fallback)\n\n"
        f"# LiteLLM - Getting Started\n\n{_prose(40, 'o')}\n\n## Completion Guide\n"
        "[Skip to main content](https://docs.litellm.ai/completion/input#__docusaurus)\n\n"
        f"# completion()\n\n{_prose(40, 'c')}\n"
    )
    assert pages(parse_full(text)) == [
        ("LiteLLM Overview", "https://docs.litellm.ai/"),
        ("Completion Guide", "https://docs.litellm.ai/completion/input"),
    ]


_H1_PAGES = "".join(
    f"# Page {i}\n\n{_prose(500, 'w')}\n\n## Sub {i}\n\n{_prose(100, 's')}\n\n" for i in range(6)
)
_RULED_H2_PAGES = "".join(
    f"---\n\n## Page {i}\n\n{_prose(400, 'p')}\n\n## Part {i}\n\n{_prose(200, 'q')}\n\n" for i in range(5)
)
_H2_PARTS = "".join(
    f"## Part {i}\n\n{_prose(900, 'x')}\n\n### Detail {i}\n\n{_prose(100, 'y')}\n\n" for i in range(4)
)


@pytest.mark.parametrize(
    ("text", "titles", "attrs", "kept"),
    [
        pytest.param(
            f"<SYSTEM>Full docs.</SYSTEM>\n\n# Start of docs\n\n{_H1_PAGES}",
            [f"Page {i}" for i in range(6)],
            {"title": "Start of docs", "sections": []},
            "## Sub {i}",  # each page keeps its sub-heading
            id="prose-file-at-h1-pages",
        ),
        pytest.param(
            f"# atmos\n\n> Tool.\n\n## Best Practices\n\n{_prose(50, 'b')}\n\n{_RULED_H2_PAGES}",
            ["Best Practices"] + [f"Page {i}" for i in range(5)],
            {},
            "",
            id="prose-file-with-rule-separated-h2-pages",
        ),
        pytest.param(
            f"# Instructor\n\nA library.\n\n{_H2_PARTS}",
            [f"Part {i}" for i in range(4)],
            {"details": "A library."},
            "",
            id="single-document-at-h2",
        ),
    ],
)
def test_a_large_full_file_is_split_into_pages_at_its_headings(
    text: str, titles: list[str], attrs: dict[str, object], kept: str
) -> None:
    doc = parse_full(text)
    assert [d.title for d in doc.inline_docs] == titles
    assert {name: getattr(doc, name) for name in attrs} == attrs
    assert all(kept.format(i=i) in d.text for i, d in enumerate(doc.inline_docs))


def test_small_index_with_some_prose_stays_an_index() -> None:
    text = "# T\n\n> S\n\n## About\n\n" + _prose(200, "a") + "\n\n## Docs\n\n- [a](https://x/a)\n"
    doc = parse_llms_txt(text)
    assert doc.kind == "index"
    assert doc.inline_docs == []
    assert doc.sections[0].text.startswith("a0 a1")


def test_large_file_that_is_mostly_links_stays_an_index() -> None:
    items = "".join(f"- [Page {i}](https://x/p{i}): {_prose(12, 'n')}\n" for i in range(800))
    text = f"# Docs\n\n{_prose(800, 'intro')}\n\n## All\n\n{items}"
    doc = parse_llms_txt(text)
    assert doc.kind == "index"
    assert len(doc.links) == 800


def test_two_source_lines_in_a_link_list_do_not_make_it_full() -> None:
    items = "".join(f"- [P{i}](https://x/{i})\n" for i in range(20))
    doc = parse_llms_txt(f"# T\n\nSource: https://x/a\n\nURL: https://x/b\n\n## S\n{items}")
    assert doc.kind == "index"
    assert doc.inline_docs == []
    # outside a full file they are ordinary "Label: URL" entries
    assert [link.title for link in doc.links][:3] == ["Source", "URL", "P0"]
    assert len(doc.links) == 22


# ------------------------------------------------------------------------------------------ performance


def test_five_megabyte_full_file_parses_quickly() -> None:
    # half the pages start with their heading, half with the Source line (no H1: title from the URL)
    page = f"{_prose(60, 't')}\n\n```py\n# comment\nx = [1](2)\n```\n\n- [a](b): c\n\n## Part\n\nmore\n\n"
    pages = 5_000_000 // (len(page) + 30)
    text = "# Big\n\n" + "".join(
        f"# Page {i}\n\nSource: https://x/{i}\n\n{page}" if i % 2 else f"Source: https://x/{i}\n\n{page}"
        for i in range(pages)
    )
    kind, title, _, docs = _parse_or_hang(text)
    assert (kind, title, docs) == ("full", "Big", pages)


def test_pathological_brackets_do_not_blow_up() -> None:
    text = "# T\n## S\n" + "[" * 200_000 + "\n" + "- [" * 50_000 + "](" * 50_000 + "\n"
    # No link is made of the brackets, and the section survives them.
    assert _parse_or_hang(text) == ("index", "T", [["S", 0]], 0)


HANG_GUARD = 60.0  # seconds; each parse takes ~0.3 s, a quadratic one (n ~ 10^4 pages) takes hours


def _parse_or_hang(text: str) -> tuple[str, str, list[list[object]], int]:
    """``parse_llms_txt(text)`` in a fresh interpreter that is killed if it runs past ``HANG_GUARD``.

    Returns (kind, title, [[section, links]], inline docs). A tight in-process time bound flakes on a
    loaded machine, and no in-process bound could stop a parser stuck inside one regex call; this only
    says "did not hang", which is what these inputs (quadratic or backtracking traps) are about.
    """
    code = (
        f"import json, sys\nfrom {parse_llms_txt.__module__} import parse_llms_txt\n"
        "doc = parse_llms_txt(sys.stdin.buffer.read().decode('utf-8'))\n"
        "print(json.dumps([doc.kind, doc.title, [[s.name, len(s.links)] for s in doc.sections], "
        "len(doc.inline_docs)]))\n"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            input=text.encode("utf-8"),
            capture_output=True,
            timeout=HANG_GUARD,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"parse_llms_txt did not finish within {HANG_GUARD:g} s")
    kind, title, sections, docs = json.loads(out.stdout)
    return kind, title, sections, docs


# -------------------------------------------------------------------------------------------- rendering


def test_render_produces_the_spec_layout() -> None:
    doc = LlmsTxt(
        title="Demo",
        summary="Short summary.",
        details="Some details.",
        sections=[
            LlmsSection(name="", links=[LlmsLink("Full", "https://x/llms-full.txt")]),
            LlmsSection(
                name="Docs",
                links=[LlmsLink("A [x]", "https://x/a b.md", "note"), LlmsLink("B", "https://x/b")],
            ),
            LlmsSection(name="Optional", links=[LlmsLink("C", "c.md")], optional=True),
        ],
        inline_docs=[],
        issues=[],
        kind="index",
    )
    assert render_llms_txt(doc) == (
        "# Demo\n\n> Short summary.\n\nSome details.\n\n- [Full](https://x/llms-full.txt)\n\n"
        "## Docs\n\n- [A \\[x\\]](<https://x/a b.md>): note\n- [B](https://x/b)\n\n"
        "## Optional\n\n- [C](c.md)\n"
    )


def test_render_then_parse_of_a_wild_style_file_keeps_links() -> None:
    original = parse_llms_txt(
        "# T\n\n* [a](https://x/a) - one\n\n### Core\n- https://x/core/\n- Label: https://x/l\n", BASE
    )
    again = parse_llms_txt(render_llms_txt(original), BASE)
    assert triples(again) == triples(original)
    assert [link.section for link in again.links] == [link.section for link in original.links]
    assert "bare-url" in codes(original)
    assert "bare-url" not in codes(again)


# ------------------------------------------------------------------------------------ property-based tests

_FRAGMENTS = st.sampled_from(
    [
        "# ",
        "## ",
        "### ",
        "> ",
        "- [",
        "](",
        ")",
        "]",
        "[",
        "<",
        ">",
        "```",
        "~~~",
        "\n",
        "\n\n",
        "---",
        "* ",
        "+ ",
        "1. ",
        "| ",
        ": ",
        " — ",
        "http://",
        "https://x/",
        "Source: ",
        "title: ",
        '<doc title="a">',
        "</doc>",
        "`",
        "\\",
        "![",
        "\r\n",
        "\ufeff",
        "\x00",
        "Optional",
        "文档",
        "#",
        "**",
        "    ",
    ]
)
_MARKDOWNISH = st.lists(_FRAGMENTS | st.text(max_size=6), max_size=80).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parse_never_raises_on_arbitrary_text(text: str) -> None:
    doc = parse_llms_txt(text)
    assert doc.kind in ("index", "full")
    assert all(issue.line >= 1 for issue in doc.issues)


@settings(max_examples=300, deadline=None)
@given(_MARKDOWNISH, st.sampled_from([None, BASE, "file:///srv/docs/llms.txt", "http://[bad"]))
def test_parse_never_raises_on_markdown_like_text(text: str, base: str | None) -> None:
    doc = parse_llms_txt(text, base)
    assert doc.kind in ("index", "full")
    for section in doc.sections:
        assert all(
            link.section == section.name and link.optional == section.optional for link in section.links
        )
    render_llms_txt(doc)


_PAGE_PARTS = st.sampled_from(
    [
        "# Page\n",
        "## Part\n",
        "Source: https://x/p\n",
        "> Source: /p\n",
        "URL: <https://x/u>\n",
        "[Skip to content](https://x/s#top)\n",
        "---\n",
        '-----\ntitle: "T"\nurl: /u\n-----\n',
        'Back to top---\nurl: "https://x/"\ntitle: T\n---\n',
        "```\n",
        "````md\n",
        '<doc title="d">',
        "</doc>",
        "- [a](b): c\n",
        "| [a](b) | c |\n",
        "\n",
    ]
)
_PAGES = st.lists(st.lists(_PAGE_PARTS | _MARKDOWNISH, max_size=8).map("".join), max_size=12).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(_PAGES, st.booleans())
def test_parse_never_raises_on_page_shaped_text(text: str, pad: bool) -> None:
    # padding with prose pushes files past the size threshold so the heading-split path runs too
    doc = parse_llms_txt(text + ("\n\n" + "lorem ipsum " * 1000 if pad else ""), BASE)
    assert doc.kind in ("index", "full")
    if doc.kind == "full":
        assert doc.inline_docs


def _flat(s: str) -> str:
    return " ".join(s.split())


_WORD_CHARS = "abcdefghijXYZ0123456789éüßøçñ中文日本語한국어"
_PUNCT = "-.,;:!?'\"()&/+=@%$^{}|~"
_ESCAPABLE = "[]\\`*_#<>"
_names = (
    st.text(alphabet=_WORD_CHARS + _PUNCT + _ESCAPABLE + " ", min_size=1, max_size=30).map(_flat).filter(bool)
)
_notes = st.text(alphabet=_WORD_CHARS + _PUNCT + "`*_# ", max_size=40).map(_flat)
_url_chars = "abcdefghijklmnopqrstuvwxyz0123456789-._~/%"
_urls = st.one_of(
    st.builds(lambda p: "https://example.org/" + p, st.text(alphabet=_url_chars, max_size=20)),
    st.builds(lambda p: "docs/" + p + ".md", st.text(alphabet=_url_chars + " ()", min_size=1, max_size=12)),
).map(str.strip)
_words = st.text(alphabet="abcdefghij XYZ.,'", min_size=1, max_size=40).map(_flat).filter(bool)
_paragraphs = st.lists(st.lists(_words, min_size=1, max_size=3).map("\n".join), max_size=3).map("\n\n".join)


@st.composite
def _documents(draw: st.DrawFn) -> LlmsTxt:
    sections: list[LlmsSection] = []
    if draw(st.booleans()):
        links = draw(st.lists(st.builds(LlmsLink, _names, _urls, _notes), min_size=1, max_size=3))
        sections.append(LlmsSection(name="", links=links))
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.one_of(_names, st.sampled_from(["Optional", "optional", "OPTIONAL"])))
        optional = name.lower() == "optional"
        links = [
            LlmsLink(t, u, n, section=name, optional=optional)
            for t, u, n in draw(st.lists(st.tuples(_names, _urls, _notes), max_size=4))
        ]
        sections.append(LlmsSection(name=name, links=links, optional=optional, text=draw(_paragraphs)))
    return LlmsTxt(
        title=draw(st.none() | _names),
        summary=draw(st.none() | st.lists(_words, min_size=1, max_size=3).map("\n".join)),
        details=draw(_paragraphs),
        sections=sections,
        inline_docs=[],
        issues=[],
        kind="index",
    )


@settings(max_examples=300, deadline=None)
@given(_documents())
def test_render_then_parse_round_trips(doc: LlmsTxt) -> None:
    back = parse_llms_txt(render_llms_txt(doc))
    assert back.kind == "index"
    assert back.title == doc.title
    assert back.summary == doc.summary
    assert back.details == doc.details
    assert [(s.name, s.optional, s.text) for s in back.sections] == [
        (s.name, s.optional, s.text) for s in doc.sections
    ]
    assert [(ln.title, ln.url, ln.notes, ln.section, ln.optional) for ln in back.links] == [
        (ln.title, ln.url, ln.notes, ln.section, ln.optional) for ln in doc.links
    ]
