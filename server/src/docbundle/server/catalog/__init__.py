"""The catalogue of served libraries: the facade of ``docbundle.server.catalog`` (``Catalog``).

Start-up reads the catalogue summary (``catalog.json``) and lists the bundles folder, nothing else: no
``CURRENT``, no manifest, no hashing and no whoosh, so a server with many libraries, or large ones,
starts at once. A library is checked the first time a request needs it (a page of ``list_libraries``
that shows it, a request that names it, a search that opens it): its versions' ``CURRENT`` read, their
leases taken, and each version's entry read from its manifest (``entries.check_library``): what the
summary claimed is only shown as unchecked, and a summary entry that differs is rewritten. A library
version is opened, verified, the first time a request searches or reads it (``pool``).

The rooms of the package, each with one job:

- ``settings``: ``CatalogSettings``, what a catalogue is told once at ``load`` (max open, warm-up, route
  K, retire and evict times), never changed after;
- ``entries``: the entries and how a bundles folder is read into them (summary, CURRENT, manifests);
- ``snapshot``: the libraries as one frozen ``Snapshot`` a reload swaps whole, and the views derived
  from it (the resolver's word index, the routing choices), made once per snapshot;
- ``pool``: the open bundles (open, verify, LRU, retire, leases, cache shares, which to warm);
- ``warmup``: the one warm-up thread of a serving catalogue, its bounded queue and its share of a core;
- ``projection``: one library version as every listing shows it (``VersionView``) and the one rule a
  listing's words match by;
- ``watch``: the one live-reload loop of stdio and HTTP, and where a serving process starts the query
  encoder.

A lock file (``bundles.lock``, see ``lockfile``) pins what may be served: only the versions it lists,
and each only with the content hash (and manifest bytes) it names.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from docbundle.bundle.layout import LIBRARY_ID_RE, LIBRARY_ID_RULE, VERSION_RE, VERSION_RULE
from docbundle.bundle.summary import SUMMARY_NAME, update_summary_versions, write_summary_locked
from docbundle.common.process import collector_paused as _collector_paused

from ..bounds import MAX_LIBRARY_ID_CHARS, MAX_VERSION_CHARS
from ..encoder import QueryEncoder
from ..errors import InvalidIdError, LibraryUnavailableError, UnknownLibraryError, UnknownVersionError, echo
from ..lockfile import LockFile
from ..words import NextStep
from .entries import (
    BuildFacts,
    CatalogChange,
    LibraryEntry,
    OpenedLibrary,
    Reading,
    Stamp,
    VersionEntry,
    check_library,
    scan,
    stamp,
)
from .pool import Event, Pool, key_of
from .projection import State, VersionView, project
from .settings import (
    DEFAULT_MAX_OPEN,
    DEFAULT_RELOAD_SECONDS,
    DEFAULT_ROUTE_LIBRARIES,
    EVICT_AFTER_SECONDS,
    MAX_ROUTE_LIBRARIES,
    RETIRE_AFTER_SECONDS,
    WARM_TERMS,
    CatalogSettings,
)
from .snapshot import Snapshot

# The entries (``entries``) and the settings are this package's vocabulary too: other modules import
# them from here.
__all__ = [
    "DEFAULT_MAX_OPEN",
    "DEFAULT_RELOAD_SECONDS",
    "DEFAULT_ROUTE_LIBRARIES",
    "EVICT_AFTER_SECONDS",
    "MAX_ROUTE_LIBRARIES",
    "RETIRE_AFTER_SECONDS",
    "WARM_TERMS",
    "BuildFacts",
    "Catalog",
    "CatalogChange",
    "CatalogSettings",
    "Event",
    "LibraryEntry",
    "Listener",
    "OpenedLibrary",
    "Snapshot",
    "State",
    "VersionEntry",
    "VersionView",
]

log = logging.getLogger(__name__)

Listener = Callable[[Event, "VersionEntry | None"], None]
MAX_DUE_SHOWN = 5  # versions a log line names when the summary is rewritten for stale entries


class Catalog:
    """Every library under a bundles directory; opens each version on first use and caches it."""

    def __init__(
        self,
        root: Path,
        libraries: dict[str, LibraryEntry],
        lock: LockFile | None = None,
        leases: dict[Path, int] | None = None,
        *,
        settings: CatalogSettings | None = None,
        seen: Stamp | None = None,
    ) -> None:
        self.root = root
        self.lock = lock
        self.settings = settings or CatalogSettings()
        # The libraries served now; a reload (or a check that corrected an entry) swaps it whole.
        self._snapshot = Snapshot(libraries)
        # Called (in the thread where it happened) with each event; a serving process's metrics listen.
        self.listeners: list[Listener] = []
        self._pool = Pool(root, self.settings, dict(leases or {}), log, self._tell)
        # The query encoder of semantic search, loaded once per process (``start_encoder``, or on the
        # first search that needs it).
        self.encoder = QueryEncoder()
        self._preload_encoder = False
        self._guard = threading.Lock()
        # Held while the folder is read (a reload, the check of a library on its first use), so that a
        # check and a reload never replace each other's entries.
        self._reading = threading.Lock()
        # What the bundles folder looked like before it was read (``stamp``): given by ``load``.
        self._stamp = stamp(root) if seen is None else seen
        # Versions whose summary entry a check found stale, not written yet (``summary_batch``), and per
        # thread how deep in batches it is.
        self._summary_due: set[tuple[str, str]] = set()
        self._batch = threading.local()

    @classmethod
    def load(
        cls, root: Path, *, lock: Path | None = None, settings: CatalogSettings | None = None
    ) -> Catalog:
        """The libraries under ``root``: from the catalogue summary, each checked on first use; without a
        readable summary, or with a lock file, every version's CURRENT and manifest read now (and the
        summary written back when it was stale and the folder is writable). Nothing is opened."""
        if not root.is_dir():
            raise FileNotFoundError(f"bundles directory {root} does not exist or is not a directory")
        lockfile = LockFile.load(lock) if lock is not None else None
        seen = stamp(root)
        with _collector_paused():
            libraries, reading = scan(root, lockfile)
        _write_back(reading)
        if lockfile is not None:
            for lib, version in sorted(lockfile.pins):
                if lib not in libraries or version not in libraries[lib].versions:
                    log.warning("lock file pins %s/%s, which is not in %s", lib, version, root)
        for lib_entry in libraries.values():
            for v in lib_entry.versions.values():
                if v.problem:
                    log.warning("%s/%s cannot be served: %s", v.library_id, v.version, v.problem)
        return cls(root, libraries, lockfile, reading.leases, settings=settings, seen=seen)

    # -- lookups ------------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The libraries served now, with their derived views (see ``snapshot``)."""
        return self._snapshot

    def library_ids(self) -> list[str]:
        """Every library id, sorted."""
        return self._snapshot.ids()

    def libraries(self) -> list[LibraryEntry]:
        """Every library, sorted by id."""
        return self._snapshot.libraries()

    def entries(self) -> list[VersionEntry]:
        """Every library version (each library's default first)."""
        return self._snapshot.entries()

    def knows(self, library_id: str) -> bool:
        """Whether ``library_id`` (exactly, as served) is a library of the catalogue."""
        return library_id in self._snapshot

    def held(self) -> tuple[int, int]:
        """The bundles this process holds open (serving, or replaced and finishing requests in flight),
        and the bytes of their files."""
        return self._pool.held()

    def library(self, library_id: str) -> LibraryEntry:
        """The library with this id, checked (``check``); raises InvalidIdError or UnknownLibraryError
        (listing the ids)."""
        lib_id = normalize_library_id(library_id)
        lib = self._snapshot.get(lib_id)
        if lib is None:
            raise UnknownLibraryError(lib_id, self.library_ids())
        return self.check(lib)

    def check(self, lib: LibraryEntry) -> LibraryEntry:
        """``lib`` checked against the folder on its first use: each version's CURRENT read, its lease
        taken and its entry read from the manifest (never the summary's claim); when the summary named
        another build or misdescribed this one, it is brought up to date. Cheap once checked (nothing
        is read)."""
        if lib.checked:
            return lib
        with self._reading:
            now = self._snapshot.get(lib.id)
            if now is None or now.checked:
                return now or lib  # removed meanwhile (by a reload), or checked by a concurrent request
            fresh, reading = check_library(self.root, self.lock, now)
            # Another build than the summary named, or the same build misdescribed (a name, description
            # or count that differs from its manifest's): the summary is rewritten, and a new snapshot
            # serves (whatever was derived from the entries, the resolver's words and the routing
            # choices, is made again from it).
            moved = [
                (v.library_id, v.version)
                for v in fresh.versions.values()
                if not _same(now.versions[v.version], v) or now.versions[v.version].meta != v.meta
            ]
            if self._pool.adopt(reading.leases):
                with self._guard:
                    if moved:
                        self._snapshot = self._snapshot.replace(fresh)
                    else:
                        self._snapshot.refine(fresh)
        for v in fresh.versions.values():
            if v.problem and (v.library_id, v.version) in moved:
                log.warning("%s/%s cannot be served: %s", v.library_id, v.version, v.problem)
        if moved and self.lock is None:
            with self._guard:
                self._summary_due.update(moved)
            if not getattr(self._batch, "depth", 0):
                self.write_summary_due()
        return fresh

    @contextmanager
    def summary_batch(self) -> Iterator[None]:
        """The checks made meanwhile (in this thread) bring the summary up to date once, at the end: a
        page of ``list_libraries`` that checks 370 libraries whose summary entries are stale rewrites it
        once, not 370 times (issue 31: each rewrite decodes, encodes and fsyncs the whole file)."""
        depth = getattr(self._batch, "depth", 0)
        self._batch.depth = depth + 1
        try:
            yield
        finally:
            self._batch.depth = depth
            if depth == 0:
                self.write_summary_due()

    def write_summary_due(self) -> bool:
        """Rewrite the catalogue summary once for every version a check found stale since the last
        rewrite (best effort, like every write of the summary); whether it was written.

        Runs in the caller's thread: every caller is a worker thread, never the event loop."""
        with self._guard:
            due, self._summary_due = sorted(self._summary_due), set()
        if not due:
            return False
        shown = ", ".join(f"{a}/{b}" for a, b in due[:MAX_DUE_SHOWN]) + (
            ", ..." if len(due) > MAX_DUE_SHOWN else ""
        )
        log.info(
            "%s named other builds than CURRENT, or misdescribed them, for %d version(s) (%s): read "
            "from the manifests, "
            "the summary rewritten once",
            SUMMARY_NAME,
            len(due),
            shown,
        )
        return update_summary_versions(self.root, due)

    def version_entry(self, library_id: str, version: str | None = None) -> VersionEntry:
        """The entry for a library version (``None`` or an absent "latest" mean the default version)."""
        lib = self.library(library_id)
        if version is None or not version.strip():
            return lib.default
        version = version.strip()
        if len(version) > MAX_VERSION_CHARS or not VERSION_RE.fullmatch(version):
            raise InvalidIdError(
                f"invalid version {echo(version)}: versions are {VERSION_RULE}. "
                f"Versions of {lib.id!r}: {', '.join(lib.versions)}"
            )
        if version in lib.versions:
            return lib.versions[version]
        if version == "latest":
            return lib.default
        raise UnknownVersionError(lib.id, version, list(lib.versions))

    def state(self, entry: VersionEntry) -> tuple[State, str | None]:
        """``available`` (not opened yet), ``ready`` (opened and verified) or ``failed`` with the reason."""
        if entry.problem:
            return "failed", entry.problem
        state, reason = self._pool.state(key_of(entry))
        return state or "available", reason

    def version_view(self, entry: VersionEntry) -> VersionView:
        """One library version as every listing shows it (``projection``)."""
        return project(entry, *self.state(entry))

    def has_vectors(self) -> bool:
        """Whether any library version served has semantic vectors (manifests only)."""
        return any(e.meta is not None and e.meta.vectors is not None for e in self.entries())

    def start_encoder(self) -> bool:
        """Load the query encoder in a background thread now if a library has vectors, and again after a
        reload that brings one (``watch.serving`` calls this once a server serves; a one-shot command
        never does).

        Returns whether loading started (False without vectors or without the semantic extra).
        """
        self._preload_encoder = True
        return self.has_vectors() and self.encoder.start()

    # -- opening ------------------------------------------------------------------------------------

    def open(self, library_id: str, version: str | None = None) -> OpenedLibrary:
        """Open (verified, cached) a library version; raises LibraryUnavailableError with the reason."""
        return self.open_entry(self.version_entry(library_id, version))

    def open_entry(self, entry: VersionEntry, *, warm: bool = True) -> OpenedLibrary:
        """Open the bundle of a catalogue entry once, whatever the number of concurrent callers (an
        entry not checked yet is checked first, and the build its CURRENT names is the one opened).

        ``warm=False``: a search across libraries opens it (the route index chose it among many); a
        serving catalogue warms it only when a request uses it again while it is open (``warmup``)."""
        if not entry.checked:
            lib = self._snapshot.get(entry.library_id)
            checked = self.check(lib).versions.get(entry.version) if lib is not None else None
            if checked is None:
                raise LibraryUnavailableError(
                    entry.library_id, entry.version, "it is no longer in the bundles folder"
                )
            entry = checked
        return self._pool.open(entry, warm=warm)

    def mark_failed(self, entry: VersionEntry, reason: str) -> None:
        """Stop serving an opened version whose data went bad; ``state`` and ``/readyz`` report it.

        The opened bundle stays open (requests in flight may still hold it) until the catalogue closes.
        """
        self._pool.mark_failed(entry, reason)

    def _tell(self, event: Event, entry: VersionEntry | None) -> None:
        for listener in self.listeners:
            listener(event, entry)

    def open_count(self) -> int:
        """Bundles open now: in use, and retired but not closed yet."""
        return self._pool.open_count()

    def close(self) -> None:
        """Close every opened bundle; later opens fail."""
        self._pool.close()

    # -- live reload --------------------------------------------------------------------------------

    def changed(self) -> bool:
        """Whether the bundles folder or its catalogue summary changed since the last (re)load: two
        ``stat`` calls, whatever the number of libraries (``entries.stamp``).

        Every publish, install and prune rewrites the summary, and a library folder added or removed
        changes the folder. A CURRENT moved by hand, without any of them, is seen at the next change,
        or when a request first uses that library."""
        return stamp(self.root) != self._stamp

    def reload(self) -> CatalogChange:
        """Serve what the bundles folder holds now: new libraries and versions, new builds, removals.

        A version whose build did not change keeps its entry, its opened bundle and its lease. One that
        now points at another build is served from the new one at the next request; the old one stays
        open and leased for ``retire_after`` seconds (requests in flight finish on it, and a prune
        cannot delete its files meanwhile), then is closed. The lock file read at start still applies.
        """
        if self._pool.closed:
            return CatalogChange()
        with self._reading:
            return self._reload()

    def _reload(self) -> CatalogChange:
        with self._guard:
            served = self._snapshot.by_id()
        listed = {(e.library_id, e.version) for lib in served.values() for e in lib.versions.values()}
        seen = stamp(self.root)
        with _collector_paused():
            scanned, reading = scan(self.root, self.lock, listed, served)
        _write_back(reading)
        now = time.monotonic()
        if not self._pool.adopt(reading.leases):
            scanned = {}
        libraries: dict[str, LibraryEntry] = {}
        updated: list[tuple[str, str]] = []
        for lib_id, lib in scanned.items():
            versions: dict[str, VersionEntry] = {}
            for name, entry in lib.versions.items():
                before = served[lib_id].versions.get(name) if lib_id in served else None
                if before is not None and (before is entry or _same(before, entry)):
                    versions[name] = before
                else:
                    versions[name] = entry
                    if before is not None:
                        updated.append((lib_id, name))
            libraries[lib_id] = LibraryEntry(lib_id, versions, lib.default_version)
        live = {key_of(e) for lib in libraries.values() for e in lib.versions.values()}
        # Only a checked version holds a lease.
        leased = {e.bundle_path for lib in libraries.values() for e in lib.versions.values() if e.checked}
        with self._guard:
            self._snapshot = Snapshot(libraries)
            self._stamp = seen
        self._pool.retire(live, leased, now)
        self._pool.expire()
        if self._preload_encoder:
            self.start_encoder()
        change = CatalogChange(
            tuple(sorted(set(libraries) - set(served))),
            tuple(sorted(set(served) - set(libraries))),
            tuple(updated),
        )
        if change:
            log.info("bundles reloaded: %s", change.describe())
            self._tell("reloaded", None)
        return change

    def expire(self, now: float | None = None) -> int:
        """Close the replaced builds whose grace time is over; returns how many were closed."""
        return self._pool.expire(now)

    def refresh(self) -> CatalogChange:
        """One look at the bundles folder: reload when it changed, else close builds whose time is over.

        The one step of the reload loop (``watch``). A failure (a half-written folder) is logged and the
        previous catalogue keeps serving; the next look retries.
        """
        try:
            if self.changed():
                return self.reload()
            self.expire()
        except Exception:
            log.exception("reloading the bundles folder failed; still serving the previous catalogue")
        return CatalogChange()

    def watch(
        self, interval: float, on_change: Callable[[CatalogChange], None] | None = None
    ) -> Callable[[], None]:
        """``watch.watch``: this catalogue's folder checked every ``interval`` seconds in a thread."""
        from .watch import watch

        return watch(self, interval, on_change)


def _write_back(reading: Reading) -> None:
    """Rewrite the catalogue summary when the reading found it stale (best effort: a read-only folder
    keeps serving, and the next start reads the manifests again)."""
    if reading.stale and reading.lock is None and (reading.known or (reading.root / SUMMARY_NAME).exists()):
        try:
            written = write_summary_locked(reading.root, reading.entries())
        except OSError as exc:
            written = False
            log.debug("catalogue summary not written back: %s", exc)
        log.debug("catalogue summary %s", "rebuilt from the manifests" if written else "stale, not rewritten")


def _same(before: VersionEntry, after: VersionEntry) -> bool:
    """The same build, read the same way (a problem that appeared or went away counts as a change)."""
    return (
        before.bundle_path == after.bundle_path
        and before.build_id == after.build_id
        and before.problem == after.problem
    )


def normalize_library_id(library_id: str) -> str:
    """Trim and lowercase a library id, then check its format (raises InvalidIdError)."""
    lib_id = library_id.strip().lower()
    if len(lib_id) > MAX_LIBRARY_ID_CHARS or not LIBRARY_ID_RE.fullmatch(lib_id):
        raise InvalidIdError(
            f"invalid libraryId {echo(library_id)}: ids are {LIBRARY_ID_RULE}.",
            NextStep("valid_ids", "list_libraries"),
        )
    return lib_id
