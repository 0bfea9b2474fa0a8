"""The ranking metrics (release/metrics.py) that regress and benchmarks/quality.py share: the metrics,
the need/split labels and the paired randomization test."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest
from buildkit import golden_query, golden_toml
from docbundle.indexer.release.metrics import (
    DEPTH,
    PERMUTATIONS,
    check_labels,
    dcg,
    group_means,
    in_split,
    mrr,
    ndcg,
    paired_test,
    recall,
)
from hypothesis import given, settings
from hypothesis import strategies as st


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


# -- labels: need and split ------------------------------------------------------------------------


def test_unknown_need_or_split_is_refused_with_the_query_named() -> None:
    check_labels("q1", "how-to", "dev")
    check_labels("q1")  # both optional
    with pytest.raises(ValueError, match=r"query 'q7': unknown need 'howto'"):
        check_labels("q7", "howto", "dev")
    with pytest.raises(ValueError, match=r"query 'q8': unknown split 'train'"):
        check_labels("q8", "api", "train")
    with pytest.raises(ValueError, match="unknown split"):
        in_split("dev", "both")


def test_split_selection_and_means_per_label() -> None:
    assert in_split("dev", "dev") and in_split("dev", "all") and in_split("", "all")
    assert not in_split("test", "dev") and not in_split("", "test")
    rows = [
        ({"kind": "question", "need": "api", "split": "dev"}, {"ndcg10": 1.0}),
        ({"kind": "question", "need": "how-to", "split": "test"}, {"ndcg10": 0.0}),
        ({"kind": "keyword", "need": "api", "split": "test"}, {"ndcg10": 0.5}),
    ]
    groups = group_means(rows)
    assert list(groups["split"]) == ["dev", "test", "all"]
    assert groups["split"]["test"] == {"ndcg10": 0.25, "n": 2}
    assert groups["split"]["all"]["ndcg10"] == 0.5
    assert list(groups["need"]) == ["how-to", "api"]  # in the order NEEDS lists them
    assert groups["need"]["api"] == {"ndcg10": 0.75, "n": 2}
    assert groups["kind"]["question"]["n"] == 2
    # No labels at all: no groups (a golden file without the keys reports as before).
    assert group_means([({"kind": "", "need": "", "split": ""}, {"ndcg10": 1.0})]) == {}


# -- paired randomization test ---------------------------------------------------------------------


def test_identical_rankings_give_no_difference_and_p_one() -> None:
    c = paired_test([0.3, 0.7, 1.0, 0.0], [0.3, 0.7, 1.0, 0.0])
    assert (c.mean_diff, c.p, c.better, c.worse, c.n) == (0.0, 1.0, 0, 0, 4)
    assert paired_test([], []).p == 1.0


def test_a_consistent_large_improvement_is_significant() -> None:
    before = [0.2 + 0.01 * i for i in range(30)]
    after = [b + 0.3 for b in before]
    c = paired_test(before, after)
    assert c.mean_diff == pytest.approx(0.3)
    assert c.better == 30 and c.worse == 0
    assert c.p < 0.001  # 2 of 2^30 sign patterns are as extreme: p is the floor 1 / (permutations + 1)
    assert c.p == pytest.approx(1 / (PERMUTATIONS + 1), abs=1e-4)
    assert "+0.300" in c.describe()


def test_a_mixed_change_is_not_significant_and_the_test_is_deterministic() -> None:
    before = [0.5, 0.6, 0.4, 0.9, 0.3, 0.8, 0.2, 0.7]
    after = [0.6, 0.5, 0.5, 0.8, 0.4, 0.7, 0.3, 0.6]  # four up, four down by 0.1
    c = paired_test(before, after)
    assert c.mean_diff == 0.0 and c.p > 0.5
    assert paired_test(before, after) == c  # same seed, same answer
    assert paired_test(before, after, seed=1).p == pytest.approx(c.p, abs=0.05)
    with pytest.raises(ValueError, match="same queries"):
        paired_test([0.1], [0.1, 0.2])


def test_small_samples_cannot_be_significant() -> None:
    # Three queries all better: 2 of the 8 sign patterns are as extreme, so p is about 1/4.
    assert paired_test([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]).p == pytest.approx(0.25, abs=0.02)


scores = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None)
@given(scores, st.data())
def test_swapping_the_rankings_negates_the_difference_and_keeps_p(
    before: list[float], data: st.DataObject
) -> None:
    after = data.draw(st.lists(st.floats(0.0, 1.0), min_size=len(before), max_size=len(before)))
    ab = paired_test(before, after, permutations=500)
    ba = paired_test(after, before, permutations=500)
    assert ab.mean_diff == pytest.approx(-ba.mean_diff, abs=1e-4)
    assert ab.p == ba.p and 0.0 < ab.p <= 1.0
    assert (ab.better, ab.worse) == (ba.worse, ba.better)
    assert paired_test(before, before, permutations=500).p == 1.0


# -- benchmarks/quality.py reads the labels --------------------------------------------------------


def _quality() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "quality.py"
    spec = importlib.util.spec_from_file_location("bench_quality", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _qset(b_need: str = "error") -> str:
    """A query set in the benchmark's form: ``a`` a dev how-to, ``b`` a test ``b_need``, ``c`` unlabelled."""
    return golden_toml(
        [
            golden_query(
                "a", "install the package", "install.md", kind="question", need="how-to", split="dev"
            ),
            golden_query(
                "b", "ConnectionResetError", "errors.md", kind="identifier", need=b_need, split="test"
            ),
            golden_query("c", "retries", "retries.md"),
        ]
    )


def test_quality_reads_need_and_split_and_selects_a_half(tmp_path: Path) -> None:
    quality = _quality()
    path = tmp_path / "set.toml"
    path.write_text(_qset(), encoding="utf-8")
    every = quality.load_queries(path)
    assert [(q.id, q.need, q.split) for q in every] == [
        ("a", "how-to", "dev"),
        ("b", "error", "test"),
        ("c", "", ""),
    ]
    assert [q.id for q in quality.load_queries(path, "dev")] == ["a"]
    assert [q.id for q in quality.load_queries(path, "test")] == ["b"]
    groups = dict(quality.label_groups(every))
    assert groups["need how-to"] == ["a"] and groups["split test"] == ["b"]
    assert groups["split all"] == ["a", "b", "c"] and groups[""] == ["a", "b", "c"]
    path.write_text(_qset(b_need="bug"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"query 'b': unknown need 'bug'"):
        quality.load_queries(path)


def test_quality_compares_with_a_saved_run(tmp_path: Path) -> None:
    quality = _quality()
    path = tmp_path / "set.toml"
    path.write_text(_qset(), encoding="utf-8")
    queries = quality.load_queries(path)
    now = quality.Report("ours")
    for q, v in zip(queries, (1.0, 0.5, 0.0), strict=True):
        now.scores[q.id] = quality.Score(v, v, v, [], 0.0)
    saved = {"s": {"a": {"ndcg": 0.0}, "b": {"ndcg": 0.5}}}
    lines = quality.compare_to_run("s", queries, now, saved)
    assert lines[0].startswith("s          all  nDCG@10 +0.500 (p = ")
    assert any(line.startswith("s          dev ") for line in lines)
    assert "1 queries not in the saved run" in lines[-1]
    assert quality.compare_to_run("other", queries, now, saved) == ["other      not in the saved run"]
