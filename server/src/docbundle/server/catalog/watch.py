"""Live reload for ``docbundle serve``: new builds, libraries and removals served without a restart, the
same way over stdio and HTTP, and where a serving process starts the query encoder.

One loop (``watch``), a daemon thread: every ``interval`` seconds ``Catalog.refresh`` looks at the
bundles folder (two ``stat`` calls, ``Catalog.changed``); when it changed, the catalogue reloads
(``Catalog.reload``: requests in flight finish on the build they resolved, a replaced build stays open
and leased for ``retire_after`` seconds). A reload that fails is logged and the previous catalogue keeps
serving. The thread never runs on an event loop, so a slow folder holds up no client.

``serving`` is what a serving process runs once it serves, on either transport: the query encoder
started (``Catalog.start_encoder``: in the background, when a library has vectors) and the loop. Over
HTTP (stateless: no stream from server to client) the next request simply sees the new catalogue;
``watch_bundles`` is stdio's: it runs ``serving`` beside the session and sends the client
``notifications/resources/list_changed`` after each change, so it can list the libraries again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from .entries import CatalogChange
from .settings import DEFAULT_RELOAD_SECONDS

log = logging.getLogger(__name__)

LIST_CHANGED = "notifications/resources/list_changed"
STOP_WAIT_SECONDS = 5.0  # how long stopping waits for a look in progress (a reload of a big folder)

Notify = Callable[[str], Awaitable[None]]
__all__ = ["DEFAULT_RELOAD_SECONDS", "LIST_CHANGED", "serving", "watch", "watch_bundles"]


class Catalog(Protocol):
    """What the loop needs of a catalogue (``docbundle.server.catalog.Catalog``; a protocol, as the facade
    imports this module: no import circle)."""

    def refresh(self) -> CatalogChange:
        """One look at the bundles folder (reload on a change); never raises."""

    def start_encoder(self) -> bool:
        """Load the query encoder in the background when a library has vectors."""


def watch(
    catalog: Catalog, interval: float, on_change: Callable[[CatalogChange], None] | None = None
) -> Callable[[], None]:
    """Check the bundles folder every ``interval`` seconds in a daemon thread and reload on a change.

    ``on_change`` is called (in that thread) with each non-empty change. Returns a function that
    stops the thread. Errors are logged (``Catalog.refresh``) and the last good catalogue keeps serving.
    """
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(interval):
            change = catalog.refresh()
            if change and on_change is not None:
                on_change(change)

    thread = threading.Thread(target=run, name="docbundle-reload", daemon=True)
    thread.start()

    def cancel() -> None:
        stop.set()
        thread.join(timeout=STOP_WAIT_SECONDS)

    return cancel


def serving(
    catalog: Catalog, interval: float, on_change: Callable[[CatalogChange], None] | None = None
) -> Callable[[], None]:
    """What every serving process starts once it serves (stdio and HTTP alike): the query encoder, in
    the background when a library has vectors, and the reload loop when ``interval`` > 0. Returns the
    function that stops the loop."""
    catalog.start_encoder()
    if interval <= 0:
        return lambda: None
    return watch(catalog, interval, on_change)


async def watch_bundles(catalog: Catalog, interval: float, notify: Notify | None = None) -> None:
    """``serving`` beside a stdio session until cancelled; ``notify(LIST_CHANGED)`` after each change
    (sent from the loop's thread; a session that already ended is not told)."""
    token = anyio.lowlevel.current_token()

    def told(change: CatalogChange) -> None:
        if notify is None:
            return

        async def send() -> None:
            await notify(LIST_CHANGED)

        try:
            anyio.from_thread.run(send, token=token)
        except Exception as exc:  # the session ended meanwhile: nobody to tell
            log.debug("list_changed not sent: %s", exc)

    stop = serving(catalog, interval, told)
    try:
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(stop)
