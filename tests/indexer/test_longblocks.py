"""A page that is one enormous paragraph is cut into chunks of bounded size (issue 31, item 13)."""

from __future__ import annotations

import itertools
import json
import random
import re
from pathlib import Path

from clikit import index_cli, server_cli
from docbundle.bundle.store import DocStore
from docbundle.indexer.pipeline.chunk import chunk_markdown, parse_page
from docbundle.indexer.pipeline.longblocks import MAX_CHUNK_CHARS, cut_points
from hypothesis import given, settings
from hypothesis import strategies as st

# Line ends of every kind, sentence ends, spaces, combining marks and joiners, Han, Latin.
_ALPHABET = st.sampled_from(
    ["a", "b", " ", "\n", "\r", "\r\n", ".", "\u3002", "\u0301", "\u200d", "数", "据"]
)


@st.composite
def _texts_and_kept(draw: st.DrawFn) -> tuple[str, int, list[tuple[int, int]]]:
    text = "".join(draw(st.lists(_ALPHABET, max_size=400)))
    bound = draw(st.integers(min_value=2, max_value=60))
    marks = sorted(set(draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=8))))
    # Kept ranges (code blocks) start and end at line starts: never inside a \r\n.
    marks = [m for m in marks if text[m - 1 : m + 1] != "\r\n"]
    kept = [(a, b) for a, b in itertools.pairwise(marks) if b > a][::2]
    return text, bound, kept


@settings(max_examples=500, deadline=None)
@given(_texts_and_kept())
def test_cutting_keeps_the_text_and_bounds_every_piece(case: tuple[str, int, list[tuple[int, int]]]) -> None:
    text, bound, kept = case
    cuts = cut_points(text, bound, kept)
    bounds = [0, *cuts, len(text)]
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    assert "".join(pieces) == text
    for a, b in itertools.pairwise(bounds):
        assert b > a or not text
        # Within the bound, unless the piece is one kept range longer than the bound.
        assert b - a <= bound or (a, b) in kept
    for cut in cuts:
        assert not any(a < cut < b for a, b in kept)
        assert text[cut - 1 : cut + 1] != "\r\n"


_LINE = st.lists(st.sampled_from(["word ", "数据", "。", ". ", "`x` ", "*a* ", "# ", "- ", "é"]), max_size=30)
_BLOCK = st.one_of(
    _LINE.map("".join),
    st.builds(lambda body: "```\n" + "".join(body) + "\n```", _LINE),
    st.just(""),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_BLOCK, min_size=1, max_size=12), st.integers(min_value=8, max_value=80), st.booleans())
def test_chunks_of_a_page_cut_by_a_small_bound_tile_it(blocks: list[str], bound: int, crlf: bool) -> None:
    body = "\n".join(blocks) + "\n"
    if crlf:
        body = body.replace("\n", "\r\n")
    whole = chunk_markdown(body, min_words=0, max_chars=10**9)
    chunks = chunk_markdown(body, min_words=0, max_chars=bound)
    if not body.strip():
        assert chunks == []
        return
    assert "".join(c.text for c in chunks) == body
    line = 0
    for c in chunks:
        # Within the bound (but for whitespace a blank piece gave it), unless it holds a code block
        # (never cut) or no block of it is over the bound (then it is the chunk it always was); the
        # line ranges follow each other, a piece that ends inside a line sharing it with the next.
        assert len(c.text.strip()) <= bound or "```" in c.text or c in whole
        assert c.text.strip()
        assert c.start_line in (line, line - 1) and c.end_line > c.start_line
        lines = len(re.findall(r"\r\n|\r|\n", c.text)) + (0 if c.text.endswith(("\n", "\r")) else 1)
        assert c.end_line - c.start_line == lines
        line = c.end_line


def _cjk(n: int, seed: int = 1, sentence: int = 0) -> str:
    """``n`` Han characters on one line, with a full stop every ``sentence`` characters (0: none)."""
    rng = random.Random(seed)
    chars = [chr(rng.randrange(0x4E00, 0x9FA6)) for _ in range(n)]
    if sentence:
        for k in range(sentence - 1, n, sentence):
            chars[k] = "\u3002"
    return "".join(chars)


def test_one_enormous_paragraph_is_cut_into_bounded_chunks_at_sentence_ends() -> None:
    paragraph = _cjk(5 * MAX_CHUNK_CHARS, sentence=50)
    body = "# 手册\n\n" + paragraph + "\n"
    chunks = chunk_markdown(body)
    assert len(chunks) >= 5
    assert "".join(c.text for c in chunks) == body
    assert all(len(c.text) <= MAX_CHUNK_CHARS for c in chunks)
    assert all(c.text.endswith(("\u3002", "\n")) for c in chunks)
    assert all(c.heading_path == ["手册"] for c in chunks)
    assert "".join(c.plain for c in chunks) == "手册\n" + paragraph
    # Pieces of one line share it: each starts on the line the one before ends in.
    assert [(c.start_line, c.end_line) for c in chunks[1:]] == [(2, 3)] * (len(chunks) - 1)


def test_a_paragraph_without_sentences_or_spaces_is_cut_between_characters() -> None:
    body = _cjk(3 * MAX_CHUNK_CHARS + 7)
    chunks = chunk_markdown(body)
    assert [len(c.text) for c in chunks] == [MAX_CHUNK_CHARS] * 3 + [7]
    assert "".join(c.plain for c in chunks) == body


def test_no_piece_is_blank() -> None:
    # Runs of spaces longer than half the bound would make pieces of whitespace alone.
    body = "a" + " " * (3 * MAX_CHUNK_CHARS) + "b" + " " * MAX_CHUNK_CHARS + "\n"
    chunks = chunk_markdown(body)
    assert "".join(c.text for c in chunks) == body
    assert all(c.text.strip() for c in chunks) and len(chunks) == 2


def test_code_blocks_are_never_cut_and_a_huge_one_stays_whole() -> None:
    code = "x = 1\n" * (MAX_CHUNK_CHARS // 3)  # twice the bound
    body = "# T\n\n" + _cjk(2 * MAX_CHUNK_CHARS, sentence=40) + "\n\n```python\n" + code + "```\n\nEnd.\n"
    chunks = chunk_markdown(body)
    assert "".join(c.text for c in chunks) == body
    fenced = [c for c in chunks if "```python" in c.text]
    assert len(fenced) == 1 and fenced[0].text.startswith("```python\n" + code + "```\n")
    assert fenced[0].code == code.rstrip("\n")
    assert all(len(c.text) <= MAX_CHUNK_CHARS for c in chunks if c is not fenced[0])
    # A page whose only large block is code chunks as before: one chunk, whatever its size.
    (whole,) = chunk_markdown("# T\n\nIntro.\n\n```\n" + code + "```\n")
    assert whole.code == code.rstrip("\n")
    # A huge code block that ends a cut chunk is its last piece (no empty chunk after it). Few words,
    # so the paragraph and the code block are one section, one chunk, before the cut.
    fence = "```\n" + "z" * (MAX_CHUNK_CHARS + 10) + "\n```\n"
    body = "# T\n\n" + "y" * (2 * MAX_CHUNK_CHARS) + "\n\n" + fence
    chunks = chunk_markdown(body)
    assert "".join(c.text for c in chunks) == body and chunks[-1].text == fence
    assert all(c.text.strip() for c in chunks)


def test_a_build_stores_a_one_paragraph_page_in_bounded_chunks(tmp_path: Path) -> None:
    page = "# 数据库手册\n\n" + _cjk(8 * MAX_CHUNK_CHARS, sentence=60) + "数据库。\n"
    site = tmp_path / "site"
    site.mkdir()
    (site / "page.md").write_text(page, encoding="utf-8")
    (site / "llms.txt").write_text("# CJK\n\n- [Page](page.md)\n", encoding="utf-8")
    config = tmp_path / "docbundle.toml"
    config.write_text(f'[[library]]\nid = "cjk"\nllms_txt = "{site / "llms.txt"}"\n', encoding="utf-8")
    out = tmp_path / "bundles"
    built = index_cli("build", "--config", str(config), "--out", str(out), "--no-cache", timeout=600)
    assert built.returncode == 0, built.stderr
    (manifest,) = out.glob("cjk/*/*/manifest.json")
    with DocStore(manifest.parent) as store:
        (doc,) = list(store)
    assert len(doc.chunks) >= 8
    assert all(len(c.text) <= MAX_CHUNK_CHARS for c in doc.chunks)
    assert "".join(c.text for c in doc.chunks) == parse_page(page).body
    found = server_cli("search", "cjk", "数据库", "--json", "--bundles", str(out), timeout=300)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert hits and all(len(h["text"]) <= MAX_CHUNK_CHARS for h in hits)
