"""Ranking metrics over graded relevance: nDCG@k, MRR@k and Recall@k.

The one definition of the search-quality figures: ``docbundle-index regress`` checks golden queries with
them and ``benchmarks/quality.py`` scores its query sets with them. ``ranked`` is a list of distinct
document ids, best first; ``relevant`` maps document ids to a grade on the set's ``scale`` (``SCALES``):

- ``1-2`` (the default, every set graded before issue 36): 2 = the page that answers, 1 = a related page
  that helps;
- ``0-3`` (issue 36's pooled judging): 3 = the page that answers, 2 = answers partly, 1 = related.

On both, 0 = judged not relevant: kept so a judge sees a pooled page was looked at, and scored exactly as
a page nobody graded. The metrics read the grades as they are (a 2 is a gain of 3 on either scale), so a
set graded 1-2 scores as it always did; a 2 means "answers" there and "answers partly" on 0-3, which is
why a set names its scale rather than the two being mixed (``check_grades``).

- nDCG@k: DCG with gains 2^grade - 1 and discount log2(rank + 1), divided by the DCG of the ideal order.
- MRR@k: the reciprocal rank of the first document with grade >= 1 in the top k, else 0.
- Recall@k: the share of the documents with grade >= 1 that appear in the top k (0 when there are none).
  A document judged 0 is not relevant, so it is not counted as missed.

Also here: the optional query labels ``need`` and ``split`` (``check_labels``, ``in_split``), means per
label (``group_means``) and a paired randomization test between two rankings (``paired_test``).

They are computed here in a few lines rather than with an IR library: the definitions are short, and the
established libraries (pytrec_eval, ir-measures) need a C toolchain to install.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

DEPTH = 10


def dcg(grades: Iterable[int]) -> float:
    """Discounted cumulative gain of grades in rank order (gain 2^grade - 1)."""
    return float(sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(grades)))


def ndcg(ranked: Sequence[str], relevant: dict[str, int], depth: int = DEPTH) -> float:
    """nDCG@depth with gains 2^grade - 1."""
    ideal = dcg(sorted(relevant.values(), reverse=True)[:depth])
    return dcg(relevant.get(d, 0) for d in ranked[:depth]) / ideal if ideal else 0.0


def mrr(ranked: Sequence[str], relevant: dict[str, int], depth: int = DEPTH) -> float:
    """Reciprocal rank of the first relevant (grade >= 1) document within depth, else 0."""
    for i, d in enumerate(ranked[:depth]):
        if relevant.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def recall(ranked: Sequence[str], relevant: dict[str, int], depth: int = DEPTH) -> float:
    """Share of the relevant (grade >= 1) documents found within depth; 0 when none is relevant."""
    wanted = {d for d, g in relevant.items() if g > 0}
    return len(wanted & set(ranked[:depth])) / len(wanted) if wanted else 0.0


# --------------------------------------------------------------------------------------------------
# grade scales

#: The grades each scale allows, and what they mean. ``1-2`` is the default (a set without ``scale``).
SCALES: dict[str, dict[int, str]] = {
    "1-2": {0: "judged not relevant", 1: "related, helps", 2: "answers"},
    "0-3": {0: "judged not relevant", 1: "related", 2: "answers partly", 3: "answers"},
}
DEFAULT_SCALE = "1-2"


def check_grades(qid: str, relevant: Mapping[str, int], scale: str = DEFAULT_SCALE) -> None:
    """Refuse a grade the scale does not allow, or a query with no page graded 1 or more (nothing to
    find: every nDCG would be 0); ValueError names the query."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r} (one of {', '.join(SCALES)})")
    allowed = SCALES[scale]
    bad = sorted({g for g in relevant.values() if isinstance(g, bool) or g not in allowed}, key=str)
    if bad:
        grades = ", ".join(str(g) for g in allowed)
        hint = ' (grade 3 needs scale = "0-3")' if scale == "1-2" and 3 in bad else ""
        raise ValueError(f"query {qid!r}: grades {bad} not on scale {scale} ({grades}){hint}")
    if not any(g > 0 for g in relevant.values()):
        raise ValueError(f"query {qid!r}: needs a relevant page graded 1 or more")


# --------------------------------------------------------------------------------------------------
# query labels: what a query needs, and which half of the set it belongs to

#: What the asker needs (optional ``need`` key of a query).
NEEDS = ("how-to", "concept", "api", "error", "config", "identifier")
#: Which half of a set a query is in (optional ``split`` key): tune on ``dev``, score ``test`` once.
SPLITS = ("dev", "test")
#: What ``--split`` accepts: one half, or every query.
SPLIT_CHOICES = ("dev", "test", "all")


def check_labels(qid: str, need: str = "", split: str = "") -> None:
    """Refuse an unknown ``need`` or ``split`` (empty = not given); ValueError names the query."""
    if need and need not in NEEDS:
        raise ValueError(f"query {qid!r}: unknown need {need!r} (one of {', '.join(NEEDS)})")
    if split and split not in SPLITS:
        raise ValueError(f"query {qid!r}: unknown split {split!r} (one of {', '.join(SPLITS)})")


def in_split(split: str, wanted: str) -> bool:
    """Whether a query labelled ``split`` is selected by ``--split wanted`` (unlabelled: only by all)."""
    if wanted not in SPLIT_CHOICES:
        raise ValueError(f"unknown split {wanted!r} (one of {', '.join(SPLIT_CHOICES)})")
    return wanted == "all" or split == wanted


def group_means(
    rows: Sequence[tuple[Mapping[str, str], Mapping[str, float]]],
    keys: Sequence[str] = ("kind", "need", "split"),
) -> dict[str, dict[str, dict[str, float]]]:
    """Means of every metric per label value: ``{key: {value: {metric: mean, ..., "n": count}}}``.

    ``rows`` pairs each query's labels (``kind``, ``need``, ``split``; empty = not given) with its
    metrics. A key no query labels is left out; queries without the label are not counted under it.
    For ``split`` an ``all`` group over every row is added, so dev, test and all read side by side.
    """
    out: dict[str, dict[str, dict[str, float]]] = {}
    for key in keys:
        groups: dict[str, list[Mapping[str, float]]] = {}
        for labels, metrics in rows:
            if labels.get(key):
                groups.setdefault(labels[key], []).append(metrics)
        if not groups:
            continue
        if key == "split":
            groups["all"] = [m for _, m in rows]
        out[key] = {
            value: _means(ms) for value, ms in sorted(groups.items(), key=lambda kv: _order(key, kv[0]))
        }
    return out


def _order(key: str, value: str) -> tuple[int, str]:
    known = {"need": NEEDS, "split": SPLIT_CHOICES}.get(key, ())
    return (known.index(value) if value in known else len(known), value)


def _means(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    names = list(rows[0]) if rows else []
    out = {m: round(sum(r[m] for r in rows) / len(rows), 4) for m in names}
    out["n"] = len(rows)
    return out


# --------------------------------------------------------------------------------------------------
# paired significance: is ranking B better than ranking A on the same queries, or is it noise?

PERMUTATIONS = 10_000
SEED = 12


@dataclass(frozen=True)
class Comparison:
    """A paired randomization test of per-query scores ``after - before`` over the same queries."""

    n: int  # queries compared
    mean_diff: float  # mean of after - before
    p: float  # two-sided p: chance of a mean difference at least this large if the labels were swapped
    better: int  # queries that scored higher after
    worse: int  # queries that scored lower after
    permutations: int
    seed: int

    def describe(self, metric: str = "nDCG@10") -> str:
        """One line: ``nDCG@10 +0.034 (p = 0.012, 9 better, 2 worse of 40)``."""
        return (
            f"{metric} {self.mean_diff:+.3f} (p = {self.p:.3f}, {self.better} better, {self.worse} worse "
            f"of {self.n}; paired randomization test, {self.permutations} permutations)"
        )


def paired_test(
    before: Sequence[float],
    after: Sequence[float],
    *,
    permutations: int = PERMUTATIONS,
    seed: int = SEED,
) -> Comparison:
    """Paired randomization (sign-flip permutation) test on per-query differences ``after - before``.

    Under the null hypothesis that the two rankings are interchangeable, each query's difference is
    as likely to have either sign. Each of ``permutations`` rounds flips every difference's sign with
    probability 1/2 (``random.Random(seed)``, so the answer is the same on every run) and counts the
    rounds whose mean is at least as far from 0 as the observed one; p = (count + 1) / (rounds + 1)
    (the observed labelling counts as one round, so p is never 0). Identical scores give p = 1.
    """
    if len(before) != len(after):
        raise ValueError("paired_test needs the same queries on both sides")
    diffs = [b - a for a, b in zip(before, after, strict=True)]
    n = len(diffs)
    better = sum(d > 0 for d in diffs)
    worse = sum(d < 0 for d in diffs)
    observed = abs(sum(diffs))
    nonzero = [abs(d) for d in diffs if d != 0]  # a zero difference is the same under either sign
    rng = random.Random(seed)
    tol = 1e-9 * max(1.0, observed)
    hits = 0
    for _ in range(permutations):
        bits = rng.getrandbits(len(nonzero)) if nonzero else 0
        total = 0.0
        for d in nonzero:
            total += d if bits & 1 else -d
            bits >>= 1
        if abs(total) >= observed - tol:
            hits += 1
    p = (hits + 1) / (permutations + 1)
    return Comparison(
        n, round(sum(diffs) / n, 4) if n else 0.0, round(p, 4), better, worse, permutations, seed
    )
