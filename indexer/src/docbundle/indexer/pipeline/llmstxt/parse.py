"""``parse_llms_txt``: the entry point, and the conformance issues of the file as a whole.

It normalises the text (BOM, CR/CRLF, NUL: each reported), runs the line pass (``scan.py``), asks
``full.py`` for the file's shape, and hands the index part to ``index.py``; then it adds the issues of
the file's structure (``no-h1``, ``multiple-h1``, ``text-before-h1``, ``no-sections``...). It never
raises: every deviation from the spec becomes a :class:`ConformanceIssue`.
"""

from __future__ import annotations

from ..page import leading_block_end
from .full import build_docs, file_shape
from .index import IndexParser, IndexResult
from .links import entries_from_text
from .model import ConformanceIssue, InlineDoc, LlmsTxt, add_issue
from .scan import BULLET_RE, SOURCE_MARKER_RE, Scan, front_matter, scan_lines

__all__ = ["parse_llms_txt"]


def parse_llms_txt(text: str, base_url: str | None = None) -> LlmsTxt:
    """Parse an llms.txt or llms-full.txt file leniently; never raises on any str input."""
    issues: list[ConformanceIssue] = []
    text = _normalise(text, issues)
    lines = text.split("\n")
    if not text.strip():
        add_issue(issues, "empty-file", 0, "file is empty")
        add_issue(issues, "no-h1", 0, "no H1 title")
        return LlmsTxt(None, None, "", [], [], issues, "index")
    if not text.endswith("\n"):
        add_issue(issues, "missing-trailing-newline", len(lines) - 1, "file does not end with a newline")

    fm = front_matter(text, lines)
    scan = scan_lines(lines, fm)
    if fm and len(fm) - scan.fm_in_fence < 2:
        # front-matter look-alikes inside code blocks are examples, not page boundaries
        fm = {}
        scan = scan_lines(lines, fm)
    title_idx, h1_sections = _title_heading(lines, scan)
    shape = file_shape(text, lines, scan, fm, title_idx, base_url)
    docs = shape.docs
    preamble_end = len(lines)
    if shape.kind == "full" and shape.pages:
        h1_sections = False  # the H1s open pages
        pages = shape.pages
        preamble_end = pages[0].start
        if title_idx == preamble_end:
            preamble_end += 1  # the title heading also opens the first page
        elif title_idx is not None and title_idx > preamble_end:
            title_idx = None
        spans = [(p, pages[k + 1].start if k + 1 < len(pages) else len(lines)) for k, p in enumerate(pages)]
        docs = build_docs(lines, spans, scan, fm, base_url)
        if not docs:
            docs = [InlineDoc(title="", text=text.strip("\n"), line=1)]

    if shape.preamble_text is not None:
        head = _tagged_preamble(shape.preamble_text, shape.shift, base_url, issues)
    else:
        skip_to = 0
        if 0 in fm:
            skip_to = fm[0].close_idx + 1
        elif leading_block_end(lines) > 0 and shape.kind == "index":
            skip_to = leading_block_end(lines)
            add_issue(issues, "front-matter", 0, "file starts with a YAML front-matter block")
        parser = IndexParser(lines, scan.in_fence, scan.heads, base_url, issues)
        head = parser.parse(preamble_end, title_idx, h1_sections, skip_to)
        _structure_issues(issues, lines, scan, title_idx, h1_sections, preamble_end, shape.kind, skip_to)

    if scan.unclosed_fence >= 0:
        add_issue(issues, "unclosed-fence", scan.unclosed_fence, "code fence is never closed")
    if head.title is None and not any(i.code in ("no-h1", "h1-as-section") for i in issues):
        add_issue(issues, "no-h1", 0, "no H1 title")
    issues.sort(key=lambda i: i.line)
    return LlmsTxt(
        title=head.title,
        summary=head.summary,
        details=head.details,
        sections=head.sections,
        inline_docs=docs,
        issues=issues,
        kind=shape.kind,
    )


def _normalise(text: str, issues: list[ConformanceIssue]) -> str:
    """Drop a BOM and turn CR/CRLF into LF, reporting each (and NUL characters)."""
    if text.startswith("\ufeff"):
        text = text[1:]
        add_issue(issues, "bom", 0, "file starts with a byte order mark")
    if "\r" in text:
        add_issue(issues, "crlf-line-endings", 0, "file uses CR or CRLF line endings")
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in text:
        add_issue(
            issues, "nul-character", text[: text.index("\x00")].count("\n"), "file contains NUL characters"
        )
    return text


def _title_heading(lines: list[str], scan: Scan) -> tuple[int | None, bool]:
    """(line of the title H1 or None, whether the H1s are sections): ``h1-as-section`` files have no title."""
    heads = scan.heads
    if not heads or heads[0].level != 1:
        return None, False
    title_idx = heads[0].idx
    h1s = [h for h in heads if h.level == 1]
    if len(h1s) >= 2 and len(h1s) == len(heads) and _followed_by_links(lines, scan.in_fence, title_idx):
        return None, True
    return title_idx, False


def _tagged_preamble(
    preamble_text: str, shift: int, base_url: str | None, issues: list[ConformanceIssue]
) -> IndexResult:
    """Title, summary, details and sections of the text before the first ``<doc>`` wrapper."""
    sub = parse_llms_txt(preamble_text, base_url)
    issues.extend(
        ConformanceIssue(i.code, max(1, i.line - shift), i.message)
        for i in sub.issues
        if i.code not in ("missing-trailing-newline", "empty-file", "no-h1", "no-sections")
    )
    return IndexResult(sub.title, sub.summary, sub.details, sub.sections)


def _followed_by_links(lines: list[str], in_fence: bytearray, idx: int) -> bool:
    for k in range(idx + 1, min(len(lines), idx + 20)):
        line = lines[k]
        if not line.strip():
            continue
        if in_fence[k]:
            return False
        if SOURCE_MARKER_RE.match(line.strip()):
            return False  # a page's source line, not a link list
        bullet = BULLET_RE.match(line)
        content = line[bullet.end() :].strip() if bullet is not None else line.strip()
        return entries_from_text(content, list_item=bullet is not None) is not None
    return False


def _structure_issues(
    issues: list[ConformanceIssue],
    lines: list[str],
    scan: Scan,
    title_idx: int | None,
    h1_sections: bool,
    end: int,
    kind: str,
    skip_to: int,
) -> None:
    heads = [h for h in scan.heads if h.idx < end]
    if h1_sections and heads:
        add_issue(issues, "h1-as-section", heads[0].idx, "no title: H1 headings are used as sections")
    elif title_idx is None:
        add_issue(issues, "no-h1", heads[0].idx if heads else 0, "the file does not start with an H1 title")
    else:
        extra = [h for h in heads if h.level == 1 and h.idx != title_idx]
        if extra:
            add_issue(
                issues, "multiple-h1", extra[0].idx, f"{len(extra) + 1} H1 headings; later ones are sections"
            )
        before = next((k for k in range(skip_to, title_idx) if lines[k].strip()), None)
        if before is not None:
            add_issue(issues, "text-before-h1", before, "content before the H1 title")
    if kind == "index" and not any(h.idx != title_idx for h in heads):
        add_issue(issues, "no-sections", title_idx or 0, "no section headings")
