"""The main content of a page: which element holds it, and the site's chrome removed from it.

``select_main`` takes the generator's own content element when it knows one, else the generic rules
(``<main>``, ``[role=main]``, ``<article>``), else ``<body>`` with its chrome removed and the densest
block kept (``_densest``). ``remove_chrome`` then removes, inside it: navigation, sidebars, breadcrumbs,
headers without a heading, footers, "edit this page" links, prev/next bars, cookie banners, in-page
tables of contents, buttons, forms, scripts, heading anchors (``¶``, ``#``) and the generator's own
chrome. Text lengths are computed once per tree (``text_lengths``), so both are linear in the page's
size however deep it is. It changes the tree in place and converts nothing (``convert.py`` does).
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

__all__ = [
    "ADMONITION_CLASS_RE",
    "SOURCE_LINK_TEXTS",
    "remove_chrome",
    "select_main",
    "text_len",
    "text_lengths",
]


# The generator's main-content element, best first.
_MAIN_SELECTORS: dict[str, tuple[str, ...]] = {
    "sphinx": ("div[role=main]", "div.body", "article[role=main]", "div.rst-content", "main"),
    "mkdocs": ("article.md-content__inner", "div.md-content", "[role=main]", "main"),
    "docusaurus": (".theme-doc-markdown", "article .markdown", "article", "main"),
    "mdbook": ("#content > main", "#content main", "main"),
    "docbook": (),  # the body's DocBook division, found by _docbook_main
    "vitepress": (".vp-doc", "main"),
    "starlight": (".sl-markdown-content", "main"),
    "mintlify": ("#content-area", ".mdx-content", "main"),
    "gitbook": ("main", "article"),
    "nextra": ("main", "article"),
    "docsy": (".td-content", "main"),
    "generic": ("main", "[role=main]", "article"),
}

_DOCBOOK_DIVISIONS = (
    "book",
    "part",
    "chapter",
    "appendix",
    "preface",
    "article",
    "reference",
    "refentry",
    "sect1",
    "sect2",
    "sect3",
    "section",
    "glossary",
    "index",
    "bibliography",
    "colophon",
    "set",
    "setindex",
    "legalnotice",
    "dedication",
    "acknowledgements",
)

# Chrome removed inside the main element: what every page may hold, then each generator's own. Lexbor
# matches a selector list node by node (about 20 us per selector on a 90 KB page), so a page known to
# come from a generator is searched for that generator's chrome only; an unknown one for all of it.
_CHROME_COMMON = (
    "nav",
    "[role=navigation]",
    "[role=banner]",
    "[role=contentinfo]",
    "[role=search]",
    "footer",
    "script",
    "style",
    "noscript",
    "template",
    "button",
    "form",
    "input",
    "select",
    "textarea",
    "iframe",
    "dialog",
    "link",
    "meta",
    "[class*='breadcrumb']",
    "[class*='cookie']",
    "[id*='cookie']",
    "[class*='consent']",
    ".linenos",
    ".lineno",
)
_CHROME_BY_GENERATOR: dict[str, tuple[str, ...]] = {
    "sphinx": (
        "a.headerlink",
        ".linenodiv",
        "div.contents.local",
        "div.topic.contents",
        ".sphinxsidebar",
        ".related",
        ".rst-footer-buttons",
        ".copybutton",
    ),
    "mkdocs": (
        "a.headerlink",
        ".linenodiv",
        ".md-source-file",
        ".md-content__button",
        ".md-clipboard",
        ".md-sidebar",
        "[class*='toc-']",
    ),
    "docusaurus": (
        "a.hash-link",
        ".theme-edit-this-page",
        "[class*='editThisPage']",
        ".pagination-nav",
        ".theme-doc-footer",
        ".theme-doc-toc-mobile",
        ".theme-doc-toc-desktop",
        ".theme-doc-version-banner",
        ".theme-doc-version-badge",
        ".table-of-contents",
        "[class*='toc-']",
    ),
    "mdbook": (".boring", ".buttons", ".nav-chapters", ".mobile-nav-chapters", "a.header-anchor"),
    "docbook": ("div.navheader", "div.navfooter"),
    "vitepress": (
        "a.header-anchor",
        ".VPDocFooter",
        ".VPDocAside",
        ".aside-container",
        ".edit-link",
        ".prev-next",
        ".last-updated",
        "span.lang",
        ".line-numbers-wrapper",
    ),
    "starlight": (".sl-anchor-link", "a.anchor-link", ".pagination-links", ".meta", "[class*='toc-']"),
    "docsy": (
        "a.td-heading-self-link",
        ".td-page-meta",
        ".feedback",
        "[class*='feedback--']",
        ".d-print-none",  # Docsy's feedback widget and page meta: never printed, never content
        ".td-toc",
        "#TableOfContents",
    ),
    "nextra": (".nextra-toc", "a.subheading-anchor", "[class*='nextra-breadcrumb']"),
}
# For pages of no known generator (and the few generators whose markup varies): everything above and
# the common names of such chrome.
_CHROME_OTHER = (
    "a.headerlink",
    "a.hash-link",
    "a.header-anchor",
    "a.anchor-link",
    "a.anchorjs-link",
    ".heading-anchor",
    "[aria-label='breadcrumbs']",
    "[aria-label='Breadcrumbs']",
    ".edit-this-page",
    "[class*='editThisPage']",
    ".edit-link",
    ".last-updated",
    ".lastUpdated",
    ".prev-next",
    ".prev_next",
    ".pager",
    ".table-of-contents",
    ".toc",
    "[class*='toc-']",
    "#TableOfContents",
    ".cc-banner",
    "#onetrust-banner-sdk",
    ".line-numbers-rows",
    "span.line-number",
    ".hljs-ln-numbers",
    "td.gutter",
    ".copybutton",
    ".copy-button",
    ".clipboard",
    ".code-copy",
    ".linenodiv",
)


def _chrome_selector(generator: str) -> str:
    own = _CHROME_BY_GENERATOR.get(generator)
    if own is None:
        extra = _CHROME_OTHER + tuple(sel for group in _CHROME_BY_GENERATOR.values() for sel in group)
        if generator != "generic":
            extra = tuple(sel for sel in extra if sel not in ("div.navheader", "div.navfooter"))
    else:
        extra = own
    # DocBook's div.toc is the content of its index pages: never removed there.
    selectors = dict.fromkeys(_CHROME_COMMON + extra)
    return ", ".join(selectors)


_CHROME = {name: _chrome_selector(name) for name in (*_CHROME_BY_GENERATOR, "generic", "mintlify", "gitbook")}


# ``aside`` and ``header`` are chrome unless they hold content (admonitions, the page's heading).
ADMONITION_CLASS_RE = re.compile(
    r"\b(admonition|note|warning|tip|caution|important|danger|hint|attention|error|info|seealso|"
    r"callout|alert|starlight-aside|theme-admonition|custom-block)\b",
    re.IGNORECASE,
)
_GLYPHS = frozenset({"¶", "#", "§", "🔗", "⚓", "#️⃣", "∞", "link"})
# The text of a link to a heading's or entry's source code (Node's API docs, Sphinx viewcode, rustdoc).
SOURCE_LINK_TEXTS = frozenset({"[src]", "[source]", "source", "src", "[view source]", "view source"})


def text_len(node: LexborNode) -> int:
    """The length of the node's text, stripped (what ``text_lengths`` computes for every node at once)."""
    return len(node.text(deep=True, strip=True))


def _docbook_main(tree: LexborHTMLParser) -> LexborNode | None:
    body = tree.body
    if body is None:
        return None
    for child in body.iter():
        if child.tag != "div":
            continue
        classes = (child.attributes.get("class") or "").split()
        if any(c in _DOCBOOK_DIVISIONS for c in classes):
            return child
    return None


def text_lengths(root: LexborNode) -> tuple[dict[int, int], dict[int, int]]:
    """Every node's ``text_len`` and link-text length under ``root`` (by ``mem_id``), in one pass.

    Computed bottom-up over the nodes in reverse document order, where each node comes after all its
    descendants: linear in the size of the tree, however deep it is (``text_len`` called per level of
    a 100,000-deep page held a worker for over a minute, issue 19). The link-text length of a node is
    the text length of the ``<a>`` elements inside it.
    """
    lengths: dict[int, int] = {}
    linked: dict[int, int] = {}
    root_id = root.mem_id
    for node in reversed(list(root.traverse(include_text=True))):
        key = node.mem_id
        if node.tag == "-text":
            length = len((node.text_content or "").strip())
            link = 0
        else:
            length = lengths.get(key, 0)
            link = length if node.tag == "a" else linked.get(key, 0)
            lengths[key] = length
            linked[key] = link
        if key == root_id:
            break
        parent = node.parent
        if parent is not None and (length or link):
            pkey = parent.mem_id
            lengths[pkey] = lengths.get(pkey, 0) + length
            linked[pkey] = linked.get(pkey, 0) + link
    return lengths, linked


def _densest(body: LexborNode) -> LexborNode:
    """The block holding most of the page's text once chrome is gone (the text-density fallback).

    Walks down from ``body`` while one child element holds at least 85% of the text of its parent. The
    text lengths are computed once (``text_lengths``), so the walk is linear in the page's size.
    """
    lengths, _ = text_lengths(body)
    node = body
    while True:
        total = lengths.get(node.mem_id, 0)
        if total == 0:
            return node
        best: LexborNode | None = None
        for child in node.iter():
            if child.tag in ("p", "pre", "table", "ul", "ol", "dl", "h1", "h2", "h3", "blockquote"):
                return node  # content sits at this level
            if lengths.get(child.mem_id, 0) >= 0.85 * total:
                best = child
                break
        if best is None:
            return node
        node = best


def _sphinx_sections(tree: LexborHTMLParser) -> LexborNode | None:
    """The element holding a Sphinx page's top-level sections, for themes without ``role=main``.

    Such themes (Django's) put the site header and its navigation bar beside the content; on a short
    index page they hold more than a sixth of the text, so the text-density walk would keep them.
    """
    first = tree.css_first("div.section, section")
    if first is None:
        return None
    parent = first.parent
    if parent is None or parent.tag in ("body", "html"):
        return first
    return parent


def select_main(tree: LexborHTMLParser, generator: str) -> LexborNode | None:
    """The page's main content node (by the generator's selectors, else the densest block), or None."""
    if generator == "docbook":
        found = _docbook_main(tree)
        if found is not None:
            return found
    for selector in _MAIN_SELECTORS.get(generator, ()) + _MAIN_SELECTORS["generic"]:
        node = tree.css_first(selector)
        if node is not None and text_len(node) > 0:
            return node
    if generator == "sphinx":
        found = _sphinx_sections(tree)
        if found is not None:
            return found
    body = tree.body
    if body is None:
        return None
    remove_chrome(body, generator)
    for node in body.css("header, aside"):
        node.decompose()
    return _densest(body)


def remove_chrome(main: LexborNode, generator: str) -> None:
    """Remove the navigation, sidebars, footers and other chrome left inside ``main``."""
    for node in main.css(_CHROME[generator]):
        node.decompose()
    for node in main.css("header"):
        if node.css_first("h1, h2") is None:
            node.decompose()
    if generator != "sphinx":  # docutils writes sidebars, topics and footnotes as <aside>: content
        asides = main.css("aside")
        if asides:
            # Lengths taken once for all of them (asides nest), each judged on the whole tree; then the
            # removed ones go innermost first, so none is removed after an aside around it.
            lengths, linked = text_lengths(main)
            removed: list[LexborNode] = []
            for node in asides:
                if ADMONITION_CLASS_RE.search(node.attributes.get("class") or ""):
                    continue
                # Navigation, not prose: at least half of its text is link text (or it has none).
                if linked.get(node.mem_id, 0) * 2 >= lengths.get(node.mem_id, 0):
                    removed.append(node)
            for node in reversed(removed):
                node.decompose()
    # Heading anchors: a glyph link goes, a link around the heading's own text is unwrapped.
    # A link to the source code ("[src]", "[source]") goes wherever it points.
    for anchor in main.css("h1 a, h2 a, h3 a, h4 a, h5 a, h6 a, dt a[href^='#']"):
        href = anchor.attributes.get("href")
        text = anchor.text(deep=True, strip=True)
        if text.lower() in SOURCE_LINK_TEXTS:
            anchor.decompose()
            continue
        if href is None or not href.startswith("#"):
            continue
        if text in _GLYPHS or not text:
            if anchor.css_first("img") is None:
                anchor.decompose()
        elif anchor.parent is not None and anchor.parent.tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            anchor.unwrap()
