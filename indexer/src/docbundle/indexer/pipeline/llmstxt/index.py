"""The index (link list) part of an llms.txt file: title, summary, details and sections.

A block-level walk over the lines ``scan.py`` classified; it reports the conformance issues it meets
(``text-in-section``, ``bare-url``, ``relative-link``...). The structure it reads:

    The first heading, when it is an H1, is the title; a ``>`` blockquote right after it is the summary;
    everything up to the first section heading is ``details``. Every later heading starts a section.
    Section names are the heading path below the title joined with ``" / "``: an H3 under ``## Build`` is
    the section ``"Build / Reference"``, an H2 under a second H1 ``# Package index`` is
    ``"Package index / Read data"``. So H3-only files (``h3-as-section``) and several H1s
    (``multiple-h1``) need no special casing. A file with no H2 and several H1s whose first H1 is directly
    followed by links uses its H1s as sections and has no title (``h1-as-section``). A section is optional
    when the first part of its path is ``Optional`` (case-insensitive, trimmed).
    Link entries are list items or lines with an entry shape (``links.entries_from_text``); the bare ones
    yield ``bare-url``. Inside sections, other content is kept as the section's ``text``
    (``text-in-section``) and the markdown links in it are extracted too; links in the free ``details``
    prose are not.

Whether the file is an index at all, and where the index part ends in a full file, is ``full.py``'s.
"""

from __future__ import annotations

from typing import NamedTuple

from .links import (
    LinkEntry,
    absolute_url,
    clean_link_text,
    entries_from_text,
    find_links,
    heading_text,
    is_relative,
    title_from_url,
)
from .model import ConformanceIssue, LlmsLink, LlmsSection, add_issue
from .scan import BULLET_RE, HR_RE, Head

__all__ = ["IndexParser", "IndexResult"]


class _SectionBuilder:
    __slots__ = ("idx", "last", "links", "name", "optional", "text")

    def __init__(self, name: str, optional: bool, idx: int) -> None:
        self.name = name
        self.optional = optional
        self.idx = idx
        self.links: list[LlmsLink] = []
        self.text: list[str] = []
        self.last = -1  # line index just past the last text block


class IndexResult(NamedTuple):
    """The index part of a file: title, summary, details and sections."""

    title: str | None
    summary: str | None
    details: str
    sections: list[LlmsSection]


class IndexParser:
    """Block-level walk over the index part of a file producing title, summary, details and sections."""

    def __init__(
        self,
        lines: list[str],
        in_fence: bytearray,
        heads: list[Head],
        base_url: str | None,
        issues: list[ConformanceIssue],
    ) -> None:
        self.lines = lines
        self.in_fence = in_fence
        self.heads = {h.idx: h for h in heads}
        self.base_url = base_url
        self.issues = issues
        self.relative_reported = False
        self.outside_reported = False
        self.has_sections = False
        self.pre = _SectionBuilder("", False, -1)
        self.current: _SectionBuilder | None = None
        self.sections: list[_SectionBuilder] = []
        self.text_reported: set[int] = set()
        self.title: str | None = None
        self.summary: str | None = None
        self.stack: list[tuple[int, str]] = []  # (level, text) of the open headings below the title
        self.expect_summary = False
        self.seen_content = False

    def parse(self, end: int, title_idx: int | None, h1_sections: bool, skip_to: int) -> IndexResult:
        """Walk ``lines[skip_to:end]``; ``title_idx`` is the title heading's line, if any."""
        section_heads = [h for i, h in self.heads.items() if i < end and i != title_idx]
        self.has_sections = bool(section_heads)
        if section_heads and not h1_sections and min(h.level for h in section_heads) >= 3:
            first = min(section_heads, key=lambda h: h.idx)
            add_issue(
                self.issues, "h3-as-section", first.idx, "no H2 sections: deeper headings used as sections"
            )
        self.expect_summary = title_idx is None
        self._walk(skip_to, end, title_idx)
        return IndexResult(self.title, self.summary, _join_text(self.pre.text), self._finish())

    def _walk(self, i: int, end: int, title_idx: int | None) -> None:
        lines = self.lines
        in_fence = self.in_fence
        while i < end:
            line = lines[i]
            if in_fence[i]:
                j = i
                while j < end and in_fence[j]:
                    j += 1
                self._text(lines[i:j], i)
                self.expect_summary = False
                self.seen_content = True
                i = j
                continue
            if not line.strip():
                i += 1
                continue
            head = self.heads.get(i)
            if head is not None:
                if i == title_idx:
                    self.title = heading_text(head.raw)
                    self.expect_summary = True
                else:
                    stack = self.stack
                    while stack and stack[-1][0] >= head.level:
                        stack.pop()
                    stack.append((head.level, heading_text(head.raw)))
                    name = " / ".join(part for _, part in stack)
                    optional = stack[0][1].lower() == "optional"
                    self.current = _SectionBuilder(name, optional, i)
                    self.sections.append(self.current)
                    self.expect_summary = False
                self.seen_content = True
                i += 1
                continue
            if line.lstrip(" \t").startswith(">"):
                j = i
                while j < end and not in_fence[j] and lines[j].lstrip(" \t").startswith(">"):
                    j += 1
                if (
                    self.expect_summary
                    and self.summary is None
                    and (self.title is not None or not self.seen_content)
                ):
                    self.summary = _quote_text(lines[i:j])
                else:
                    self._text(lines[i:j], i)
                self.expect_summary = False
                self.seen_content = True
                i = j
                continue
            self.expect_summary = False
            self.seen_content = True
            if HR_RE.match(line):
                i += 1
            elif BULLET_RE.match(line):
                i = self._list_item(i, end)
            else:
                i = self._paragraph(i, end)

    def _is_block_start(self, k: int) -> bool:
        line = self.lines[k]
        if self.in_fence[k] or k in self.heads or not line.strip():
            return True
        s = line.lstrip(" \t")
        return s.startswith(">") or HR_RE.match(line) is not None or BULLET_RE.match(line) is not None

    def _list_item(self, i: int, end: int) -> int:
        lines = self.lines
        bullet = BULLET_RE.match(lines[i])
        indent = len(bullet.group(1)) if bullet is not None else 0
        parts = [lines[i][bullet.end() :] if bullet is not None else lines[i]]
        j = i + 1
        while j < end:
            if not self._is_block_start(j):
                parts.append(lines[j])
                j += 1
                continue
            # after blank lines, deeper-indented plain lines still belong to the item
            k = j
            while k < end and not lines[k].strip() and not self.in_fence[k]:
                k += 1
            if k > j and k < end and not self._is_block_start(k):
                nxt = lines[k]
                if len(nxt) - len(nxt.lstrip(" \t")) > indent:
                    parts.extend(lines[j : k + 1])
                    j = k + 1
                    continue
            break
        content = " ".join(p.strip() for p in parts).strip()
        entries = entries_from_text(content, list_item=True)
        if entries is not None:
            self._add_entries(entries, i)
        else:
            self._prose(lines[i:j], content, i)
        return j

    def _paragraph(self, i: int, end: int) -> int:
        lines = self.lines
        j = i
        prose: list[str] = []
        prose_start = -1
        while j < end and (j == i or not self._is_block_start(j)):
            line = lines[j]
            entries = entries_from_text(line.strip(), list_item=False)
            if entries is not None:
                if prose:
                    self._prose(prose, "\n".join(p.strip() for p in prose), prose_start)
                    prose = []
                self._add_entries(entries, j)
            else:
                if not prose:
                    prose_start = j
                prose.append(line)
            j += 1
        if prose:
            self._prose(prose, "\n".join(p.strip() for p in prose), prose_start)
        return j

    def _prose(self, block: list[str], content: str, idx: int) -> None:
        self._text(block, idx)
        if self.current is None:
            return  # links in free details prose are commentary, not file-list entries
        for found in find_links(content):
            if found.image:
                continue
            if found.text:
                title = clean_link_text(found.text)
                if not title:
                    continue
            else:
                title = title_from_url(found.url)
            if not found.url:
                add_issue(self.issues, "empty-link-url", idx, f"link {title!r} has an empty URL")
                continue
            self._add_link(title, found.url, "", idx)

    def _text(self, block: list[str], idx: int) -> None:
        target = self.current or self.pre
        if target.text:
            # keep a tight list tight: separate blocks only where the source had a blank line
            gap = self.lines[target.last : idx]
            if any(not line.strip() for line in gap):
                target.text.append("")
        target.text.extend(block)
        target.last = idx + len(block)
        if target is not self.pre and target.idx not in self.text_reported:
            self.text_reported.add(target.idx)
            add_issue(
                self.issues,
                "text-in-section",
                idx,
                f"section {target.name!r} contains content other than a link list",
            )

    def _add_entries(self, entries: list[LinkEntry], idx: int) -> None:
        for e in entries:
            if not e.url:
                add_issue(self.issues, "empty-link-url", idx, f"link {e.title!r} has an empty URL")
                continue
            if e.bare:
                add_issue(self.issues, "bare-url", idx, f"URL {e.url!r} has no markdown link title")
            if e.empty_title:
                add_issue(self.issues, "empty-link-title", idx, f"link to {e.url!r} has no title")
            self._add_link(e.title, e.url, e.notes, idx)

    def _add_link(self, title: str, url: str, notes: str, idx: int) -> None:
        if is_relative(url) and not self.relative_reported:
            self.relative_reported = True
            add_issue(
                self.issues, "relative-link", idx, f"relative link {url!r} (resolved against the base URL)"
            )
        target = self.current or self.pre
        if target is self.pre and self.has_sections and not self.outside_reported:
            self.outside_reported = True
            add_issue(self.issues, "link-outside-section", idx, "links before the first section heading")
        target.links.append(
            LlmsLink(
                title=title,
                url=absolute_url(url, self.base_url),
                notes=notes,
                section=target.name,
                optional=target.optional,
                line=idx + 1,
            )
        )

    def _finish(self) -> list[LlmsSection]:
        out: list[LlmsSection] = []
        if self.pre.links:
            out.append(LlmsSection(name="", links=self.pre.links))
        for b in self.sections:
            out.append(LlmsSection(name=b.name, links=b.links, optional=b.optional, text=_join_text(b.text)))
        return out


def _quote_text(block: list[str]) -> str:
    paragraphs: list[list[str]] = [[]]
    for line in block:
        body = line.lstrip(" \t")[1:]
        if body.startswith(" "):
            body = body[1:]
        if body.strip():
            paragraphs[-1].append(body.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    # line breaks are kept: some files put one fact per quoted line
    return "\n\n".join("\n".join(p) for p in paragraphs if p)


def _join_text(block: list[str]) -> str:
    return "\n".join(block).strip("\n")
