"""``HttpApp`` in process, for HTTP tests where the subprocess is not itself under test: the ASGI app with
its lifespan running (the SDK's session manager), reached with ``httpkit.client(app)`` as a chosen client
address (no socket), and a clock the test moves by hand for the rate limit and key budgets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from docbundle.server.catalog import Catalog
from docbundle.server.http.app import MCP_PATH, HttpApp
from docbundle.server.http.options import HttpOptions
from docbundle.server.keys import KeyStore
from docbundle.server.mcp.server import create_server
from httpkit import APP_BASE_URL

URL = APP_BASE_URL + MCP_PATH
LIFESPAN_WAIT = 30  # seconds the app may take to start or stop


class FakeClock:
    """Monotonic seconds that pass only when ``advance`` says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@asynccontextmanager
async def serving(
    catalog: Catalog, options: HttpOptions, *, keys: KeyStore | None = None, clock: FakeClock | None = None
) -> AsyncIterator[HttpApp]:
    """The ``HttpApp`` ``docbundle serve --transport http`` would run with ``options``, started (its
    lifespan) for the duration of the block, then stopped."""
    app = HttpApp(create_server(catalog), catalog, keys, options, **({"clock": clock} if clock else {}))
    to_app, app_reads = anyio.create_memory_object_stream[dict[str, Any]](4)
    app_writes, from_app = anyio.create_memory_object_stream[dict[str, Any]](4)
    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
    async with to_app, app_reads, app_writes, from_app, anyio.create_task_group() as tg:
        tg.start_soon(app, scope, app_reads.receive, app_writes.send)
        with anyio.fail_after(LIFESPAN_WAIT):
            await to_app.send({"type": "lifespan.startup"})
            assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        try:
            yield app
        finally:
            with anyio.fail_after(LIFESPAN_WAIT):
                await to_app.send({"type": "lifespan.shutdown"})
                assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"
