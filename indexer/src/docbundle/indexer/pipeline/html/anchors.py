"""Heading ids kept through conversion, so a hit cites its section: ``url#anchor``.

html-to-markdown drops every attribute, so a heading's id would be lost with the conversion. The id is
found in the tree (``find_anchors``, before the chrome that holds a permalink is removed), marked at the
end of the heading's text (``mark_anchors``, just before conversion) with private-use characters that no
converter escapes or rewrites, and taken out of the finished markdown with the number of its heading's
line (``take_anchors``). The chunker records it per chunk as it records a markdown page's explicit
``## Title {#id}``; the text a model reads does not spend tokens on it (the hit's URL carries it).

A heading's id, first found of (the rule is the same for every generator; what each one writes):

1. its own ``id`` (MkDocs, Docusaurus, VitePress, Starlight, mdBook, Hugo, GitBook, Nextra; an API
   entry's ``<dt id>``, carried to its heading by ``api.py``);
2. the target of a permalink inside it, ``<a href="#id">`` with a permalink class (Sphinx ``headerlink``,
   ``anchor``, ``header-anchor``, ``hash-link``...);
3. an ``<a id>`` or ``<a name>`` inside it (DocBook's ``<h2 class="title"><a id="…"></a>``);
4. the ``id`` of the ``<section>``, ``<div>`` or ``<article>`` it opens: the nearest one around it with
   an id (at most ``MAX_HOLDER_DEPTH`` levels up, inside the main content), when it is the first heading
   in it (Sphinx's ``<section id>``, older Sphinx's ``div.section``, DocBook's ``div.sect1`` around its
   ``div.titlepage``).

Nothing is computed from the heading's text: a generator that gives its headings ids writes them in the
page, and a slug guessed by another rule would cite an anchor the page may not have. An id a URL
fragment cannot carry as it is (``blocks.ANCHOR``: spaces, quotes, braces) is not kept.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborNode

from ..blocks import ANCHOR

__all__ = ["ANCHORS_ID", "find_anchors", "mark_anchors", "take_anchors"]

#: The anchors' rules, in the input hash of a build with an HTML page (``assemble.input_hash``): the
#: converted markdown is what it was before them (``CONVERTER_ID`` unchanged, so a library of markdown
#: pages keeps its input hash and its bytes), but a chunk's anchor is new output of the same HTML.
ANCHORS_ID = "docbundle-html-anchors/1"
HEADINGS = "h1, h2, h3, h4, h5, h6"
# The classes documentation generators give a heading's permalink (the ``¶`` or ``#`` glyph link).
_PERMALINK_CLASSES = frozenset(
    {"headerlink", "anchor", "anchor-link", "anchorjs-link", "hash-link", "header-anchor", "heading-anchor"}
)
_HOLDERS = frozenset({"section", "div", "article"})
# How far up from a heading its section's element is looked for: DocBook puts the heading four levels
# inside it (``div.sect1#id > div.titlepage > div > div > h2``); further up, an id names a larger part.
MAX_HOLDER_DEPTH = 6
# The marks around an id in a heading's text through the conversion: private-use characters, which no
# page text of a documentation site holds and the converter passes through as they are.
_OPEN, _CLOSE = "\ue000", "\ue001"
_MARKED = re.compile(f"{_OPEN}([^{_OPEN}{_CLOSE}\n]*){_CLOSE}")
_ATX = re.compile(r" {0,3}#{1,6}(?: |$)")


def _usable(value: str | None) -> str:
    """``value`` when it can be a URL fragment as it is, else ""."""
    return value if value and ANCHOR.fullmatch(value) else ""


def _permalink(heading: LexborNode) -> str:
    for link in heading.css("a[href^='#']"):
        if _PERMALINK_CLASSES.intersection((link.attributes.get("class") or "").split()):
            return _usable((link.attributes.get("href") or "")[1:])
    return ""


def _target(heading: LexborNode) -> str:
    for link in heading.css("a[id], a[name]"):
        found = _usable(link.attributes.get("id") or link.attributes.get("name"))
        if found:
            return found
    return ""


def _holder(heading: LexborNode, previous: LexborNode | None, main: LexborNode) -> str:
    """The id of the nearest ``<section>``, ``<div>`` or ``<article>`` around ``heading`` (inside
    ``main``, at most ``MAX_HOLDER_DEPTH`` levels up) that has one, when ``heading`` is the first heading
    in it: when it does not hold ``previous``, the heading before this one. "" otherwise.

    Read from the headings' ancestors only (their depth is bounded, ``tree.parse_html``), never by
    searching an element's content, so a page of many headings costs time in proportion to them."""
    node = heading.parent
    for _ in range(MAX_HOLDER_DEPTH):
        if node is None or node.mem_id == main.mem_id:
            return ""
        if node.tag in _HOLDERS and node.attributes.get("id") is not None:
            return "" if _holds(node, previous) else _usable(node.attributes.get("id"))
        node = node.parent
    return ""


def _holds(holder: LexborNode, node: LexborNode | None) -> bool:
    """Whether ``node`` is inside ``holder``."""
    while node is not None:
        if node.mem_id == holder.mem_id:
            return True
        node = node.parent
    return False


def find_anchors(main: LexborNode) -> None:
    """Give each heading of ``main`` without a usable ``id`` the one its page says (the rules above)."""
    previous: LexborNode | None = None
    for heading in main.css(HEADINGS):
        if not _usable(heading.attributes.get("id")):
            found = _permalink(heading) or _target(heading) or _holder(heading, previous, main)
            if found:
                heading.attrs["id"] = found
        previous = heading


def mark_anchors(main: LexborNode) -> None:
    """Mark each heading's usable id at the end of its text, for ``take_anchors`` after conversion."""
    for heading in main.css(HEADINGS):
        anchor = _usable(heading.attributes.get("id"))
        if anchor:
            heading.insert_child(f"{_OPEN}{anchor}{_CLOSE}")


def take_anchors(markdown: str) -> tuple[str, dict[int, str]]:
    """The converted ``markdown`` without the marks, and the id marked on each ATX heading line, by
    line number (from 0); a mark the conversion left outside such a line (a heading inside a table
    cell) is dropped with its id."""
    if _OPEN not in markdown:
        return markdown, {}
    lines = markdown.split("\n")
    anchors: dict[int, str] = {}
    for i, line in enumerate(lines):
        if _OPEN not in line:
            continue
        marks = _MARKED.findall(line)
        text = _MARKED.sub("", line).rstrip()
        if marks and _ATX.match(text) and text.lstrip(" #"):
            anchors[i] = marks[-1]
        lines[i] = text
    return "\n".join(lines), anchors
