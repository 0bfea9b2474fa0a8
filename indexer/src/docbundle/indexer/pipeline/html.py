"""HTML pages to markdown: decode the bytes, find the main content, convert it.

A pure module (no network, no files), run inside the build's worker processes. The HTML is parsed
with selectolax (lexbor); the main content is chosen, cleaned of the site's chrome and normalised in
that tree; then the compiled ``html-to-markdown`` turns it into markdown. Both libraries were chosen by
measurement on real Sphinx, mdBook and DocBook sites (see the stack facts, point 17).

The steps of ``convert_html``:

1. ``detect_generator``: which documentation generator wrote the page, from its markers only (the
   ``<meta name="generator">``, well-known classes and ids; never the host name).
2. The main element: the generator's own content element when it knows one, else the generic rules
   (``<main>``, ``[role=main]``, ``<article>``), else ``<body>`` with its chrome removed and the densest
   block kept (``_densest``).
3. Cleaning inside it: navigation, sidebars, breadcrumbs, headers without a heading, footers, "edit
   this page" links, prev/next bars, cookie banners, in-page tables of contents, buttons, forms,
   scripts, heading anchors (``¶``, ``#``) and the generator's own chrome.
4. Normalising: every code block becomes ``<pre><code class="language-x">`` holding its plain text
   (no line numbers, copy buttons or mdBook's hidden "boring" lines; a line per ``.token-line`` or
   ``<br>``); admonitions become blockquotes opening with a bold label; a text-only ``<dt>`` becomes
   bold.
5. Conversion with links made absolute against ``<base href>`` or the page URL; then no-break spaces
   become spaces and zero-width spaces go (in code and tables as everywhere).

The title is the main content's top heading (a site-name ``<h1>`` outside it is never taken), else the
``<title>`` without its site suffix, else the link text the llms.txt gave. Everything is deterministic:
the same input gives byte-identical output.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from importlib.metadata import version as _dist_version
from urllib.parse import urljoin, urlsplit

import html_to_markdown
from selectolax.lexbor import LexborHTMLParser, LexborNode

from .nesting import bound_nesting

__all__ = [
    "CONVERTER_ID",
    "Converted",
    "base_url",
    "convert_html",
    "decode_html",
    "detect_generator",
    "meta_refresh_target",
    "parse_html",
    "remove_chrome",
    "select_main",
]


def _short_version(dist: str) -> str:
    parts = _dist_version(dist).split(".")
    return ".".join(parts[:2])


#: The converter's name and version, recorded per document in the manifests. Its own number changes
#: whenever the output for the same HTML may change.
CONVERTER_ID = (
    f"docbundle-html/1 (selectolax {_short_version('selectolax')}, "
    f"html-to-markdown {_short_version('html-to-markdown')})"
)


@dataclass(frozen=True)
class Converted:
    """One converted page."""

    title: str
    """The page's title; ``""`` when none was found."""
    markdown: str
    generator: str
    """``sphinx``, ``mkdocs``, ``docusaurus``, ``mdbook``, ``docbook``, ``vitepress``, ``starlight``,
    ``mintlify``, ``gitbook``, ``nextra``, ``docsy`` or ``generic``."""


def parse_html(html: str) -> LexborHTMLParser:
    """The page's tree, its nesting first bounded to ``nesting.MAX_DEPTH`` (lexbor is quadratic in depth)."""
    return LexborHTMLParser(bound_nesting(html))


# --------------------------------------------------------------------------------------------------
# Decoding

_CHARSET_RE = re.compile(rb"""charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_META_RE = re.compile(rb"<meta\b[^>]*>", re.IGNORECASE)
_XML_DECL_RE = re.compile(rb"""^\s*<\?xml\b[^>]*\bencoding\s*=\s*["']([A-Za-z0-9_.:-]+)["']""")
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# What the WHATWG encoding standard maps these labels to.
_ALIASES = {
    "iso-8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "x-sjis": "shift_jis",
    "utf8": "utf-8",
    "unicode": "utf-16-le",
}


def _codec(label: str | bytes | None) -> str | None:
    """The Python codec for a charset label, or ``None`` when there is none or it is unknown."""
    if label is None:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "replace")
    name = label.strip().strip("\"'").lower()
    if not name:
        return None
    name = _ALIASES.get(name, name)
    try:
        return str(codecs.lookup(name).name)
    except LookupError:
        return None


def _header_charset(content_type: str | None) -> str | None:
    if not content_type:
        return None
    match = _CHARSET_RE.search(content_type.encode("latin-1", "replace"))
    return _codec(match.group(1)) if match else None


def _sniff_meta(head: bytes) -> str | None:
    for tag in _META_RE.finditer(head):
        text = tag.group(0)
        lower = text.lower()
        if b"charset" not in lower:
            continue
        # <meta charset="x"> or <meta http-equiv="Content-Type" content="text/html; charset=x">
        match = _CHARSET_RE.search(text)
        if match:
            codec = _codec(match.group(1))
            if codec:
                # A page declaring UTF-16 in ASCII-compatible bytes is not UTF-16 (WHATWG).
                return "utf-8" if codec.startswith("utf_16") or codec.startswith("utf-16") else codec
    return None


def decode_html(body: bytes, content_type: str | None) -> str:
    """Text of an HTML (or XHTML) response body; never raises.

    The charset comes from the ``Content-Type`` header, else a byte order mark, else ``<meta charset>``
    or ``<meta http-equiv="Content-Type">`` in the first 4 KiB, else an ``<?xml encoding?>``
    declaration, else UTF-8. Bytes that are not valid in the chosen charset become U+FFFD; a BOM is
    never part of the text.
    """
    codec = _header_charset(content_type)
    start = 0
    if codec is None:
        for bom, name in _BOMS:
            if body.startswith(bom):
                codec, start = name, len(bom)
                break
    if codec is None:
        head = body[:4096]
        codec = _sniff_meta(head)
        if codec is None:
            match = _XML_DECL_RE.match(head)
            codec = _codec(match.group(1)) if match else None
    if codec is None:
        codec = "utf-8"
    try:
        text = body[start:].decode(codec, "replace")
    except Exception:  # a codec that fails on its own (not on the bytes): fall back to UTF-8
        text = body[start:].decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


# --------------------------------------------------------------------------------------------------
# Meta refresh

# Each of these matches one run of one kind of character from a given position: linear, with no
# backtracking, whatever the content attribute holds (issue 19: a lazy ``(.*?)\1\s*$`` took seconds on
# 20,000 spaces).
_WS = " \t\n\f\r"
_WS_RUN = re.compile(r"[ \t\n\f\r]*")
_TIME_RUN = re.compile(r"[0-9.]*")


def _skip(run: re.Pattern[str], text: str, pos: int) -> int:
    """Where the run of ``run``'s characters starting at ``pos`` ends (``pos`` when there is none)."""
    match = run.match(text, pos)
    return match.end() if match else pos


def refresh_url(content: str) -> str | None:
    """The URL in a refresh ``content`` value: ``""`` for a plain reload, ``None`` when it is not one.

    The WHATWG "shared declarative refresh steps", one pass over ``content`` (linear in its length): a
    time (digits and dots), a ``;`` or ``,`` or spaces, then an optional
    ``url =`` (any case), then the URL, whose surrounding quotes go; a quoted URL ends at its closing
    quote. Leading and trailing spaces of the URL go too.
    """
    n = len(content)
    start = _skip(_WS_RUN, content, 0)
    if start >= n or not (content[start].isascii() and (content[start].isdigit() or content[start] == ".")):
        return None  # no time: not a refresh (as browsers read it)
    pos = _skip(_TIME_RUN, content, start)
    if pos >= n:
        return ""
    if content[pos] not in ";," + _WS:
        return None
    pos = _skip(_WS_RUN, content, pos)
    if pos < n and content[pos] in ";,":
        pos = _skip(_WS_RUN, content, pos + 1)
    if pos >= n:
        return ""
    if content[pos : pos + 3].lower() == "url":
        after = _skip(_WS_RUN, content, pos + 3)
        if after < n and content[after] == "=":
            pos = _skip(_WS_RUN, content, after + 1)
    url = content[pos:]
    if url[:1] in ("'", '"'):
        end = url.find(url[0], 1)
        url = url[1:] if end < 0 else url[1:end]
    return url.strip(_WS)


def meta_refresh_target(html: str, url: str) -> str | None:
    """The absolute URL a ``<meta http-equiv="refresh" content="0; url=...">`` page redirects to.

    ``None`` when the page has no such tag, or the tag names no URL (a plain reload). Linear in the
    page's size (one parse, one pass over the attribute); the crawler runs it off its event loop.
    """
    if "refresh" not in html.lower():
        return None
    tree = parse_html(html)
    for meta in tree.css("meta[http-equiv]"):
        if (meta.attributes.get("http-equiv") or "").strip().lower() != "refresh":
            continue
        target = refresh_url(meta.attributes.get("content") or "")
        if not target:
            continue
        absolute = urljoin(base_url(tree, url), target)
        if urlsplit(absolute).scheme not in ("http", "https"):
            return None
        return absolute
    return None


def base_url(tree: LexborHTMLParser, url: str) -> str:
    """The address the page's relative links resolve against: its http(s) ``<base href>``, else ``url``."""
    base = tree.css_first("base[href]")
    if base is not None:
        href = (base.attributes.get("href") or "").strip()
        if href:
            joined = urljoin(url, href)
            if urlsplit(joined).scheme in ("http", "https"):
                return joined
    return url


# --------------------------------------------------------------------------------------------------
# Generators

# (generator, marker selector, meta-generator substrings). The first match wins; the meta generator is
# looked at first.
_META_GENERATORS = (
    ("docusaurus", "docusaurus"),
    ("vitepress", "vitepress"),
    ("starlight", "starlight"),
    ("mkdocs", "mkdocs"),
    ("sphinx", "sphinx"),
    ("sphinx", "docutils"),
    ("mdbook", "mdbook"),
    ("docbook", "docbook"),
    ("mintlify", "mintlify"),
    ("gitbook", "gitbook"),
    ("nextra", "nextra"),
)
_MARKERS = (
    ("docusaurus", "#__docusaurus, [class*='theme-doc-markdown'], .docusaurus-highlight-code-line"),
    ("vitepress", ".vp-doc, #VPContent"),
    ("starlight", ".sl-markdown-content, starlight-theme-select"),
    ("mkdocs", ".md-content, .md-nav"),
    ("sphinx", "a.headerlink, div.sphinxsidebar, div.bodywrapper, div.rst-content"),
    ("mdbook", "#mdbook-help-container, #content > main, .menu-bar > .menu-title"),
    ("docbook", "div.navheader, div.navfooter, body > div.refentry, body > div.sect1, body > div.chapter"),
    ("mintlify", "#content-area, .mdx-content"),
    ("gitbook", "[class*='gitbook']"),
    ("nextra", "[class*='nextra-']"),
    ("docsy", ".td-content, body.td-page, body.td-section"),
)

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

# A title heading some generators put outside their content element.
_TITLE_OUTSIDE: dict[str, str] = {
    "starlight": "h1#_top",
    "mintlify": "#page-title",
    "vitepress": "h1",
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
_ADMONITION_CLASS_RE = re.compile(
    r"\b(admonition|note|warning|tip|caution|important|danger|hint|attention|error|info|seealso|"
    r"callout|alert|starlight-aside|theme-admonition|custom-block)\b",
    re.IGNORECASE,
)
_ADMONITION_SELECTOR = ", ".join(
    (
        "div.admonition",
        "div.note",
        "div.warning",
        "div.tip",
        "div.caution",
        "div.important",
        "div.danger",
        "div.hint",
        "div.attention",
        "div.error",
        "div.seealso",
        "div.theme-admonition",
        "div.custom-block",
        "aside.starlight-aside",
        "aside.admonition",
        "div.alert",
        "div.callout",
        "blockquote.admonition",
    )
)
_ADMONITION_TITLE = (
    ".admonition-title, .admonition-heading, .starlight-aside__title, .custom-block-title, "
    "h3.title, .callout-title, .alert-heading"
)

_LANG_CLASS_RE = re.compile(r"(?:^|\s)(?:language|lang|highlight|brush:?)-?([A-Za-z0-9_+#.-]+)")
_NOT_A_LANGUAGE = frozenset(
    {
        "default",
        "none",
        "text",
        "plain",
        "plaintext",
        "nohighlight",
        "notranslate",
        "source",
        "output",
        "console-output",
        "",
    }
)
_GLYPHS = frozenset({"¶", "#", "§", "🔗", "⚓", "#️⃣", "∞", "link"})

_TITLE_SEPARATORS = (" — ", " – ", " | ", " · ", " :: ", " - ")
_SPACE_RE = re.compile(r"\s+")
# Anchor glyphs left at the end of a heading's text ("C#" keeps its "#": only a detached one goes).
_TRAILING_GLYPH_RE = re.compile(r"(?:\s*[¶§🔗⚓]|\s+#)+$")
_BLANK_LINES_RE = re.compile(r"\n{3,}")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# No-break spaces become spaces; zero-width spaces, word joiners, BOMs and soft hyphens go.
_INVISIBLE = (("\u00a0", " "), ("\u200b", ""), ("\u2060", ""), ("\ufeff", ""), ("\u00ad", ""))


def _plain_spaces(text: str) -> str:
    """``text`` with ``_INVISIBLE`` replaced (``str.translate`` with a dict is several times slower)."""
    if text.isascii():
        return text
    for char, replacement in _INVISIBLE:
        if char in text:
            text = text.replace(char, replacement)
    return text


def detect_generator(tree: LexborHTMLParser) -> str:
    """The documentation generator that wrote the page, from its markers; ``generic`` if unknown."""
    for meta in tree.css("meta[name=generator]"):
        content = (meta.attributes.get("content") or "").lower()
        for name, needle in _META_GENERATORS:
            if needle in content:
                return name
        if "hugo" in content and tree.css_first(".td-content, body.td-page, .td-main") is not None:
            return "docsy"
        if "astro" in content and tree.css_first(".sl-markdown-content") is not None:
            return "starlight"
    for name, selector in _MARKERS:
        if tree.css_first(selector) is not None:
            return name
    return "generic"


def _text_len(node: LexborNode) -> int:
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


def _text_lengths(root: LexborNode) -> tuple[dict[int, int], dict[int, int]]:
    """Every node's ``_text_len`` and link-text length under ``root`` (by ``mem_id``), in one pass.

    Computed bottom-up over the nodes in reverse document order, where each node comes after all its
    descendants: linear in the size of the tree, however deep it is (``_text_len`` called per level of
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
    text lengths are computed once (``_text_lengths``), so the walk is linear in the page's size.
    """
    lengths, _ = _text_lengths(body)
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


def select_main(tree: LexborHTMLParser, generator: str) -> LexborNode | None:
    """The page's main content node (by the generator's selectors, else the densest block), or None."""
    if generator == "docbook":
        found = _docbook_main(tree)
        if found is not None:
            return found
    for selector in _MAIN_SELECTORS.get(generator, ()) + _MAIN_SELECTORS["generic"]:
        node = tree.css_first(selector)
        if node is not None and _text_len(node) > 0:
            return node
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
            lengths, linked = _text_lengths(main)
            removed: list[LexborNode] = []
            for node in asides:
                if _ADMONITION_CLASS_RE.search(node.attributes.get("class") or ""):
                    continue
                # Navigation, not prose: at least half of its text is link text (or it has none).
                if linked.get(node.mem_id, 0) * 2 >= lengths.get(node.mem_id, 0):
                    removed.append(node)
            for node in reversed(removed):
                node.decompose()
    # Heading anchors: a glyph link goes, a link around the heading's own text is unwrapped.
    for anchor in main.css("h1 a, h2 a, h3 a, h4 a, h5 a, h6 a, dt a[href^='#']"):
        href = anchor.attributes.get("href")
        if href is None or not href.startswith("#"):
            continue
        text = anchor.text(deep=True, strip=True)
        if text in _GLYPHS or not text:
            if anchor.css_first("img") is None:
                anchor.decompose()
        elif anchor.parent is not None and anchor.parent.tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            anchor.unwrap()


def _language(pre: LexborNode) -> str:
    node: LexborNode | None = pre.css_first("code")
    candidates: list[LexborNode] = []
    if node is not None:
        candidates.append(node)
    ancestor: LexborNode | None = pre
    for _ in range(4):
        if ancestor is None:
            break
        candidates.append(ancestor)
        ancestor = ancestor.parent
    for candidate in candidates:
        attrs = candidate.attributes
        data = attrs.get("data-language") or attrs.get("data-lang")
        if data and data.strip().lower() not in _NOT_A_LANGUAGE:
            return data.strip().lower()
        classes = attrs.get("class") or ""
        for match in _LANG_CLASS_RE.finditer(classes):
            lang = match.group(1).lower()
            if lang not in _NOT_A_LANGUAGE and lang != "js-code":
                return lang
    return ""


def _code_text(pre: LexborNode) -> str:
    lines = pre.css(".token-line, .ec-line, .code-line")
    if lines:
        text = "\n".join(line.text(deep=True).rstrip("\n") for line in lines)
    else:
        for br in pre.css("br"):
            br.replace_with("\n")
        text = pre.text(deep=True)
    text = _plain_spaces(text)
    return text.strip("\n")


def _normalise_code(main: LexborNode, tree: LexborHTMLParser) -> None:
    # Pygments' line-number tables: keep only the code cell's block.
    for table in main.css("table.highlighttable, table.codehilitetable"):
        pre = table.css_first("td.code pre") or table.css_first("pre")
        if pre is not None:
            lang = _language(pre)
            if lang:
                pre.attrs["data-language"] = lang
            table.replace_with(pre)
        else:
            table.decompose()
    for pre in main.css("pre"):
        if pre.parent is not None and pre.parent.tag == "pre":
            continue
        lang = _language(pre)
        text = _code_text(pre)
        block = tree.create_node("pre")
        code = tree.create_node("code")
        if lang:
            code.attrs["class"] = f"language-{lang}"
        code.insert_child(text)
        block.insert_child(code)
        pre.replace_with(block)


def _normalise_admonitions(main: LexborNode, tree: LexborHTMLParser) -> None:
    for box in main.css(_ADMONITION_SELECTOR):
        if box.parent is None:
            continue
        title_node = box.css_first(_ADMONITION_TITLE)
        if title_node is not None:
            label = _SPACE_RE.sub(" ", title_node.text(deep=True)).strip()
        else:
            classes = (box.attributes.get("class") or "").split()
            label = next(
                (
                    c
                    for c in classes
                    if c
                    not in (
                        "admonition",
                        "theme-admonition",
                        "custom-block",
                        "starlight-aside",
                        "alert",
                        "callout",
                    )
                    and _ADMONITION_CLASS_RE.fullmatch(c)
                ),
                "",
            )
            label = label.capitalize()
        quote = tree.create_node("blockquote")
        if label:
            para = tree.create_node("p")
            strong = tree.create_node("strong")
            strong.insert_child(label)
            para.insert_child(strong)
            quote.insert_child(para)
        if title_node is not None:
            title_node.decompose()
        for child in box.iter(include_text=True):
            quote.insert_child(child)
        box.replace_with(quote)


def _normalise_definitions(main: LexborNode, tree: LexborHTMLParser) -> None:
    for term in main.css("dt"):
        if next(iter(term.iter()), None) is not None:
            continue  # markup inside (an API signature): kept as it is
        text = _SPACE_RE.sub(" ", term.text(deep=True)).strip()
        if not text:
            continue
        strong = tree.create_node("strong")
        strong.insert_child(text)
        for child in list(term.iter(include_text=True)):
            child.decompose()
        term.insert_child(strong)


def _unfold_block_tables(main: LexborNode, tree: LexborHTMLParser) -> None:
    """A table whose cells hold code blocks becomes one block per cell, row after row.

    A markdown table cell holds one line, so a ``<pre>`` in it would lose its lines and its fence
    (PostgreSQL's function tables: signature, description and an example block in one cell).
    """
    for table in main.css("table"):
        if table.parent is None or table.css_first("pre") is None:
            continue
        if len(table.css("table")) > 1:  # the table itself matches too
            continue  # nested tables: the inner one is unfolded on its own, if at all
        unfolded = tree.create_node("div")
        for cell in table.css("th, td"):
            block = tree.create_node("div")
            for child in cell.iter(include_text=True):
                block.insert_child(child)
            unfolded.insert_child(block)
        table.replace_with(unfolded)


def _clean_title(text: str) -> str:
    text = _SPACE_RE.sub(" ", _plain_spaces(text)).strip()
    return _TRAILING_GLYPH_RE.sub("", text)


def _top_heading(main: LexborNode) -> str:
    for level in ("h1", "h2", "h3", "h4", "h5", "h6"):
        heading = main.css_first(level)
        if heading is not None:
            title_span = heading.css_first("span.refentrytitle")
            text = _clean_title((title_span or heading).text(deep=True))
            if text:
                return text
    title_span = main.css_first("span.refentrytitle")
    if title_span is not None:
        return _clean_title(title_span.text(deep=True))
    return ""


def _document_title(tree: LexborHTMLParser) -> str:
    node = tree.css_first("title")
    if node is None:
        return ""
    text = _clean_title(node.text(deep=True))
    for separator in _TITLE_SEPARATORS:
        head, found, _site = text.rpartition(separator)
        if found and head.strip():
            return head.strip()
    return text


def _options(base: str) -> html_to_markdown.ConversionOptions:
    return html_to_markdown.ConversionOptions(
        heading_style="atx",
        bullets="-",
        code_block_style="backticks",
        extract_metadata=False,
        preprocessing=html_to_markdown.PreprocessingOptions(enabled=False),
        autolinks=False,
        base_url=base,
        skip_images=False,
        hidden_content="drop",
        wrap=False,
        newline_style="backslash",
        compact_tables=True,  # no padding: a wide cell would widen every row of its column
    )


def _separate_quotes(markdown: str) -> str:
    """A blank line before a blockquote glued to the paragraph above it (outside code fences)."""
    if "\n>" not in markdown:
        return markdown
    out: list[str] = []
    fence = ""
    previous = ""
    for line in markdown.split("\n"):
        match = _FENCE_RE.match(line)
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


def convert_html(html: str, url: str, *, link_text: str = "") -> Converted:
    """Convert one HTML page to markdown, keeping only its main content. Deterministic."""
    tree = parse_html(html)
    generator = detect_generator(tree)
    base = base_url(tree, url)
    main = select_main(tree, generator)
    title = ""
    markdown = ""
    if main is not None:
        remove_chrome(main, generator)
        _normalise_code(main, tree)
        _normalise_admonitions(main, tree)
        _normalise_definitions(main, tree)
        _unfold_block_tables(main, tree)
        title = _top_heading(main)
        outside = _TITLE_OUTSIDE.get(generator)
        prefix = ""
        if not title and outside:
            heading = tree.css_first(outside)
            if heading is not None:
                title = _clean_title(heading.text(deep=True))
                if title:
                    prefix = f"# {title}\n\n"
        # Spans carry no markdown; unwrapped they cannot split an inline code run (html-to-markdown
        # turns a line break between two spans inside <code> into a hard break), and the converter
        # reads less markup. Hidden ones go first, as the converter would have dropped them.
        for node in main.css("span[hidden], span[style*='display:none'], span[style*='display: none']"):
            node.decompose()
        main.unwrap_tags(["span"])
        try:
            result = html_to_markdown.convert(main.html or "", _options(base))
            markdown = result.content or ""
        except Exception:  # the converter refused the fragment: its text is better than nothing
            markdown = main.text(deep=True, separator="\n")
        markdown = prefix + markdown
    markdown = _plain_spaces(markdown)
    markdown = "\n".join(line.rstrip() for line in markdown.split("\n"))
    markdown = _separate_quotes(markdown)
    markdown = _BLANK_LINES_RE.sub("\n\n", markdown).strip("\n")
    if markdown:
        markdown += "\n"
    if not title:
        title = _document_title(tree) or _clean_title(link_text)
    return Converted(title=title, markdown=markdown, generator=generator)
