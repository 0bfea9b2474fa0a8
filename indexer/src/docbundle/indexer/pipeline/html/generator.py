"""Which documentation generator wrote a page, from its markers only.

The ``<meta name="generator">`` first, then well-known classes and ids; never the host name. The other
modules key their per-generator tables (main-content selectors, chrome) by the name this returns.
"""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser

__all__ = ["detect_generator"]


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
