"""What a query to a bundle may be: its modes, its bounds and its time budget (no whoosh import).

The search engine (``docbundle.bundle.search``) and the server (its input checks and tool schemas)
share these. The module imports nothing heavy, so the server's start-up path can read it.

A ``Deadline`` is both a time budget and a cancellation token: the caller makes one per call and
cancels it when the request is cancelled (client gone, ``notifications/cancelled``, shutting down), and
the engine checks it between units of work, so a worker thread stops soon after the caller stops
waiting.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Literal

#: How the words of a query combine: see docbundle.bundle.search.
Mode = Literal["balanced", "broad", "precise"]
MODES: tuple[Mode, ...] = ("balanced", "broad", "precise")
#: What a search may ask for: the PRD's hybrid, semantic and fulltext beside the keyword modes above.
#: fulltext is balanced; hybrid and semantic need the bundle's vectors (docbundle.server.semantic).
SearchMode = Literal["hybrid", "semantic", "fulltext", "balanced", "broad", "precise"]
SEARCH_MODES: tuple[SearchMode, ...] = ("hybrid", "semantic", "fulltext", "balanced", "broad", "precise")
#: The modes a search runs (fulltext runs as balanced).
RanMode = Literal["hybrid", "semantic", "balanced", "broad", "precise"]
#: How a search's hits bear on its words (``search.SearchOutcome.word_match``): "matched", some hit holds
#: the query's informative words (at least two of them when it has two or more); "weak", none does, so
#: the library may not cover the question; "no_topic", the query has no informative word (only stop
#: words and question words).
WordMatch = Literal["matched", "weak", "no_topic"]

MAX_QUERY_CHARS = 2000  # search query (also the search-docs / explain-with-docs prompt text)
MAX_KEYWORD_CHARS = 200  # one keyword

# How many chunks a search ranks in full before it keeps ``limit`` hits (at most ``per_doc`` a page):
# at least RANK_POOL_MIN, else RANK_POOL_PER_HIT per hit asked for, so a page with many matching
# sections cannot crowd the other pages out of the hits. The keyword engine (``search``) and the
# vector one (``docbundle.server.semantic``) both rank this many.
RANK_POOL_MIN = 50
RANK_POOL_PER_HIT = 8


def rank_pool(limit: int) -> int:
    """How many chunks to rank in full for ``limit`` hits."""
    return max(RANK_POOL_MIN, RANK_POOL_PER_HIT * limit)


class Cancelled(Exception):
    """Raised by ``Deadline.check`` once the caller cancelled the work."""


class OutOfTime(Exception):
    """Raised by ``Deadline.check`` when the time budget is spent (the engine answers with what it has)."""


class Deadline:
    """A wall-clock time budget plus a cancellation flag, shared by every check of one call.

    ``check()`` raises ``Cancelled`` once ``cancel()`` was called (from any thread) and
    ``OutOfTime`` once ``seconds`` have passed; ``None`` seconds means no time limit.
    """

    def __init__(self, seconds: float | None = None, *, _cancelled: threading.Event | None = None) -> None:
        self.seconds = seconds
        self._end = math.inf if seconds is None else time.monotonic() + seconds
        self._cancelled = _cancelled if _cancelled is not None else threading.Event()

    def cancel(self) -> None:
        """Ask the work checking this deadline to stop (thread-safe)."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel()`` was called."""
        return self._cancelled.is_set()

    def expired(self) -> bool:
        """Whether the time budget is spent (a cancelled deadline counts as expired)."""
        return self._cancelled.is_set() or time.monotonic() >= self._end

    def check(self) -> None:
        """Raise ``Cancelled`` when cancelled, ``OutOfTime`` when the budget is spent."""
        if self._cancelled.is_set():
            raise Cancelled()
        if time.monotonic() >= self._end:
            raise OutOfTime()

    def within(self, seconds: float) -> Deadline:
        """A deadline at most ``seconds`` from now (earlier if this one ends first), cancelled with this one."""
        child = Deadline(seconds, _cancelled=self._cancelled)
        child._end = min(child._end, self._end)
        child.seconds = max(0.0, child._end - time.monotonic())
        return child
