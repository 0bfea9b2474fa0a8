"""Normalising the main content's tree before conversion, in place.

Every code block becomes ``<pre><code class="language-x">`` holding its plain text (no line numbers,
copy buttons or mdBook's hidden "boring" lines; a line per ``.token-line`` or ``<br>``); admonitions
become blockquotes opening with a bold label; a text-only ``<dt>`` becomes bold; a table whose cells hold
code blocks becomes one block per cell. ``plain_spaces`` turns no-break spaces into spaces and drops
zero-width ones (in code and tables as everywhere). It chooses and removes nothing (``content.py`` does).
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from .content import ADMONITION_CLASS_RE

__all__ = [
    "normalise_admonitions",
    "normalise_code",
    "normalise_definitions",
    "plain_spaces",
    "unfold_block_tables",
]


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
_SPACE_RE = re.compile(r"\s+")
# No-break spaces become spaces; zero-width spaces, word joiners, BOMs and soft hyphens go.
_INVISIBLE = (("\u00a0", " "), ("\u200b", ""), ("\u2060", ""), ("\ufeff", ""), ("\u00ad", ""))


def plain_spaces(text: str) -> str:
    """``text`` with ``_INVISIBLE`` replaced (``str.translate`` with a dict is several times slower)."""
    if text.isascii():
        return text
    for char, replacement in _INVISIBLE:
        if char in text:
            text = text.replace(char, replacement)
    return text


def _language(pre: LexborNode, default: str = "") -> str:
    """The block's language from its own or its ancestors' classes; ``default`` for ``highlight-default``."""
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
            if default and lang == "default" and match.group(0).strip().startswith("highlight"):
                return default
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
    text = plain_spaces(text)
    return text.strip("\n")


# What a generator's "default" highlighting means: Sphinx's default ``highlight_language`` is Python.
_DEFAULT_LANGUAGE = {"sphinx": "python"}


def normalise_code(main: LexborNode, tree: LexborHTMLParser, generator: str = "generic") -> None:
    """Every code block as ``<pre><code class="language-x">`` holding its plain text."""
    default = _DEFAULT_LANGUAGE.get(generator, "")
    # Pygments' line-number tables: keep only the code cell's block.
    for table in main.css("table.highlighttable, table.codehilitetable"):
        pre = table.css_first("td.code pre") or table.css_first("pre")
        if pre is not None:
            lang = _language(pre, default)
            if lang:
                pre.attrs["data-language"] = lang
            table.replace_with(pre)
        else:
            table.decompose()
    for pre in main.css("pre"):
        if pre.parent is not None and pre.parent.tag == "pre":
            continue
        lang = _language(pre, default)
        text = _code_text(pre)
        block = tree.create_node("pre")
        code = tree.create_node("code")
        if lang:
            code.attrs["class"] = f"language-{lang}"
        code.insert_child(text)
        block.insert_child(code)
        pre.replace_with(block)


def normalise_admonitions(main: LexborNode, tree: LexborHTMLParser) -> None:
    """Every admonition as a blockquote opening with its label in bold."""
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
                    and ADMONITION_CLASS_RE.fullmatch(c)
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


def normalise_definitions(main: LexborNode, tree: LexborHTMLParser) -> None:
    """Every text-only ``<dt>`` made bold."""
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


def unfold_block_tables(main: LexborNode, tree: LexborHTMLParser) -> None:
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
