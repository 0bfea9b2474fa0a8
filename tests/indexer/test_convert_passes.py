"""The text passes at the end of ``convert_html`` written for speed (issue 22) give exactly what the regex
passes they replaced gave, on generated text full of the white space ``\\s`` knows (``\\r``, ``\\x0b``,
``\\x1c``, ``\\x85``, U+2028, no-break and ideographic spaces) and of runs of newlines."""

from __future__ import annotations

import re

from docbundle.indexer.pipeline.html import convert
from hypothesis import example, given, settings
from hypothesis import strategies as st

# What the passes were before: each line's trailing white space, and three or more newlines.
_TRAILING_SPACE_BEFORE = re.compile(r"[^\S\n]+$", re.MULTILINE)
_BLANK_LINES_BEFORE = re.compile(r"\n{3,}")

_PIECES = ["a", "word", "`x`", ">", "\n", "\n\n", "\n\n\n", " ", "\t", "\r", "\r\n", "\x0b", "\x0c", "\x1c"]
_PIECES += ["\x85", "\u00a0", "\u2028", "\u2029", "\u3000", "\u200b", " \n", "\t\n\n\n \n"]
texts = st.one_of(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join), st.text())


@settings(max_examples=500, deadline=None)
@given(texts)
@example("a \u2028 b \n\r\n\x85")
def test_strip_lines_removes_what_the_multiline_regex_removed(text: str) -> None:
    assert convert._strip_lines(text) == _TRAILING_SPACE_BEFORE.sub("", text)


@settings(max_examples=300, deadline=None)
@given(texts)
def test_blank_lines_fold_as_before(text: str) -> None:
    assert convert._BLANK_LINES_RE.sub("\n\n", text) == _BLANK_LINES_BEFORE.sub("\n\n", text)


def test_a_converted_page_keeps_no_trailing_space_and_no_run_of_blank_lines() -> None:
    html = "<main><h1>T</h1><p>one \u00a0</p>\n\n\n\n<p>two\t</p><pre><code>x = 1   \n\n\n\ny</code></pre></main>"
    markdown = convert.convert_html(html, "https://docs.example.invalid/p.html").markdown
    assert all(line == line.rstrip() for line in markdown.split("\n"))
    assert "\n\n\n" not in markdown
    assert "one" in markdown and "two" in markdown


_FENCE_BEFORE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _separate_quotes_before(markdown: str) -> str:
    """``_separate_quotes`` as it was: every line read in turn."""
    if "\n>" not in markdown:
        return markdown
    out: list[str] = []
    fence = ""
    previous = ""
    for line in markdown.split("\n"):
        match = _FENCE_BEFORE.match(line)
        if fence:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = ""
        elif match:
            fence = match.group(1)
        elif line.startswith(">") and previous.strip() and not previous.startswith(">"):
            out.append("")
        out.append(line)
        previous = line
    return "\n".join(out)


_LINES = [
    "text",
    "> quote",
    ">",
    ">>> code",
    "",
    " ",
    "\t",
    "```",
    "````",
    "```python",
    "~~~",
    "~~~~ x",
    "   ```",
    "    ```",
    "  ~~~",
    "x ```",
    "``",
    "``~~~",
    "~~~```",
    " > not a quote line",
    "\u3000",
]
markdown_texts = st.one_of(
    st.lists(st.sampled_from(_LINES), max_size=30).map("\n".join),
    st.lists(st.one_of(st.sampled_from(_LINES), st.text(alphabet=" >`~\nab\t", max_size=8)), max_size=20).map(
        "\n".join
    ),
)


@settings(max_examples=800, deadline=None)
@given(markdown_texts)
@example("a\n```\n>>> x\n```\nb\n> q")
@example("```\n~~~\n```\nt\n> q")
def test_separate_quotes_is_the_line_by_line_pass(markdown: str) -> None:
    assert convert._separate_quotes(markdown) == _separate_quotes_before(markdown)


_SEGMENTS = st.lists(st.sampled_from(["a", "b", "..", ".", "", "lib", "x.html"]), max_size=5).map("/".join)


@settings(max_examples=300, deadline=None)
@given(_SEGMENTS, _SEGMENTS)
def test_cached_relative_paths_are_posixpaths(path: str, page_dir: str) -> None:
    # compact_links caches relpath only for two absolute paths, which depend on nothing else.
    import posixpath

    from docbundle.indexer.pipeline.html import links

    for a, b in (("/" + path, "/" + page_dir + "/"), ("/" + path, "/" + page_dir)):
        assert links._relpath(a, b) == posixpath.relpath(a, b)
        assert links._relpath(a, b) == posixpath.relpath(a, b)  # again, from the cache


_URL_PIECES = [
    "a",
    "B",
    "x.html",
    "..",
    ".",
    "",
    "%20",
    "~u",
    "é",
    ":",
    "?q=1",
    ";p",
    "#f",
    "@",
    "!",
    "'",
    "\t",
]
_BASES = st.builds(
    lambda scheme, host, parts: f"{scheme}://{host}" + ("/" + "/".join(parts) if parts is not None else ""),
    st.sampled_from(["http", "https", "HTTP", "file", "ftp"]),
    st.sampled_from(["docs.example.invalid", "h:8080", "h:", "H.Example", "[::1]", "u@h", "é.invalid"]),
    st.one_of(st.none(), st.lists(st.sampled_from(_URL_PIECES), max_size=5)),
)
_HREFS = st.one_of(
    st.lists(
        st.sampled_from([*_URL_PIECES, "/", "//", "#", "#frag", "#a/b?c:d"]), min_size=1, max_size=7
    ).map("".join),
    st.text(max_size=12),
)


@settings(max_examples=1500, deadline=None)
@given(_BASES, _HREFS)
@example("https://h/a/b.html", "../../x.html#y")
@example("https://h", "x")
@example("https://h/a/", "./")
@example("https://h/a/b", "..")
@example("https://h/a/b", "c#")
def test_plain_links_resolve_as_urljoin_does(base: str, href: str) -> None:
    # compact_links resolves the common shape itself (issue 22): the same address and parts as urllib.
    from urllib.parse import urljoin, urlsplit

    from docbundle.indexer.pipeline.html import links

    try:
        target = urljoin(base, href)
        expected = (target, urlsplit(target))
    except ValueError:
        assert links._plain_join(base, href) is None
        return
    plain = links._plain_join(base, href)
    if plain is not None:
        assert plain == expected
        assert tuple(plain[1]) == tuple(expected[1])
    assert links._resolved(base, href) == expected
