"""What the model receives from a converted page: few link targets, API names in heading paths, no
navigation first (issue 23). Fixtures in the markup of Sphinx (default and Django themes) and Node.js."""

from __future__ import annotations

import re
from pathlib import Path

from docbundle.bundle.reader import open_bundle
from docbundle.bundle.search import BundleSearcher
from docbundle.indexer.pipeline.chunk import chunk_markdown
from docbundle.indexer.pipeline.html import convert_html
from hypothesis import given, settings
from hypothesis import strategies as st
from treekit import build

SPHINX_URL = "https://docs.example.org/3/library/functools.html"
_LINK_TARGET = re.compile(r"\]\(([^()\s]*(?:\([^()]*\))?[^()\s]*)(?:\s+\"[^\"]*\")?\)")


def _sphinx(body: str) -> str:
    return (
        '<html><head><meta name="generator" content="Docutils 0.17.1: http://docutils.sourceforge.net/">'
        '<title>functools - Python docs</title></head><body><div class="related" role="navigation">'
        '<a href="../genindex.html">index</a> | <a href="os.html">next</a></div><div class="document">'
        '<div class="body" role="main">' + body + "</div></div></body></html>"
    )


def _entry(kind: str, ident: str, signature: str, text: str, inner: str = "") -> str:
    return (
        f'<dl class="py {kind}"><dt class="sig sig-object py" id="{ident}">'
        f'<em class="property"><span class="pre">{kind}</span> </em>{signature}'
        f'<a class="reference internal" href="../_modules/functools.html#{ident}">'
        '<span class="viewcode-link"><span class="pre">[source]</span></span></a>'
        f'<a class="headerlink" href="#{ident}" title="Permalink to this definition">¶</a></dt>'
        f"<dd><p>{text}</p>{inner}</dd></dl>"
    )


LINKS = _sphinx(
    '<section id="functools"><h1>functools<a class="headerlink" href="#functools">¶</a></h1>'
    + "".join(
        f"<p>Paragraph {i}: like "
        '<a class="reference internal" href="functions.html#property" title="property">'
        '<code class="xref py py-func docutils literal notranslate"><span class="pre">property()</span></code></a>'
        ', see <a class="reference internal" href="#functools.cache" title="functools.cache"><code>cache()</code></a>'
        ', <a class="reference external" href="https://en.wikipedia.org/wiki/Memoization">memoize</a>'
        ' and <a class="reference internal" href="../glossary.html#term-key-function">'
        '<span class="xref std std-term">key function</span></a>. '
        + "Some words of prose to read. " * 6
        + "</p>"
        for i in range(5)
    )
    + '<img src="../_images/diagram.png" alt="A cache diagram"></section>'
)


def _target_share(markdown: str) -> float:
    targets = sum(len(m.group(0)) - 1 for m in _LINK_TARGET.finditer(markdown))
    return targets / len(markdown)


def test_links_become_their_text_and_another_page_is_referenced_once_and_relative() -> None:
    md = convert_html(LINKS, SPHINX_URL).markdown
    assert md.count("[`property()`](functions.html#property)") == 1  # the first link to that page
    assert md.count("`property()`") == 5  # later ones are its text
    assert md.count("[key function](../glossary.html#term-key-function)") == 1
    assert "`cache()`" in md and "(#functools.cache" not in md  # within the page: text only
    assert "memoize" in md and "wikipedia" not in md  # another site: text only
    assert '"property"' not in md and "title" not in md  # no title attribute repeated
    assert "A cache diagram" in md and "diagram.png" not in md
    assert _target_share(md) <= 0.05


API = _sphinx(
    '<section id="functools"><h1>functools</h1><p>The module defines these.</p>'
    + _entry(
        "class",
        "functools.Cache",
        '<span class="sig-prename descclassname">functools.</span><span class="sig-name descname">Cache</span>'
        '<span class="sig-paren">(</span><em class="sig-param">*args</em>, <em class="sig-param">**kw</em>'
        '<span class="sig-paren">)</span>',
        "A cache.",
        _entry(
            "method", "functools.Cache.clear", '<span class="sig-name descname">clear</span>()', "Empty it."
        )
        + _entry(
            "attribute", "functools.Cache.size", '<span class="sig-name descname">size</span>', "How many."
        ),
    )
    + _entry(
        "function", "functools.wraps", '<span class="sig-name descname">wraps</span>(wrapped)', "Wrap it."
    )
    + '<div class="highlight-default notranslate"><div class="highlight"><pre>wraps(f)</pre></div></div>'
    + '<div class="highlight-console notranslate"><div class="highlight"><pre>$ python -m x</pre></div></div>'
    + "</section>"
)


def test_each_sphinx_api_entry_is_a_section_its_chunk_names() -> None:
    md = convert_html(API, SPHINX_URL).markdown
    assert "## `class functools.Cache(*args, **kw)`\n" in md  # no [source], no ¶, no emphasis marks
    assert "### `method clear()`\n" in md and "### `attribute size`\n" in md
    assert "[source]" not in md and "¶" not in md
    assert "```python\nwraps(f)\n```" in md  # Sphinx's highlight-default is Python
    assert "```console\n$ python -m x\n```" in md
    paths = {tuple(c.heading_path) for c in chunk_markdown(md)}
    assert ("functools", "class functools.Cache(*args, **kw)") in paths
    assert ("functools", "class functools.Cache(*args, **kw)", "method clear()") in paths
    assert ("functools", "class functools.Cache(*args, **kw)", "attribute size") in paths
    assert ("functools", "function wraps(wrapped)") in paths
    for chunk in chunk_markdown(md):
        for line in chunk.text.splitlines():
            if line.startswith("#") and "`" in line:
                assert line.lstrip("# ").strip("`") in chunk.heading_path


def _node_event(name: str, words: int) -> str:
    slug = re.sub(r"\W+", "-", name.lower())
    return (
        f'<h4>Event: <code>\'{name}\'</code><span><a class="mark" href="#event-{slug}" id="event-{slug}">#</a>'
        f'</span><a class="srclink" href="https://github.com/nodejs/node/blob/v20/lib/process.js#L1">[src]</a></h4>'
        f"<p>{'The ' + name + ' event is emitted when it happens to the process. ' * (words // 12)}</p>"
    )


NODE = (
    '<html><head><title>Process | Node.js v20 Documentation</title></head><body><div id="column2">'
    '<ul><li><a href="index.html">Index</a></li></ul></div><div id="column1" data-id="process">'
    '<div id="apicontent"><h2>Process<span><a class="mark" href="#process" id="process">#</a></span>'
    '<a class="srclink" href="https://github.com/nodejs/node/blob/v20/lib/process.js">[src]</a></h2>'
    "<p>The <code>process</code> object provides information about the current process.</p>"
    '<h3>Process events<span><a class="mark" href="#process-events" id="process-events">#</a></span></h3>'
    "<p>The process object is an instance of EventEmitter.</p>"
    + "".join(_node_event(n, 240) for n in ("beforeExit", "disconnect", "exit", "unhandledRejection"))
    + "</div></div></body></html>"
)


def test_node_headings_lose_their_source_links_and_level_4_reaches_the_path() -> None:
    md = convert_html(NODE, "https://nodejs.example.org/api/process.html").markdown
    assert "## Process\n" in md and "### Process events\n" in md
    assert "#### Event: `'unhandledRejection'`\n" in md
    assert "[src]" not in md and "github" not in md
    paths = [c.heading_path for c in chunk_markdown(md, max_depth=3)]
    assert ["Process", "Process events", "Event: 'unhandledRejection'"] in paths
    assert ["Process", "Process events", "Event: 'exit'"] in paths
    # The first event shares its chunk with the short lead-ins above it: a path naming none of them.
    first = next(c for c in chunk_markdown(md, max_depth=3) if "'beforeExit'" in c.text)
    assert first.heading_path in (["Process"], ["Process", "Process events"])


DJANGO_INDEX = (
    '<html><head><meta name="generator" content="Docutils 0.16"><title>Models | Django docs</title></head>'
    '<body><div class="document"><div id="custom-doc" class="yui-t6"><div id="hd">'
    '<h1><a href="../../index.html">Django 3.2 documentation</a></h1><div id="global-nav">'
    '<a title="Home page" href="../../index.html">Home</a> | <a href="../../contents.html">Table of contents</a>'
    ' | <a href="../../genindex.html">Index</a> | <a href="../../py-modindex.html">Modules</a></div>'
    '<div class="nav">« <a href="../index.html">previous</a> | <a href="../index.html">up</a> | '
    '<a href="fields.html">next</a> »</div></div><div id="bd"><div id="yui-main"><div class="yui-b">'
    '<div class="yui-g" id="ref-models-index"><div class="section" id="s-models"><h1>Models</h1>'
    '<p>Model API reference.</p><div class="toctree-wrapper compound"><ul>'
    '<li><a href="fields.html">Model field reference</a></li><li><a href="options.html">Meta options</a></li>'
    '</ul></div></div></div></div></div></div><div id="ft"><div class="nav">« <a href="x">previous</a></div>'
    "</div></div></div></body></html>"
)


def test_a_short_sphinx_index_page_without_role_main_starts_with_its_content() -> None:
    out = convert_html(DJANGO_INDEX, "https://docs.example.org/3.2/ref/models/index.html")
    assert out.title == "Models"
    assert out.markdown.startswith("# Models\n\nModel API reference.")
    for chrome in ("Home", "Table of contents", "previous", "Django 3.2 documentation"):
        assert chrome not in out.markdown
    assert "[Model field reference](fields.html)" in out.markdown


def _counter_page(lead_sentences: int) -> str:
    """A Sphinx page: a section whose lead tells what its class is for, then the class and a method."""
    lead = "A counter tool is provided to tally how often each word occurs in a text. " * lead_sentences
    return _sphinx(
        '<section id="collections"><h1>collections</h1><p>Container datatypes for everyday work.</p>'
        '<section id="counter-objects"><h2>Counter objects</h2>'
        f"<p>{lead}</p>"
        + _entry(
            "class",
            "collections.Counter",
            '<span class="sig-prename descclassname">collections.</span>'
            '<span class="sig-name descname">Counter</span>(iterable)',
            "A dict subclass for counting hashable objects: elements are keys, their counts are values. " * 3,
            _entry(
                "method",
                "collections.Counter.most_common",
                '<span class="sig-name descname">most_common</span>(n)',
                "Return the n most common elements and their counts, from the most common to the least. " * 3,
            ),
        )
        + "</section></section>"
    )


COUNTER_PATH = ("collections", "Counter objects", "class collections.Counter(iterable)")


def test_a_sections_lead_joins_its_first_api_entry_and_the_chunk_names_the_entry() -> None:
    md = convert_html(_counter_page(2), "https://docs.example.org/3/library/collections.html").markdown
    chunks = chunk_markdown(md)
    entry = next(c for c in chunks if tuple(c.heading_path) == COUNTER_PATH)
    assert "tally how often each word occurs" in entry.text  # the lead ...
    assert "counting hashable objects" in entry.text  # ... and the entry, in one chunk
    assert not any(tuple(c.heading_path) == COUNTER_PATH[:2] for c in chunks)  # no chunk of the lead alone
    # An entry never joins another entry: the method keeps its own chunk, named.
    method = next(c for c in chunks if "most_common" in c.text and "counting hashable" not in c.text)
    assert tuple(method.heading_path) == (*COUNTER_PATH, "method most_common(n)")
    # The page's introduction is no lead of an entry (a section, not an entry, follows it).
    intro = next(c for c in chunks if "Container datatypes" in c.text)
    assert tuple(intro.heading_path) == ("collections",) and "tally" not in intro.text


def test_a_lead_too_long_to_share_a_chunk_with_its_entry_keeps_its_own() -> None:
    md = convert_html(_counter_page(40), "https://docs.example.org/3/library/collections.html").markdown
    chunks = chunk_markdown(md, max_words=300)
    leads = [c for c in chunks if "tally how often" in c.text]
    assert leads and all("counting hashable objects" not in c.text for c in leads)
    assert all(COUNTER_PATH[-1] not in c.heading_path for c in leads)
    entry = next(c for c in chunks if "counting hashable objects" in c.text)
    assert tuple(entry.heading_path) == COUNTER_PATH and "tally" not in entry.text


def test_a_question_worded_like_a_lead_finds_the_entry_it_introduces(tmp_path: Path) -> None:
    """Built and searched for real: the hit for a question in the lead's words is the entry's chunk."""
    site = tmp_path / "site"
    (site / "library").mkdir(parents=True)
    (site / "library" / "collections.html").write_text(_counter_page(2), encoding="utf-8")
    (site / "llms.txt").write_text("# Docs\n\n- [collections](library/collections.html)\n", encoding="utf-8")
    built = build(
        tmp_path / "libraries.toml",
        tmp_path / "bundles",
        '[[library]]\nid = "py"\nllms_txt = "site/llms.txt"\n',
    ).bundle
    bundle = open_bundle(built, use_mmap=False)
    try:
        hits = BundleSearcher(bundle).search("count how often each word occurs in a text", per_doc=5).hits
        top = bundle.store.get(hits[0].doc).chunks[hits[0].chunk]
    finally:
        bundle.close()
    assert tuple(top.heading_path) == COUNTER_PATH
    assert "tally how often" in top.text and "counting hashable objects" in top.text


_PROSE_WORDS = st.lists(
    st.sampled_from(["count", "word", "text", "the", "each", "lead"]), min_size=1, max_size=40
)
# A page as the converter writes a Sphinx reference: prose sections (a heading, a lead of any size)
# holding API entries (a code-span heading, with text), entries nested in entries one level down.
_SECTIONS = st.lists(
    st.tuples(st.integers(1, 3), st.booleans(), _PROSE_WORDS, st.integers(0, 2)), min_size=1, max_size=12
)


def _reference_page(sections: list[tuple[int, bool, list[str], int]]) -> tuple[str, list[str]]:
    lines: list[str] = []
    names: list[str] = []
    for i, (level, is_api, words, nested) in enumerate(sections):
        title = f"`entry_{i}()`" if is_api else f"Section {i}"
        lines += ["#" * level + " " + title, "", " ".join(words), ""]
        if is_api:
            names.append(f"entry_{i}()")
        for j in range(nested if is_api else 0):
            lines += ["#" * (level + 1) + f" `member_{i}_{j}()`", "", " ".join(words[: j + 1]), ""]
            names.append(f"member_{i}_{j}()")
    return "\n".join(lines), names


@settings(max_examples=200, deadline=None)
@given(_SECTIONS, st.integers(0, 30), st.integers(1, 60))
def test_every_api_entry_with_text_is_named_by_the_chunk_holding_it(
    sections: list[tuple[int, bool, list[str], int]], min_words: int, max_words: int
) -> None:
    body, names = _reference_page(sections)
    chunks = chunk_markdown(body, min_words=min_words, max_words=max_words)
    assert "".join(c.text for c in chunks) == body
    for name in names:
        holding = [c for c in chunks if f" `{name}`\n" in c.text]
        assert len(holding) == 1 and holding[0].heading_path[-1] == name
