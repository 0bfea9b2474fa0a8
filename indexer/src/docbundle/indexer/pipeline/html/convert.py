"""``convert_html``: one HTML page to markdown, keeping only its main content; and ``CONVERTER_ID``.

The steps, each in its module:

1. ``tree.parse_html`` and ``generator.detect_generator``: the bounded tree, and which documentation
   generator wrote the page.
2. ``content.select_main``: the main element; ``content.remove_chrome``: the site's chrome inside it.
3. ``normalise``: code blocks (fenced with their language; Sphinx's ``highlight-default`` is Python),
   admonitions, definition terms and tables holding code, rewritten in the tree; ``api``: definition-list
   API entries (Sphinx ``dl.py.function`` ...) as sections headed by their signature.
4. ``links.compact_links``: links become their text, except the first link to each other page of the
   same site, kept with an href relative to the page (resolved against ``<base href>`` or the page URL,
   ``tree.base_url``); images become their alt text; ``title`` attributes go.
5. ``anchors``: each heading's id (its own, its permalink's target, its section's) marked in its text,
   taken out after conversion with its line number (``Converted.anchors``), for the chunker to record.
6. Conversion by the compiled ``html-to-markdown``; then no-break spaces become spaces and zero-width
   spaces go.

The title is the main content's top heading (a site-name ``<h1>`` outside it is never taken), else the
``<title>`` without its site suffix, else the link text the llms.txt gave. Everything is deterministic:
the same input gives byte-identical output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib.metadata import version as _dist_version

import html_to_markdown
from selectolax.lexbor import LexborHTMLParser, LexborNode

from .anchors import find_anchors, mark_anchors, take_anchors
from .api import normalise_api_entries
from .content import remove_chrome, select_main
from .generator import detect_generator
from .links import compact_links
from .normalise import (
    normalise_admonitions,
    normalise_code,
    normalise_definitions,
    plain_spaces,
    unfold_block_tables,
)
from .tree import base_url, parse_html

__all__ = ["CONVERTER_ID", "Converted", "convert_html"]


def _short_version(dist: str) -> str:
    parts = _dist_version(dist).split(".")
    return ".".join(parts[:2])


#: The converter's name and version, recorded per document in the manifests. Its own number changes
#: whenever the output for the same HTML may change.
CONVERTER_ID = (
    f"docbundle-html/2 (selectolax {_short_version('selectolax')}, "
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
    anchors: dict[int, str] = field(default_factory=dict)
    """The id of each heading that has one (``anchors.py``), by its line in ``markdown`` (from 0)."""


# A title heading some generators put outside their content element.
_TITLE_OUTSIDE: dict[str, str] = {
    "starlight": "h1#_top",
    "mintlify": "#page-title",
    "vitepress": "h1",
}

_TITLE_SEPARATORS = (" — ", " – ", " | ", " · ", " :: ", " - ")
_SPACE_RE = re.compile(r"\s+")
# Anchor glyphs left at the end of a heading's text ("C#" keeps its "#": only a detached one goes).
_TRAILING_GLYPH_RE = re.compile(r"(?:\s*[¶§🔗⚓]|\s+#)+$")
# Three or more newlines (written with a literal prefix, which the regex engine finds at C speed).
_BLANK_LINES_RE = re.compile(r"\n\n\n+")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A quote line, and a fence line, after a line break (led by "\n", which the engine finds at C speed).
_QUOTE_AFTER_LINE_RE = re.compile(r"\n>")
_FENCE_AFTER_LINE_RE = re.compile(r"\n {0,3}(`{3,}|~{3,})")


def _strip_lines(text: str) -> str:
    """``text`` without the white space at the end of each line (``str.rstrip``'s: what ``[^\\S\\n]+$``
    removes in multiline mode, as ``\\s`` is the same ``isspace``; a regex would try every space)."""
    return "\n".join([line.rstrip() for line in text.split("\n")])


def _clean_title(text: str) -> str:
    text = _SPACE_RE.sub(" ", plain_spaces(text)).strip()
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


def _options() -> html_to_markdown.ConversionOptions:
    # No base_url: ``links.compact_links`` has already written every kept href relative to the page.
    return html_to_markdown.ConversionOptions(
        heading_style="atx",
        bullets="-",
        code_block_style="backticks",
        extract_metadata=False,
        preprocessing=html_to_markdown.PreprocessingOptions(enabled=False),
        autolinks=False,
        skip_images=False,
        hidden_content="drop",
        wrap=False,
        newline_style="backslash",
        compact_tables=True,  # no padding: a wide cell would widen every row of its column
    )


_OPTIONS = _options()


def _separate_quotes(markdown: str) -> str:
    """A blank line before a blockquote glued to the paragraph above it (outside code fences).

    Only two kinds of line matter, both found by C-speed searches rather than by reading every line:
    a quote line (``>``) after a line that is neither blank nor a quote line, where the blank line may
    go, and a fence line, which opens or closes a code fence.
    """
    if "\n>" not in markdown:
        return markdown
    events: list[tuple[int, str]] = []  # (line start, fence run; "" for a quote line after text)
    for match in _QUOTE_AFTER_LINE_RE.finditer(markdown):
        at = match.start()
        previous = markdown[markdown.rfind("\n", 0, at) + 1 : at]
        if previous.strip() and not previous.startswith(">"):
            events.append((at + 1, ""))
    if not events:
        return markdown
    first = _FENCE_RE.match(markdown)
    if first is not None:
        events.append((0, first.group(1)))
    for match in _FENCE_AFTER_LINE_RE.finditer(markdown):
        events.append((match.start() + 1, match.group(1)))
    events.sort()
    out: list[str] = []
    done = 0
    fence = ""
    for start, run in events:
        if run:
            if not fence:
                fence = run
            elif run[0] == fence[0] and len(run) >= len(fence):
                fence = ""
        elif not fence:
            out.append(markdown[done:start])
            done = start
    if not out:
        return markdown
    out.append(markdown[done:])
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
        find_anchors(main)  # before the chrome goes: a Sphinx heading's id is its permalink's target
        remove_chrome(main, generator)
        normalise_code(main, tree, generator)
        normalise_admonitions(main, tree)
        normalise_api_entries(main, tree)
        normalise_definitions(main, tree)
        compact_links(main, url, base)
        unfold_block_tables(main, tree)
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
        mark_anchors(main)
        try:
            result = html_to_markdown.convert(main.html or "", _OPTIONS)
            markdown = result.content or ""
        except Exception:  # the converter refused the fragment: its text is better than nothing
            markdown = main.text(deep=True, separator="\n")
        markdown = prefix + markdown
    markdown = plain_spaces(markdown)
    markdown = _strip_lines(markdown)
    markdown = _separate_quotes(markdown)
    markdown = _BLANK_LINES_RE.sub("\n\n", markdown).strip("\n")
    markdown, anchors = take_anchors(markdown)  # last: the lines are numbered as the chunker reads them
    if markdown:
        markdown += "\n"
    if not title:
        title = _document_title(tree) or _clean_title(link_text)
    return Converted(title=title, markdown=markdown, generator=generator, anchors=anchors)
