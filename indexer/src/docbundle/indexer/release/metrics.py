"""Ranking metrics over graded relevance: nDCG@k, MRR@k and Recall@k.

The one definition of the search-quality figures: ``docbundle-index regress`` checks golden queries with
them and ``benchmarks/quality.py`` scores its query sets with them. ``ranked`` is a list of distinct
document ids, best first; ``relevant`` maps document ids to a grade (0 = judged not relevant, 1 = helps,
2 or more = answers).

- nDCG@k: DCG with gains 2^grade - 1 and discount log2(rank + 1), divided by the DCG of the ideal order.
- MRR@k: the reciprocal rank of the first document with grade >= 1 in the top k, else 0.
- Recall@k: the share of the documents with grade >= 1 that appear in the top k (0 when there are none).
  A document judged 0 is not relevant, so it is not counted as missed.

They are computed here in a few lines rather than with an IR library: the definitions are short, and the
established libraries (pytrec_eval, ir-measures) need a C toolchain to install.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

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
