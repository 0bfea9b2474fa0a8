"""Token estimates and fitting text into budgets."""

from __future__ import annotations

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
