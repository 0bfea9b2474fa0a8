"""Parse documentation pages (markdown / MDX) and split them into search chunks.

``parse_page`` separates front matter (read by ``page.py``) from the body; ``chunk_markdown`` cuts the body into sections at
headings and returns each as an exact slice of the body, with a markup-free ``plain`` text for indexing.

Line endings: ``parse_page`` strips a leading BOM and turns ``\\r\\n`` / ``\\r`` into ``\\n``.
``chunk_markdown`` takes its input as given; it counts lines the way markdown-it does (``\\r\\n``, ``\\r``
and ``\\n`` each end a line), so chunk texts stay exact slices even of un-normalised input.

MDX: pass ``mdx=True`` to both functions (``chunk_markdown(page.body, mdx=page.mdx)``). MDX has no
indented code blocks, so indented JSX children (headings and fences inside ``<TabItem>``) parse as markdown.

Plain text: headings, paragraphs, list items, table cells, admonition titles, code (fenced, indented and
inline) and the text inside HTML/JSX blocks, without emphasis marks, link/image URLs (image alt text is
kept; an autolink is all URL and is dropped), HTML/JSX tags, ``{/* */}`` comments and ``{#id}`` heading ids.

Sections: a heading of level <= ``max_depth`` (ATX or setext, at the top level of the page or directly
inside a ``:::`` admonition) with some text starts a section, and so does an API entry's heading at any
level (one whose whole text is a code span: ``#### `f(x)` ``, as the HTML converter writes a Sphinx
``<dt>``). Other deeper headings stay inside their section unless it is over ``max_words`` (rule 1). A
chunk's ``heading_path`` holds every heading level above it, ending at its own: a ``####`` under a
``###`` is in the path of the chunks that start under it, whatever ``max_depth`` is.

Sizes, in words (whitespace-separated tokens, plus one per Han / kana character because Chinese and
Japanese do not separate words; Hangul does, so it is counted by whitespace):

1. A section over ``max_words`` is first cut at its own deeper headings (the shallowest level it has;
   each part keeps its full path), and a part still over ``max_words`` is cut the same way, then between
   its top-level blocks (paragraph, list, table, code block,
   HTML block...) into pieces of about equal size, each at most ``max_words`` unless one block alone is
   larger. Blocks are never cut (a code block, HTML block or table always stays whole), except that a
   list or block quote that alone exceeds ``max_words`` is cut between its items (and an item that alone
   exceeds it, between its paragraphs / nested list items, and so on down). A
   piece is not closed below ``min_words`` (a short lead-in stays with the big block after it), and a
   last piece under ``min_words`` joins the one before it. Every piece keeps the section's path.
2. Then, in order, a chunk under ``min_words`` absorbs the chunk after it (so a heading with little text
   stays with what follows), and a final chunk still under ``min_words`` joins the one before it. A merge
   can overshoot ``max_words`` by less than ``min_words``. A merged chunk's ``heading_path`` is the
   common prefix of the paths of its parts that have text besides their own heading, so it never names
   a section the chunk only partly belongs to, while a bare heading (or a leading HTML comment) merged
   into what follows takes that part's path: ``## Install`` + ``### macOS ...`` -> [Install, macOS].
   Bare headings join what follows them first. No merge drops an API entry from a path: a small entry
   keeps a chunk of its own, and a small chunk that may not take the entry after it joins the one
   before it when it may.
3. Before rule 2, a section's lead (the text under a heading that is not an API entry, up to the first
   entry under it: ``## Counter objects`` and its prose, or a page's introduction) joins that entry's
   chunk when the two together hold at most ``max_words``, and the chunk keeps the entry's path (the
   lead's heading is the entry's parent in it). The lead says what the entries are for, in words
   their own text may lack; on its own, a question in its words found a chunk that named no entry.
   Only a lead moves: an entry never joins another entry.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate, pairwise
from math import ceil
from typing import Any, NamedTuple

import msgspec
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.container import container_plugin

from .blockguards import guard_block_rules
from .inline import fast_inline
from .longblocks import MAX_CHUNK_CHARS, split_chunk
from .page import read_front_matter, text_field

__all__ = ["Chunk", "ParsedPage", "chunk_markdown", "parse_page"]


class ParsedPage(msgspec.Struct, frozen=True):
    """A page split into front matter and markdown body."""

    # Front matter `title`, else the first H1, else front matter `sidebar_label` / `linkTitle`, else None.
    title: str | None
    description: str | None
    # Parsed YAML (--- fences) or TOML (+++ fences); {} when absent or unparsable.
    front_matter: dict[str, object]
    # Text after the front matter; for MDX, top-level import/export (ESM) paragraphs removed.
    body: str
    # Whether the page was parsed as MDX; pass it on: chunk_markdown(page.body, mdx=page.mdx).
    mdx: bool = False


class Chunk(msgspec.Struct, frozen=True):
    """One search unit: a contiguous slice of a page body."""

    text: str
    heading_path: list[str]
    plain: str
    code: str
    start_line: int
    end_line: int
    # Word count of `plain` as used for the size rules (CJK-aware).
    words: int = 0


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


def _make_parser(*, mdx: bool, guarded: bool = True) -> MarkdownIt:
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


_MD = _make_parser(mdx=False)
_MDX = _make_parser(mdx=True)

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


class _Block(NamedTuple):
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


class _Analysis(NamedTuple):
    blocks: tuple[_Block, ...]
    offsets: tuple[int, ...]  # start offset of each line, plus len(body) as a sentinel
    cum_words: tuple[int, ...]  # cum_words[k] = words in blocks[:k]


def _count_words(text: str) -> int:
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


def _without_heading_id(text: str) -> str:
    """A heading's plain text (markdown-it already dropped its markup) without an explicit ``{#id}``."""
    text = " ".join(text.split())
    # Docusaurus/Pandoc explicit heading ids: `## Title {#title}`.
    if text.endswith("}"):
        cut = text.rfind("{#")
        if cut != -1:
            text = text[:cut].rstrip()
    return text


def _is_api_heading(content: str) -> bool:
    """Whether a heading's inline markdown is one code span and nothing else (an API signature)."""
    match = _CODE_HEADING.fullmatch(content.strip())
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


def _scan_blocks(md: MarkdownIt, body: str) -> list[_Block]:
    env: dict[str, Any] = {}
    tokens = md.parse(body, env)
    blocks: list[_Block] = []

    def add(lo: int, hi: int, start: int, heading: int, depth: int) -> None:
        plain, code = _block_text(md, tokens, lo, hi, env)
        words = _count_words(plain)
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
            title = ""
            api = False
            if heading:
                title = plain = _without_heading_id(plain)
                api = (
                    lo + 1 < hi
                    and tokens[lo + 1].type == "inline"
                    and _is_api_heading(tokens[lo + 1].content)
                )
            verbatim = tokens[lo].type in _VERBATIM
            blocks.append(
                _Block(
                    max(start, 0), heading, title, plain, code, words, depth if blocks else 0, api, verbatim
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
def _analyse(body: str, mdx: bool) -> _Analysis:
    # Cached so parse_page (which may need the first H1) and chunk_markdown on the same body parse once.
    offsets = _line_offsets(body)
    try:
        blocks = _scan_blocks(_MDX if mdx else _MD, body)
    except Exception:
        # markdown-it should not fail, but a page must never break a build: index it as one text block.
        blocks = [_Block(0, 0, "", body.strip(), "", _count_words(body))]
    if not blocks and body.strip():
        # Only link reference definitions (or the like): content, but no text to index.
        blocks = [_Block(0, 0, "", "", "", 0)]
    return _Analysis(tuple(blocks), offsets, tuple(accumulate((b.words for b in blocks), initial=0)))


@dataclass(slots=True, eq=False)
class _Unit:
    """A run of blocks [lo, hi) that will become one chunk."""

    lo: int
    hi: int
    path: tuple[str, ...]
    words: int
    # Whether it has words besides its own heading; only such units have a say in a merged path.
    content: bool
    # How much of ``path`` a merge must keep: up to the deepest API entry it names (0: none).
    keep: int = 0

    def mergeable(self, other: _Unit) -> bool:
        """Whether merging with ``other`` keeps every API entry either one's path names."""
        if not (self.content and other.content):
            return True
        return _common(self.path, other.path) >= max(self.keep, other.keep)

    def absorb(self, other: _Unit) -> None:
        """Extend this unit by the adjacent unit ``other`` (before or after it)."""
        if self.content and other.content:
            self.path = self.path[: _common(self.path, other.path)]
            self.keep = max(self.keep, other.keep)
        elif other.content:
            self.path = other.path
            self.keep = other.keep
        self.lo = min(self.lo, other.lo)
        self.hi = max(self.hi, other.hi)
        self.words += other.words
        self.content = self.content or other.content


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common


class _Paths(NamedTuple):
    """Per block: the heading path in effect there (every level), and its ``_Unit.keep``."""

    paths: list[tuple[str, ...]]
    keeps: list[int]


def _heading_paths(blocks: tuple[_Block, ...]) -> _Paths:
    paths: list[tuple[str, ...]] = []
    keeps: list[int] = []
    stack: list[tuple[int, str, bool]] = []
    path: tuple[str, ...] = ()
    keep = 0
    for block in blocks:
        if block.heading and block.title:
            while stack and stack[-1][0] >= block.heading:
                stack.pop()
            stack.append((block.heading, block.title, block.api))
            path = tuple(t for _, t, _ in stack)
            keep = max((k + 1 for k, (_, _, api) in enumerate(stack) if api), default=0)
        paths.append(path)
        keeps.append(keep)
    return _Paths(paths, keeps)


def _starts_section(block: _Block, max_depth: int) -> bool:
    return bool(block.title) and (0 < block.heading <= max_depth or (block.heading > 0 and block.api))


def _sections(blocks: tuple[_Block, ...], heads: _Paths, max_depth: int) -> list[_Unit]:
    units: list[_Unit] = []
    lo = 0
    words = 0
    head_words = 0
    for idx, block in enumerate(blocks):
        if _starts_section(block, max_depth):
            if idx > lo:
                units.append(_Unit(lo, idx, heads.paths[lo], words, words > head_words, heads.keeps[lo]))
            lo = idx
            words = 0
            head_words = block.words
        words += block.words
    units.append(_Unit(lo, len(blocks), heads.paths[lo], words, words > head_words, heads.keeps[lo]))
    return units


def _atoms(
    blocks: tuple[_Block, ...], cum: tuple[int, ...], lo: int, hi: int, depth: int, max_words: int
) -> list[tuple[int, int]]:
    """Cut blocks [lo, hi) at boundaries no deeper than ``depth`` into (first block, words) runs.

    A run over ``max_words`` is cut again at its shallowest inner boundaries.
    """
    atoms: list[tuple[int, int]] = []
    k = lo
    while k < hi:
        e = k + 1
        inner = -1
        while e < hi and blocks[e].depth > depth:
            inner = blocks[e].depth if inner == -1 else min(inner, blocks[e].depth)
            e += 1
        words = cum[e] - cum[k]
        if words > max_words and inner != -1:
            atoms.extend(_atoms(blocks, cum, k, e, inner, max_words))
        else:
            atoms.append((k, words))
        k = e
    return atoms


def _split(
    unit: _Unit,
    blocks: tuple[_Block, ...],
    heads: _Paths,
    cum: tuple[int, ...],
    min_words: int,
    max_words: int,
) -> list[_Unit]:
    if unit.words <= max_words or unit.hi - unit.lo < 2:
        return [unit]
    # Too large: cut first at its own headings deeper than max_depth (the shallowest level present),
    # each part keeping its full path; a part still too large is cut again.
    inner = [k for k in range(unit.lo + 1, unit.hi) if blocks[k].heading and blocks[k].title]
    if inner:
        level = min(blocks[k].heading for k in inner)
        cuts = [k for k in inner if blocks[k].heading == level]
        parts: list[_Unit] = []
        bounds = [unit.lo, *cuts, unit.hi]
        for lo, hi in pairwise(bounds):
            words = cum[hi] - cum[lo]
            if lo == unit.lo:
                head = blocks[lo].words if blocks[lo].heading else 0
                part = _Unit(lo, hi, unit.path, words, words > head, unit.keep)
            else:
                part = _Unit(lo, hi, heads.paths[lo], words, words > blocks[lo].words, heads.keeps[lo])
            parts.extend(_split(part, blocks, heads, cum, min_words, max_words))
        return parts
    target = unit.words / ceil(unit.words / max_words)
    pieces: list[_Unit] = []
    lo = unit.lo
    words = 0
    for idx, atom_words in _atoms(blocks, cum, unit.lo, unit.hi, 0, max_words):
        if idx > lo and (words >= target or (words + atom_words > max_words and words >= min_words)):
            content = unit.content if lo == unit.lo else words > 0
            pieces.append(_Unit(lo, idx, unit.path, words, content, unit.keep))
            lo = idx
            words = 0
        words += atom_words
    pieces.append(
        _Unit(lo, unit.hi, unit.path, words, unit.content if lo == unit.lo else words > 0, unit.keep)
    )
    if len(pieces) > 1 and pieces[-1].words < min_words:
        pieces[-2].absorb(pieces.pop())
    return pieces


def _lead_into_entries(units: list[_Unit], max_words: int) -> list[_Unit]:
    """A section's lead text joins the API entry that follows it, when both fit in ``max_words``.

    The lead (``## Counter objects`` and its prose, or a page's introduction) says what the entries
    under it are for, in words their own text may lack; merged, the chunk takes the entry's path (the
    lead's section is its parent, so the path stays true of the lead as well). Only a lead's text
    moves: an entry never joins another entry.
    """
    out: list[_Unit] = []
    for unit in units:
        lead = out[-1] if out else None
        if (
            lead is not None
            and lead.content
            and lead.keep < len(lead.path)  # a lead, not an entry (nor a lead already merged)
            and unit.content
            and unit.keep == len(unit.path) > 0
            and lead.path == unit.path[:-1]
            and lead.words + unit.words <= max_words
        ):
            lead.path, lead.keep = unit.path, unit.keep
            lead.hi = unit.hi
            lead.words += unit.words
            continue
        out.append(unit)
    return out


def _merge_small(units: list[_Unit], min_words: int) -> list[_Unit]:
    # Bare headings first join what follows them (a class entry with only its members under it).
    forward: list[_Unit] = []
    pending: _Unit | None = None
    for unit in units:
        if pending is not None:
            unit.absorb(pending)
            pending = None
        if not unit.content and unit.words < min_words:
            pending = unit
        else:
            forward.append(unit)
    if pending is not None:
        if forward:
            forward[-1].absorb(pending)
        else:
            forward.append(pending)
    out: list[_Unit] = []
    for unit in forward:
        if out and out[-1].words < min_words:
            if out[-1].mergeable(unit):
                out[-1].absorb(unit)
                continue
            # It may not take what follows (an API entry, or it is one): it joins what precedes, if it may.
            if len(out) > 1 and out[-2].mergeable(out[-1]):
                out[-2].absorb(out.pop())
        out.append(unit)
    if len(out) > 1 and out[-1].words < min_words and out[-2].mergeable(out[-1]):
        out[-2].absorb(out.pop())
    return out


def chunk_markdown(
    body: str,
    *,
    max_depth: int = 3,
    min_words: int = 60,
    max_words: int = 500,
    mdx: bool = False,
    max_chars: int = MAX_CHUNK_CHARS,
) -> list[Chunk]:
    """Split a markdown body into heading-delimited chunks that are exact, contiguous slices of it.

    A chunk over ``max_chars`` characters whose block (other than a code block) is over it too is cut
    by ``longblocks`` (the indexer always uses ``MAX_CHUNK_CHARS``; tests pass other bounds)."""
    if not body.strip():
        return []
    analysis = _analyse(body, mdx)
    blocks = analysis.blocks
    offsets = analysis.offsets
    max_words = max(max_words, 1)

    heads = _heading_paths(blocks)
    units: list[_Unit] = []
    for section in _sections(blocks, heads, max_depth):
        units.extend(_split(section, blocks, heads, analysis.cum_words, min_words, max_words))
    units = _lead_into_entries(units, max_words)
    units = _merge_small(units, min_words)

    # Line ranges tile the body: blank lines and anything markdown-it ignores (link reference
    # definitions, closing fences) belong to the block before them, leading ones to the first block.
    n_lines = len(offsets) - 1
    starts = [0] + [blocks[u.lo].start for u in units[1:]]
    ends = [*starts[1:], n_lines]
    # Python's idea of whitespace is wider than markdown's (e.g. U+3000 starts a paragraph).
    keep: list[int] = []
    for k in range(len(units)):
        if body[offsets[starts[k]] : offsets[ends[k]]].strip():
            keep.append(k)
        elif keep:
            units[keep[-1]].absorb(units[k])
            ends[keep[-1]] = ends[k]
        elif k + 1 < len(units):
            units[k + 1].absorb(units[k])
            starts[k + 1] = starts[k]

    chunks: list[Chunk] = []
    for k in keep:
        unit = units[k]
        part = blocks[unit.lo : unit.hi]
        chunk = Chunk(
            text=body[offsets[starts[k]] : offsets[ends[k]]],
            heading_path=list(unit.path),
            plain="\n".join(b.plain for b in part if b.plain),
            code="\n".join(b.code for b in part if b.code),
            start_line=starts[k],
            end_line=ends[k],
            words=unit.words,
        )
        if len(chunk.text) <= max_chars:
            chunks.append(chunk)
            continue
        cuts = [offsets[starts[k]], *(offsets[b.start] for b in part[1:]), offsets[ends[k]]]
        spans = list(pairwise(cuts))
        chunks.extend(_bounded(chunk, part, spans, offsets[starts[k]], _MDX if mdx else _MD, max_chars))
    return chunks


def _bounded(
    chunk: Chunk,
    part: tuple[_Block, ...],
    spans: list[tuple[int, int]],
    base: int,
    md: MarkdownIt,
    max_chars: int,
) -> list[Chunk]:
    """``chunk`` cut by ``longblocks`` when one of its blocks (``part``, at body offsets ``spans``) other
    than a code block is longer than ``max_chars``; else ``[chunk]`` as it is."""
    if not any(hi - lo > max_chars and not b.verbatim for b, (lo, hi) in zip(part, spans, strict=True)):
        return [chunk]
    keep = [(lo - base, hi - base) for b, (lo, hi) in zip(part, spans, strict=True) if b.verbatim]

    def describe(text: str) -> tuple[str, str, int]:
        try:
            pieces = _scan_blocks(md, text)
        except Exception:
            # As in _analyse: a piece must never break a build.
            return text.strip(), "", _count_words(text)
        plain = "\n".join(b.plain for b in pieces if b.plain)
        return plain, "\n".join(b.code for b in pieces if b.code), sum(b.words for b in pieces)

    return [
        Chunk(p.text, list(chunk.heading_path), p.plain, p.code, p.start_line, p.end_line, p.words)
        for p in split_chunk(chunk.text, chunk.start_line, keep, describe, max_chars)
    ]


def _is_esm_line(line: str) -> bool:
    word = line[:6]
    if word != "import" and word != "export":
        return False
    return len(line) == 6 or not (line[6].isalnum() or line[6] in "_$")


def _strip_esm(body: str) -> str:
    if not (body.startswith(("import", "export")) or "\nimport" in body or "\nexport" in body):
        return body
    # MDX treats a top-level paragraph that starts with import/export as JavaScript, up to a blank line.
    tokens = _MDX.parse(body, {})
    lines = body.split("\n")
    drop: list[tuple[int, int]] = []
    for tok in tokens:
        if tok.type == "paragraph_open" and tok.level == 0 and tok.map and _is_esm_line(lines[tok.map[0]]):
            drop.append((tok.map[0], tok.map[1]))
    if not drop:
        return body
    kept: list[str] = []
    prev = 0
    for lo, hi in drop:
        kept.extend(lines[prev:lo])
        prev = hi
    kept.extend(lines[prev:])
    return "\n".join(kept)


def parse_page(text: str, *, mdx: bool = False) -> ParsedPage:
    """Split a page into front matter, title, description and body; never raises."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")

    front_matter, fields, body = read_front_matter(text)

    if mdx:
        # On failure the body stays as is and its ESM lines are indexed as text.
        with contextlib.suppress(Exception):
            body = _strip_esm(body)

    title = text_field(fields, "title")
    if title is None:
        title = next((b.title for b in _analyse(body, mdx).blocks if b.heading == 1 and b.title), None)
    if title is None:
        title = text_field(fields, "sidebar_label", "linkTitle")
    return ParsedPage(
        title=title,
        description=text_field(fields, "description"),
        front_matter=front_matter,
        body=body,
        mdx=mdx,
    )
