"""The threads of catalogue lookups, shared by the MCP server (``mcp/``) and the HTTP layer (``http/``).

Nothing that grows with the catalogue, a query or a file runs on the event loop (issue 31: a resolve
query held it 16 s, a stale summary 27 s, and every client and ``/healthz`` waited). Catalogue lookups
(``resolve_library``, ``list_libraries``, ``list_library_versions``, ``resources/list``, completions,
``/ui/libraries``, ``/metrics``, ``/readyz``) run in threads of their own, apart from the searches'
(anyio's default limiter, 40): a lookup is bounded (milliseconds at 10,000 libraries) and never waits
for a worker thread behind a flood of searches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

T = TypeVar("T")

# Lookups that run at once; the rest wait their turn (each takes milliseconds). A few, as a server has a
# few cores and the work holds the GIL.
LOOKUP_THREADS = 4
_lookups: anyio.lowlevel.RunVar[anyio.CapacityLimiter] = anyio.lowlevel.RunVar("docbundle_lookups")


def lookup_limiter() -> anyio.CapacityLimiter:
    """The event loop's limiter of catalogue lookups (one per loop: a limiter belongs to its loop)."""
    try:
        return _lookups.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(LOOKUP_THREADS)
        _lookups.set(limiter)
        return limiter


async def lookup_thread(work: Callable[[], T]) -> T:
    """``work()`` (a catalogue lookup) in one of the lookup threads; a cancelled caller stops waiting."""
    return await anyio.to_thread.run_sync(work, abandon_on_cancel=True, limiter=lookup_limiter())
