"""A page's blocks, as the chunker sees them: the markdown parser (markdown-it with the admonition container,
first-character guards and the fast inline pass), one scan of the page into top-level blocks with their
lines, heading levels and markup-free text (``scan_blocks``), and the word count every size rule uses
(``count_words``). ``analyse`` is the scan of one page body, cached, that ``chunk.chunk_markdown`` cuts
into sections.

Moved out of ``chunk.py`` (issue 33: no module over 800 lines); what the plain text keeps and drops is
described in ``chunk.py``'s docstring, the one description of the chunker's rules.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import accumulate
from typing import Any, NamedTuple

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.container import container_plugin

from .blockguards import guard_block_rules
from .inline import fast_inline

__all__ = ["MD", "MDX", "Analysis", "Block", "analyse", "count_words", "make_parser", "scan_blocks"]


class _Parser(MarkdownIt):
    """MarkdownIt that leaves link URLs alone: chunking never renders them, and normalising them is slow."""

    def normalizeLink(self, url: str) -> str:
        """Return the URL unchanged."""
        return url

    def normalizeLinkText(self, link: str) -> str:
        """Return the link text unchanged."""
        return link

    def validateLink(self, url: str) -> bool:
        """Accept every URL (no HTML is produced, so there is nothing to protect)."""
        return True


def _is_admonition(params: str, markup: str) -> bool:
    # `:::tip`, `:::note Title`, `::: warning`, `:::info[Title]`; a bare `:::` only closes.
    return params.strip()[:1].isalpha()


_ADMONITION = "admonition"
_ADMONITION_OPEN = f"container_{_ADMONITION}_open"
_ADMONITION_CLOSE = f"container_{_ADMONITION}_close"


def make_parser(*, mdx: bool, guarded: bool = True) -> MarkdownIt:
    md = _Parser("commonmark").enable(["table", "strikethrough"])
    # Inline parsing is done lazily in _inline_plain, which skips it for text without markup.
    md.disable(["inline", "text_join"])
    if mdx:
        # MDX has no indented code blocks; JSX children are commonly indented.
        md.disable("code")
    container_plugin(md, _ADMONITION, validate=_is_admonition)
    if guarded:
        # Same tokens, fewer block-rule calls per line (``guarded=False`` only for the tests' comparison).
        guard_block_rules(md, container=_ADMONITION)
    return md


MD = make_parser(mdx=False)
MDX = make_parser(mdx=True)

# Characters that can start inline markup that changes the plain text (escapes, code spans, emphasis,
# strikethrough, links/images, autolinks/HTML, entities); inline text without them is already plain.
_INLINE_SPECIAL = re.compile(r"[\\`*_~\[<&]")
_NEWLINE = re.compile(r"\r\n|\r|\n")
# Han, kana and CJK compatibility ideographs (incl. supplementary planes).
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]+")
# HTML/JSX markup: comments, processing instructions, declarations, CDATA and tags (attribute values
# may be quoted or {braced}, one level deep). Every alternative stops at the next "<" unless it has a
# closing delimiter to find, so unclosed markup cannot make stripping quadratic.
_HTML_MARKUP = re.compile(
    r"<!--.*?(?:-->|$)"
    r"|<\?[^<]*?\?>"
    r"|<!\[CDATA\[[^<]*?\]\]>"
    r"|<![A-Za-z][^<>]*>"
    r"""|</?[A-Za-z][\w.:-]*(?:[^<>"'{}]|"[^"<]*"|'[^'<]*'|\{(?:[^{}<]|\{[^{}<]*\})*\})*>""",
    re.S,
)
_PLACEHOLDER = re.compile("\0(\\d+)\0")
_CODE_HEADING = re.compile(r"(`+)(.+?)\1")
_ADMONITION_NAME = re.compile(r"\A\s*[\w-]*")
# A heading id a hit's URL can cite as its fragment as it is: no space, no character a URL must escape
# (RFC 3986's fragment characters, less the few that read as markup); at most ``MAX_ANCHOR_CHARS``.
MAX_ANCHOR_CHARS = 200  # longer than any generator's slug of a long heading; a longer "id" is text
ANCHOR = re.compile(r"[\w.:~!$&'()*+,;=@/?%-]{1," + str(MAX_ANCHOR_CHARS) + "}")


class Block(NamedTuple):
    start: int  # first source line
    heading: int  # heading level, 0 if not a heading
    title: str  # plain heading text ("" unless a heading)
    plain: str
    code: str
    words: int
    # How deep inside lists / block quotes the boundary before this block lies: 0 between top-level
    # blocks, 1 between items of a list, 2 between blocks of one item... Deeper cuts are a last resort.
    depth: int = 0
    # A heading whose whole text is one code span: an API entry's signature (``### `f(x)` ``).
    api: bool = False
    # A code block (fenced or indented): never cut, even when it is larger than ``MAX_CHUNK_CHARS``.
    verbatim: bool = False
    # A heading's explicit id (``## Title {#title}``), the anchor a hit in its section cites; "" if none.
    anchor: str = ""


class Analysis(NamedTuple):
    blocks: tuple[Block, ...]
    offsets: tuple[int, ...]  # start offset of each line, plus len(body) as a sentinel
    cum_words: tuple[int, ...]  # cum_words[k] = words in blocks[:k]


def count_words(text: str) -> int:
    n = len(text.split())
    if not text.isascii():
        for run in _CJK.findall(text):
            n += len(run)
    return n


def _line_offsets(body: str) -> tuple[int, ...]:
    offsets = [0]
    if "\r" in body:
        offsets.extend(m.end() for m in _NEWLINE.finditer(body))
    else:
        pos = body.find("\n")
        while pos != -1:
            offsets.append(pos + 1)
            pos = body.find("\n", pos + 1)
    # A final line break ends the last line rather than starting an empty one.
    if len(offsets) > 1 and offsets[-1] == len(body):
        offsets.pop()
    offsets.append(len(body))
    return tuple(offsets)


def _inline_children_plain(children: list[Token], code: list[str]) -> str:
    out: list[str] = []
    spans: list[str] = []
    in_autolink = False
    for tok in children:
        kind = tok.type
        if kind == "text" or kind == "text_special":
            if not in_autolink:
                out.append(tok.content)
        elif kind == "code_inline":
            out.append(f"\0{len(spans)}\0")
            spans.append(tok.content)
        elif kind == "softbreak" or kind == "hardbreak":
            out.append("\n")
        elif kind == "image":
            out.append(_inline_children_plain(tok.children or [], code))
        elif kind == "link_open":
            # An autolink's text is its URL.
            in_autolink = tok.markup == "autolink"
        elif kind == "link_close":
            in_autolink = False
        # html_inline and emphasis/strikethrough markers carry no text.
    return _joined_plain(out, spans, code)


def _joined_plain(out: list[str], spans: list[str], code: list[str]) -> str:
    """Join inline text pieces whose code spans are held out as ``\\0N\\0`` placeholders."""
    text = "".join(out)
    if "<" in text:
        # JSX tags with {expression} attributes are not HTML to markdown-it and come through as text
        # (split around any real tags inside them), so strip tags again from the joined text.
        text = _HTML_MARKUP.sub("", text)
    if spans:
        # Code spans were held out as NUL-delimited placeholders (markdown-it turns real NULs into
        # U+FFFD) so that tag stripping cannot touch them.
        code.extend(spans)
        text = _PLACEHOLDER.sub(lambda m: spans[int(m[1])], text)
    return text


def _drop_jsx_comments(text: str) -> str:
    parts: list[str] = []
    pos = 0
    while (start := text.find("{/*", pos)) != -1:
        end = text.find("*/}", start + 3)
        if end == -1:
            break
        parts.append(text[pos:start])
        pos = end + 3
    parts.append(text[pos:])
    return "".join(parts)


def _inline_plain(md: MarkdownIt, content: str, env: dict[str, Any], code: list[str]) -> str:
    if "{/*" in content:
        # MDX comments (`## Title {/*title-id*/}`); removed first, as their `*` would read as emphasis.
        content = _drop_jsx_comments(content)
    if not _INLINE_SPECIAL.search(content):
        return content
    # Common markup (code spans, escapes, plain links) is read without markdown-it when it can be.
    fast = fast_inline(content, "references" in env)
    if fast is not None:
        return _joined_plain(*fast, code)
    children: list[Token] = []
    md.inline.parse(content, md, env, children)
    return _inline_children_plain(children, code)


def _html_plain(md: MarkdownIt, content: str, env: dict[str, Any], code: list[str]) -> str:
    text = _HTML_MARKUP.sub(" ", content)
    # What is left between JSX tags is usually markdown (MDX), so links and code spans still need parsing.
    lines = [line.strip() for line in text.split("\n")]
    text = "\n".join(line for line in lines if line)
    return _inline_plain(md, text, env, code) if text else ""


def _admonition_title(info: str) -> str:
    title = _ADMONITION_NAME.sub("", info, count=1).strip()
    if title.startswith("[") and title.endswith("]"):
        title = title[1:-1].strip()
    return title


def _block_text(
    md: MarkdownIt, tokens: list[Token], lo: int, hi: int, env: dict[str, Any]
) -> tuple[str, str]:
    parts: list[str] = []
    code: list[str] = []
    for k in range(lo, hi):
        tok = tokens[k]
        kind = tok.type
        if kind == "inline":
            parts.append(_inline_plain(md, tok.content, env, code))
        elif kind == "fence" or kind == "code_block":
            content = tok.content.rstrip("\n")
            parts.append(content)
            code.append(content)
        elif kind == "html_block":
            parts.append(_html_plain(md, tok.content, env, code))
        elif kind == _ADMONITION_OPEN:
            parts.append(_admonition_title(tok.info))
    plain = "\n".join(p.strip() for p in parts if p and not p.isspace())
    return plain, "\n".join(c for c in code if c)


def _without_heading_id(text: str) -> tuple[str, str]:
    """A heading's plain text (markdown-it already dropped its markup) without an explicit ``{#id}``,
    and that id ("" when it has none, or one a URL fragment cannot carry as it is)."""
    text = " ".join(text.split())
    # Docusaurus/Pandoc/attr_list explicit heading ids: `## Title {#title}` (`{#title .class}` too).
    if text.endswith("}"):
        cut = text.rfind("{#")
        if cut != -1:
            attrs = text[cut + 2 : -1].split()
            anchor = attrs[0] if attrs and ANCHOR.fullmatch(attrs[0]) else ""
            return text[:cut].rstrip(), anchor
    return text, ""


def _is_api_heading(content: str) -> bool:
    """Whether a heading's inline markdown is one code span and nothing else (an API signature), its
    explicit ``{#id}`` aside."""
    content = content.strip()
    if content.endswith("}") and "{#" in content:
        content = content[: content.rfind("{#")].rstrip()
    match = _CODE_HEADING.fullmatch(content)
    return match is not None and match.group(1) not in match.group(2)


def _block_end(tokens: list[Token], i: int) -> int:
    """Index just past the block that opens at ``tokens[i]``."""
    tok = tokens[i]
    j = i + 1
    if tok.nesting == 1:
        n = len(tokens)
        while j < n and not (tokens[j].nesting == -1 and tokens[j].level == tok.level):
            j += 1
        j += 1
    return min(j, len(tokens))


# Code blocks: never cut, not even inside a block too long for one chunk (``longblocks``).
_VERBATIM = frozenset({"fence", "code_block"})
# Containers whose children may be cut apart when the whole is too large for one chunk.
_SPLITTABLE = frozenset({"bullet_list_open", "ordered_list_open", "list_item_open", "blockquote_open"})


def scan_blocks(md: MarkdownIt, body: str) -> list[Block]:
    env: dict[str, Any] = {}
    tokens = md.parse(body, env)
    blocks: list[Block] = []

    def add(lo: int, hi: int, start: int, heading: int, depth: int) -> None:
        plain, code = _block_text(md, tokens, lo, hi, env)
        words = count_words(plain)
        if blocks and start <= blocks[-1].start:
            # No line of its own to start at: fold into the previous block.
            prev = blocks[-1]
            blocks[-1] = prev._replace(
                plain="\n".join(p for p in (prev.plain, plain) if p),
                code="\n".join(c for c in (prev.code, code) if c),
                words=prev.words + words,
                verbatim=prev.verbatim or tokens[lo].type in _VERBATIM,
            )
        else:
            title = anchor = ""
            api = False
            if heading:
                title, anchor = _without_heading_id(plain)
                plain = title
                api = (
                    lo + 1 < hi
                    and tokens[lo + 1].type == "inline"
                    and _is_api_heading(tokens[lo + 1].content)
                )
            verbatim = tokens[lo].type in _VERBATIM
            blocks.append(
                Block(
                    max(start, 0),
                    heading,
                    title,
                    plain,
                    code,
                    words,
                    depth if blocks else 0,
                    api,
                    verbatim,
                    anchor,
                )
            )

    def add_nested(lo: int, hi: int, start: int, depth: int) -> None:
        # Lists, items and quotes become one block per leaf; the first leaf starts where its container
        # does, later children start a boundary one level deeper.
        c = lo + 1
        first = True
        while c < hi - 1:
            e = _block_end(tokens, c)
            child = tokens[c]
            child_start = start if first else (child.map[0] if child.map else -1)
            child_depth = depth if first else depth + 1
            if child.type in _SPLITTABLE:
                add_nested(c, e, child_start, child_depth)
            else:
                add(c, e, child_start, 0, child_depth)
            first = False
            c = e

    i = 0
    n = len(tokens)
    while i < n:
        tok = tokens[i]
        kind = tok.type
        start = tok.map[0] if tok.map else -1
        if kind == _ADMONITION_OPEN:
            # Not atomic: its children become blocks of their own, so headings inside still split.
            add(i, i + 1, start, 0, 0)
            i += 1
            continue
        if kind == _ADMONITION_CLOSE:
            i += 1
            continue
        j = _block_end(tokens, i)
        if kind in _SPLITTABLE:
            add_nested(i, j, start, 0)
        else:
            heading = int(tok.tag[1:]) if kind == "heading_open" and tok.tag[1:].isdigit() else 0
            add(i, j, start, heading, 0)
        i = j
    return blocks


@lru_cache(maxsize=8)
def analyse(body: str, mdx: bool) -> Analysis:
    # Cached so parse_page (which may need the first H1) and chunk_markdown on the same body parse once.
    offsets = _line_offsets(body)
    try:
        blocks = scan_blocks(MDX if mdx else MD, body)
    except Exception:
        # markdown-it should not fail, but a page must never break a build: index it as one text block.
        blocks = [Block(0, 0, "", body.strip(), "", count_words(body))]
    if not blocks and body.strip():
        # Only link reference definitions (or the like): content, but no text to index.
        blocks = [Block(0, 0, "", "", "", 0)]
    return Analysis(tuple(blocks), offsets, tuple(accumulate((b.words for b in blocks), initial=0)))
