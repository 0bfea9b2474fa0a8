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
