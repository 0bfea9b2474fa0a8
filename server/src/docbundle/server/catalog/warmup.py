"""The warm-up of a serving catalogue's open bundles: one thread, a bounded queue, a share of one core.

A question's first sight of its words costs whoosh's posting-block decoding, so a server caches the
postings of each served bundle's ``warm_terms`` commonest terms in the background
(``BundleSearcher.warm``). Issue 35 measured what one thread per opened bundle did: a search across
1,000 six-page libraries opens up to 10 bundles, each started its own warm-up thread, 49 ran at once,
and they starved the searches of the interpreter (from the 14th question on, every search took 2.4-6.3 s
and most stopped at the 2 s budget). So the warm-up never competes with a search as more than one
thread, nor for more than a share of one core:

- one thread per catalogue (``Warmer``, started on the first bundle it is asked to warm) warms one
  bundle at a time, in the order asked, from a queue of at most ``max_open`` bundles (one further back
  would be closed past ``--max-open`` before its turn; the oldest is dropped, and queued again if a
  request uses it again);
- between two terms it sleeps in proportion to the CPU the term cost, so that it uses at most
  ``WARM_CPU_SHARE`` of a core, and it starts a bundle no sooner than ``WARM_DELAY_SECONDS`` after the
  bundle opened (the request that opened it answers first);
- a bundle's warm-up stops when the bundle leaves the pool (closed past ``--max-open``, replaced by a
  reload, failed, or the catalogue closed: its ``closing`` event), and one still queued is skipped;
- a bundle opened by a search across libraries (the route index chose it among many) is warmed only when
  a request uses it again while it is open (``Pool.open``): most of the ten a routed question opens are
  never asked again, and warming all of them is the work that starved the searches.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from .entries import OpenedLibrary

WARM_DELAY_SECONDS = 1.0  # a bundle's warm-up starts this long after it opened (the first answer goes first)
WARM_PAUSE_SECONDS = 0.002  # the shortest sleep between two terms of the warm-up
# The warm-up's share of one core while it runs: it sleeps (1 / share - 1) times the CPU each term cost.
# A search across libraries needs the interpreter most (its ten libraries searched by four threads): a
# quarter leaves it three. benchmarks/cross_search.py --max-open 128 runs the warm-up beside its later
# passes: they held issue 35's bars with two busy processes beside the server (docs/benchmarks.md).
WARM_CPU_SHARE = 0.25
WARM_THREAD_NAME = "docbundle-warm"  # the one warm-up thread of a catalogue (a stack dump names it)


class Warmer:
    """The warm-up of one catalogue's open bundles: one thread, a queue of at most ``bound`` bundles."""

    def __init__(self, terms: int, bound: int, log: logging.Logger) -> None:
        self._terms = terms
        self._bound = max(bound, 1)
        self._log = log
        self._cond = threading.Condition()
        # (bundle, when its warm-up may start: a ``time.monotonic`` reading), oldest first.
        self._queue: deque[tuple[OpenedLibrary, float]] = deque()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def ask(self, opened: OpenedLibrary, opened_at: float) -> None:
        """Warm ``opened`` (which opened at ``opened_at``) once, after those asked before it; nothing when
        it was asked already, has left the pool, or the catalogue closed."""
        with self._cond:
            if self._stopped or opened.warm_asked or opened.closing.is_set():
                return
            opened.warm_asked = True
            self._queue.append((opened, opened_at + WARM_DELAY_SECONDS))
            while len(self._queue) > self._bound:
                dropped, _due = self._queue.popleft()
                dropped.warm_asked = False  # asked again later (if still open), it is queued again
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=WARM_THREAD_NAME, daemon=True)
                self._thread.start()
            self._cond.notify()

    def stop(self) -> None:
        """Warm nothing more (the catalogue closes; the bundle being warmed stops at its ``closing``)."""
        with self._cond:
            self._stopped = True
            self._queue.clear()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                opened, due = self._queue.popleft()
            self._warm(opened, due)

    def _warm(self, opened: OpenedLibrary, due: float) -> None:
        """Cache the commonest terms' postings of one bundle, unless it left the pool meanwhile."""
        wait = due - time.monotonic()
        if opened.closing.wait(wait) if wait > 0 else opened.closing.is_set():
            return
        lib, version = opened.entry.library_id, opened.entry.version
        started = time.monotonic()
        try:
            done = opened.searcher.warm(
                self._terms, opened.closing, pause=WARM_PAUSE_SECONDS, share=WARM_CPU_SHARE
            )
        except Exception as exc:  # the bundle closed under it, or a read failed: searches read on demand
            if not opened.closing.is_set():
                self._log.debug("warming %s/%s stopped: %s", lib, version, exc)
            return
        self._log.debug(
            "%s/%s: %d terms' postings cached in %.2f s", lib, version, done, time.monotonic() - started
        )
