"""The ranking metrics (release/metrics.py) that regress and benchmarks/quality.py share."""

from __future__ import annotations

import math

import pytest
from docbundle.indexer.release.metrics import DEPTH, dcg, mrr, ndcg, recall


def test_ndcg_uses_exponential_gains_and_the_ideal_order() -> None:
    rel = {"a": 2, "b": 1}
    assert ndcg(["a", "b"], rel) == 1.0
    expected = (1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert ndcg(["b", "a"], rel) == pytest.approx(expected)
    assert ndcg(["x", "y"], rel) == 0.0
    assert ndcg(["a"], {}) == 0.0  # nothing relevant: no ideal gain, no division


def test_ndcg_looks_only_at_the_top_depth() -> None:
    ranked = [f"d{i}" for i in range(DEPTH)] + ["a"]
    assert ndcg(ranked, {"a": 2}) == 0.0
    assert ndcg(ranked, {"a": 2}, depth=DEPTH + 1) > 0.0
    assert dcg([2, 0, 1]) == pytest.approx(3 + 1 / 2)


def test_mrr_is_the_first_relevant_rank() -> None:
    rel = {"a": 1, "b": 2}
    assert mrr(["x", "b", "a"], rel) == 0.5
    assert mrr(["x", "y"], rel) == 0.0
    assert mrr(["x", "n", "a"], {"n": 0, "a": 1}) == pytest.approx(1 / 3)  # grade 0 is not relevant


def test_recall_counts_only_relevant_documents() -> None:
    assert recall(["a", "x"], {"a": 2, "b": 1}) == 0.5
    # A document judged 0 is not relevant: finding it or not does not move recall. (The benchmark's
    # own copy divided by every judged document, so this query scored 0.5 there.)
    assert recall(["a"], {"a": 2, "n": 0}) == 1.0
    assert recall(["a"], {"n": 0}) == 0.0  # nothing relevant: 0, not a division by zero
    assert recall([f"d{i}" for i in range(DEPTH)] + ["a"], {"a": 1}) == 0.0
