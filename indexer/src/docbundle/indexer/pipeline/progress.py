"""Progress of the long phases of a build: a tqdm bar on a terminal, sparse plain lines in logs (CI), or
nothing.

Each phase gets its own display from one factory (``make_progress``, a ``ProgressFactory``): the crawl
(``verb="crawled"``, fed with ``crawl(..., on_result=progress.update)``), the parsing and analysis of the
pages (``"indexed"``, one ``advance()`` per page) and the writing of the bundle (``"wrote"``, one
``advance(note=...)`` per part). Every display shows a rate and, while work remains, an estimated time
left; ``close()`` ends it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TextIO

from tqdm import tqdm

if TYPE_CHECKING:
    from docbundle.indexer.pipeline.crawl import FetchResult

__all__ = [
    "LinesProgress",
    "Progress",
    "ProgressFactory",
    "QuietProgress",
    "TqdmProgress",
    "duration",
    "make_progress",
]

# Plain-line mode prints a line when another tenth of the work is done (at most one a second), and at
# least one per interval while the work goes on: enough to show a CI log is alive, few enough not to
# drown it. A phase that takes less than a second prints only its final line.
LINE_INTERVAL = 5.0
LINE_MIN_GAP = 1.0


class Progress(Protocol):
    """Counts the units of one phase; ``close`` ends the display."""

    def update(self, result: FetchResult) -> None:
        """Count one finished URL (a failed one is counted as failed)."""

    def advance(self, n: int = 1, *, note: str = "") -> None:
        """Count ``n`` finished units; ``note`` names what was just done."""

    def close(self) -> None:
        """Finish the display (idempotent)."""


class ProgressFactory(Protocol):
    """Makes the display of one phase: ``total`` units of ``unit``, each one ``verb`` when done."""

    def __call__(self, total: int, label: str, *, verb: str = "crawled", unit: str = "pages") -> Progress:
        """A display for ``total`` units."""


def duration(seconds: float) -> str:
    """``45 s``, ``3 min 05 s``, ``1 h 02 min``: a time for a person to read."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class QuietProgress:
    """A progress that prints nothing."""

    def update(self, result: FetchResult) -> None:
        """Ignore the result."""

    def advance(self, n: int = 1, *, note: str = "") -> None:
        """Ignore the count."""

    def close(self) -> None:
        """Do nothing."""


class LinesProgress:
    """Plain ``docbundle: LABEL: crawled N/TOTAL pages (F failed), R/s, ETA T`` lines for logs,
    rate-limited."""

    def __init__(
        self,
        total: int,
        label: str,
        stream: TextIO,
        *,
        verb: str = "crawled",
        unit: str = "pages",
        interval: float = LINE_INTERVAL,
        min_gap: float = LINE_MIN_GAP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.label = label
        self.stream = stream
        self.verb = verb
        self.unit = unit
        self.interval = interval
        self.min_gap = min_gap
        self.clock = clock
        self.done = 0
        self.failed = 0
        self.note = ""
        self._start = clock()
        self._last_time = self._start
        self._last_tenth = 0
        self._last_done = -1
        self._closed = False

    def update(self, result: FetchResult) -> None:
        """Count ``result``; print when another tenth is done or ``interval`` has passed."""
        if not result.ok:
            self.failed += 1
        self.advance()

    def advance(self, n: int = 1, *, note: str = "") -> None:
        """Count ``n`` units; print when another tenth is done or ``interval`` has passed."""
        self.done += n
        self.note = note
        tenth = self.done * 10 // self.total if self.total else 10
        now = self.clock()
        since = now - self._last_time
        if (tenth > self._last_tenth and since >= self.min_gap) or since >= self.interval:
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
        line = f"docbundle: {self.label}: {self.verb} {self.done}/{self.total} {self.unit}"
        if self.note:
            line += f" ({self.note})"
        if self.failed or self.verb == "crawled":
            line += f" ({self.failed} failed)"
        elapsed = now - self._start
        if elapsed > 0 and self.done:
            rate = self.done / elapsed
            line += f", {rate:.1f}/s" if rate < 100 else f", {rate:.0f}/s"
            if self.done < self.total:
                line += f", ETA {duration((self.total - self.done) / rate)}"
            else:
                line += f", {duration(elapsed)}"
        self.stream.write(line + "\n")
        self.stream.flush()


class TqdmProgress:
    """A tqdm bar (rate and time left built in) with the failure count in its postfix."""

    def __init__(
        self, total: int, label: str, stream: TextIO, *, verb: str = "crawled", unit: str = "pages"
    ) -> None:
        self.failed = 0
        desc = label if verb == "crawled" else f"{label} {verb}"
        self._bar = tqdm(
            total=total, desc=desc, file=stream, unit=unit.rstrip("s"), dynamic_ncols=True, leave=True
        )
        if verb == "crawled":
            self._bar.set_postfix(failed=0, refresh=False)

    def update(self, result: FetchResult) -> None:
        """Advance the bar by one; refresh the postfix when a failure is counted."""
        if not result.ok:
            self.failed += 1
            self._bar.set_postfix(failed=self.failed, refresh=False)
        self._bar.update(1)

    def advance(self, n: int = 1, *, note: str = "") -> None:
        """Advance the bar by ``n``, showing ``note`` after it."""
        if note:
            self._bar.set_postfix_str(note, refresh=False)
        self._bar.update(n)

    def close(self) -> None:
        """Close the bar (idempotent)."""
        self._bar.close()


def make_progress(
    total: int,
    label: str,
    *,
    verb: str = "crawled",
    unit: str = "pages",
    stream: TextIO | None = None,
    quiet: bool = False,
) -> Progress:
    """Pick the display: nothing when ``quiet``, a tqdm bar on a terminal, plain lines otherwise."""
    if quiet:
        return QuietProgress()
    # Resolved per call, not at import, so redirected or captured stderr is honoured.
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return TqdmProgress(total, label, stream, verb=verb, unit=unit)
    return LinesProgress(total, label, stream, verb=verb, unit=unit)
