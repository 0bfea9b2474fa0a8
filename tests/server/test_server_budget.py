"""Token estimates and fitting text into budgets."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from docbundle.server import budget
from docbundle.server.budget import estimate_tokens, fit_text, open_fence, page_end, share
from hypothesis import given, settings
from hypothesis import strategies as st


def test_estimate_counts_ascii_by_four_and_cjk_by_one() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("결제위젯") == 4
    assert estimate_tokens("数据库 abcd") == 3 + 2  # 5 ASCII characters -> 1.25, rounded up with the rest
    assert estimate_tokens("é" * 4) == 2


def test_fit_text_cuts_at_a_line_and_closes_an_open_code_block() -> None:
    text = "intro line\n```python\n" + "x = 1\n" * 200 + "```\nafter\n"
    cut, was_cut = fit_text(text, 40)
    assert was_cut and estimate_tokens(cut) <= 40
    assert cut.startswith("intro line\n```python\nx = 1\n")
    assert cut.endswith("```\n") and open_fence(cut) is None
    assert fit_text("short", 40) == ("short", False)


def test_fit_text_cuts_inside_a_line_that_alone_is_too_long() -> None:
    cut, was_cut = fit_text("y" * 1000, 10)
    assert was_cut and 0 < len(cut) <= 40


def test_open_fence_tracks_markers() -> None:
    assert open_fence("```js\ncode\n") == "```"
    assert open_fence("~~~~\ncode\n~~~~\n") is None
    assert open_fence("````\n```\nstill open\n") == "````"


def test_page_end_prefers_chunk_boundaries() -> None:
    text = "a" * 400 + "b" * 400 + "c" * 400
    assert page_end(text, 0, 210, [400, 800]) == 800  # 200 tokens: two chunks fit
    assert page_end(text, 0, 110, [400, 800]) == 400  # 100 of 110 tokens: near enough to full
    # A boundary that leaves much of the budget unused: the page goes on into the next chunk.
    assert page_end(text, 0, 150, [400, 800]) == 600
    assert page_end(text, 800, 500, [400, 800]) == 1200
    # Not even one chunk fits: cut inside it, but always move forward.
    assert 0 < page_end(text, 0, 50, [400, 800]) <= 200


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=12),
    st.integers(min_value=1, max_value=120),
)
def test_paging_reassembles_the_text_exactly(chunks: list[str], budget: int) -> None:
    text = "".join(chunks)
    bounds, pos = [], 0
    for c in chunks:
        pos += len(c)
        bounds.append(pos)
    pages, start = [], 0
    while start < len(text):
        end = page_end(text, start, budget, bounds)
        assert end > start
        pages.append(text[start:end])
        start = end
    assert "".join(pages) == text


def test_share_serves_small_items_whole_and_cuts_large_ones_equally() -> None:
    assert share([10, 20], 100) == [10, 20]
    assert share([10, 1000, 1000], 410) == [10, 200, 200]
    alloc = share([50, 5000, 70, 3000], 1000)
    assert alloc[0] == 50 and alloc[2] == 70 and alloc[1] == alloc[3] == 440
    assert sum(share([7, 9, 11], 10)) <= 10


# --- fitting is linear in what it keeps, and cuts where it always did (issue 31, item 13) -------------


def _reference_estimate(text: str) -> int:
    """The estimate as first written: one float sum over the three kinds of characters."""
    ascii_chars = sum(ch.isascii() for ch in text)
    cjk = len(budget._CJK_RE.findall(text))
    return math.ceil(ascii_chars / 4 + cjk + (len(text) - ascii_chars - cjk) / 2)


def _reference_cut_within(text: str, max_tokens: int) -> int:
    """``cut_within`` as it was before the fix: whole-text estimates and a binary search per line."""
    if _reference_estimate(text) <= max_tokens:
        return len(text)
    used = pos = 0
    cut_line = ""
    for line in text.splitlines(keepends=True):
        cost = _reference_estimate(line)
        if used + cost > max_tokens:
            cut_line = line
            break
        used += cost
        pos += len(line)
    rest = max_tokens - used
    if cut_line and (pos == 0 or rest >= max(8, max_tokens // 4)):
        lo, hi = 0, len(cut_line)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _reference_estimate(cut_line[:mid]) <= rest:
                lo = mid
            else:
                hi = mid - 1
        space = cut_line.rfind(" ", 0, lo)
        pos += space + 1 if space > lo // 2 else lo
    return max(pos, 1) if text else 0


# Characters of each weight, the line ends str.splitlines knows (\r\n split by a window too), spaces.
_FIT_TEXT = st.text(alphabet=st.sampled_from("ab \n\r\x0b\u2028é数据결ｱ\U00020001"), max_size=400)


@settings(max_examples=400, deadline=None)
@given(_FIT_TEXT, st.integers(min_value=-2, max_value=120))
def test_fitting_cuts_where_it_always_did(text: str, max_tokens: int) -> None:
    assert estimate_tokens(text) == _reference_estimate(text)
    assert budget.cut_within(text, max_tokens) == _reference_cut_within(text, max_tokens)
    kept, was_cut = fit_text(text, max(max_tokens, 1))
    assert was_cut == (_reference_estimate(text) > max(max_tokens, 1))
    assert kept.startswith(text[: budget.cut_within(text, max(max_tokens - 3, 1))]) or not was_cut


def test_fitting_a_hit_weighs_only_the_text_it_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    # One 5 MB paragraph on one line: every fitting step weighed the whole line before (~23 passes).
    line = "数据库是一个很好的东西。" * 140_000 + "\n"
    weighed = 0

    def counting(weigh: Callable[[str], int]) -> Callable[[str], int]:
        def count(text: str) -> int:
            nonlocal weighed
            weighed += len(text)
            return weigh(text)

        return count

    # Every character weighed is counted (twice when estimate_tokens hands it to _quarters).
    monkeypatch.setattr(budget, "estimate_tokens", counting(budget.estimate_tokens))
    if hasattr(budget, "_quarters"):
        monkeypatch.setattr(budget, "_quarters", counting(budget._quarters))
    for max_tokens in (60, 2_000, 20_000):
        bound = 2 * 4 * (4 * max_tokens + 64)
        weighed = 0
        kept, was_cut = fit_text(line, max_tokens)
        assert weighed <= bound, (max_tokens, weighed)
        assert was_cut and estimate_tokens(kept) <= max_tokens
        weighed = 0
        end = page_end(line * 3, 0, max_tokens, [len(line), 2 * len(line)])
        assert weighed <= bound, (max_tokens, weighed)
        assert 0 < end <= 4 * max_tokens
