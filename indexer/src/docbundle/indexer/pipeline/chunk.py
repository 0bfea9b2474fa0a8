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
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from math import ceil
from typing import NamedTuple

import msgspec
from markdown_it import MarkdownIt

from .blocks import MD, MDX, Block, analyse, count_words, scan_blocks
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
    # The id of the deepest heading of ``heading_path`` that has one (``{#id}``, or the HTML converter's):
    # the fragment a hit in this chunk cites. "" when none has one.
    anchor: str = ""


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
    anchors: list[tuple[str, ...]]  # the explicit id of each heading of the path ("" where none)


def _heading_paths(blocks: tuple[Block, ...], ids_at: Mapping[int, str]) -> _Paths:
    paths: list[tuple[str, ...]] = []
    keeps: list[int] = []
    anchors: list[tuple[str, ...]] = []
    stack: list[Block] = []
    path: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()
    keep = 0
    for block in blocks:
        if block.heading and block.title:
            while stack and stack[-1].heading >= block.heading:
                stack.pop()
            stack.append(block if block.anchor else block._replace(anchor=ids_at.get(block.start, "")))
            path = tuple(b.title for b in stack)
            ids = tuple(b.anchor for b in stack)
            keep = max((k + 1 for k, b in enumerate(stack) if b.api), default=0)
        paths.append(path)
        keeps.append(keep)
        anchors.append(ids)
    return _Paths(paths, keeps, anchors)


def _anchor(unit: _Unit, heads: _Paths) -> str:
    """The id of the deepest heading of ``unit``'s path that has one (its own heading's, else the
    nearest above it: a hit there is best cited by the closest place the page lets a link reach), read
    where a block of the unit is under that path (a merged unit's path may be shorter than its first
    block's, a lead's longer); "" when no heading of the path has an id."""
    depth = len(unit.path)
    if not depth:
        return ""
    for b in range(unit.lo, unit.hi):
        if heads.paths[b][:depth] == unit.path:
            return next((a for a in reversed(heads.anchors[b][:depth]) if a), "")
    return ""


def _starts_section(block: Block, max_depth: int) -> bool:
    return bool(block.title) and (0 < block.heading <= max_depth or (block.heading > 0 and block.api))


def _sections(blocks: tuple[Block, ...], heads: _Paths, max_depth: int) -> list[_Unit]:
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
    blocks: tuple[Block, ...], cum: tuple[int, ...], lo: int, hi: int, depth: int, max_words: int
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
    blocks: tuple[Block, ...],
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
    anchors: Mapping[int, str] | None = None,
) -> list[Chunk]:
    """Split a markdown body into heading-delimited chunks that are exact, contiguous slices of it.

    ``anchors``: heading ids the body's text does not hold, by the line of their heading (the HTML
    converter's, ``Converted.anchors``); a heading's own ``{#id}`` goes first.

    A chunk over ``max_chars`` characters whose block (other than a code block) is over it too is cut
    by ``longblocks`` (the indexer always uses ``MAX_CHUNK_CHARS``; tests pass other bounds)."""
    if not body.strip():
        return []
    analysis = analyse(body, mdx)
    blocks = analysis.blocks
    offsets = analysis.offsets
    max_words = max(max_words, 1)

    heads = _heading_paths(blocks, anchors or {})
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
            anchor=_anchor(unit, heads),
        )
        if len(chunk.text) <= max_chars:
            chunks.append(chunk)
            continue
        cuts = [offsets[starts[k]], *(offsets[b.start] for b in part[1:]), offsets[ends[k]]]
        spans = list(pairwise(cuts))
        chunks.extend(_bounded(chunk, part, spans, offsets[starts[k]], MDX if mdx else MD, max_chars))
    return chunks


def _bounded(
    chunk: Chunk,
    part: tuple[Block, ...],
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
            pieces = scan_blocks(md, text)
        except Exception:
            # As in analyse: a piece must never break a build.
            return text.strip(), "", count_words(text)
        plain = "\n".join(b.plain for b in pieces if b.plain)
        return plain, "\n".join(b.code for b in pieces if b.code), sum(b.words for b in pieces)

    return [
        Chunk(
            p.text, list(chunk.heading_path), p.plain, p.code, p.start_line, p.end_line, p.words, chunk.anchor
        )
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
    tokens = MDX.parse(body, {})
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
        title = next((b.title for b in analyse(body, mdx).blocks if b.heading == 1 and b.title), None)
    if title is None:
        title = text_field(fields, "sidebar_label", "linkTitle")
    return ParsedPage(
        title=title,
        description=text_field(fields, "description"),
        front_matter=front_matter,
        body=body,
        mdx=mdx,
    )
