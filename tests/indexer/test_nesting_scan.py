"""``bound_nesting`` reads leaves whole and writes its common steps out (issue 22): it must bound every
page exactly as the pass that reads one tag at a time through ``_Stack`` (the pass of issue 19).

The reference below is that pass; the property compares the two on generated nested HTML, with small
bounds so that pages nest past them, drops happen inside and around leaves, and leaves meet foreign
content, column groups, open links and tables.
"""

from __future__ import annotations

from docbundle.indexer.pipeline import nesting
from hypothesis import example, given, settings
from hypothesis import strategies as st


def reference(html: str, max_depth: int) -> str:
    """The bounded page, every tag read on its own by ``_Stack``'s methods (no leaf, nothing written out)."""
    stack = nesting._Stack()
    dropped: dict[str, int] = {}
    keep: list[str] = []
    kept_to = 0
    pos = 0
    while pos < len(html):
        jump = len(html)
        for match in nesting._TOKEN.finditer(html, pos):
            slash, raw_name, attributes, other = match.groups()
            if raw_name is None:
                if other is not None:
                    jump = nesting.after_markup(html, other, match.end())
                break
            name = raw_name.lower()
            if slash:
                if dropped.get(name):
                    dropped[name] -= 1
                    keep.append(html[kept_to : match.start()])
                    kept_to = match.end()
                elif stack.names and stack.names[-1] == name:
                    stack.pop()
                else:
                    stack.end_tag(name)
                continue
            foreign = stack.start_tag(name)
            if foreign is None or (attributes.endswith("/") and (foreign or name in nesting._FOREIGN_ROOTS)):
                continue
            depth = stack.depth_of(name, foreign)
            if depth > max_depth:
                dropped[name] = dropped.get(name, 0) + 1
                keep.append(html[kept_to : match.start()])
                kept_to = match.end()
                continue
            stack.push(name, depth)
            if not foreign and name == "plaintext":
                break
            if not foreign and name in nesting._RAW_TEXT:
                jump = nesting.raw_text_end(html, name, match.end())
                break
        pos = jump
    return nesting.kept(html, keep, kept_to)


# Leaves (plain, nested, with attributes, upper case, "/>", mismatched ends, a "<" in the text) and the
# tags around which they stop being no-ops.
PIECES = (
    "<span>t</span>",
    '<code class="x"><span>t</span> u</code>',
    "<a href=x><code><span>t</span></code></a>",
    "<b><i><u><s>deep</s></u></i></b>",
    "<SPAN Class='y'>t</Span>",
    "<span/>t</span>",
    "<span>t</em>",
    "<em>a < b</em>",
    "<path d='m0'></path>",
    "<span title='a>b'>t</span>",
    "<p>t <em>x</em> <code><span>y</span></code></p>",
    "<p>t <a href=1><code><span>x</span></code></a> and <a>y</a>.</p>",
    "<a href=1><a>t</a></a>",
    "<div class=d><b>t</b></div>",
    "<li>t</li>",
    "<li>t <a>x</a></li>",
    "<dt>t</dt><dd>u</dd>",
    "<pre>t</pre>",
    "<h2>t</h2>",
    "<ul>",
    "<dl>",
    "<ſpan>t</span>",
    "<div>",
    "</div>",
    "<section>",
    "<p>",
    "<li>",
    "<a>",
    "</a>",
    "<b>",
    "</b>",
    "<table><tr><td>",
    "<table>",
    "<colgroup>",
    "<table><colgroup>",
    "<col>",
    "<svg>",
    "<svg><g/>",
    "<math>",
    "<foreignObject>",
    "</svg>",
    "<select>",
    "<template>",
    "<!-- <span>c</span> -->",
    "<script><span>s</span></script>",
    "<title><span>t</span></title>",
    "<plaintext>",
    '<p a="',
    "text",
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(PIECES), st.integers(1, 40)), min_size=1, max_size=8),
    st.integers(0, 24),
)
@example([("<div>", 10), ("<span>t</span>", 3)], 9)  # a leaf one level past the bound is dropped
@example([("<svg>", 1), ("<code><span>t</span></code>", 1), ("<section>", 30)], 12)  # breaks out of SVG
@example([("<svg>", 1), ("<path d='m0'></path>", 1), ("<section>", 30)], 12)  # stays in SVG: no-op
@example([("<table><colgroup>", 1), ("<span>t</span>", 1), ("<template>", 1), ("<section>", 30)], 12)
@example([("<a>", 1), ("<a href=x><code><span>t</span></code></a>", 1), ("<div>", 30)], 12)  # ends the <a>
@example([("<p>", 1), ("<b>", 1), ("<h2>t</h2>", 1), ("<section>", 30)], 12)  # ends the <p>
@example([("<a>", 1), ("<b>", 1), ("<li>t <a>x</a></li>", 1), ("<section>", 30)], 12)  # ends the <a>
@example([("<li>", 1), ("<b>", 1), ("<li>t</li>", 1), ("<section>", 30)], 12)  # ends the <li>
@example([("<ul>", 1), ("<li>t</li>", 2), ("<section>", 30)], 12)  # in a list: a no-op
@example([("<div>", 10), ("<b>", 1), ("</div>", 5), ("<div class=d><b>t</b></div>", 1)], 12)  # </b> dropped
def test_bound_nesting_bounds_a_page_as_the_tag_by_tag_pass_does(
    pieces: list[tuple[str, int]], max_depth: int
) -> None:
    page = "<html><body>" + "".join(piece * count for piece, count in pieces)
    assert nesting.bound_nesting(page, max_depth) == reference(page, max_depth)
