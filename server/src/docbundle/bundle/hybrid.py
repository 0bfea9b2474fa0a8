"""Fusing a keyword ranking and a semantic ranking of pages: by score (what the server runs) or by rank.

``fuse_scores`` (served): each side's first ``depth`` pages scaled to 0..1 on that side (min-max: its
first page 1, its last 0; a page the side did not bring 0), then

    fused(d) = α · kw(d) + (1 − α) · sem(d)

``fuse`` (weighted reciprocal rank fusion, what the server ran before issue 36's second round; kept for
the benchmarks' comparisons):

    fused(d) = α / (K + rank_kw(d)) + (1 − α) / (K + rank_sem(d))

where a page that is not among one list's first ``depth`` counts at rank ``depth + 1`` there. Pure
functions, no I/O, no numpy. Ties are broken by the better keyword place, then the better semantic
place: for two distinct pages one of these always differs, so the order is total and the same for the
same inputs.

``ALPHA`` (``KOREAN_ALPHA`` and ``CJK_ALPHA`` by the question's script, ``alpha_for``) and ``DEPTH`` were
chosen on the dev questions of every judged set of eight corpora with ``benchmarks/fusion.py dev``
(docs/semantic.md, "Chosen on enough questions"); the test halves are scored once, with these values.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from typing import TypeVar

T = TypeVar("T", bound=Hashable)

# The server fuses by score (``fuse_scores``; issue 36's second round, docs/semantic.md, "Chosen on enough
# questions"): on 1,238 dev questions of eight corpora, every page in any side's top 10 judged, each side's
# first 30 pages with α 0.65 (Korean 0.45, Chinese and Japanese 0.5) beat the rank fusion chosen in the
# first round (``fuse`` at 20 pages a side, K 2, α 0.65 / 0.4 / 0.55) by +0.006 nDCG@10 (p = 0.004) and
# put the right page first for 23 more questions; no corpus lost to keyword search at these α nor at
# α ± 0.05 (Korean and CJK: at any α from 0.2 to 0.9), and 30 pages a side gained 0.0024 over 20.
# ``fuse`` (reciprocal ranks) stays for the benchmarks' comparisons; ``K`` sets the scale a hybrid hit's
# score is shown on, 1 / (K + place), the one a search across libraries merges by (``semantic.rescale``).
ALPHA = 0.65
K = 2
DEPTH = 30
# A question's script sets α: the Korean and the Chinese and Japanese vector sides score near or above
# keyword search on their corpora (Korean sections embedded without markup, ``embed.passage_text``), and
# weigh more.
KOREAN_ALPHA = 0.45
CJK_ALPHA = 0.5  # a question in Chinese or Japanese (Han or kana, no Hangul)
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


def fuse_scores(
    keyword: Sequence[tuple[T, float]],
    semantic: Sequence[tuple[T, float]],
    alpha: float = ALPHA,
    depth: int = DEPTH,
) -> list[tuple[T, float]]:
    """Fuse two scored lists of pages (best first) by their scores: (page, fused score), best first.

        fused(d) = α · kw(d) + (1 − α) · sem(d)

    Each side's first ``depth`` distinct pages are scaled to 0..1 on that side: its first page 1, its
    ``depth``-th (or last) page 0, the rest by their score between the two (min-max); a page missing
    from a side's first ``depth`` counts 0 there. A side whose pages all score alike scales them all to 1.
    A page repeated within one list counts at its first place only. Ties are broken by the better
    keyword place, then the better semantic place (a page missing from a side is placed after all of
    that side's), so the order is total and the same for the same inputs.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be within 0..1, got {alpha}")
    if depth < 1:
        raise ValueError(f"depth must be 1 or more, got {depth}")
    kw_place, kw_scaled = _scaled(keyword, depth)
    sem_place, sem_scaled = _scaled(semantic, depth)
    scores = {
        d: alpha * kw_scaled.get(d, 0.0) + (1.0 - alpha) * sem_scaled.get(d, 0.0)
        for d in (*kw_place, *sem_place)
    }
    order = sorted(scores, key=lambda d: (-scores[d], kw_place.get(d, depth), sem_place.get(d, depth)))
    return [(d, scores[d]) for d in order]


def _scaled(pages: Sequence[tuple[T, float]], depth: int) -> tuple[dict[T, int], dict[T, float]]:
    """Place (from 0) and min-max scaled score of each of the first ``depth`` distinct pages of a list."""
    place: dict[T, int] = {}
    score: dict[T, float] = {}
    for d, value in pages:
        if len(place) >= depth:
            break
        if d not in place:
            place[d] = len(place)
            score[d] = float(value)
    if not score:
        return place, {}
    values = list(score.values())
    hi, lo = values[0], values[-1]
    span = hi - lo
    return place, {d: (v - lo) / span if span > 0 else 1.0 for d, v in score.items()}


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
