"""The event-loop guard (issue 31): fails a test whose requests held the server's event loop too long.

A server answers every client on one event loop, so a request that holds it (CPU work or a blocking read
run by a coroutine instead of a thread) makes ``/healthz`` and every other client wait, whatever the
rate limits. ``loop_guard`` turns on asyncio's debug mode for the running loop with its slow-callback
hook at ``HOLD_LIMIT_SECONDS``: asyncio then logs "Executing <handle> took N seconds" for each step of a
task or callback that ran longer, naming the coroutine, and the guard collects those lines. The server
runs in process (the MCP SDK's in-memory client, or the HTTP app through its ASGI transport), so every
step of every request runs on the loop under guard.

The limit is the one the issue sets (100 ms), ten times what a catalogue lookup takes at 10,000
libraries, so a loaded machine does not trip it; a step that holds it is named in the failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

HOLD_LIMIT_SECONDS = 0.1  # the longest one step may hold the event loop (issue 31)
_SHOWN_CHARS = 300  # of each slow step's log line, in a failure


class _SlowSteps(logging.Handler):
    """Collects asyncio's "Executing ... took" warnings."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.held: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Executing"):
            self.held.append(message[:_SHOWN_CHARS])


@asynccontextmanager
async def loop_guard(limit: float = HOLD_LIMIT_SECONDS) -> AsyncIterator[list[str]]:
    """While in the block, every step on the running loop longer than ``limit`` is recorded; the block
    gets the list (filled as it runs) and fails on leaving it when a step held the loop.

    asyncio decides whether to time a step when it starts it, and logs it when it ends: so the guard
    yields to the loop once after turning debug on (the block starts in a timed step) and once before
    turning it off (the block's last step is logged). The in-memory MCP client runs the server's
    handler in the caller's own task, so the block's steps are the requests' steps."""
    loop = asyncio.get_running_loop()
    steps = _SlowSteps()
    logger = logging.getLogger("asyncio")
    was_debug, was_slow, was_level = loop.get_debug(), loop.slow_callback_duration, logger.level
    logger.addHandler(steps)
    logger.setLevel(logging.WARNING)
    loop.set_debug(True)
    loop.slow_callback_duration = limit
    try:
        await asyncio.sleep(0)
        yield steps.held
        await asyncio.sleep(0)
    finally:
        loop.set_debug(was_debug)
        loop.slow_callback_duration = was_slow
        logger.removeHandler(steps)
        logger.setLevel(was_level)
    assert not steps.held, f"the event loop was held over {limit * 1000:.0f} ms:\n" + "\n".join(steps.held)
