"""Which libraries a search across libraries searches: the K the route index ranks best.

A search without ``libraryId`` asks ``Router.route``. With at most K libraries in the catalogue (K is
``CatalogSettings.route_libraries``, ``--route-libraries``, 10 by default) every one is searched, as before.
With more, the query's words (analysed as the search analyses them, ``bundle.search.query_words``;
never whoosh's query parser) are looked up in the route index (``bundle.routeindex``), and the K
libraries it scores best are searched; a library holding none of the words is not.

The route index is kept fresh and trustworthy here. Anyone who can write the bundles folder can
write ``routing.idx``, and its build ids prove nothing about its postings: moved from one library to
another they hide a library without a word. So the server routes only by an index it made itself, in
this process, from each served bundle's routing record, read through ``untrusted`` and checked against
the manifest the catalogue verified (its bytes' sha256 is the one the catalogue read at start, pinned
by the lock file when there is one). From ``routing.idx`` it takes only the entries of bundles without a
record (deriving one opens and verifies the whole bundle), when their manifest is unchanged, and none
under a lock file. ``prepare`` (a server calls it once it serves) or else the first cross-library
search starts that build in a background thread; later ones reuse its entries whose build did not
change (checked once per catalogue reload). The result is written atomically into the bundles
folder when it differs from what is there (kept in memory when the folder is read-only). A bundle whose
record cannot be had is left out, logged once, and not tried again until its build changes; a bad
``routing.idx`` (a FIFO, a device, too big, malformed, nested) is rebuilt. No file is read with the
router's lock held, so no file can hold up another search.

A search waits for the index at most ``ROUTE_INDEX_WAIT_SECONDS`` (cancellable, outside its time
budget). Not built by then (a catalogue of thousands of libraries takes seconds), it routes by this
process's previous index when there is one, choosing only among the libraries whose entry still names
the build they serve, and says so; without any (the first seconds of a large catalogue, or routing off,
``--route-libraries 0``) it searches the libraries in catalogue order within its time budget, as
before routing, and says why.

Bounds: the query gives at most ``MAX_ROUTE_WORDS`` words; the answer names at most ``SHOWN`` libraries.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

from docbundle.bundle.layout import write_atomically
from docbundle.bundle.manifest import Manifest
from docbundle.bundle.query import Deadline
from docbundle.bundle.routeindex import (
    ROUTING_INDEX,
    IndexedLibrary,
    RouteIndex,
    Served,
    build_index,
    read_index,
    read_manifest_checked,
)

from .catalog import Catalog, Snapshot, VersionEntry
from .errors import CancelledError

log = logging.getLogger(__name__)

ROUTE_INDEX_WAIT_SECONDS = 5.0  # the longest a search waits for the route index being (re)built
RETRY_SECONDS = 60.0  # after a failed rebuild, the next one starts no sooner than this
MAX_ROUTE_WORDS = 32  # query words looked up in the route index
SHOWN = 5  # libraries an answer names (plus the count of the others)

Method = Literal["all", "routed", "unrouted"]


@dataclass(frozen=True)
class Route:
    """The libraries a search across libraries searches, in that order, and how they were chosen."""

    targets: list[VersionEntry]
    method: Method  # all: the catalogue is small; routed: by the route index; unrouted: in order
    total: int  # libraries in the catalogue
    reason: str  # how they were chosen, one line


def _key(entry: VersionEntry) -> tuple[str, str]:
    return (entry.library_id, entry.version)


def _checked_manifest(bundle: Path, sha256: str) -> Manifest:
    """The manifest the catalogue verified (``BundleIntegrityError`` when its bytes changed since)."""
    return read_manifest_checked(bundle, sha256)[0]


def _derived(lib: IndexedLibrary) -> bool:
    return lib.derived


class Router:
    """The route index of one catalogue, kept fresh, and the choice of libraries for a query."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        # Guards the fields below; never held while a file is read or written (a FIFO or a slow disk
        # would hold up every cross-library search behind it).
        self._lock = threading.Lock()
        # Made by this process from verified records (``_rebuild``); None until the first build ends.
        self._index: RouteIndex | None = None
        # The catalogue snapshot ``_index`` was found fresh for (None: not checked yet); a reload or a
        # corrected entry serves a new snapshot, which the index is checked against again.
        self._fresh_for: Snapshot | None = None
        # Library versions whose record could not be had: (build id, why), left out of the index until
        # their build changes, so they neither make it stale nor get logged at every search.
        self._unindexable: dict[tuple[str, str], tuple[str, str]] = {}
        self._written: str | None = None  # sha256 of routing.idx as this process last read or wrote it
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._started = 0.0
        self._failed: tuple[float, str] | None = None
        self.in_memory = False  # the last rebuild could not be written (a read-only folder)

    # -- the index ------------------------------------------------------------------------------------

    def _served(self) -> list[Served]:
        """The served bundles (no file is read: the catalogue's entries)."""
        return [
            Served(
                e.library_id,
                e.version,
                e.bundle_path,
                e.meta.build_id,
                e.meta.manifest_sha256,
                partial(_checked_manifest, e.bundle_path, e.meta.manifest_sha256),
            )
            for e in self.catalog.entries()
            if e.meta is not None and e.bundle_path is not None and not e.problem
        ]

    def _wanted(self) -> dict[tuple[str, str], str]:
        """(library id, version) -> the build the index must describe: every served build but those
        known to be unindexable (with ``_lock`` held)."""
        skip = self._unindexable
        return {
            (s.library_id, s.version): s.build_id
            for s in self._served()
            if skip.get((s.library_id, s.version), ("",))[0] != s.build_id
        }

    def index(self, wait: float, cancel: Deadline | None = None) -> tuple[RouteIndex | None, str]:
        """The route index and, when it is not a fresh one, why: None (no index yet: a build was
        started, or failed), or this process's previous one while it is rebuilt (its entries whose
        build changed are not chosen: ``_choosable``)."""
        snapshot = self.catalog.snapshot()
        with self._lock:
            if self._index is not None and self._fresh_for is snapshot:
                return self._index, ""
            if self._index is not None and not self._index.stale(self._wanted()):
                self._fresh_for = snapshot
                return self._index, ""
            if self._failed is not None and time.monotonic() - self._failed[0] < RETRY_SECONDS:
                return self._index, f"the routing index could not be built ({self._failed[1]})"
            if self._thread is None:
                self._start_rebuild()
            done, started = self._done, self._started
        deadline = Deadline(wait) if cancel is None else cancel.within(wait)
        while not done.wait(min(0.05, max(wait, 0.0))):
            if deadline.cancelled:
                raise CancelledError()
            if deadline.expired():
                return self._index, (
                    f"the routing index is being built (for {time.monotonic() - started:.1f} s so far)"
                )
        return self.index(0.0, cancel)

    def prepare(self) -> None:
        """Start building the index in the background when searches across libraries route (a server
        calls this once it serves: the build reads every record, seconds at 10,000 libraries, which the
        first such search would otherwise wait for, past ``ROUTE_INDEX_WAIT_SECONDS``)."""
        if 0 < self.catalog.settings.route_libraries < len(self._defaults()):
            self.index(0.0)

    def _start_rebuild(self) -> None:
        """Start rebuilding in a background thread (with ``_lock`` held)."""
        self._done = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(
            target=self._rebuild, args=(self._done,), name="docbundle-routing", daemon=True
        )
        self._thread.start()

    def _rebuild(self, done: threading.Event) -> None:
        """Build the index from verified records (reusing this process's entries whose build did not
        change), write it when it differs from the file, and remember what could not be indexed."""
        started = time.monotonic()
        try:
            with self._lock:
                previous, served, written = self._index, self._served(), self._written
            reusable: Callable[[IndexedLibrary], bool] | None = None
            if previous is None:
                # The file is not this process's work: only its derived entries may be kept (not
                # under a lock file, which pins manifests, not the postings derived from them).
                on_disk, written = read_index(self.catalog.root)
                previous = on_disk if self.catalog.lock is None else None
                reusable = _derived
            index, left_out = build_index(served, previous, reusable=reusable)
            data = index.encode()
            digest = hashlib.sha256(data).hexdigest()
            if digest != written:
                try:
                    write_atomically(self.catalog.root / ROUTING_INDEX, data)
                    written, self.in_memory = digest, False
                except OSError as exc:
                    if not self.in_memory:
                        log.info("route index kept in memory: the bundles folder cannot be written (%s)", exc)
                    self.in_memory = True
            builds = {(s.library_id, s.version): s.build_id for s in served}
            with self._lock:
                before = self._unindexable
                self._unindexable = {key: (builds[key], why) for key, why in left_out.items()}
                self._index, self._written, self._failed = index, written, None
                self._fresh_for = None  # checked against the catalogue at the next search
            for key, (build, why) in self._unindexable.items():
                if before.get(key, ("",))[0] != build:
                    log.warning("left out of the route index: %s/%s: %s", key[0], key[1], why)
            log.info(
                "route index built: %d library versions in %.2f s",
                len(index.libraries),
                time.monotonic() - started,
            )
        except Exception as exc:
            log.exception("building the route index failed")
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
        k = self.catalog.settings.route_libraries
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
        """Every library's default version, in catalogue order (a view of the catalogue's snapshot)."""
        return self.catalog.snapshot().view("routing.defaults", _defaults)

    def _choosable(
        self, index: RouteIndex, defaults: list[VersionEntry]
    ) -> tuple[dict[int, VersionEntry], int]:
        """The default versions by their number in ``index``, and how many are not in it (kept in the
        catalogue snapshot's view for the last index asked about)."""
        cache: dict[str, tuple[RouteIndex, dict[int, VersionEntry], int]]
        cache = self.catalog.snapshot().view("routing.choosable", _last_choice)
        cached = cache.get("last")
        if cached is not None and cached[0] is index:
            return cached[1], cached[2]
        choosable: dict[int, VersionEntry] = {}
        missing = 0
        for e in defaults:
            n = index.number(_key(e))
            if n is not None and index.libraries[n].build_id == e.build_id:
                choosable[n] = e
            elif e.meta is not None and not e.problem:
                missing += 1
        cache["last"] = (index, choosable, missing)
        return choosable, missing


def _defaults(snapshot: Snapshot) -> list[VersionEntry]:
    return [lib.default for lib in snapshot.libraries()]


def _last_choice(snapshot: Snapshot) -> dict[str, tuple[RouteIndex, dict[int, VersionEntry], int]]:
    return {}
