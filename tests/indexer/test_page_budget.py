"""Each page is prepared within a budget in a worker process that is replaced when it overruns (issue 19).

The slow page is a real one: 400,000 ``[`` as a markdown page. markdown-it-py looks for the end of a
link label at each one, which costs tens of microseconds per character, so the page takes several
seconds of CPU time (about 8 s measured), far over the 1 s budget these tests give.
"""

from __future__ import annotations

import pytest
from docbundle.indexer.pipeline import prepare
from docbundle.indexer.pipeline.prepare import PageJob, prepare_all, prepare_page
from docbundle.indexer.pipeline.prepare import pool as prepare_pool


def _job(text: str, *, html: bool = False) -> PageJob:
    return PageJob(
        text, False, "", "x.md", "", False, 3, 5, 500, html, "http://127.0.0.1/x.html" if html else ""
    )


def _slow(size: int = 400_000) -> PageJob:
    return _job("[" * size)


GOOD = [_job(f"# Page {i}\n\nSome words about the widget number {i}, enough to index.\n") for i in range(6)]


def test_a_page_over_its_cpu_budget_fails_and_the_next_pages_are_prepared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCBUNDLE_PAGE_SECONDS", "1")
    jobs = [*GOOD[:3], _slow(), *GOOD[3:]]
    results = list(prepare_all(jobs, workers=1))
    assert results[3].failure == "over its CPU budget of 1 s (its worker process was ended)"
    assert results[3].chunks == []
    expected = [prepare_page(j) for j in GOOD]
    assert results[:3] + results[4:] == expected
    assert all(r.failure is None for r in expected)


def test_a_worker_that_does_not_answer_is_ended_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCBUNDLE_PAGE_SECONDS", "600")  # the CPU limit would come far too late
    monkeypatch.setattr(prepare_pool, "page_deadline", lambda budget: 1.0)
    results = list(prepare_all([_slow(), *GOOD[:2]], workers=1))
    assert results[0].failure == "no answer within 1 s (its worker process was ended)"
    assert results[1:] == [prepare_page(j) for j in GOOD[:2]]


def test_the_budget_setting_falls_back_to_the_default_when_not_a_positive_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for bad in ("", "x", "0", "-3", "nan", "inf"):
        monkeypatch.setenv("DOCBUNDLE_PAGE_SECONDS", bad)
        assert prepare.page_budget() == prepare.PAGE_CPU_SECONDS
    monkeypatch.setenv("DOCBUNDLE_PAGE_SECONDS", "2.5")
    assert prepare.page_budget() == 2.5
