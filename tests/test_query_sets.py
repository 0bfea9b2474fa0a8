"""The graded query sets under ``benchmarks/queries`` (issue 12, grown by issue 36): every set loads with
``benchmarks/quality.py``'s own reader (ids unique, labels known, grades on the set's scale: 1-2 by
default, 0-3 with ``scale = "0-3"``), holds both halves, and judges only pages its corpus holds. The last check needs the corpora (``../shared/corpora``, absent from
a user's clone): it runs where they are and skips otherwise."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from benchkit import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ROOT / "benchmarks" / "queries"
CORPORA = ROOT.parent / "shared" / "corpora"
SETS = sorted(p.stem for p in QUERIES.glob("*.toml"))


@pytest.mark.parametrize("name", SETS)
def test_a_query_set_loads_and_holds_both_halves(name: str) -> None:
    quality = load_benchmark("quality")
    queries = quality.load_queries(QUERIES / f"{name}.toml")
    splits = {q.split for q in queries}
    if splits == {"test"}:
        # a fresh set written only to test the next change (issue 36's third round): its corpus's other
        # sets hold the dev questions that change is chosen on
        corpus = quality.set_corpus(name)
        others = [s for s in SETS if s != name and quality.set_corpus(s) == corpus]
        dev = [q for s in others for q in quality.load_queries(QUERIES / f"{s}.toml") if q.split != "test"]
        assert dev, f"{name} holds only test questions, and no other set of {corpus} holds dev ones"
        return
    assert queries and (splits == {"dev", "test"} or splits == {""}), (name, splits)


@pytest.mark.parametrize("name", SETS)
def test_a_query_set_judges_only_pages_its_corpus_holds(name: str) -> None:
    corpus = tomllib.loads((QUERIES / f"{name}.toml").read_text(encoding="utf-8")).get("corpus", name)
    folder = CORPORA / corpus
    if not (folder / "llms.txt").is_file():
        pytest.skip(f"the corpus {corpus} is not on this machine (../shared/corpora)")
    quality = load_benchmark("quality")
    missing = sorted(
        {
            d
            for q in quality.load_queries(QUERIES / f"{name}.toml")
            for d in q.relevant
            if not (folder / d).is_file()
        }
    )
    assert missing == [], f"{name} judges pages {corpus} does not hold: {missing[:10]}"


def test_an_html_corpus_names_its_pages_by_the_file_every_link_style_points_at(tmp_path: Path) -> None:
    # The HTML sets grade files (`ch01.html`, `dir/index.html`); a bundle's documents carry the URL the
    # llms.txt linked (`ch01`, `ch01.html#part`, `dir/`). Ranked ids must be the files, or every hit of an
    # HTML corpus scores 0 in the hybrid and judging benchmarks.
    quality = load_benchmark("quality")
    folder = tmp_path / "html-mini"
    (folder / "dir").mkdir(parents=True)
    for rel in ("llms.txt", "ch01.html", "dir/index.html", "notes.html"):
        (folder / rel).write_text("x", encoding="utf-8")
    quality._PAGE_FOLDERS["html-mini"] = folder
    name = quality.page_namer("html-mini")
    base = "http://127.0.0.1:9/"
    assert name("ch01", base + "ch01") == "ch01.html"
    assert name("ch01.html", base + "ch01.html#part-2") == "ch01.html"
    assert name("dir", base + "dir/") == "dir/index.html"
    assert name("notes", base + "notes.md") == "notes.html"  # a markdown twin names its HTML page
    assert name("gone", base + "gone") == "gone"  # no such file: the document id, never a wrong page
    # A markdown corpus keeps its document ids as they are.
    assert quality.page_namer("medium-en")("pages/a.md", base + "pages/a.md") == "pages/a.md"
    assert quality.is_html_corpus(folder) and not quality.is_html_corpus(tmp_path / "medium-en")
