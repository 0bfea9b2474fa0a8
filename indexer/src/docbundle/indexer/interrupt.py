"""SIGTERM interrupts a ``docbundle-index`` command the way Ctrl-C (SIGINT) does.

SIGTERM is what a service manager, a CI runner's cancel and ``timeout`` send. Left at its default it
ended the indexer on the spot (issue 31): no ``finally`` ran, so an interrupted ``add --build`` kept the
new entry in the config and left the version folder with its lock file, and a build's page workers were
left to notice by themselves that the indexer was gone. Ctrl-C already unwinds cleanly (a first build's
version folder is removed, ``add`` takes its entry out again, the workers are stopped at exit, and the
published bundles are never touched), so the first SIGTERM takes that same path: it is handed to the
SIGINT handler in force (asyncio's while a crawl runs, which cancels the crawl's task and ends it in
``KeyboardInterrupt``; Python's default one otherwise, which raises it). A second SIGTERM ends the
process at once, its default action, as a way out of a clean-up that does not finish (the published
bundles are still intact: they are only ever replaced by a rename).

Standard library only: ``cli`` imports this before any command runs.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType

__all__ = ["TermAsInterrupt"]


class TermAsInterrupt:
    """For the ``with`` block: the first SIGTERM interrupts as SIGINT does; ``exit_code`` then says
    which signal it was (128 + its number, as a shell reports it: 130 for SIGINT, 143 for SIGTERM).

    Only the main thread may set signal handlers; elsewhere (a command run from a thread) the block
    changes nothing. The previous SIGTERM handler is put back when the block ends.
    """

    def __init__(self) -> None:
        self.received = signal.SIGINT  # a KeyboardInterrupt with no SIGTERM before it is Ctrl-C
        self._previous: signal._HANDLER = None

    def __enter__(self) -> TermAsInterrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_term)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)

    @property
    def exit_code(self) -> int:
        """The exit code of a command this interrupt ended."""
        return 128 + int(self.received)

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        self.received = signal.SIGTERM
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the second one ends the process at once
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)  # asyncio's cancels the running crawl; the default raises
            return
        # SIGINT ignored (a job a script started in the background) or not handled in Python: a
        # SIGTERM still interrupts.
        raise KeyboardInterrupt
