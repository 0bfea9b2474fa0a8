"""API entries written as definition lists become sections headed by their signature.

Sphinx (and the generators that copy its markup) writes each function, class, method, attribute,
exception or data item as ``<dl class="py function"><dt class="sig ...">signature</dt><dd>...</dd></dl>``
rather than under a heading, so without this step a method's text would sit under the heading of the
section around it and no heading path would name it. Each such entry's first ``<dt>`` becomes a heading
one level below the heading above the list (two below for an entry nested in another entry's ``<dd>``,
and so on, at most ``<h6>``) whose text is the signature in a code span, without its permalink and
``[source]`` links; further ``<dt>`` of the same entry (overloads) become code paragraphs; the ``<dd>``
and ``<dl>`` are unwrapped. Text that follows a list inside the same section then reads as part of the
last entry: markdown cannot close a section without opening another.

Pure: it changes the tree in place and reads nothing else.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from .content import SOURCE_LINK_TEXTS

__all__ = ["normalise_api_entries"]

# Object types of Sphinx's domains (py, c, cpp, js, rst, std) that name an API entry.
_API_TYPES = frozenset(
    {
        "function",
        "class",
        "method",
        "attribute",
        "exception",
        "data",
        "property",
        "classmethod",
        "staticmethod",
        "decorator",
        "decoratormethod",
        "module",
        "type",
        "member",
        "macro",
        "var",
        "enum",
        "enumerator",
        "struct",
        "union",
        "concept",
        "object",
        "describe",
        "option",
        "cmdoption",
        "envvar",
        "directive",
        "role",
        "opcode",
        "pdbcommand",
        "setting",
        "templatetag",
        "templatefilter",
        "fieldlookup",
        "django-admin",
    }
)
# Definition lists that are prose, not API entries.
_PROSE = frozenset({"simple", "field-list", "glossary", "footnote", "citation", "option-list", "docutils"})
_HEADING_RE = re.compile(r"^h([1-6])\Z")
_HEADINGS_AND_LISTS = "h1, h2, h3, h4, h5, h6, dl"
_SPACE_RE = re.compile(r"\s+")


def _is_api_list(node: LexborNode) -> bool:
    classes = set((node.attributes.get("class") or "").split())
    if classes & _PROSE:
        return False
    if classes & _API_TYPES:
        return True
    term = next((child for child in node.iter() if child.tag == "dt"), None)
    return term is not None and "sig" in (term.attributes.get("class") or "").split()


def _signature(term: LexborNode) -> str:
    for anchor in term.css("a"):
        text = anchor.text(deep=True, strip=True)
        source = text.lower() in SOURCE_LINK_TEXTS or anchor.css_first(".viewcode-link") is not None
        permalink = "headerlink" in (anchor.attributes.get("class") or "").split() or text in ("¶", "#", "§")
        if source or permalink:
            anchor.decompose()
    text = _SPACE_RE.sub(" ", term.text(deep=True)).strip()
    return text.rstrip("¶").rstrip()


def normalise_api_entries(main: LexborNode, tree: LexborHTMLParser) -> None:
    """Every definition-list API entry as a section headed by its signature (see the module)."""
    found: list[tuple[LexborNode, int]] = []
    last_heading = 1
    # The headings and lists only (lexbor gives them in document order, ``main`` first if it is one),
    # not every node of the page.
    for node in main.css(_HEADINGS_AND_LISTS):
        tag = node.tag or ""
        match = _HEADING_RE.match(tag)
        if match:
            last_heading = int(match.group(1))
        elif tag == "dl" and _is_api_list(node):
            depth = 0
            parent = node.parent
            while parent is not None and parent.mem_id != main.mem_id:
                if parent.tag == "dl" and _is_api_list(parent):
                    depth += 1
                parent = parent.parent
            found.append((node, min(6, last_heading + 1 + depth)))
    # Innermost first, so an outer list is unwrapped after the entries inside it are rewritten.
    for dl, level in reversed(found):
        entries = [child for child in dl.iter() if child.tag in ("dt", "dd")]
        headed = False
        for child in entries:
            if child.tag == "dd":
                child.unwrap()
                headed = False
                continue
            signature = _signature(child)
            if not signature:
                child.decompose()
                continue
            block = tree.create_node(f"h{level}" if not headed else "p")
            anchor = child.attributes.get("id")
            if anchor and not headed:  # the entry's id, cited by its section (``anchors.py``)
                block.attrs["id"] = anchor
            code = tree.create_node("code")
            code.insert_child(signature)
            block.insert_child(code)
            child.replace_with(block)
            headed = True
        dl.unwrap()
