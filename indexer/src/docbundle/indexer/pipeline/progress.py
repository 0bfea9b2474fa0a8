"""Crawl progress display: a tqdm bar on a terminal, sparse plain lines in logs (CI), or nothing.

Feed it from the crawler with ``crawl(..., on_result=progress.update)`` and ``close()`` it at the end.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TextIO

from tqdm import tqdm

if TYPE_CHECKING:
    from docbundle.indexer.pipeline.crawl import FetchResult

__all__ = ["LinesProgress", "Progress", "QuietProgress", "TqdmProgress", "make_progress"]

# Plain-line mode prints at most one line per interval unless another tenth of the work is done:
# enough to show a CI log is alive, few enough not to drown it.
LINE_INTERVAL = 5.0


class Progress(Protocol):
    """Receives each crawl result; ``close`` ends the display."""

    def update(self, result: FetchResult) -> None:
        """Count one finished URL."""

    def close(self) -> None:
        """Finish the display (idempotent)."""


class QuietProgress:
    """A progress that prints nothing."""

    def update(self, result: FetchResult) -> None:
        """Ignore the result."""

    def close(self) -> None:
        """Do nothing."""


class LinesProgress:
    """Plain ``docbundle: LABEL: crawled N/TOTAL (F failed)`` lines for logs, rate-limited."""

    def __init__(
        self,
        total: int,
        label: str,
        stream: TextIO,
        *,
        interval: float = LINE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.label = label
        self.stream = stream
        self.interval = interval
        self.clock = clock
        self.done = 0
        self.failed = 0
        self._last_time = clock()
        self._last_tenth = 0
        self._last_done = -1
        self._closed = False

    def update(self, result: FetchResult) -> None:
        """Count ``result``; print when another tenth is done or ``interval`` has passed."""
        self.done += 1
        if not result.ok:
            self.failed += 1
        tenth = self.done * 10 // self.total if self.total else 10
        now = self.clock()
        if tenth > self._last_tenth or now - self._last_time >= self.interval:
            self._last_tenth = tenth
            self._emit(now)

    def close(self) -> None:
        """Print the final count unless the last line already showed it."""
        if self._closed:
            return
        self._closed = True
        if self.done != self._last_done:
            self._emit(self.clock())

    def _emit(self, now: float) -> None:
        self._last_time = now
        self._last_done = self.done
        self.stream.write(
            f"docbundle: {self.label}: crawled {self.done}/{self.total} ({self.failed} failed)\n"
        )
        self.stream.flush()


class TqdmProgress:
    """A tqdm bar with the failure count in its postfix."""

    def __init__(self, total: int, label: str, stream: TextIO) -> None:
        self.failed = 0
        self._bar = tqdm(total=total, desc=label, file=stream, unit="page", dynamic_ncols=True, leave=True)
        self._bar.set_postfix(failed=0, refresh=False)

    def update(self, result: FetchResult) -> None:
        """Advance the bar by one; refresh the postfix when a failure is counted."""
        if not result.ok:
            self.failed += 1
            self._bar.set_postfix(failed=self.failed, refresh=False)
        self._bar.update(1)

    def close(self) -> None:
        """Close the bar (idempotent)."""
        self._bar.close()


def make_progress(total: int, label: str, *, stream: TextIO | None = None, quiet: bool = False) -> Progress:
    """Pick the display: nothing when ``quiet``, a tqdm bar on a terminal, plain lines otherwise."""
    if quiet:
        return QuietProgress()
    # Resolved per call, not at import, so redirected or captured stderr is honoured.
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return TqdmProgress(total, label, stream)
    return LinesProgress(total, label, stream)
