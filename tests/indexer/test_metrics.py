"""The ranking metrics (release/metrics.py) that regress and benchmarks/quality.py share: the metrics,
the need/split labels and the paired randomization test."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from benchkit import load_benchmark
from buildkit import golden_query, golden_toml
from docbundle.indexer.errors import ConfigError
from docbundle.indexer.release.metrics import (
    DEPTH,
    PERMUTATIONS,
    SCALES,
    check_grades,
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


# -- grade scales: 1-2 (every set before issue 36) and 0-3 (pooled judging) -------------------------


def test_grades_zero_to_three_score_with_exponential_gains_and_zero_as_not_relevant() -> None:
    rel = {"a": 3, "b": 2, "c": 1, "n": 0}
    ideal = 7 + 3 / math.log2(3) + 1 / 2
    assert ndcg(["a", "b", "c"], rel) == pytest.approx(1.0)
    assert ndcg(["n", "c", "b", "a"], rel) == pytest.approx(
        (1 / math.log2(3) + 3 / 2 + 7 / math.log2(5)) / ideal
    )
    assert mrr(["n", "x", "c"], rel) == pytest.approx(1 / 3)  # a page judged 0 is not a first hit
    assert recall(["n", "a", "b"], rel) == pytest.approx(2 / 3)  # three relevant pages; n is not one
    # A page judged 0 scores exactly as a page nobody graded.
    for ranked in (["n", "a"], ["c", "n", "b"], ["x", "y"]):
        unjudged = {d: g for d, g in rel.items() if d != "n"}
        for metric in (ndcg, mrr, recall):
            assert metric(ranked, rel) == metric(ranked, unjudged)


def test_a_set_graded_one_to_two_scores_as_before() -> None:
    # The figures a 1-2 query had before grades 0 and 3 existed, pinned: a grade is still read as written
    # (2 -> gain 3, 1 -> gain 1), not remapped onto 0-3, and a 0 beside them changes nothing.
    rel = {"a": 2, "b": 1, "c": 1}
    ranked = ["x", "b", "a", "y", "c"]
    before = (
        (1 / math.log2(3) + 3 / 2 + 1 / math.log2(6)) / (3 + 1 / math.log2(3) + 1 / 2),
        0.5,
        1.0,
    )
    for judged in (rel, {**rel, "x": 0, "y": 0}):
        assert (ndcg(ranked, judged), mrr(ranked, judged), recall(ranked, judged)) == pytest.approx(before)
        check_grades("q", judged)  # the default scale is 1-2, with 0 allowed


def test_each_scale_refuses_grades_it_does_not_have() -> None:
    assert set(SCALES) == {"1-2", "0-3"} and set(SCALES["0-3"]) == {0, 1, 2, 3}
    check_grades("q", {"a": 3, "b": 2, "c": 1, "n": 0}, "0-3")
    with pytest.raises(ValueError, match=r"query 'q9': grades \[3\] not on scale 1-2.*scale = \"0-3\""):
        check_grades("q9", {"a": 3, "b": 1})
    with pytest.raises(ValueError, match=r"grades \[-1, 4\] not on scale 0-3"):
        check_grades("q", {"a": 4, "b": -1, "c": 3}, "0-3")
    with pytest.raises(ValueError, match=r"query 'q2': needs a relevant page graded 1 or more"):
        check_grades("q2", {"n": 0}, "0-3")
    with pytest.raises(ValueError, match="needs a relevant page"):
        check_grades("q2", {})
    with pytest.raises(ValueError, match="unknown scale '1-5'"):
        check_grades("q", {"a": 1}, "1-5")


def test_quality_reads_a_set_scale_and_keeps_the_old_one_by_default(tmp_path: Path) -> None:
    quality = load_benchmark("quality")
    path = tmp_path / "set.toml"
    pooled = (
        '[[query]]\nid = "a"\ntext = "x y"\nrelevant = { "p.md" = 3, "q.md" = 2, "r.md" = 1, "n.md" = 0 }\n'
    )
    path.write_text('scale = "0-3"\n' + pooled, encoding="utf-8")
    (q,) = quality.load_queries(path)
    assert q.scale == "0-3" and q.relevant == {"p.md": 3, "q.md": 2, "r.md": 1, "n.md": 0}
    s = quality.score(q, ["n.md", "p.md"], 0.0)
    assert (s.mrr, s.recall) == (0.5, pytest.approx(1 / 3))
    # Without the key a set is 1-2: a 3 is refused (it would mean "answers" with a larger gain), a 0 kept.
    path.write_text(pooled, encoding="utf-8")
    with pytest.raises(ValueError, match=r"set.toml: query 'a': grades \[3\] not on scale 1-2"):
        quality.load_queries(path)
    path.write_text(_qset().replace('"install.md" = 2', '"install.md" = 2, "other.md" = 0'), encoding="utf-8")
    first = quality.load_queries(path)[0]
    assert first.scale == "1-2" and first.relevant == {"install.md": 2, "other.md": 0}
    path.write_text(
        'scale = "0-3"\n[[query]]\nid = "z"\ntext = "t"\nrelevant = { "n.md" = 0 }\n', encoding="utf-8"
    )
    with pytest.raises(ValueError, match="needs a relevant page graded 1 or more"):
        quality.load_queries(path)


def test_regress_reads_a_golden_scale(tmp_path: Path) -> None:
    from docbundle.indexer.release.regress import load_golden

    path = tmp_path / "golden.toml"
    query = '[[query]]\nid = "a"\ntext = "t"\nrelevant = { "p.md" = 3, "n.md" = 0 }\n'
    path.write_text('scale = "0-3"\n' + query, encoding="utf-8")
    golden = load_golden(path)
    assert golden.scale == "0-3" and golden.query[0].relevant == {"p.md": 3, "n.md": 0}
    path.write_text(query, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"query 'a': grades \[3\] not on scale 1-2"):
        load_golden(path)


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
    quality = load_benchmark("quality")
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
    quality = load_benchmark("quality")
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
