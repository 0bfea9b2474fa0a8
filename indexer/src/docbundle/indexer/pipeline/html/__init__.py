"""HTML pages to markdown: decode the bytes, find the main content, convert it.

A pure package (no network, no files), run inside the build's worker processes (and by the crawler for
meta refresh, and by ``follow.py`` for a page's links). The HTML is parsed with selectolax (lexbor); the
main content is chosen, cleaned of the site's chrome and normalised in that tree; then the compiled
``html-to-markdown`` turns it into markdown. Both libraries were chosen by measurement on real Sphinx,
mdBook and DocBook sites (see the stack facts, point 17).

The rooms (imports run down this list; each module's docstring states its bounds)::

    convert.py    convert_html and CONVERTER_ID: the steps in order, the title, the markdown clean-up
    normalise.py  code blocks, admonitions, definition terms, tables of code rewritten in the tree
    anchors.py    find_anchors, mark_anchors, take_anchors: heading ids carried through the conversion
    content.py    select_main and remove_chrome: the main element, the chrome inside it
    generator.py  detect_generator: which documentation generator wrote the page
    refresh.py    meta_refresh_target, refresh_url: where a meta refresh redirects
    tree.py       parse_html (nesting bounded first, ``nesting.py``) and base_url
    decode.py     decode_html: the body's bytes to text
"""

from __future__ import annotations

from .anchors import ANCHORS_ID
from .content import remove_chrome, select_main, text_len, text_lengths
from .convert import CONVERTER_ID, Converted, convert_html
from .decode import decode_html
from .generator import detect_generator
from .refresh import meta_refresh_target, refresh_url
from .tree import base_url, parse_html

__all__ = [
    "ANCHORS_ID",
    "CONVERTER_ID",
    "Converted",
    "base_url",
    "convert_html",
    "decode_html",
    "detect_generator",
    "meta_refresh_target",
    "parse_html",
    "refresh_url",
    "remove_chrome",
    "select_main",
    "text_len",
    "text_lengths",
]
