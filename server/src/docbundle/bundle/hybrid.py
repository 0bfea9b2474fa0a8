"""Fusing a keyword ranking and a semantic ranking of pages: weighted reciprocal rank fusion.

    fused(d) = α / (K + rank_kw(d)) + (1 − α) / (K + rank_sem(d))

ranks start at 1; a page missing from one list gets no term from it. Pure functions, no I/O, no numpy.
Ties (equal fused scores) are broken by the better keyword rank (present before absent), then the better
semantic rank: for two distinct pages one of these always differs, so the order is total and the same for
the same inputs. ``ALPHA`` and ``K`` are the defaults: a keyword weight of 0.7, where issue 21's
whole-corpus measurement found the gain (0.7-0.8), and K = 30, the middle of the grid.
``benchmarks/semantic_quality.py tune`` chooses both on the dev halves of the quality sets
(docs/semantic.md gives the figures).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

T = TypeVar("T", bound=Hashable)

# Set on the dev halves of ko-real, medium-en-real and large-en (docs/semantic.md, "Results so far"):
# the grid is flat (dev means 0.659-0.690); 0.7/10 is within 0.004 of the best mean (0.5/10) and costs
# medium-en-real half as much. Provisional until zh and ja are embedded; the test halves are unscored.
ALPHA = 0.7
K = 10


def fuse(
    keyword: Sequence[T], semantic: Sequence[T], alpha: float = ALPHA, k: int = K
) -> list[tuple[T, float]]:
    """Fuse two ranked lists of pages (best first) into one: (page, fused score), best first.

    A page repeated within one list counts at its first (best) rank only.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be within 0..1, got {alpha}")
    if k < 0:
        raise ValueError(f"k must be 0 or more, got {k}")
    kw_rank: dict[T, int] = {}
    for i, d in enumerate(keyword, 1):
        kw_rank.setdefault(d, i)
    sem_rank: dict[T, int] = {}
    for i, d in enumerate(semantic, 1):
        sem_rank.setdefault(d, i)
    scores: dict[T, float] = {}
    for d, r in kw_rank.items():
        scores[d] = alpha / (k + r)
    for d, r in sem_rank.items():
        scores[d] = scores.get(d, 0.0) + (1.0 - alpha) / (k + r)
    absent = len(kw_rank) + len(sem_rank) + 1
    order = sorted(scores, key=lambda d: (-scores[d], kw_rank.get(d, absent), sem_rank.get(d, absent)))
    return [(d, scores[d]) for d in order]
