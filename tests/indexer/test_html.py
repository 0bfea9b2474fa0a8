"""The HTML -> markdown converter: main content, chrome removed, code kept, titles, decoding."""

from __future__ import annotations

import codecs

import pytest
from docbundle.indexer.pipeline.html import (
    CONVERTER_ID,
    Converted,
    convert_html,
    decode_html,
    meta_refresh_target,
)
from hypothesis import given, settings
from hypothesis import strategies as st

SPHINX = """<!DOCTYPE html>
<html><head><meta charset="utf-8">
<meta name="generator" content="Docutils 0.19: https://docutils.sourceforge.io/">
<title>Built-in Functions &#8212; Python 3.12.1 documentation</title></head>
<body>
<div class="related" role="navigation"><h3>Navigation</h3><ul><li><a href="../genindex.html">index</a></li>
<li><a href="intro.html">next</a> |</li></ul></div>
<div class="document"><div class="documentwrapper"><div class="bodywrapper">
<div class="body" role="main">
<section id="built-in-functions">
<h1>Built-in Functions<a class="headerlink" href="#built-in-functions" title="Link to this heading">¶</a></h1>
<p>The Python interpreter has a number of functions&nbsp;built in. See <a href="stdtypes.html#str">str</a>.</p>
<dl class="py function">
<dt class="sig sig-object py" id="abs"><span class="sig-name descname">abs</span>(<em>x</em>)<a class="headerlink" href="#abs">¶</a></dt>
<dd><p>Return the absolute value of a number.</p></dd></dl>
<div class="highlight-python3 notranslate"><div class="highlight"><pre><span></span><span class="gp">&gt;&gt;&gt; </span><span class="nb">abs</span><span class="p">(</span><span class="o">-</span><span class="mi">3</span><span class="p">)</span>
<span class="go">3</span>
</pre></div></div>
<table class="highlighttable"><tr><td class="linenos"><div class="linenodiv"><pre><span class="normal">1</span>
<span class="normal">2</span></pre></div></td><td class="code"><div class="highlight-c"><div class="highlight"><pre><span></span>int main(void)
{ return 0; }
</pre></div></div></td></tr></table>
<div class="admonition note"><p class="admonition-title">Note</p><p>Mind the gap.</p></div>
<aside class="sidebar"><p class="sidebar-title">Hello World!</p><p>A sidebar directive's text.</p></aside>
<aside class="footnote-list brackets"><aside class="footnote brackets" id="id2"><span class="label">1</span><p>The footnote text.</p></aside></aside>
<dl class="simple"><dt>plain term</dt><dd><p>its definition</p></dd></dl>
</section></div></div></div>
<div class="sphinxsidebar" role="navigation"><h3>Table of Contents</h3><ul><li><a href="#">Sidebar entry</a></li></ul></div>
</div>
<div class="footer">&copy; Copyright 2001-2024, Python Software Foundation.</div>
</body></html>"""

MKDOCS = """<html><head><meta name="generator" content="mkdocs-1.5.3, mkdocs-material-9.5.3">
<title>Configuration - Material Site</title></head><body>
<header class="md-header"><nav class="md-header__inner"><div class="md-header__title">Material Site</div></nav></header>
<div class="md-container"><main class="md-main"><div class="md-main__inner">
<div class="md-sidebar md-sidebar--primary"><nav class="md-nav"><a href="/">Home nav link</a></nav></div>
<div class="md-sidebar md-sidebar--secondary"><nav class="md-nav md-nav--secondary">On this page list</nav></div>
<div class="md-content"><article class="md-content__inner md-typeset">
<a href="https://github.com/x/edit/main/docs/config.md" title="Edit this page" class="md-content__button md-icon">Edit</a>
<h1 id="configuration">Configuration<a class="headerlink" href="#configuration" title="Permanent link">&para;</a></h1>
<p>Set options in <code>mkdocs.yml</code>.</p>
<div class="language-yaml highlight"><table class="highlighttable"><tr><td class="linenos"><div class="linenodiv"><pre><span></span><span class="normal"><a href="#__codelineno-0-1">1</a></span>
<span class="normal"><a href="#__codelineno-0-2">2</a></span></pre></div></td><td class="code"><div><pre><span></span><code><span class="nt">site_name</span><span class="p">:</span><span class="w"> </span><span class="l l-Scalar l-Scalar-Plain">demo</span>
<span class="nt">theme</span><span class="p">:</span><span class="w"> </span>material
</code></pre></div></td></tr></table></div>
<div class="admonition warning"><p class="admonition-title">Warning</p><p>Restart the server.</p></div>
<table><thead><tr><th>Key</th><th>Meaning</th></tr></thead><tbody><tr><td>site_name</td><td>The&nbsp;name&#8203;</td></tr></tbody></table>
<aside class="md-source-file">Last update: 2024-01-01</aside>
</article></div></div></main>
<footer class="md-footer"><nav class="md-footer__inner">Previous Getting started Next Plugins</nav></footer></div>
</body></html>"""

DOCUSAURUS = """<html><head><meta name="generator" content="Docusaurus v3.1.0">
<title>Installation | My Project</title></head><body><div id="__docusaurus">
<nav class="navbar">My Project navbar Docs Blog</nav>
<div class="main-wrapper"><aside class="theme-doc-sidebar-container"><ul><li>Sidebar Intro</li></ul></aside>
<main><div class="row"><div class="col"><div class="theme-doc-breadcrumbs"><ul><li>Breadcrumb Home</li></ul></div>
<article><div class="theme-doc-markdown markdown"><header><h1>Installation</h1></header>
<p>Install with npm.</p><aside class="sidenote"><p>An aside of prose, kept.</p></aside><aside class="related-links"><a href="/a">Aside link one</a> <a href="/b">Aside link two</a></aside>
<div class="language-bash codeBlockContainer theme-code-block"><div class="codeBlockContent"><pre tabindex="0" class="prism-code language-bash codeBlock"><code class="codeBlockLines"><span class="token-line"><span class="token plain">npm install my-project</span><br></span><span class="token-line"><span class="token plain">npm run start</span><br></span></code></pre><div class="buttonGroup"><button type="button" aria-label="Copy code to clipboard" class="clean-btn">Copy</button></div></div></div>
<div class="theme-admonition theme-admonition-tip admonition alert alert--success"><div class="admonition-heading">tip</div><div class="admonition-content"><p>Use Node 18.</p></div></div>
</div>
<footer class="theme-doc-footer"><a href="https://github.com/x/edit/main/docs/install.md" class="theme-edit-this-page">Edit this page</a></footer></article>
<nav class="pagination-nav"><a class="pagination-nav__link--prev">Previous Intro page</a></nav></div>
<div class="col col--3"><div class="tableOfContents theme-doc-toc-desktop"><ul><li>TOC Requirements</li></ul></div></div></div></main></div>
<footer class="footer">Copyright 2024 My Project footer</footer></div></body></html>"""

MDBOOK = """<!DOCTYPE HTML><html lang="en" class="light sidebar-visible"><head><title>Data Types - The Rust Programming Language</title></head>
<body><nav id="sidebar" class="sidebar"><div class="sidebar-scrollbox"><ol class="chapter"><li>Sidebar Chapter 1</li></ol></div></nav>
<div id="page-wrapper" class="page-wrapper"><div class="page">
<div id="menu-bar" class="menu-bar sticky"><div class="left-buttons"><button>Toggle</button></div>
<h1 class="menu-title">The Rust Programming Language</h1><div class="right-buttons"><a href="print.html">Print</a></div></div>
<div id="content" class="content"><main>
<h2 id="data-types"><a class="header" href="#data-types">Data Types</a></h2>
<p>Every value has a <em>type</em>.</p>
<pre><pre class="playground"><code class="language-rust edition2021"><span class="boring">#![allow(unused)]
</span><span class="boring">fn main() {
</span>let guess: u32 = "42".parse().expect("Not a number!");
<span class="boring">}</span></code></pre></pre>
<table><thead><tr><th>Length</th><th>Signed</th></tr></thead><tbody><tr><td>8-bit</td><td><code>i8</code></td></tr></tbody></table>
</main>
<nav class="nav-wrapper" aria-label="Page navigation"><a rel="prev" href="ch03-01.html" class="mobile-nav-chapters previous">Prev chapter</a></nav>
</div></div>
<nav class="nav-wide-wrapper" aria-label="Page navigation"><a rel="next" href="ch03-03.html" class="nav-chapters next">Next chapter</a></nav>
</div></body></html>"""

DOCBOOK = """<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml"><head>
<meta http-equiv="Content-Type" content="text/html; charset=UTF-8" />
<title>9.4. String Functions and Operators</title>
<meta name="generator" content="DocBook XSL Stylesheets Vsnapshot" /></head><body>
<div class="navheader"><table width="100%"><tr><th colspan="3" align="center">Navheader Chapter 9. Functions</th></tr>
<tr><td><a accesskey="p" href="functions-math.html">Prev</a></td><td><a accesskey="u" href="functions.html">Up</a></td></tr></table><hr /></div>
<div class="sect1" id="FUNCTIONS-STRING"><div class="titlepage"><div><div><h2 class="title" style="clear: both">9.4. String Functions and Operators <a href="#FUNCTIONS-STRING" class="id_link">#</a></h2></div></div></div>
<div class="toc"><dl class="toc"><dt><span class="sect2"><a href="functions-string.html#FUNCTIONS-STRING-FORMAT">9.4.1. format</a></span></dt></dl></div>
<p>This section describes functions for <code class="type">text</code>.</p>
<div class="note"><h3 class="title">Note</h3><p>The concatenation operator accepts non-string input.</p></div>
<pre class="programlisting">SELECT 'Post' || 'greSQL';</pre>
<pre class="screen"><em class="lineannotation"><span class="lineannotation">Result: </span></em><code class="computeroutput">PostgreSQL</code></pre>
<div class="table"><table class="table"><thead><tr><th>Function</th></tr></thead><tbody>
<tr><td><p class="func_signature"><code class="function">upper</code> ( <code class="type">text</code> )</p>
<p>Converts the string to upper case.</p><pre class="programlisting">SELECT upper('tom');
-- TOM</pre></td></tr></tbody></table></div>
<div class="variablelist"><dl class="variablelist"><dt><span class="term">flags</span></dt><dd><p>Flags passed in.</p></dd></dl></div>
</div>
<div class="navfooter"><hr /><table width="100%"><tr><td><a accesskey="p" href="functions-math.html">Prev</a></td><td>Navfooter Home</td></tr></table></div>
</body></html>"""

REFENTRY = """<html><head><meta name="generator" content="DocBook XSL Stylesheets V1.79.2" /><title>CREATE TABLE</title></head>
<body><div class="navheader">Navheader</div>
<div class="refentry" id="SQL-CREATETABLE"><div class="titlepage"></div>
<div class="refnamediv"><h2><span class="refentrytitle">CREATE TABLE</span></h2><p>CREATE TABLE &#8212; define a new table</p></div>
<div class="refsect1"><h2>Description</h2><p>Creates a table.</p></div></div>
<div class="navfooter">Navfooter</div></body></html>"""

VITEPRESS = """<html><head><meta name="generator" content="VitePress v1.0.0"><title>Routing | VitePress</title></head>
<body><div id="app"><div class="Layout"><header class="VPNav"><div class="VPNavBar">VitePress nav bar</div></header>
<aside class="VPSidebar"><nav>Sidebar Guide</nav></aside>
<div class="VPContent has-sidebar" id="VPContent"><div class="VPDoc"><div class="container">
<div class="aside"><div class="aside-container"><nav class="VPDocAsideOutline">On this page outline</nav></div></div>
<div class="content"><main class="main"><div style="position:relative;" class="vp-doc _guide_routing">
<div><h1 id="routing" tabindex="-1">Routing <a class="header-anchor" href="#routing" aria-label="Permalink to &quot;Routing&quot;">&#8203;</a></h1>
<p>File-based routing maps <a href="./markdown">markdown files</a> to pages.</p>
<div class="language-ts vp-adaptive-theme"><button title="Copy Code" class="copy"></button><span class="lang">ts</span><pre class="shiki shiki-themes"><code><span class="line"><span>export default {</span></span>
<span class="line"><span>  srcDir: './src'</span></span>
<span class="line"><span>}</span></span></code></pre></div>
<div class="tip custom-block"><p class="custom-block-title">TIP</p><p>Use clean URLs.</p></div>
</div></div></main>
<footer class="VPDocFooter"><div class="edit-info"><div class="edit-link"><a class="VPLink">Edit this page on GitHub</a></div></div>
<nav class="prev-next"><a class="pager-link prev">Previous page Getting Started</a></nav></footer>
</div></div></div></div></div></div></body></html>"""

STARLIGHT = """<html><head><meta name="generator" content="Astro v4.3.5"><meta name="generator" content="Starlight v0.19.0">
<title>Authoring Content | Starlight</title></head><body>
<header class="header">Starlight site header</header>
<nav class="sidebar">Sidebar Getting Started</nav>
<main><div class="content-panel"><div class="sl-container"><h1 id="_top">Authoring Content</h1></div></div>
<div class="content-panel"><div class="sl-container"><div class="sl-markdown-content">
<p>Starlight supports Markdown.</p>
<div class="expressive-code"><figure class="frame has-title"><figcaption class="header"><span class="title">astro.config.mjs</span></figcaption>
<pre data-language="js"><code><div class="ec-line"><div class="code"><span style="--0:#F97583">import</span> starlight <span>from</span> '@astrojs/starlight';</div></div><div class="ec-line"><div class="code">export default {};</div></div></code></pre>
<div class="copy"><button title="Copy to clipboard" data-code="import starlight">Copy</button></div></figure></div>
<aside aria-label="Note" class="starlight-aside starlight-aside--note"><p class="starlight-aside__title">Note</p><div class="starlight-aside__content"><p>Frontmatter is optional.</p></div></aside>
</div><footer class="sl-flex">Edit page Previous Getting started</footer></div></div></main></body></html>"""

GENERIC = """<html><head><title>Widgets guide - Acme Docs</title><base href="https://cdn.example.net/docs/v2/"></head><body>
<div id="cookie-banner" class="cookie-consent">We use cookies. Accept all cookies</div>
<header><div class="logo">Acme Docs</div><nav><a href="/">Home</a><a href="/pricing">Pricing page</a></nav></header>
<h1 class="site-name">Acme</h1>
<main>
<div class="breadcrumbs"><a href="/">Docs</a> / Guides</div>
<h1>Widgets guide</h1>
<p>Widgets are configured with <a href="config.html">the config file</a> or <a href="/api/">the API</a>.</p>
<p>See <a href="ref.html"><code class="xref"><span class="pre">the</span> <span class="pre">Library</span>
<span class="pre">Reference</span></code></a>.<span hidden>Hidden span text</span></p>
<pre><code class="lang-python"><span class="line-number">1</span>import acme
acme.widget(size=3)</code></pre>
<ul><li>first item</li><li>second item<ul><li>nested item</li></ul></li></ul>
<ol><li>step one</li><li>step two</li></ol>
<h2>Details</h2><h3>Deeper</h3><h4>Deeper still</h4><h5>Five</h5><h6>Six</h6>
<p><a href="#details">jump</a> <img src="img/w.png" alt="a widget"></p>
</main>
<aside class="sidebar">Related articles sidebar</aside>
<footer><p>Copyright Acme Inc footer text</p></footer>
</body></html>"""

NO_MAIN = """<html><head><title>Plain page</title></head><body>
<div id="top"><a href="/">Home</a> <a href="/about">About us</a> <a href="/blog">Blog</a></div>
<nav>Menu entries here</nav>
<div id="wrap"><div id="text"><h1>The real article</h1><p>Lots of useful prose about the topic,
long enough to be the densest part of the page by far, with many words in it.</p>
<p>A second paragraph with more words about the topic at hand.</p></div></div>
<footer>Footer links</footer></body></html>"""

DOCSY = """<html><head><meta name="generator" content="Hugo 0.120.4"><title>Tasks | Kube Docs</title></head>
<body class="td-page"><header><nav class="td-navbar">Docsy navbar</nav></header>
<div class="container-fluid td-outer"><div class="td-main"><div class="row flex-xl-nowrap">
<aside class="col-12 col-md-3 td-sidebar"><nav class="td-sidebar-nav">Docsy sidebar</nav></aside>
<aside class="d-none d-xl-block col-xl-2 td-sidebar-toc"><div class="td-page-meta">View page source Edit this page</div>
<nav id="TableOfContents">Docsy toc</nav></aside>
<main class="col-12 col-md-9 col-xl-8 ps-md-5" role="main"><nav aria-label="breadcrumb" class="td-breadcrumbs">Docsy crumbs</nav>
<div class="td-content"><h1>Run a task<a class="td-heading-self-link" href="#run"></a></h1>
<div class="lead">Tasks run to completion.</div><p>Use a <code>Job</code>.</p>
<div class="highlight"><pre tabindex="0" class="chroma"><code class="language-shell" data-lang="shell"><span class="line"><span class="cl">kubectl apply -f job.yaml
</span></span></code></pre></div>
<div class="d-print-none"><h2 class="feedback--title">Feedback</h2><p class="feedback--question">Was this page helpful?</p></div>
</div></main></div></div></div></body></html>"""

NEXTRA = """<html><head><title>Getting Started – Nextra</title></head><body>
<div class="nextra-nav-container"><nav>Nextra navbar</nav></div>
<div class="nx-mx-auto nx-flex"><aside class="nextra-sidebar-container"><ul><li>Nextra sidebar</li></ul></aside>
<nav class="nextra-toc nx-order-last">On This Page Nextra toc</nav>
<article class="nx-w-full nx-break-words nextra-content"><main class="nx-w-full nx-min-w-0">
<div class="nextra-breadcrumb nx-mt-1.5">Docs › Getting Started</div>
<h1>Getting Started</h1><p>Nextra builds sites from MDX.</p>
<pre data-language="sh"><code><span class="line">npm i nextra</span></code></pre>
</main></article></div><footer class="nextra-footer">Nextra footer MIT</footer></body></html>"""

URL = "https://docs.example.org/en/guide/page.html"


def conv(html: str, url: str = URL, **kw: str) -> Converted:
    return convert_html(html, url, **kw)


def test_converter_id_names_both_libraries() -> None:
    assert CONVERTER_ID.startswith("docbundle-html/")
    assert "selectolax" in CONVERTER_ID and "html-to-markdown" in CONVERTER_ID


@pytest.mark.parametrize(
    ("html", "url", "generator", "title", "start", "present", "absent"),
    [
        pytest.param(
            SPHINX,
            "https://docs.python.org/3/library/functions.html",
            "sphinx",
            "Built-in Functions",
            "# Built-in Functions\n",
            [
                "number of functions built in",  # &nbsp; became a space
                "[str](stdtypes.html#str)",
                "```python3\n>>> abs(-3)\n3\n```",
                "```c\nint main(void)\n{ return 0; }\n```",
                "> **Note**",
                "> Mind the gap.",
                "**plain term**",
                "its definition",
                "Return the absolute value",
                "A sidebar directive's text.",  # docutils <aside>s
                "The footnote text.",
            ],
            ["¶", "Navigation", "Sidebar entry", "Copyright", "next", "Table of Contents"],
            id="sphinx",
        ),
        pytest.param(
            MKDOCS,
            "https://squidfunk.example.io/site/setup/config/",
            "mkdocs",
            "Configuration",
            "",
            [
                "```yaml\nsite_name: demo\ntheme: material\n```",
                "> **Warning**",
                "Restart the server.",
                "| site_name | The name |",  # nbsp and zero-width space cleaned in the table
            ],
            ["Edit", "¶", "Material Site", "Home nav link", "On this page", "Last update", "Previous"],
            id="mkdocs-material",
        ),
        pytest.param(
            DOCUSAURUS,
            URL,
            "docusaurus",
            "Installation",
            "# Installation\n",
            [
                "```bash\nnpm install my-project\nnpm run start\n```",
                "Use Node 18.",
                "**tip**",
                "An aside of prose, kept.",
            ],
            [
                "Aside link",
                "navbar",
                "Sidebar Intro",
                "Breadcrumb",
                "Edit this page",
                "Previous",
                "TOC",
                "Copy",
                "footer",
            ],
            id="docusaurus",
        ),
        pytest.param(
            MDBOOK,
            "https://doc.example-lang.org/book/ch03-02-data-types.html",
            "mdbook",
            "Data Types",  # not the site-name <h1> of the menu bar
            "## Data Types\n",  # the heading's self-link is unwrapped
            [
                '```rust\nlet guess: u32 = "42".parse().expect("Not a number!");\n```',
                "| Length | Signed |\n| --- | --- |\n| 8-bit | `i8` |",
            ],
            [
                "allow(unused)",  # boring lines
                "fn main",
                "Sidebar",
                "Rust Programming Language",
                "Prev chapter",
                "Next chapter",
                "Print",
            ],
            id="mdbook",
        ),
        pytest.param(
            DOCBOOK,
            "https://www.example.org/docs/16/functions-string.html",
            "docbook",
            "9.4. String Functions and Operators",
            "## 9.4. String Functions and Operators\n",  # so no permalink " #" on the first line
            [
                "> **Note**",
                "non-string input",
                "```\nSELECT 'Post' || 'greSQL';\n```",
                "Result: PostgreSQL",
                # a table whose cells hold code blocks is unfolded: the block keeps its lines and its fence
                "Converts the string to upper case.\n\n```\nSELECT upper('tom');\n-- TOM\n```",
                "flags",
                "9.4.1. format",  # a DocBook page's own TOC is content
            ],
            ["#\n", "Navheader", "Navfooter", "Prev", "Up"],
            id="docbook-sect1",
        ),
        pytest.param(
            REFENTRY,
            URL,
            "docbook",
            "CREATE TABLE",  # a refentry has no <h1>
            "",
            ["define a new table", "Creates a table."],
            ["Navheader"],
            id="docbook-refentry",
        ),
        pytest.param(
            VITEPRESS,
            "https://vitepress.example.dev/guide/routing.html",
            "vitepress",
            "Routing",
            "",
            [
                "[markdown files](markdown)",
                "```ts\nexport default {\n  srcDir: './src'\n}\n```",
                "Use clean URLs.",
                "**TIP**",
            ],
            ["\u200b", "nav bar", "Sidebar", "outline", "Edit this page", "Previous page"],
            id="vitepress",
        ),
        pytest.param(
            STARLIGHT,
            URL,
            "starlight",
            "Authoring Content",  # its title stands outside the content
            "# Authoring Content\n",
            [
                "```js\nimport starlight from '@astrojs/starlight';\nexport default {};\n```",
                "> **Note**",
                "Frontmatter is optional.",
            ],
            ["Copy", "site header", "Sidebar", "Edit page"],
            id="starlight",
        ),
        pytest.param(
            DOCSY,
            URL,
            "docsy",
            "Run a task",
            "# Run a task\n",
            ["Tasks run to completion.", "```shell\nkubectl apply -f job.yaml\n```"],
            ["Docsy", "Edit this page", "Feedback", "helpful"],
            id="docsy",
        ),
        pytest.param(
            NEXTRA,
            URL,
            "nextra",
            "Getting Started",
            "",
            ["Nextra builds sites from MDX.", "```sh\nnpm i nextra\n```"],
            ["navbar", "sidebar", "toc", "footer", "Docs ›"],
            id="nextra",
        ),
        pytest.param(
            GENERIC,
            "https://acme.example.com/guides/widgets",
            "generic",
            "Widgets guide",
            "# Widgets guide\n",
            [
                # relative links resolve against <base href>, not the page URL; that host is not the
                # page's, so the kept links are absolute
                "[the config file](https://cdn.example.net/docs/v2/config.html)",
                "[the API](https://cdn.example.net/api/)",
                "jump a widget",  # a link within the page and an image: their text,
                "```python\nimport acme\nacme.widget(size=3)\n```",
                "[`the Library Reference`](https://cdn.example.net/docs/v2/ref.html)",
                "- first item",
                "  - nested item",
                "1. step one",
                *("\n" + "#" * level + " " for level in range(2, 7)),
            ],
            ["Hidden span", "cookie", "Pricing", "Acme Docs", "Related articles", "footer", "Docs /"],
            id="generic",
        ),
        pytest.param(
            NO_MAIN,
            URL,
            "generic",
            "The real article",  # found by density: the page has no <main>
            "",
            ["densest part", "second paragraph"],
            ["About us", "Menu entries", "Footer links"],
            id="density-fallback-without-main",
        ),
    ],
)
def test_a_generators_page_converts_to_its_content_without_chrome(
    html: str, url: str, generator: str, title: str, start: str, present: list[str], absent: list[str]
) -> None:
    out = conv(html, url)
    assert out.generator == generator
    assert out.title == title
    md = out.markdown
    assert md.startswith(start)
    for text in present:
        assert text in md
    for text in absent:
        assert text not in md, text


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Built-in Functions &#8212; Python 3.12.1 documentation", "Built-in Functions"),
        ("Install | Site", "Install"),
        ("Install - Site", "Install"),
        ("9.4. String Functions", "9.4. String Functions"),
        ("C# ¶", "C#"),
        ("Anchors #", "Anchors"),
        ("", "Link text"),
    ],
)
def test_title_from_title_element_then_link_text(title: str, expected: str) -> None:
    html = f"<html><head><title>{title}</title></head><body><main><p>Just prose.</p></main></body></html>"
    assert conv(html, link_text="Link text").title == expected


def test_code_lines_starting_with_a_quote_marker_are_left_alone() -> None:
    html = "<main><p>Shell:</p><pre><code class='language-console'>$ echo a \\\n&gt; b</code></pre></main>"
    assert "```console\n$ echo a \\\n> b\n```" in conv(html).markdown


def test_empty_and_odd_inputs() -> None:
    assert conv("").markdown == ""
    assert conv("", link_text="Fallback").title == "Fallback"
    assert "hello" in conv("hello").markdown
    assert conv("<pre></pre>").markdown.strip("`\n") == ""
    assert "ab" in conv("<p>a\x00b\ud800</p>").markdown  # NUL and a lone surrogate do not raise
    assert meta_refresh_target("\ud800<meta http-equiv=refresh content='0;url=/x'>", URL) is not None


@pytest.mark.parametrize(
    "html", [SPHINX, MKDOCS, DOCUSAURUS, MDBOOK, DOCBOOK, VITEPRESS, STARLIGHT, DOCSY, NEXTRA, GENERIC]
)
def test_deterministic(html: str) -> None:
    assert conv(html) == conv(html)
    assert conv(html).markdown.encode() == conv(html).markdown.encode()


# decode_html ---------------------------------------------------------------------------------------


def test_decode_header_charset_wins() -> None:
    body = '<meta charset="utf-8"><p>café</p>'.encode("latin-1")
    assert "café" in decode_html(body, "text/html; charset=ISO-8859-1")
    assert "caf\ufffd" in decode_html(body, "text/html")  # the meta says UTF-8: é is invalid there


def test_decode_bom() -> None:
    assert decode_html(codecs.BOM_UTF8 + "<p>é</p>".encode(), None) == "<p>é</p>"
    assert decode_html(codecs.BOM_UTF16_LE + "<p>ü</p>".encode("utf-16-le"), None) == "<p>ü</p>"
    assert decode_html(codecs.BOM_UTF16_BE + "<p>ü</p>".encode("utf-16-be"), None) == "<p>ü</p>"


def test_decode_meta() -> None:
    body = '<html><head><meta charset="windows-1251"></head><p>Привет</p>'.encode("cp1251")
    assert "Привет" in decode_html(body, "text/html")
    body = ('<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS"><p>日本語</p>').encode(
        "shift_jis"
    )
    assert "日本語" in decode_html(body, None)


def test_decode_xml_declaration() -> None:
    body = '<?xml version="1.0" encoding="ISO-8859-15"?><html><p>€uro</p></html>'.encode("iso-8859-15")
    assert "€uro" in decode_html(body, "application/xhtml+xml")


def test_decode_bad_bytes_and_labels() -> None:
    assert decode_html(b"<p>\xff\xfe\xfa ok</p>", None).endswith(" ok</p>")
    assert "\ufffd" in decode_html(b"<p>\xc3</p>", "text/html; charset=utf-8")
    assert decode_html(b"<p>x</p>", "text/html; charset=no-such-charset") == "<p>x</p>"
    assert decode_html(b"", None) == ""


@given(st.binary(max_size=300), st.one_of(st.none(), st.text(max_size=40)))
@settings(max_examples=300, deadline=None)
def test_decode_never_raises(body: bytes, content_type: str | None) -> None:
    assert isinstance(decode_html(body, content_type), str)


# meta refresh --------------------------------------------------------------------------------------


def test_meta_refresh() -> None:
    page = '<html><head><meta http-equiv="refresh" content="0; url=../new/page.html"></head></html>'
    assert (
        meta_refresh_target(page, "https://a.example.org/old/x.html") == "https://a.example.org/new/page.html"
    )
    page = "<meta http-equiv='Refresh' content='5;URL=\"https://b.example.org/\"'>"
    assert meta_refresh_target(page, URL) == "https://b.example.org/"
    assert meta_refresh_target('<meta http-equiv="refresh" content="30">', URL) is None
    assert meta_refresh_target("<p>refresh your browser</p>", URL) is None
    assert (
        meta_refresh_target('<meta http-equiv="refresh" content="0; url=javascript:alert(1)">', URL) is None
    )


# properties ----------------------------------------------------------------------------------------

_TAGS = [
    "p",
    "div",
    "main",
    "article",
    "nav",
    "pre",
    "code",
    "h1",
    "h2",
    "ul",
    "li",
    "dl",
    "dt",
    "dd",
    "table",
    "tr",
    "td",
    "th",
    "a",
    "span",
    "aside",
    "header",
    "footer",
    "blockquote",
    "br",
]
_CLASSES = [
    "",
    "admonition note",
    "language-py",
    "highlight-c",
    "headerlink",
    "boring",
    "token-line",
    "md-content__inner",
    "vp-doc",
    "sect1",
    "navheader",
    "toc",
    "body",
    "linenos",
]


@st.composite
def html_docs(draw: st.DrawFn) -> str:
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.integers(0, 2))
        if kind == 0:
            tag = draw(st.sampled_from(_TAGS))
            cls = draw(st.sampled_from(_CLASSES))
            href = draw(st.sampled_from(["", ' href="#x"', ' href="../y"', ' href="http://[bad"']))
            parts.append(f'<{tag} class="{cls}"{href}>')
        elif kind == 1:
            parts.append(f"</{draw(st.sampled_from(_TAGS))}>")
        else:
            parts.append(draw(st.text(max_size=20)))
    return "".join(parts)


@given(st.one_of(st.text(max_size=400), html_docs()))
@settings(max_examples=300, deadline=None)
def test_any_html_converts_deterministically(html: str) -> None:
    first = convert_html(html, URL, link_text="t")
    second = convert_html(html, URL, link_text="t")
    assert first.markdown.encode() == second.markdown.encode()
    assert first == second
    assert isinstance(first.title, str) and first.generator


def _anchors(html: str) -> dict[str, str]:
    """Each heading line of the converted page, with the id it cites."""
    converted = convert_html(html, "https://docs.example.org/page")
    lines = converted.markdown.split("\n")
    assert "\ue000" not in converted.markdown and "{#" not in converted.markdown
    return {lines[i]: anchor for i, anchor in converted.anchors.items()}


@pytest.mark.parametrize(
    ("generator", "body", "heading", "anchor"),
    [
        ("own id (MkDocs, Docusaurus, mdBook)", '<h2 id="install">Install</h2>', "## Install", "install"),
        (
            "Sphinx permalink",
            '<h2>Usage<a class="headerlink" href="#usage">¶</a></h2>',
            "## Usage",
            "usage",
        ),
        (
            "VitePress permalink",
            '<h2>Setup <a class="header-anchor" href="#setup">#</a></h2>',
            "## Setup",
            "setup",
        ),
        (
            "DocBook <a id>",
            '<h2 class="title"><a id="DDL-BASICS"></a>5.1. Basics</h2>',
            "## 5.1. Basics",
            "DDL-BASICS",
        ),
        (
            "Sphinx <section id>",
            '<section id="notes"><h2>Notes</h2><p>Words.</p></section>',
            "## Notes",
            "notes",
        ),
        (
            "DocBook div.sect1 around its titlepage",
            '<div class="sect1" id="ddl-alter"><div class="titlepage"><div><div>'
            '<h2 class="title">5.6. Modifying Tables</h2></div></div></div><p>Words.</p></div>',
            "## 5.6. Modifying Tables",
            "ddl-alter",
        ),
    ],
)
def test_a_headings_id_is_carried_through_the_conversion(
    generator: str, body: str, heading: str, anchor: str
) -> None:
    page = f"<html><body><main><h1>Page</h1><p>Intro words.</p>{body}<p>More words.</p></main></body></html>"
    assert _anchors(page) == {heading: anchor}, generator


def test_no_id_is_guessed_and_a_section_cites_only_its_first_heading() -> None:
    page = (
        "<html><body><main><h1>Page</h1><p>Intro.</p>"
        '<section id="outer"><h2>Outer</h2><p>Words.</p><h3>Inner, no id</h3><p>Words.</p></section>'
        '<h2 id="has space">Bad id</h2><p>Words.</p></main></body></html>'
    )
    assert _anchors(page) == {"## Outer": "outer"}
