"""Pages prepared while the crawl runs (``prepare.Ahead``, issue 22): what the build gets is what
``prepare_all`` would have given for its final jobs, whatever was prepared ahead, with real workers."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest
from docbundle.indexer.pipeline import prepare
from docbundle.indexer.pipeline.prepare import Ahead, PageJob, prepare_all, prepare_page
from docbundle.indexer.pipeline.prepare import job as prepare_job
from docbundle.indexer.pipeline.prepare import pool as prepare_pool


def _job(text: str, fallback: str = "x.md", link_title: str = "") -> PageJob:
    return PageJob(text, False, link_title, fallback, "", False, 3, 5, 500)


PAGES = [_job(f"# Page {i}\n\nSome words about the widget number {i}, enough to index.\n") for i in range(6)]


def _not_in_this_process(values: dict[str, str]) -> prepare.Analysed:
    raise AssertionError("a page was prepared in the test process, not in a worker")


def test_pages_prepared_ahead_are_taken_when_their_job_is_final(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = [prepare_page(j) for j in PAGES]
    monkeypatch.setattr(prepare_job, "_analyse", _not_in_this_process)  # workers only (see test_write)
    ahead = Ahead()
    for i, job in enumerate(PAGES):
        ahead.offer(f"p{i}", job)
    got = list(ahead.results([(f"p{i}", job) for i, job in enumerate(PAGES)]))
    assert got == expected
    assert ahead.taken == len(PAGES)


def test_a_page_whose_final_job_differs_is_prepared_from_the_final_job() -> None:
    # No title on the page and none on its link: the document id is the title, and the id guessed
    # during the crawl ("a.md") was numbered at its end ("a.md~2").
    untitled = "Only a paragraph of words here, and no heading at all on this page.\n"
    ahead = Ahead()
    ahead.offer("a", _job(untitled, fallback="a.md"))
    ahead.offer("b", PAGES[0])
    final = [("a", _job(untitled, fallback="a.md~2")), ("b", PAGES[0])]
    got = list(ahead.results(final))
    assert got[0].title == "a.md~2"
    assert got == [prepare_page(job) for _, job in final]
    assert ahead.taken == 1


def test_pages_past_the_limit_are_prepared_after_the_crawl() -> None:
    ahead = Ahead(limit=2 * len(PAGES[0].text) + 1)
    for i, job in enumerate(PAGES):
        ahead.offer(f"p{i}", job)
    got = list(ahead.results([(f"p{i}", job) for i, job in enumerate(PAGES)]))
    assert got == [prepare_page(j) for j in PAGES]
    assert ahead.taken == 2


def test_a_page_over_its_budget_ahead_fails_as_it_would_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCBUNDLE_PAGE_SECONDS", "1")
    slow = _job("[" * 400_000)  # several seconds of markdown-it (test_page_budget.py)
    jobs = [PAGES[0], slow, PAGES[1]]
    ahead = Ahead()
    for i, job in enumerate(jobs):
        ahead.offer(f"p{i}", job)
    got = list(ahead.results([(f"p{i}", job) for i, job in enumerate(jobs)]))
    assert got[1].failure == "over its CPU budget of 1 s (its worker process was ended)"
    assert [got[0], got[2]] == [prepare_page(PAGES[0]), prepare_page(PAGES[1])]


def test_a_build_that_stops_early_frees_the_workers_for_the_next() -> None:
    ahead = Ahead()
    for i, job in enumerate(PAGES * 10):
        ahead.offer(f"p{i}", job)
    ahead.close()  # the build kept its current bundle, or failed: nothing offered is wanted
    assert prepare_pool._shared.lock.acquire(blocking=False)  # the shared pool is free again
    prepare_pool._shared.lock.release()
    assert list(prepare_all(PAGES[:2], workers=1)) == [prepare_page(j) for j in PAGES[:2]]


def test_without_workers_nothing_is_prepared_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCBUNDLE_WORKERS", "0")
    ahead = Ahead()
    assert not ahead.active
    ahead.offer("p0", PAGES[0])
    assert list(ahead.results([("p0", PAGES[0])])) == [prepare_page(PAGES[0])]
    assert ahead.taken == 0


def test_an_interrupted_build_does_not_wait_for_a_slow_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCBUNDLE_PAGE_SECONDS", "600")
    ahead = Ahead()
    ahead.offer("slow", _job("[" * 4_000_000))  # over a minute of markdown-it
    deadline = time.monotonic() + 60
    while not (ahead._pool and [w for w in ahead._pool.workers if w.job >= 0]):  # a worker has it
        assert time.monotonic() < deadline, "no worker took the page"
        time.sleep(0.01)
    (busy,) = [w for w in ahead._pool.workers if w.job >= 0]
    ahead.close(now=True)
    # Ended, not left to finish its page (it would be idle and alive again, a minute later).
    assert not busy.process.is_alive() and busy.process.exitcode == -signal.SIGKILL
    assert list(prepare_all(PAGES[:1], workers=1)) == [prepare_page(PAGES[0])]


def test_a_page_offered_while_the_workers_are_busy_goes_to_a_free_one_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pages offered during a run join it: a free worker takes the next one at once. Offered pages used
    # to wait in a batch until the whole earlier batch was prepared, so behind a long page the other
    # worker idled (html-python: a 10-page batch on one worker while the crawl brought 71 more).
    monkeypatch.setenv("DOCBUNDLE_WORKERS", "2")
    monkeypatch.setattr(prepare_pool, "PARALLEL_MIN_BYTES", 0)  # two workers from the first page
    slow = _job("[" * 400_000)  # several seconds of markdown-it (test_page_budget.py)
    later = _job("[" * 150_000)  # long enough to be seen in a worker
    ahead = Ahead()

    def busy() -> int:
        pool = ahead._pool
        return 0 if pool is None else sum(1 for w in list(pool.workers) if w.job >= 0)

    def until(condition: Callable[[], bool], seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if condition():
                return True
            time.sleep(0.005)
        return False

    try:
        ahead.offer("slow", slow)
        assert until(lambda: busy() == 1, 60), "the first page never reached a worker"
        ahead.offer("later", later)
        # While the slow page still holds its worker, the later one is in the other.
        assert until(lambda: busy() == 2, 30), "the later page waited for the slow one"
    finally:
        ahead.close(now=True)


def test_pages_prepared_ahead_go_longest_first() -> None:
    # The longest page waiting is handed out first: taken last, it would end the run alone on one
    # worker while the other idles. A pool of one worker shows the order it hands pages out in.
    import sys
    import threading

    jobs = [_job("[" * 100_000), _job("[" * 120_000), _job("[" * 300_000)]  # each takes a while
    pool = prepare_pool._Pool()
    run = pool.run(jobs, 1, 60.0, ahead=sys.maxsize, longest_first=True)
    threading.Thread(target=lambda: next(run, None), daemon=True).start()
    deadline = time.monotonic() + 60
    first = -1
    while first < 0 and time.monotonic() < deadline:
        held = [w.job for w in list(pool.workers) if w.job >= 0]
        first = held[0] if held else -1
        time.sleep(0.002)
    try:
        assert first == 2, "the first page handed out was not the longest"
    finally:
        for worker in list(pool.workers):
            worker.stop()


_NO_WORKERS = """
import os
from docbundle.indexer.pipeline.prepare import Ahead
before = len(os.listdir("/proc/self/fd"))
ahead = Ahead()
print(before, len(os.listdir("/proc/self/fd")))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
def test_an_ahead_without_workers_holds_no_descriptor() -> None:
    # DOCBUNDLE_WORKERS=0: no thread, so nothing is opened that only the thread would close. In a
    # fresh interpreter: the test process has other descriptors coming and going.
    import subprocess
    import sys

    env = {**os.environ, "DOCBUNDLE_WORKERS": "0"}
    done = subprocess.run(
        [sys.executable, "-c", _NO_WORKERS], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    before, after = map(int, done.stdout.split())
    assert after == before
