"""The page's tree: parsed with its nesting bounded, and the address its links resolve against.

Every HTML page the indexer reads (converted, searched for a refresh, or for links to follow) is parsed
here, by selectolax (lexbor), after ``nesting.bound_nesting`` has bounded its depth.
"""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser

from ..nesting import bound_nesting

__all__ = ["base_url", "parse_html"]


def parse_html(html: str) -> LexborHTMLParser:
    """The page's tree, its nesting first bounded to ``nesting.MAX_DEPTH`` (lexbor is quadratic in depth)."""
    return LexborHTMLParser(bound_nesting(html))


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
