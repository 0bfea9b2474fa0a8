"""Which libraries a search across libraries searches: the K the catalogue's routing index ranks best.

A search without ``libraryId`` asks ``Router.route``. With at most K libraries in the catalogue (K is
``Catalog.route_libraries``, ``--route-libraries``, 10 by default) every one is searched, as before.
With more, the query's words (analysed as the search analyses them, ``bundle.search.query_words``;
never whoosh's query parser) are looked up in the routing index (``bundle.routeindex``), and the K
libraries it scores best are searched; a library holding none of the words is not.

The routing index is kept fresh here: it is used only when it describes the build every served
version's ``CURRENT`` names now (checked once per catalogue reload). Missing, unreadable or stale, it is
rebuilt in a background thread, reusing the entries whose build did not change, reading each other
bundle's routing record (checked against its manifest's sha256) or deriving it from the bundle's search
index when the bundle has none; then written atomically into the bundles folder (kept in memory when the
folder is read-only). A search waits for that at most ``ROUTE_INDEX_WAIT_SECONDS`` (cancellable, outside
its time budget). Not rebuilt by then (a catalogue of thousands of libraries takes seconds), it routes
by the stale index when there is one, choosing only among the libraries whose entry still names the
build they serve, and says so; without any index (or with routing off, ``--route-libraries 0``) it
searches the libraries in catalogue order within its time budget, as before routing, and says why.

Bounds: the query gives at most ``MAX_ROUTE_WORDS`` words; the answer names at most ``SHOWN`` libraries.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Literal

from docbundle.bundle.query import Deadline
from docbundle.bundle.routeindex import RouteIndex, Served, build_index, load_index, write_index

from .catalog import Catalog, VersionEntry
from .errors import CancelledError

log = logging.getLogger(__name__)

ROUTE_INDEX_WAIT_SECONDS = 5.0  # the longest a search waits for the routing index being (re)built
RETRY_SECONDS = 60.0  # after a failed rebuild, the next one starts no sooner than this
MAX_ROUTE_WORDS = 32  # query words looked up in the routing index
SHOWN = 5  # libraries an answer names (plus the count of the others)

Method = Literal["all", "routed", "unrouted"]


@dataclass(frozen=True)
class Route:
    """The libraries a search across libraries searches, in that order, and how they were chosen."""

    targets: list[VersionEntry]
    method: Method  # all: the catalogue is small; routed: by the routing index; unrouted: in order
    total: int  # libraries in the catalogue
    reason: str  # how they were chosen, one line


def _key(entry: VersionEntry) -> tuple[str, str]:
    return (entry.library_id, entry.version)


class Router:
    """The routing index of one catalogue, kept fresh, and the choice of libraries for a query."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._lock = threading.Lock()
        self._index: RouteIndex | None = None
        # The last index that described some of the served builds: routed by (its unchanged entries
        # only) while a fresh one is built, rather than searching in catalogue order.
        self._stale: RouteIndex | None = None
        self._generation = -1  # the catalogue generation ``_index`` was checked against
        self._left_out: list[str] = []
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._started = 0.0
        self._failed: tuple[float, str] | None = None
        self.in_memory = False  # the last rebuild could not be written (a read-only folder)
        self._defaults_cache: tuple[int, list[VersionEntry]] | None = None
        self._choosable_cache: tuple[tuple[int, int], dict[int, VersionEntry], int] | None = None

    # -- the index ------------------------------------------------------------------------------------

    def _served(self) -> list[Served]:
        return [
            Served(e.library_id, e.version, e.bundle_path, e.meta.build_id, e.read_manifest)
            for e in self.catalog.entries()
            if e.meta is not None and e.bundle_path is not None and not e.problem
        ]

    def index(self, wait: float, cancel: Deadline | None = None) -> tuple[RouteIndex | None, str]:
        """The routing index and, when it is not the fresh one, why: None (no index: a rebuild was
        started, or failed), or a stale one while it is rebuilt (its entries whose build changed are
        not chosen: ``_choosable``)."""
        generation = self.catalog.generation
        with self._lock:
            if self._index is not None and self._generation == generation:
                return self._index, ""
            current = {(s.library_id, s.version): s.build_id for s in self._served()}
            candidate = self._index
            stale = candidate
            if self._thread is None and (candidate is None or candidate.stale(current)):
                on_disk = load_index(self.catalog.root)
                if on_disk is not None and not on_disk.stale(current):
                    candidate = on_disk
                stale = stale or on_disk
            if candidate is not None and not candidate.stale(current):
                self._index, self._generation = candidate, generation
                return candidate, ""
            if stale is not None:
                self._stale = stale
            if self._failed is not None and time.monotonic() - self._failed[0] < RETRY_SECONDS:
                return self._stale, f"the routing index could not be built ({self._failed[1]})"
            if self._thread is None:
                self._start_rebuild(candidate)
            done, started = self._done, self._started
        deadline = Deadline(wait) if cancel is None else cancel.within(wait)
        while not done.wait(min(0.05, max(wait, 0.0))):
            if deadline.cancelled:
                raise CancelledError()
            if deadline.expired():
                return self._stale, (
                    f"the routing index is being built (for {time.monotonic() - started:.1f} s so far)"
                )
        return self.index(0.0, cancel)

    def _start_rebuild(self, previous: RouteIndex | None) -> None:
        """Start rebuilding in a background thread (with ``_lock`` held)."""
        self._done = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(
            target=self._rebuild, args=(previous, self._done), name="docbundle-routing", daemon=True
        )
        self._thread.start()

    def _rebuild(self, previous: RouteIndex | None, done: threading.Event) -> None:
        started = time.monotonic()
        try:
            if previous is None:
                previous = load_index(self.catalog.root)
            index, left_out = build_index(self._served(), previous)
            try:
                write_index(self.catalog.root, index)
                self.in_memory = False
            except OSError as exc:
                self.in_memory = True
                log.info("routing index kept in memory: the bundles folder cannot be written (%s)", exc)
            for problem in left_out:
                log.warning("left out of the routing index: %s", problem)
            with self._lock:
                self._index, self._left_out, self._failed = index, left_out, None
                self._stale = None
                self._generation = -1  # checked against the catalogue at the next search
            log.info(
                "routing index built: %d library versions in %.2f s",
                len(index.libraries),
                time.monotonic() - started,
            )
        except Exception as exc:
            log.exception("building the routing index failed")
            with self._lock:
                self._failed = (time.monotonic(), f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._thread = None
            done.set()

    # -- routing -----------------------------------------------------------------------------------------

    def route(self, words: list[tuple[str, ...]], cancel: Deadline | None = None) -> Route:
        """The libraries (default versions) a search across libraries searches for these query words."""
        defaults = self._defaults()
        total = len(defaults)
        k = self.catalog.route_libraries
        if k <= 0:
            return Route(defaults, "unrouted", total, "routing is off (--route-libraries 0)")
        if total <= k:
            return Route(defaults, "all", total, f"every library: the catalogue holds no more than {k}")
        index, why = self.index(ROUTE_INDEX_WAIT_SECONDS, cancel)
        if index is None:
            return Route(defaults, "unrouted", total, why)
        if why:
            why = f"{why}: the previous one was used"
        if not words:
            # Each library then says there is nothing to search for (stop words and question words only).
            return Route(
                defaults[:k], "routed", total, f"the question has no word to route by: the first {k}"
            )
        choosable, missing = self._choosable(index, defaults)
        ranked = index.score(words[:MAX_ROUTE_WORDS], allowed=choosable, limit=k)
        chosen = [choosable[c.number] for c in ranked]
        reason = (
            f"the {len(chosen)} of {total} libraries whose routing records best match the question's words"
            f" (at most {k})"
        )
        if len(ranked) < k:
            reason += f"; {len(ranked)} hold any of them"
        if missing:
            reason += f"; {missing} without a current routing record could not be chosen"
        if why:
            reason += f"; {why}"
        return Route(chosen, "routed", total, reason)

    def _defaults(self) -> list[VersionEntry]:
        """Every library's default version, in catalogue order (cached per catalogue generation)."""
        generation = self.catalog.generation
        if self._defaults_cache is None or self._defaults_cache[0] != generation:
            self._defaults_cache = (generation, [lib.default for lib in self.catalog.libraries()])
        return self._defaults_cache[1]

    def _choosable(
        self, index: RouteIndex, defaults: list[VersionEntry]
    ) -> tuple[dict[int, VersionEntry], int]:
        """The default versions by their number in ``index``, and how many are not in it (cached per
        index and catalogue generation)."""
        key = (id(index), self.catalog.generation)
        cached = self._choosable_cache
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        choosable: dict[int, VersionEntry] = {}
        missing = 0
        for e in defaults:
            n = index.number(_key(e))
            if n is not None and index.libraries[n].build_id == e.build_id:
                choosable[n] = e
            elif e.meta is not None and not e.problem:
                missing += 1
        self._choosable_cache = (key, choosable, missing)
        return choosable, missing
