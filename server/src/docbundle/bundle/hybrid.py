"""Fusing a keyword ranking and a semantic ranking of pages: weighted reciprocal rank fusion.

    fused(d) = α / (K + rank_kw(d)) + (1 − α) / (K + rank_sem(d))

Each list brings its first ``depth`` distinct pages (ranks start at 1); a page that is not among one
list's first ``depth`` counts at rank ``depth + 1`` there, just below the last page that list brought.
So the fused list holds the pages either side ranks in its top ``depth``, and a page both sides found
goes before one only a side found at the same rank. Pure functions, no I/O, no numpy. Ties (equal fused
scores) are broken by the better keyword rank, then the better semantic rank: for two distinct pages one
of these always differs, so the order is total and the same for the same inputs.

``ALPHA`` (``KOREAN_ALPHA`` and ``CJK_ALPHA`` by the question's script, ``alpha_for``), ``K`` and ``DEPTH``
were chosen on the dev questions of every judged set of eight corpora with ``benchmarks/fusion.py dev``
(docs/semantic.md, "Chosen on enough questions"); the test halves are scored once, with these values.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from typing import TypeVar

T = TypeVar("T", bound=Hashable)

# Chosen on 811 dev questions of eight corpora, every page in any side's top 10 judged (issue 36;
# docs/semantic.md, "Chosen on enough questions"): with each side's first 20 pages (a page beyond them at
# rank 21) and K 2, no corpus lost to keyword search at this α nor at any α ± 0.05 / neighbouring K, and
# the neighbourhood's mean gain was the best; 30 or 50 pages a side gained at most 0.002 more. A page
# missing from one side still gets that side's rank-21 term, so a page keyword search ranks first and the
# vectors miss is not buried under pages both sides ranked middling (issue 21, "Choosing α, K and the
# depth").
ALPHA = 0.65
K = 2
DEPTH = 20
# A question's script sets α: the Korean and the Chinese and Japanese vector sides score near or above
# keyword search on their corpora (Korean sections embedded without markup, ``embed.passage_text``), and
# weigh more. Korean: every α from 0.35 to 0.45 gained 0.057 to 0.065 over keyword search on 166 dev
# questions; Chinese and Japanese: 0.5 to 0.6 gained 0.040 to 0.061 on 158 (both at K 1 to 5).
KOREAN_ALPHA = 0.4
CJK_ALPHA = 0.55  # a question in Chinese or Japanese (Han or kana, no Hangul)
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
