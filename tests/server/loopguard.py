"""The event-loop guard (issue 31): fails a test whose requests held the server's event loop too long.

A server answers every client on one event loop, so a request that holds it (CPU work or a blocking read
run by a coroutine instead of a thread) makes ``/healthz`` and every other client wait, whatever the
rate limits. ``loop_guard`` times every step the running loop executes while the block runs (each
``Handle`` it runs: a task's step or a callback) and records a step that

- spent over ``HOLD_LIMIT_SECONDS`` (100 ms, the issue's bound) of the loop thread's **CPU time**: work
  done on the loop. CPU time, not wall time, so that a loaded machine (the suite runs beside builds and
  benchmarks on 2 cores: a 14 ms step once took 596 ms of wall time there) does not trip it, while work
  that grows with the input does; or
- took over ``BLOCK_LIMIT_SECONDS`` (2 s) of wall time: a step blocked in a system call (a FIFO
  read, a sleep, a lock) holds the loop without using the CPU.

The server runs in process (the MCP SDK's in-memory client, or the HTTP app through its ASGI
transport), so every step of every request runs on the loop under guard. asyncio's debug mode is on
meanwhile, so a step is named by its coroutine in a failure.
"""

from __future__ import annotations

import asyncio
import threading
import time
from asyncio import events
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

HOLD_LIMIT_SECONDS = 0.1  # CPU time one step may take on the event loop (issue 31)
BLOCK_LIMIT_SECONDS = 2.0  # wall time one step may take: past it, the step blocked the loop
_SHOWN_CHARS = 300  # of each slow step's description, in a failure
_guarded: dict[int, list[str]] = {}  # loop thread id -> its guard's findings
_original_run = events.Handle._run


def _timed_run(handle: events.Handle) -> None:
    held = _guarded.get(threading.get_ident())
    if held is None:
        return _original_run(handle)
    cpu, wall = time.thread_time(), time.perf_counter()
    try:
        return _original_run(handle)
    finally:
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        if cpu > HOLD_LIMIT_SECONDS or wall > BLOCK_LIMIT_SECONDS:
            step = _describe(handle)
            held.append(f"{cpu * 1000:.0f} ms of CPU, {wall * 1000:.0f} ms in all: {step}"[:_SHOWN_CHARS])


def _describe(handle: events.Handle) -> str:
    """A task's step as its task (coroutine and where it runs, as asyncio's own slow-step log says it)."""
    task = getattr(getattr(handle, "_callback", None), "__self__", None)
    return repr(task) if isinstance(task, asyncio.Task) else repr(handle)


@asynccontextmanager
async def loop_guard() -> AsyncIterator[list[str]]:
    """While in the block, every step on the running loop over the limits is recorded; the block gets
    the list (filled as it runs) and fails on leaving it when a step held the loop."""
    loop = asyncio.get_running_loop()
    thread = threading.get_ident()
    assert thread not in _guarded, "loop_guard blocks do not nest"
    held: list[str] = []
    was_debug = loop.get_debug()
    events.Handle._run = _timed_run  # type: ignore[method-assign]
    _guarded[thread] = held
    loop.set_debug(True)  # handles are then described by their coroutine and where it was created
    loop.slow_callback_duration = BLOCK_LIMIT_SECONDS * 10  # the guard reports; asyncio need not
    try:
        # A step is timed from its start: the block's own first step starts after this yield to the
        # loop, and its last one ends at the second.
        await asyncio.sleep(0)
        yield held
        await asyncio.sleep(0)
    finally:
        loop.set_debug(was_debug)
        del _guarded[thread]
        if not _guarded:
            events.Handle._run = _original_run  # type: ignore[method-assign]
    assert not held, "the event loop was held:\n" + "\n".join(held)
