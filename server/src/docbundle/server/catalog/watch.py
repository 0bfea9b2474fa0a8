"""Live reload for ``docbundle serve``: new builds, libraries and removals served without a restart.

Every ``interval`` seconds the server compares the bundles folder's signature (each
``<library>/<version>/CURRENT`` and its content, see ``Catalog.changed``); when it differs, the catalogue
reloads (``Catalog.reload``: requests in flight finish on the build they resolved, a replaced build
stays open and leased for ``RETIRE_AFTER_SECONDS``) and, on stdio, the client is sent
``notifications/resources/list_changed`` so it can list the libraries again. Over HTTP (stateless: no
stream from server to client) the next request simply sees the new catalogue. A reload that fails is
logged and the previous catalogue keeps serving.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import anyio.to_thread

from . import DEFAULT_RELOAD_SECONDS, Catalog, CatalogChange

LIST_CHANGED = "notifications/resources/list_changed"

Notify = Callable[[str], Awaitable[None]]
__all__ = ["DEFAULT_RELOAD_SECONDS", "LIST_CHANGED", "check_once", "watch_bundles"]


async def check_once(catalog: Catalog) -> CatalogChange:
    """``Catalog.refresh`` in a worker thread (it reads manifests): reload on a change, expire old builds."""
    return await anyio.to_thread.run_sync(catalog.refresh)


async def watch_bundles(catalog: Catalog, interval: float, notify: Notify | None = None) -> None:
    """Check every ``interval`` seconds until cancelled; ``notify(LIST_CHANGED)`` after each change."""
    while True:
        await anyio.sleep(interval)
        change = await check_once(catalog)
        if change and notify is not None:
            await notify(LIST_CHANGED)
