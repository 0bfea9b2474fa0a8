"""The llms.txt parser against real files (``corpora/llms-txt-wild``); opt-in, skipped without the corpus.

The corpus folder is found through ``DOCBUNDLE_SHARED`` (a folder holding ``corpora/``) or else the
``shared`` folder next to the repository.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from docbundle.indexer.pipeline.llmstxt import LlmsTxt, parse_llms_txt


def _corpus() -> Path:
    shared = os.environ.get("DOCBUNDLE_SHARED")
    root = Path(shared) if shared else Path(__file__).parents[3] / "shared"
    return root / "corpora" / "llms-txt-wild"


CORPUS = _corpus()
FILES = sorted(p for p in CORPUS.rglob("*") if p.is_file()) if CORPUS.is_dir() else []

pytestmark = [
    pytest.mark.shared,
    pytest.mark.skipif(not FILES, reason=f"llms-txt-wild corpus not found at {CORPUS}"),
]

_LINK_ITEM = re.compile(r"\s*(?:[-*+]|\d+[.)])\s+\[[^\]]+\]\([^)\s]+\)")
_FENCE = re.compile(r"\s*(```|~~~)")


def _name(path: Path) -> str:
    return path.relative_to(CORPUS).as_posix()


def _has_link_items(text: str) -> bool:
    """Whether a ``- [title](url)`` item occurs outside fenced code (an independent, cruder check)."""
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and _LINK_ITEM.match(line):
            return True
    return False


def _is_full_file(name: str) -> bool:
    # ai-sdk's file is named llms.txt but is concatenated pages (see the corpus MANIFEST)
    return name.startswith("full/") or "llms-full" in name or "ai-sdk-dev-llms" in name


def _check_consistency(doc: LlmsTxt, text: str) -> None:
    assert doc.kind in ("index", "full")
    line_count = text.count("\n") + 1
    assert all(1 <= issue.line <= line_count for issue in doc.issues)
    assert all(re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", issue.code) for issue in doc.issues)
    for section in doc.sections:
        for link in section.links:
            assert link.title.strip() and link.url.strip()
            assert (link.section, link.optional) == (section.name, section.optional)
    assert doc.links == [link for section in doc.sections for link in section.links]


@pytest.mark.parametrize("path", FILES, ids=_name)
def test_every_wild_file_parses_sensibly(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    name = _name(path)
    base = f"https://wild.example/{path.stem}/llms.txt"
    doc = parse_llms_txt(text, base)
    plain = parse_llms_txt(text)
    _check_consistency(doc, text)
    _check_consistency(plain, text)
    assert [link.title for link in doc.links] == [link.title for link in plain.links]
    assert all(urlsplit(link.url).scheme for link in doc.links), (
        "relative links must resolve against the base"
    )
    if _is_full_file(name):
        assert doc.kind == "full"
    if doc.kind == "full":
        assert doc.inline_docs
        assert all(d.text.strip() for d in doc.inline_docs)
        titled = sum(1 for d in doc.inline_docs if d.title)
        assert titled >= 0.95 * len(doc.inline_docs)
    elif name.endswith(".txt") and _has_link_items(text):
        assert doc.links
        assert doc.inline_docs == []


def _parsed(name: str, base: str | None = None) -> LlmsTxt:
    return parse_llms_txt((CORPUS / name).read_text(encoding="utf-8"), base)


def _codes(doc: LlmsTxt) -> set[str]:
    return {issue.code for issue in doc.issues}


def test_canonical_files_are_clean() -> None:
    doc = _parsed("AnswerDotAI__llms-txt.txt")
    assert (doc.title, doc.kind, [s.name for s in doc.sections]) == ("llms.txt", "index", ["Docs"])
    assert len(doc.links) == 3
    assert doc.issues == []
    hologram = _parsed("2060-io__hologram-docs.txt")
    assert "Build / Agent Pack reference" in [s.name for s in hologram.sections]
    assert [link.title for link in hologram.links if link.optional] == ["Repository", "Contributing"]


def test_odd_structures_from_the_manifest() -> None:
    langgraph = _parsed("langchain-ai__langgraph.2026-01.txt")
    assert langgraph.title is None
    assert [s.name for s in langgraph.sections] == ["Guides", "Examples", "Resources"]
    assert "h1-as-section" in _codes(langgraph)

    litellm = _parsed("BerriAI__litellm-docs.txt")
    assert litellm.title == "https://docs.litellm.ai/ llms.txt"
    assert len(litellm.links) == 50
    assert "no-sections" in _codes(litellm)

    assert "missing-trailing-newline" in _codes(_parsed("finos__morphir.txt"))
    assert "multiple-h1" in _codes(_parsed("112books__pocallum.cat.txt"))

    teekaart = _parsed("02signal__teekaart.txt")
    assert (teekaart.title, teekaart.links, teekaart.kind) == ("Teekaart.ee", [], "index")

    bare = _parsed("1Panel-dev__docs.txt")
    assert len(bare.links) == 32
    assert "bare-url" in _codes(bare)
    assert bare.links[0].title == "文档首页"


def test_relative_links_in_wild_files_resolve_against_the_base() -> None:
    doc = _parsed("JanDeDobbeleer__oh-my-posh.txt", "https://ohmyposh.dev/llms.txt")
    assert doc.links[0].url == "https://ohmyposh.dev/docs/"
    assert "relative-link" in _codes(doc)


def test_headings_in_code_blocks_do_not_become_pages() -> None:
    doc = _parsed("567-labs__instructor.txt")
    assert doc.kind == "full"
    titles = [d.title for d in doc.inline_docs]
    assert "Installation" in titles
    assert "OpenAI" not in titles  # "# OpenAI" is a shell comment inside a fence


def test_full_file_shapes() -> None:
    nextjs = _parsed("captured/tenequm__llms-txt-mcp__nextjs-org-docs-llms-full.txt")
    assert nextjs.title == "Next.js Documentation"
    assert len(nextjs.inline_docs) == 363
    assert all(d.url and d.url.startswith("https://nextjs.org/docs") for d in nextjs.inline_docs)

    adk = _parsed("full/google__adk-docs.llms-full.txt")
    assert len(adk.inline_docs) == 372  # one per front-matter block, runaway fences included
    assert adk.inline_docs[1].title == "Agents - Agent Development Kit"

    ctx = _parsed("full/AnswerDotAI__llms-txt.llms-ctx-full.txt")
    assert [d.title for d in ctx.inline_docs] == ["llms.txt proposal", "Python library docs", "ed demo"]

    drizzle = _parsed("captured/tenequm__llms-txt-mcp__orm-drizzle-team-llms-full.txt")
    assert drizzle.inline_docs[0].title == "drizzle-arktype"
    assert drizzle.inline_docs[0].url == "https://orm.drizzle.team/docs/arktype"

    intuition = _parsed("full/0xIntuition__intuition-docs.llms-full.txt")
    assert intuition.inline_docs[0].title == "Contribution Guidelines"
    assert "Routing Guide" in [s.name for s in intuition.sections]


def _calls(parse: Callable[[], object]) -> int:
    """How many Python and C functions ``parse()`` calls: a count of work that no machine load changes."""
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        parse()
    finally:
        sys.setprofile(None)
    return count


def test_the_work_of_parsing_the_largest_wild_file_grows_linearly() -> None:
    """Twice the text costs at most about twice the calls: no step rescans what came before. (The
    largest file is ~3.7 MB. Its time depends on the machine and is not asserted; the time of
    adversarial llms.txt shapes is a figure of ``benchmarks/hostile.py``.)"""
    biggest = max(FILES, key=lambda p: p.stat().st_size)
    text = biggest.read_text(encoding="utf-8")
    assert parse_llms_txt(text).inline_docs
    once = _calls(lambda: parse_llms_txt(text))
    twice = _calls(lambda: parse_llms_txt(text + "\n" + text))
    assert once > 0 and twice <= 2.2 * once, f"{_name(biggest)}: {once} calls, doubled {twice}"
