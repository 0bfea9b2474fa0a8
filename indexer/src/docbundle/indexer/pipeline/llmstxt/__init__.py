"""Lenient parser and renderer for ``llms.txt`` / ``llms-full.txt`` files (https://llmstxt.org).

``parse_llms_txt`` never raises: every deviation from the spec becomes a :class:`ConformanceIssue`.
Beyond the shared interface, ``LlmsLink.line`` and ``InlineDoc.line`` give the 1-based source line and
``InlineDoc.description`` the page description a file gave (front matter ``description:``, ``desc=``).
A file is either an index (``kind="index"``: title, summary, details and sections of links) or "full"
(``kind="full"``: one :class:`InlineDoc` per page, and the links of its preamble).

The rooms (imports run down this list; each module's docstring states what it decides)::

    parse.py    parse_llms_txt: normalising, the file's shape, the conformance issues of its structure
    render.py   render_llms_txt: title, summary, details and sections as a spec-conformant llms.txt
    full.py     llms-full files: whether a file is full (rules 1 to 4) and where its pages start
    index.py    the index (link list) part: title, summary, details, sections and their links
    scan.py     pass 1 over every line: fences, headings, page markers, front matter, size metrics
    links.py    markdown links within one string: find_links, link-entry shapes, heading text
    model.py    the parsed file's msgspec Structs and ConformanceIssue
"""

from __future__ import annotations

from .links import FoundLink, find_links
from .model import ConformanceIssue, InlineDoc, LlmsLink, LlmsSection, LlmsTxt
from .parse import parse_llms_txt
from .render import render_llms_txt

__all__ = [
    "ConformanceIssue",
    "FoundLink",
    "InlineDoc",
    "LlmsLink",
    "LlmsSection",
    "LlmsTxt",
    "find_links",
    "parse_llms_txt",
    "render_llms_txt",
]
