"""Weighted reciprocal rank fusion of a keyword and a semantic page ranking."""

from __future__ import annotations

import itertools
import math

import pytest
from docbundle.bundle import hybrid
from docbundle.bundle.hybrid import fuse
from hypothesis import given
from hypothesis import strategies as st


def test_scores_follow_the_formula_and_a_missing_page_counts_just_below_the_depth() -> None:
    out = dict(fuse(["a", "b"], ["b", "c"], alpha=0.7, k=10, depth=3))
    assert out["a"] == pytest.approx(0.7 / 11 + 0.3 / 14)  # not in the semantic list: rank 3 + 1 there
    assert out["b"] == pytest.approx(0.7 / 12 + 0.3 / 11)
    assert out["c"] == pytest.approx(0.7 / 14 + 0.3 / 12)
    assert [d for d, _ in fuse(["a", "b"], ["b", "c"], alpha=0.7, k=10, depth=3)] == ["b", "a", "c"]


def test_only_the_first_depth_pages_of_each_list_take_part() -> None:
    out = dict(fuse(["a", "b", "c", "d"], ["x", "c", "y", "z"], alpha=0.5, k=0, depth=2))
    assert set(out) == {"a", "b", "x", "c"}  # d, y and z are beyond both lists' first 2
    # c is 3rd by keywords: beyond the depth there, so it counts at rank 3 (depth + 1) like a missing page
    assert out["c"] == pytest.approx(0.5 / 3 + 0.5 / 2)
    assert out["a"] == pytest.approx(0.5 / 1 + 0.5 / 3)


def test_alpha_one_keeps_the_keyword_order_then_semantic_only_pages() -> None:
    ranked = [d for d, _ in fuse(["x", "y", "z"], ["z", "q", "y"], alpha=1.0, k=30)]
    assert ranked[:3] == ["x", "y", "z"]
    assert ranked[3:] == ["q"]  # q counts at keyword rank depth + 1, after every keyword page


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
    with pytest.raises(ValueError, match="depth must"):
        fuse(["a"], ["b"], depth=0)


@given(
    st.lists(st.integers(0, 30), unique=True, max_size=15),
    st.lists(st.integers(0, 30), unique=True, max_size=15),
    st.floats(0, 1),
    st.integers(1, 100),
    st.integers(1, 20),
)
def test_fusion_holds_every_page_of_both_depths_once_sorted_and_deterministic(
    kw: list[int], sem: list[int], alpha: float, k: int, depth: int
) -> None:
    out = fuse(kw, sem, alpha, k, depth)
    assert sorted(d for d, _ in out) == sorted(set(kw[:depth]) | set(sem[:depth]))
    assert all(a[1] >= b[1] for a, b in itertools.pairwise(out))
    assert all(0 < s <= 1 / (k + 1) + 1e-12 for _, s in out)
    assert out == fuse(list(kw), list(sem), alpha, k, depth)


def test_each_question_script_gets_its_own_alpha() -> None:
    # A Hangul syllable anywhere makes a question Korean, even beside a Latin identifier.
    for korean in ("배열 state에 항목 추가하기", "useState 훅", "如何 한국어"):
        assert hybrid.script_of(korean) == "ko" and hybrid.alpha_for(korean) == hybrid.KOREAN_ALPHA
    # Han or kana without Hangul: Chinese or Japanese.
    for cjk in ("如何向数组添加元素", "配列に追加する", "カタカナだけ", "useState 钩子", "ひらがな"):
        assert hybrid.script_of(cjk) == "cjk" and hybrid.alpha_for(cjk) == hybrid.CJK_ALPHA
    for other in ("add an item to an array", "", "café crème", "useState() — 2 args", "Ωμέγα"):
        assert hybrid.script_of(other) == "latin" and hybrid.alpha_for(other) == hybrid.ALPHA


@pytest.mark.parametrize("alpha", [hybrid.ALPHA, hybrid.KOREAN_ALPHA, hybrid.CJK_ALPHA])
def test_the_floor_is_below_every_fused_page(alpha: float) -> None:
    """``floor``, which a hybrid hit's score steps down to after the last page, is below every page
    ``fuse`` returns, a page at the last rank of one list only included."""
    keyword = list(range(hybrid.DEPTH))
    semantic = list(range(100, 100 + hybrid.DEPTH))
    fused = hybrid.fuse(keyword, semantic, alpha, hybrid.K, hybrid.DEPTH)
    assert min(score for _, score in fused) > hybrid.floor(hybrid.K, hybrid.DEPTH)


@given(
    st.lists(st.tuples(st.integers(0, 30), st.floats(-50, 50)), max_size=25),
    st.lists(st.tuples(st.integers(0, 30), st.floats(-1, 1)), max_size=25),
    st.floats(0, 1),
    st.integers(1, 20),
)
def test_score_fusion_holds_every_page_of_both_depths_once_scaled_and_deterministic(
    kw: list[tuple[int, float]], sem: list[tuple[int, float]], alpha: float, depth: int
) -> None:
    # Lists come best first, as the searches give them.
    kw = sorted(kw, key=lambda p: -p[1])
    sem = sorted(sem, key=lambda p: -p[1])
    out = hybrid.fuse_scores(kw, sem, alpha, depth)

    def first(pages: list[tuple[int, float]]) -> list[int]:
        return list(dict.fromkeys(d for d, _ in pages))[:depth]

    assert sorted(d for d, _ in out) == sorted(set(first(kw)) | set(first(sem)))
    assert all(a[1] >= b[1] for a, b in itertools.pairwise(out))
    assert all(-1e-9 <= s <= 1 + 1e-9 for _, s in out)
    assert out == hybrid.fuse_scores(list(kw), list(sem), alpha, depth)


def test_score_fusion_scales_each_side_and_a_page_both_sides_put_first_scores_one() -> None:
    keyword = [("a", 12.0), ("b", 9.0), ("c", 3.0)]  # scaled 1, 0.667, 0
    semantic = [("a", 0.91), ("d", 0.90), ("b", 0.81)]  # scaled 1, 0.9, 0
    fused = dict(hybrid.fuse_scores(keyword, semantic, 0.5, 3))
    assert fused["a"] == 1.0
    assert math.isclose(fused["b"], 0.5 * (6 / 9)) and math.isclose(fused["d"], 0.5 * 0.9)
    assert fused["c"] == 0.0
    # α weighs the keyword side: at 1 the semantic side does not count, at 0 the keyword side.
    assert [d for d, _ in hybrid.fuse_scores(keyword, semantic, 1.0, 3)][:3] == ["a", "b", "c"]
    assert [d for d, _ in hybrid.fuse_scores(keyword, semantic, 0.0, 3)][:3] == ["a", "d", "b"]
    # Only each side's first `depth` pages take part; a side whose pages score alike scales them to 1.
    assert {d for d, _ in hybrid.fuse_scores(keyword, semantic, 0.5, 1)} == {"a"}
    assert dict(hybrid.fuse_scores([("x", 2.0), ("y", 2.0)], [], 1.0, 5)) == {"x": 1.0, "y": 1.0}
    with pytest.raises(ValueError, match="alpha"):
        hybrid.fuse_scores(keyword, semantic, 1.5, 3)
    with pytest.raises(ValueError, match="depth"):
        hybrid.fuse_scores(keyword, semantic, 0.5, 0)
