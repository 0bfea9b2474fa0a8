"""Fusing a keyword ranking and a semantic ranking of pages: weighted reciprocal rank fusion.

    fused(d) = α / (K + rank_kw(d)) + (1 − α) / (K + rank_sem(d))

Each list brings its first ``depth`` distinct pages (ranks start at 1); a page that is not among one
list's first ``depth`` counts at rank ``depth + 1`` there, just below the last page that list brought.
So the fused list holds the pages either side ranks in its top ``depth``, and a page both sides found
goes before one only a side found at the same rank. Pure functions, no I/O, no numpy. Ties (equal fused
scores) are broken by the better keyword rank, then the better semantic rank: for two distinct pages one
of these always differs, so the order is total and the same for the same inputs.

``ALPHA`` (``KOREAN_ALPHA`` for a Korean question, ``alpha_for``), ``K`` and ``DEPTH`` were set on the dev halves of the quality sets with
``benchmarks/semantic_quality.py tune`` (docs/semantic.md, "Choosing α, K and the depth"); the test
halves are scored once, with these values.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from typing import TypeVar

T = TypeVar("T", bound=Hashable)

# Chosen on the dev halves of zh, ko-real, medium-en-real and large-en (docs/semantic.md): with each side's
# first 10 pages and a page beyond them at rank 11, every set gained for a block of (α, K) around this
# one. Giving a page missing from one side no term from it (the first fusion, 50 pages deep) let a page
# keyword search ranks high but the vectors missed fall below pages both sides ranked middling, and
# lost on medium-en-real, where the vectors alone score 0.60 against keyword search's 0.74.
ALPHA = 0.7
K = 5
DEPTH = 10
# A question in Korean (a Hangul syllable in it) gives the vectors more weight. With Korean sections
# embedded without their markup (``embed.passage_text``), the Korean vector side scored within 0.03 of
# keyword search on the Korean dev questions, or above it, where medium-en-real's vectors (0.60 against
# 0.74) were what held ALPHA at 0.7; on all three Korean dev sets every α from 0.4 to 0.5 with K 5 to 30
# gained more than 0.7 did (docs/semantic.md, "Korean").
KOREAN_ALPHA = 0.5
# A question in Chinese or Japanese (Han or kana, no Hangul).
CJK_ALPHA = 0.7
_HANGUL = re.compile("[\uac00-\ud7a3]")
_HAN_KANA = re.compile("[\u3041-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def script_of(query: str) -> str:
    """The script group a question's α is chosen by: ``ko`` (a Hangul syllable in it), ``cjk`` (Han or
    kana, no Hangul), else ``latin``."""
    if _HANGUL.search(query):
        return "ko"
    return "cjk" if _HAN_KANA.search(query) else "latin"


def alpha_for(query: str) -> float:
    """The keyword weight for ``query``: ``KOREAN_ALPHA`` for a Korean question, ``CJK_ALPHA`` for a
    Chinese or Japanese one, else ``ALPHA`` (``script_of``)."""
    return {"ko": KOREAN_ALPHA, "cjk": CJK_ALPHA}.get(script_of(query), ALPHA)


def fuse(
    keyword: Sequence[T], semantic: Sequence[T], alpha: float = ALPHA, k: int = K, depth: int = DEPTH
) -> list[tuple[T, float]]:
    """Fuse two ranked lists of pages (best first) into one: (page, fused score), best first.

    Only each list's first ``depth`` distinct pages take part; a page missing from one of the two
    counts at rank ``depth + 1`` there. A page repeated within one list counts at its first rank only.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be within 0..1, got {alpha}")
    if k < 0:
        raise ValueError(f"k must be 0 or more, got {k}")
    if depth < 1:
        raise ValueError(f"depth must be 1 or more, got {depth}")
    kw_rank = _ranks(keyword, depth)
    sem_rank = _ranks(semantic, depth)
    absent = depth + 1
    scores = {
        d: alpha / (k + kw_rank.get(d, absent)) + (1.0 - alpha) / (k + sem_rank.get(d, absent))
        for d in (*kw_rank, *sem_rank)
    }
    order = sorted(scores, key=lambda d: (-scores[d], kw_rank.get(d, absent), sem_rank.get(d, absent)))
    return [(d, scores[d]) for d in order]


def floor(k: int = K, depth: int = DEPTH) -> float:
    """The fused score of a page neither list brought (rank ``depth + 1`` on both sides): below every
    page ``fuse`` returns for 0 < α < 1, as each of those is within one list's first ``depth``."""
    return 1.0 / (k + depth + 1)


def _ranks(pages: Sequence[T], depth: int) -> dict[T, int]:
    """Rank (from 1) of each of the first ``depth`` distinct pages of a list."""
    rank: dict[T, int] = {}
    for d in pages:
        if len(rank) >= depth:
            break
        rank.setdefault(d, len(rank) + 1)
    return rank
