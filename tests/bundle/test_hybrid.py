"""Weighted reciprocal rank fusion of a keyword and a semantic page ranking."""

from __future__ import annotations

import itertools

import pytest
from docbundle.bundle.hybrid import fuse
from hypothesis import given
from hypothesis import strategies as st


def test_scores_follow_the_formula_and_a_missing_page_gets_no_term() -> None:
    out = dict(fuse(["a", "b"], ["b", "c"], alpha=0.7, k=10))
    assert out["a"] == pytest.approx(0.7 / 11)
    assert out["b"] == pytest.approx(0.7 / 12 + 0.3 / 11)
    assert out["c"] == pytest.approx(0.3 / 12)
    assert [d for d, _ in fuse(["a", "b"], ["b", "c"], alpha=0.7, k=10)] == ["b", "a", "c"]


def test_alpha_one_keeps_the_keyword_order_then_semantic_only_pages() -> None:
    ranked = [d for d, _ in fuse(["x", "y", "z"], ["z", "q", "y"], alpha=1.0, k=30)]
    assert ranked[:3] == ["x", "y", "z"]
    assert ranked[3:] == ["q"]  # q scores 0 and comes after every keyword page


def test_equal_scores_break_by_keyword_rank_then_semantic_rank() -> None:
    # b is keyword 1st only, a semantic 1st only: with alpha 0.5 their scores are equal
    assert [d for d, _ in fuse(["b"], ["a"], alpha=0.5, k=60)] == ["b", "a"]
    # z: keyword 1st, semantic 3rd; a: keyword 3rd, semantic 1st -> equal scores, the keyword rank wins
    assert [d for d, _ in fuse(["z", "m", "a"], ["a", "m", "z"], alpha=0.5, k=10)][:2] == ["z", "a"]


def test_a_repeated_page_counts_at_its_best_rank_only() -> None:
    once = dict(fuse(["a", "b"], ["a"], alpha=0.6, k=10))
    twice = dict(fuse(["a", "b", "a"], ["a", "a"], alpha=0.6, k=10))
    assert once == twice


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="alpha"):
        fuse(["a"], ["b"], alpha=1.5)
    with pytest.raises(ValueError, match="k must"):
        fuse(["a"], ["b"], k=-1)


@given(
    st.lists(st.integers(0, 30), unique=True, max_size=15),
    st.lists(st.integers(0, 30), unique=True, max_size=15),
    st.floats(0, 1),
    st.integers(1, 100),
)
def test_fusion_holds_every_page_once_sorted_and_deterministic(
    kw: list[int], sem: list[int], alpha: float, k: int
) -> None:
    out = fuse(kw, sem, alpha, k)
    assert sorted(d for d, _ in out) == sorted(set(kw) | set(sem))
    assert all(a[1] >= b[1] for a, b in itertools.pairwise(out))
    assert out == fuse(list(kw), list(sem), alpha, k)
