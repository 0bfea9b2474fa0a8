"""The catalogue of served libraries: manifests read at start-up, bundles opened (verified) on first use.

Start-up reads the catalogue summary (``catalog.json``) and lists the bundles folder, nothing else: no
``CURRENT``, no manifest, no hashing and no whoosh, so a server with many libraries, or large ones,
starts at once. A library is checked the first time a request needs it (a page of ``list_libraries``
that shows it, a request that names it, a search that opens it): its versions' ``CURRENT`` read, their
leases taken, and each version's entry read from its manifest (``entries.check_library``): what the
summary claimed is only shown as unchecked, and a summary entry that differs is rewritten. A library version is opened the first time a request
searches or reads it: every file is checked against
the manifest's sha256 list (``verify_bundle``) *before* whoosh unpickles anything, then the index is
opened without mmap and a ``BundleSearcher`` built over it. The result is cached; concurrent first
requests for the same version wait on a per-version lock, so it is opened once. A version that fails to
open is remembered with its reason and reported, while every other library keeps serving.

Why ``use_mmap=False``: whoosh's mmap mode still copies the terms and postings of the segment into the
heap for each searcher (~50 ms and RAM equal to their size), while without mmap a searcher costs ~0.3 ms
and almost no memory. A non-mmap searcher must never be shared between threads (its file position
races) and MCP tools run in worker threads, so ``BundleSearcher`` opens one per call.

The entries and how they are read from the folder (the summary, CURRENT, manifests) are ``entries``.

A lock file (``bundles.lock``, see ``lockfile``) pins what may be served: only the versions it lists,
and each only with the content hash (and manifest bytes) it names.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from docbundle.bundle.errors import BundleError
from docbundle.bundle.layout import LIBRARY_ID_RE, LIBRARY_ID_RULE, VERSION_RE, VERSION_RULE
from docbundle.bundle.summary import (
    SUMMARY_NAME,
    entry_from_manifest,
    update_summary_versions,
    write_summary_locked,
)

from ..encoder import QueryEncoder
from .entries import (
    CatalogChange,
    LibraryEntry,
    OpenedLibrary,
    Reading,
    Stamp,
    VersionEntry,
    check_library,
    relative,
    scan,
    stamp,
)
from ..errors import (
    MAX_LIBRARY_ID_CHARS,
    MAX_VERSION_CHARS,
    InvalidIdError,
    LibraryUnavailableError,
    UnknownLibraryError,
    UnknownVersionError,
    echo,
)
from ..lockfile import LockFile
from ..observe import span
from ..words import NextStep

# The entries (``entries``) are this module's vocabulary too: the other modules import them from here.
__all__ = [
    "Catalog",
    "CatalogChange",
    "Event",
    "LibraryEntry",
    "Listener",
    "OpenedLibrary",
    "State",
    "VersionEntry",
]

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

State = Literal["available", "ready", "failed"]
#: What a catalogue tells its listeners: a bundle verified and opened, one that failed to open or stopped
#: serving (its reason is logged), and a reload that changed what is served (with no entry).
Event = Literal["opened", "failed", "reloaded"]
Listener = Callable[[Event, "VersionEntry | None"], None]
RETIRE_AFTER_SECONDS = 60.0  # a build replaced by a reload stays open this long for requests in flight
# A bundle closed because it is past --max-open stays open this long for the requests still reading it
# (a search stops at its 2 s budget). Not the 60 s above: a search across a big catalogue opens up to 10
# bundles, and 60 s of them held a file descriptor each by the thousand (measured: 20,000 at 10,000
# libraries and 12 searches a second, and "Too many open files").
EVICT_AFTER_SECONDS = 5.0
DEFAULT_RELOAD_SECONDS = 2.0  # how often serve looks for new builds (--reload-interval; 0 = never)
WARM_TERMS = 1_000  # most frequent terms whose postings a server caches in the background per opened bundle
WARM_DELAY_SECONDS = 1.0  # the warm-up starts this long after the bundle opened (the first answer goes first)
WARM_PAUSE_SECONDS = 0.002  # between two terms of the warm-up, for the searches running meanwhile
DEFAULT_ROUTE_LIBRARIES = 10  # libraries a search across libraries searches, chosen by the routing index
MAX_ROUTE_LIBRARIES = 100  # the most --route-libraries may ask for
# Bundles a server keeps open at once (--max-open): past it the least recently used one is closed
# (after EVICT_AFTER_SECONDS, for the requests still reading it) and opened again, verified, when asked.
DEFAULT_MAX_OPEN = 32
# The search caches of every open bundle together hold at most this many estimated bytes of postings,
# and as many of phrase positions: shared equally among the open bundles, none below the floor.
CACHE_BUDGET_BYTES = 16 * 1024 * 1024
CACHE_FLOOR_BYTES = 512 * 1024
MAX_DUE_SHOWN = 5  # versions a log line names when the summary is rewritten for stale entries
T = TypeVar("T")


# -- the catalogue ----------------------------------------------------------------------------------


class Catalog:
    """Every library under a bundles directory; opens each version on first use and caches it."""

    def __init__(
        self,
        root: Path,
        libraries: dict[str, LibraryEntry],
        lock: LockFile | None = None,
        leases: dict[Path, int] | None = None,
        *,
        retire_after: float = RETIRE_AFTER_SECONDS,
        seen: Stamp | None = None,
    ) -> None:
        self.root = root
        self._leases = dict(leases or {})
        self.lock = lock
        self._libraries = libraries
        # Counts the reloads that changed the libraries: whoever caches something derived from the entries
        # (the routing index, the resolver's word index) checks it.
        self.generation = 0
        # Keyed by (library, version, build id): a request that resolved an entry before a reload
        # still gets the build it resolved, never its successor.
        # In order of use, least recent first: past ``max_open`` the first ones are retired.
        self._opened: OrderedDict[tuple[str, str, str], OpenedLibrary] = OrderedDict()
        self.max_open = DEFAULT_MAX_OPEN
        self._failed: dict[tuple[str, str, str], str] = {}
        self._retired: list[OpenedLibrary] = []  # opened, then marked failed: closed at close()
        # Replaced by a reload: closed (and their leases released) once retire_after seconds have passed,
        # so requests in flight finish on the build they started with.
        self._expiring: list[tuple[float, OpenedLibrary | None, int | None]] = []
        self.retire_after = retire_after
        self.evict_after = min(retire_after, EVICT_AFTER_SECONDS)
        # Terms whose postings a newly opened bundle caches in a background thread (0: none). A server
        # sets it (``docbundle serve``); one-shot commands leave it at 0.
        self.warm_terms = 0
        # The query encoder of semantic search, loaded once per process (``start_encoder``, or on the
        # first search that needs it).
        self.encoder = QueryEncoder()
        self._preload_encoder = False
        # Libraries a search across libraries routes to (``routing``; 0: no routing). A server sets it
        # from --route-libraries.
        self.route_libraries = DEFAULT_ROUTE_LIBRARIES
        self._guard = threading.Lock()
        self._key_locks: dict[tuple[str, str, str], threading.Lock] = {}
        # Held while the folder is read (a reload, the check of a library on its first use), so that a
        # check and a reload never replace each other's entries.
        self._reading = threading.Lock()
        self._closed = False
        # What the bundles folder looked like before it was read (``stamp``): given by ``load``.
        self._stamp = stamp(root) if seen is None else seen
        # Called (in the thread where it happened) with each event; a serving process's metrics listen.
        self.listeners: list[Listener] = []
        # Versions whose summary entry a check found stale, not written yet (``summary_batch``), and per
        # thread how deep in batches it is.
        self._summary_due: set[tuple[str, str]] = set()
        self._batch = threading.local()

    @classmethod
    def load(
        cls, root: Path, *, lock: Path | None = None, retire_after: float = RETIRE_AFTER_SECONDS
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
        return cls(
            root,
            libraries,
            lockfile,
            reading.leases,
            retire_after=retire_after,
            seen=seen,
        )

    # -- lookups ------------------------------------------------------------------------------------

    def library_ids(self) -> list[str]:
        """Every library id, sorted."""
        return sorted(self._libraries)

    def libraries(self) -> list[LibraryEntry]:
        """Every library, sorted by id."""
        return [self._libraries[k] for k in sorted(self._libraries)]

    def entries(self) -> list[VersionEntry]:
        """Every library version (each library's default first)."""
        return [v for lib in self.libraries() for v in lib.versions.values()]

    def knows(self, library_id: str) -> bool:
        """Whether ``library_id`` (exactly, as served) is a library of the catalogue."""
        return library_id in self._libraries

    def held(self) -> tuple[int, int]:
        """The bundles this process holds open (serving, or replaced and finishing requests in flight),
        and the bytes of their files."""
        with self._guard:
            held = [*self._opened.values(), *self._retired, *(lib for _, lib, _ in self._expiring if lib)]
        return len(held), sum(f.size for lib in held for f in lib.manifest.files)

    def library(self, library_id: str) -> LibraryEntry:
        """The library with this id, checked (``check``); raises InvalidIdError or UnknownLibraryError
        (listing the ids)."""
        lib_id = normalize_library_id(library_id)
        try:
            lib = self._libraries[lib_id]
        except KeyError:
            raise UnknownLibraryError(lib_id, self.library_ids()) from None
        return self.check(lib)

    def check(self, lib: LibraryEntry) -> LibraryEntry:
        """``lib`` checked against the folder on its first use: each version's CURRENT read, its lease
        taken and its entry read from the manifest (never the summary's claim); when the summary named
        another build or misdescribed this one, it is brought up to date. Cheap once checked (nothing
        is read)."""
        if lib.checked:
            return lib
        with self._reading:
            now = self._libraries.get(lib.id)
            if now is None or now.checked:
                return now or lib  # removed meanwhile (by a reload), or checked by a concurrent request
            fresh, reading = check_library(self.root, self.lock, now)
            # Another build than the summary named, or the same build misdescribed (a name, description
            # or count that differs from its manifest's): the summary is rewritten, and whatever was
            # derived from the entries (the resolver's words, the routing index) is made again.
            moved = [
                (v.library_id, v.version)
                for v in fresh.versions.values()
                if not _same(now.versions[v.version], v) or now.versions[v.version].meta != v.meta
            ]
            extra = []
            with self._guard:
                if self._closed:
                    extra = list(reading.leases.values())
                else:
                    for path, fd in reading.leases.items():
                        if path in self._leases:
                            extra.append(fd)
                        else:
                            self._leases[path] = fd
                    self._libraries[lib.id] = fresh
                    if moved:
                        self.generation += 1
        for fd in extra:
            os.close(fd)
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

    def resolve(self, library_id: str, version: str | None = None) -> VersionEntry:
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
        key = _key(entry)
        if key in self._opened:
            return "ready", None
        if key in self._failed:
            return "failed", self._failed[key]
        return "available", None

    def has_vectors(self) -> bool:
        """Whether any library version served has semantic vectors (manifests only)."""
        return any(e.meta is not None and e.meta.vectors is not None for e in self.entries())

    def start_encoder(self) -> bool:
        """Load the query encoder in a background thread now if a library has vectors, and again after a
        reload that brings one (a server calls this once it serves; a one-shot command never does).

        Returns whether loading started (False without vectors or without the semantic extra).
        """
        self._preload_encoder = True
        return self.has_vectors() and self.encoder.start()

    # -- opening ------------------------------------------------------------------------------------

    def open(self, library_id: str, version: str | None = None) -> OpenedLibrary:
        """Open (verified, cached) a library version; raises LibraryUnavailableError with the reason."""
        return self.open_entry(self.resolve(library_id, version))

    def open_entry(self, entry: VersionEntry) -> OpenedLibrary:
        """Open the bundle of a catalogue entry once, whatever the number of concurrent callers (an
        entry not checked yet is checked first, and the build its CURRENT names is the one opened)."""
        if not entry.checked:
            lib = self._libraries.get(entry.library_id)
            checked = self.check(lib).versions.get(entry.version) if lib is not None else None
            if checked is None:
                raise LibraryUnavailableError(
                    entry.library_id, entry.version, "it is no longer in the bundles folder"
                )
            entry = checked
        key = _key(entry)
        opened = self._opened.get(key)
        if opened is not None:
            self._touch(key)
            return opened
        with self._key_lock(key):
            opened = self._opened.get(key)
            if opened is not None:
                return opened
            reason = entry.problem or self._failed.get(key)
            if reason is None:
                if self._closed:
                    raise LibraryUnavailableError(
                        entry.library_id, entry.version, "the server is shutting down"
                    )
                try:
                    with span("bundle.open", library=entry.library_id, version=entry.version):
                        opened = self._open(entry)
                except Exception as exc:
                    reason = self._reason(entry, exc)
                    self._failed[key] = reason
                    log.error("cannot open %s/%s: %s", entry.library_id, entry.version, reason)
                    self._tell("failed", entry)
                else:
                    with self._guard:
                        self._opened[key] = opened
                    self._evict()
                    self._share_caches()
                    self._tell("opened", entry)
                    return opened
        raise LibraryUnavailableError(
            entry.library_id, entry.version, reason, pin=entry.pin_refused and reason == entry.problem
        )

    def mark_failed(self, entry: VersionEntry, reason: str) -> None:
        """Stop serving an opened version whose data went bad; ``state`` and ``/readyz`` report it.

        The opened bundle stays open (requests in flight may still hold it) until the catalogue closes.
        """
        key = _key(entry)
        with self._guard:
            opened = self._opened.pop(key, None)
            if opened is not None:
                self._retired.append(opened)
            self._failed[key] = reason
        log.error("%s/%s stopped serving: %s", entry.library_id, entry.version, reason)
        self._tell("failed", entry)

    def _tell(self, event: Event, entry: VersionEntry | None) -> None:
        for listener in self.listeners:
            listener(event, entry)

    def _touch(self, key: tuple[str, str, str]) -> None:
        """Mark an opened bundle as just used."""
        with self._guard:
            if key in self._opened:
                self._opened.move_to_end(key)

    def _evict(self) -> None:
        """Retire the least recently used bundles past ``max_open``: closed once ``evict_after`` has
        passed (requests in flight finish on them), then opened again, verified, on their next use."""
        now = time.monotonic()
        with self._guard:
            while len(self._opened) > max(self.max_open, 1):
                key, lib = self._opened.popitem(last=False)
                self._expiring.append((now + self.evict_after, lib, None))
                log.debug("%s/%s closed: past --max-open %d", key[0], key[1], self.max_open)
        self.expire(now)

    def _share_caches(self) -> None:
        """Give each open bundle's search caches an equal share of ``CACHE_BUDGET_BYTES``."""
        with self._guard:
            opened = list(self._opened.values())
        share = max(CACHE_BUDGET_BYTES // max(len(opened), 1), CACHE_FLOOR_BYTES)
        for lib in opened:
            lib.searcher.limit_caches(share, share)

    def open_count(self) -> int:
        """Bundles open now: in use, and retired but not closed yet."""
        with self._guard:
            return len(self._opened) + sum(1 for _, lib, _ in self._expiring if lib is not None)

    @contextmanager
    def _key_lock(self, key: tuple[str, str, str]) -> Iterator[None]:
        with self._guard:
            lock = self._key_locks.setdefault(key, threading.Lock())
        with lock:
            yield

    def _open(self, entry: VersionEntry) -> OpenedLibrary:
        # Imported here: whoosh (behind the reader and the searcher) costs ~0.1 s to import, and a
        # server that is only asked list_libraries never needs it.
        from docbundle.bundle import reader
        from docbundle.bundle.search import BundleSearcher

        assert entry.bundle_path is not None and entry.meta is not None
        # Every file's size and sha256 before whoosh unpickles anything (restricted, in any case);
        # the bundle then reads through the very descriptors that were hashed.
        bundle = reader.open_bundle(entry.bundle_path)
        # The entry was read from this manifest when the version was checked (never from the summary):
        # a difference now is a manifest rewritten in place since, under the same build id.
        if entry_from_manifest(bundle.manifest, entry.meta.manifest_sha256) != entry.meta:
            bundle.close()
            raise BundleError(
                "the bundle's manifest changed after the server read it (no publish rewrites a "
                "manifest in place); rebuild the bundle, then restart the server"
            )
        try:
            searcher = BundleSearcher(bundle)
        except BaseException:
            bundle.close()
            raise
        opened = OpenedLibrary(entry, bundle, searcher)
        if self.warm_terms > 0:
            threading.Thread(
                target=_warm, args=(opened, self.warm_terms), name="docbundle-warm", daemon=True
            ).start()
        return opened

    def _reason(self, entry: VersionEntry, exc: Exception) -> str:
        if isinstance(exc, BundleError):
            return relative(str(exc), self.root)
        # Not a bundle error: a bug or an environment problem. Keep the traceback in the log.
        log.exception("unexpected error opening %s/%s", entry.library_id, entry.version)
        return relative(f"the bundle cannot be opened ({type(exc).__name__}: {exc})", self.root)

    def close(self) -> None:
        """Close every opened bundle; later opens fail."""
        with self._guard:
            self._closed = True
            opened, self._opened = [*self._opened.values(), *self._retired], OrderedDict()
            self._retired = []
            leases, self._leases = list(self._leases.values()), {}
            for _, lib, fd in self._expiring:
                if lib is not None:
                    opened.append(lib)
                if fd is not None:
                    leases.append(fd)
            self._expiring = []
        for lib in opened:
            lib.close()
        for fd in leases:
            os.close(fd)

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
        if self._closed:
            return CatalogChange()
        with self._reading:
            return self._reload()

    def _reload(self) -> CatalogChange:
        with self._guard:
            listed = {(e.library_id, e.version) for e in self.entries()}
            served = dict(self._libraries)
        seen = stamp(self.root)
        with _collector_paused():
            scanned, reading = scan(self.root, self.lock, listed, served)
        leases = reading.leases
        _write_back(reading)
        now = time.monotonic()
        extra: list[int] = []
        with self._guard:
            if self._closed:
                extra = list(leases.values())
                scanned = {}
            old = self._libraries
            libraries: dict[str, LibraryEntry] = {}
            updated: list[tuple[str, str]] = []
            for lib_id, lib in scanned.items():
                versions: dict[str, VersionEntry] = {}
                for name, entry in lib.versions.items():
                    before = old[lib_id].versions.get(name) if lib_id in old else None
                    if before is not None and (before is entry or _same(before, entry)):
                        versions[name] = before
                    else:
                        versions[name] = entry
                        if before is not None:
                            updated.append((lib_id, name))
                libraries[lib_id] = LibraryEntry(lib_id, versions, lib.default_version)
            live = {_key(e) for lib in libraries.values() for e in lib.versions.values()}
            for key in [k for k in self._opened if k not in live]:
                self._expiring.append((now + self.retire_after, self._opened.pop(key), None))
            for key in [k for k in self._failed if k not in live]:
                del self._failed[key]
            for path, fd in leases.items():
                if path in self._leases:
                    extra.append(fd)  # already leased since an earlier (re)load
                else:
                    self._leases[path] = fd
            # Only a checked version holds a lease.
            held = {e.bundle_path for lib in libraries.values() for e in lib.versions.values() if e.checked}
            for path in [p for p in self._leases if p not in held]:
                self._expiring.append((now + self.retire_after, None, self._leases.pop(path)))
            added = tuple(sorted(set(libraries) - set(old)))
            removed = tuple(sorted(set(old) - set(libraries)))
            self._libraries = libraries
            self.generation += 1
            self._stamp = seen
        for fd in extra:
            os.close(fd)
        self.expire()
        if self._preload_encoder:
            self.start_encoder()
        change = CatalogChange(added, removed, tuple(updated))
        if change:
            log.info("bundles reloaded: %s", change.describe())
            self._tell("reloaded", None)
        return change

    def expire(self, now: float | None = None) -> int:
        """Close the replaced builds whose grace time is over; returns how many were closed."""
        now = time.monotonic() if now is None else now
        with self._guard:
            due = [item for item in self._expiring if item[0] <= now]
            self._expiring = [item for item in self._expiring if item[0] > now]
        for _, lib, fd in due:
            if lib is not None:
                lib.close()
            if fd is not None:
                os.close(fd)
        return len(due)

    def refresh(self) -> CatalogChange:
        """One look at the bundles folder: reload when it changed, else close builds whose time is over.

        The one step of both reload loops (``watch`` here, ``reload.watch_bundles`` on stdio). A failure
        (a half-written folder) is logged and the previous catalogue keeps serving; the next look retries.
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
        """Check the bundles folder every ``interval`` seconds in a daemon thread and reload on a change.

        ``on_change`` is called (in that thread) with each non-empty change. Returns a function that
        stops the thread. Errors are logged and the last good catalogue keeps serving.
        """
        stop = threading.Event()

        def run() -> None:
            while not stop.wait(interval):
                change = self.refresh()
                if change and on_change is not None:
                    on_change(change)

        thread = threading.Thread(target=run, name="docbundle-reload", daemon=True)
        thread.start()

        def cancel() -> None:
            stop.set()
            thread.join(timeout=5)

        return cancel


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off meanwhile: reading a summary of 10,000 libraries makes
    ~120,000 objects, none of them garbage, and the collections they would set off (each walking every
    object of the process) took longer than the reading itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _warm(opened: OpenedLibrary, terms: int) -> None:
    """Cache the commonest terms' postings of a just-opened bundle (a background thread)."""
    if opened.closing.wait(WARM_DELAY_SECONDS):  # the first answer first: it opened this bundle
        return
    started = time.monotonic()
    try:
        done = opened.searcher.warm(terms, opened.closing, pause=WARM_PAUSE_SECONDS)
    except Exception as exc:  # the bundle closed under it, or a read failed: searches read on demand
        if not opened.closing.is_set():
            log.debug("warming %s/%s stopped: %s", opened.entry.library_id, opened.entry.version, exc)
        return
    log.debug(
        "%s/%s: %d terms' postings cached in %.2f s",
        opened.entry.library_id,
        opened.entry.version,
        done,
        time.monotonic() - started,
    )


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


def _key(entry: VersionEntry) -> tuple[str, str, str]:
    return (entry.library_id, entry.version, entry.build_id or "")


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
