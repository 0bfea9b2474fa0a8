"""The open bundles of a catalogue: opened (verified) on first use, least recently used closed past
``max_open``, replaced builds retired after a grace time, leases, cache shares, and which bundles the
warm-up (``warmup``) is asked to warm.

A library version is opened the first time a request searches or reads it: every file is checked against
the manifest's sha256 list (``verify_bundle``) *before* whoosh unpickles anything, then the index is
opened without mmap and a ``BundleSearcher`` built over it. The result is cached; concurrent first
requests for the same version wait on a per-version lock, so it is opened once. A version that fails to
open is remembered with its reason and reported, while every other library keeps serving.

Why ``use_mmap=False``: whoosh's mmap mode still copies the terms and postings of the segment into the
heap for each searcher (~50 ms and RAM equal to their size), while without mmap a searcher costs ~0.3 ms
and almost no memory. A non-mmap searcher must never be shared between threads (its file position
races) and MCP tools run in worker threads, so ``BundleSearcher`` opens one per call.

The pool logs with the catalogue's logger (``Catalog`` hands it over): its lines (a bundle that cannot
open, one closed past --max-open) are the catalogue's, which operators filter as
``docbundle.server.catalog``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from docbundle.bundle.errors import BundleError
from docbundle.bundle.summary import entry_from_manifest

from ..errors import LibraryUnavailableError
from ..observe import span
from .entries import OpenedLibrary, VersionEntry, relative
from .settings import CatalogSettings
from .warmup import Warmer

# The search caches of every open bundle together hold at most this many estimated bytes of postings,
# and as many of phrase positions: shared equally among the open bundles, none below the floor.
CACHE_BUDGET_BYTES = 16 * 1024 * 1024
CACHE_FLOOR_BYTES = 512 * 1024

#: What a catalogue tells its listeners: a bundle verified and opened, one that failed to open or stopped
#: serving (its reason is logged), and a reload that changed what is served (with no entry).
Event = Literal["opened", "failed", "reloaded"]
Key = tuple[str, str, str]  # (library, version, build id)


def key_of(entry: VersionEntry) -> Key:
    """The pool's key of an entry: a request that resolved an entry before a reload still gets the build
    it resolved, never its successor."""
    return (entry.library_id, entry.version, entry.build_id or "")


@dataclass(frozen=True)
class Expiring:
    """An opened bundle or a lease that requests in flight may still use: closed once ``due`` (a
    ``time.monotonic`` reading) has passed."""

    due: float
    opened: OpenedLibrary | None = None
    lease: int | None = None

    def close(self) -> None:
        """Close the bundle and the lease's descriptor."""
        if self.opened is not None:
            self.opened.close()
        if self.lease is not None:
            os.close(self.lease)


class Pool:
    """The bundles of one catalogue held open, and the leases of its checked versions."""

    def __init__(
        self,
        root: Path,
        settings: CatalogSettings,
        leases: dict[Path, int],
        log: logging.Logger,
        tell: Callable[[Event, VersionEntry | None], None],
    ) -> None:
        self.root = root
        self.settings = settings
        self._log = log
        self._tell = tell
        self._leases = dict(leases)
        # In order of use, least recent first: past ``max_open`` the first ones are retired.
        self._opened: OrderedDict[Key, OpenedLibrary] = OrderedDict()
        self._failed: dict[Key, str] = {}
        self._retired: list[OpenedLibrary] = []  # opened, then marked failed: closed at close()
        # Replaced by a reload or evicted: closed (and their leases released) once due, so requests in
        # flight finish on the build they started with.
        self._expiring: list[Expiring] = []
        self._guard = threading.Lock()
        self._key_locks: dict[Key, threading.Lock] = {}
        # The one warm-up thread and its queue (a serving catalogue's; none with warm_terms 0).
        self._warmer = (
            Warmer(settings.warm_terms, settings.max_open, log) if settings.warm_terms > 0 else None
        )
        self.closed = False

    # -- leases ---------------------------------------------------------------------------------------

    def adopt(self, leases: dict[Path, int]) -> bool:
        """Keep the leases a reading took (one already held is closed: taken again since an earlier
        reading); all of them closed when the pool is closed. Whether the pool still serves."""
        extra: list[int] = []
        with self._guard:
            serving = not self.closed
            for path, fd in leases.items():
                if not serving or path in self._leases:
                    extra.append(fd)
                else:
                    self._leases[path] = fd
        for fd in extra:
            os.close(fd)
        return serving

    def retire(self, live: set[Key], leased: set[Path | None], now: float) -> None:
        """After a reload: the builds no longer served, and the leases of bundles no longer checked,
        closed once ``retire_after`` has passed (requests in flight finish on them)."""
        due = now + self.settings.retire_after
        with self._guard:
            for key in [k for k in self._opened if k not in live]:
                replaced = self._opened.pop(key)
                replaced.closing.set()  # no more warm-up: it left the pool
                self._expiring.append(Expiring(due, opened=replaced))
            for key in [k for k in self._failed if k not in live]:
                del self._failed[key]
            for path in [p for p in self._leases if p not in leased]:
                self._expiring.append(Expiring(due, lease=self._leases.pop(path)))

    # -- state ----------------------------------------------------------------------------------------

    def state(self, key: Key) -> tuple[Literal["ready", "failed"] | None, str | None]:
        """``ready`` (open), ``failed`` with its reason, or None (not opened yet)."""
        if key in self._opened:
            return "ready", None
        if key in self._failed:
            return "failed", self._failed[key]
        return None, None

    def held(self) -> tuple[int, int]:
        """The bundles this process holds open (serving, or replaced and finishing requests in flight),
        and the bytes of their files."""
        with self._guard:
            held = [*self._opened.values(), *self._retired, *(x.opened for x in self._expiring if x.opened)]
        return len(held), sum(f.size for lib in held for f in lib.manifest.files)

    def open_count(self) -> int:
        """Bundles open now: in use, and retired but not closed yet."""
        with self._guard:
            return len(self._opened) + sum(1 for x in self._expiring if x.opened is not None)

    # -- opening --------------------------------------------------------------------------------------

    def open(self, entry: VersionEntry, *, warm: bool = True) -> OpenedLibrary:
        """Open the bundle of a checked entry once, whatever the number of concurrent callers; raises
        LibraryUnavailableError with the reason.

        A serving catalogue warms the bundle (``warmup``): at once when ``warm``, else (a search across
        libraries opened it) when a request uses it again while it is open."""
        key = key_of(entry)
        opened = self._opened.get(key)
        if opened is not None:
            self._touch(key)
            self._warm(opened)
            return opened
        with self._key_lock(key):
            opened = self._opened.get(key)
            if opened is not None:
                self._warm(opened)
                return opened
            reason = entry.problem or self._failed.get(key)
            if reason is None:
                if self.closed:
                    raise LibraryUnavailableError(
                        entry.library_id, entry.version, "the server is shutting down"
                    )
                try:
                    with span("bundle.open", library=entry.library_id, version=entry.version):
                        opened = self._open(entry)
                except Exception as exc:
                    reason = self._reason(entry, exc)
                    self._failed[key] = reason
                    self._log.error("cannot open %s/%s: %s", entry.library_id, entry.version, reason)
                    self._tell("failed", entry)
                else:
                    with self._guard:
                        self._opened[key] = opened
                    self._evict()
                    self._share_caches()
                    if warm:
                        self._warm(opened)
                    self._tell("opened", entry)
                    return opened
        raise LibraryUnavailableError(
            entry.library_id, entry.version, reason, pin=entry.pin_refused and reason == entry.problem
        )

    def mark_failed(self, entry: VersionEntry, reason: str) -> None:
        """Stop serving an opened version whose data went bad (kept open for requests in flight until
        the pool closes)."""
        key = key_of(entry)
        with self._guard:
            opened = self._opened.pop(key, None)
            if opened is not None:
                opened.closing.set()  # no more warm-up: it left the pool
                self._retired.append(opened)
            self._failed[key] = reason
        self._log.error("%s/%s stopped serving: %s", entry.library_id, entry.version, reason)
        self._tell("failed", entry)

    def _warm(self, opened: OpenedLibrary) -> None:
        """Ask the warm-up thread to warm an open bundle (once per opening; nothing without warm-up)."""
        if self._warmer is not None and not opened.warm_asked:
            self._warmer.ask(opened, opened.opened_at)

    def _touch(self, key: Key) -> None:
        """Mark an opened bundle as just used."""
        with self._guard:
            if key in self._opened:
                self._opened.move_to_end(key)

    def _evict(self) -> None:
        """Retire the least recently used bundles past ``max_open``: closed once ``evict_after`` has
        passed (requests in flight finish on them), then opened again, verified, on their next use."""
        now = time.monotonic()
        max_open = self.settings.max_open
        with self._guard:
            while len(self._opened) > max(max_open, 1):
                key, lib = self._opened.popitem(last=False)
                lib.closing.set()  # its warm-up stops, or is skipped: it left the pool
                self._expiring.append(Expiring(now + self.settings.evict_after, opened=lib))
                self._log.debug("%s/%s closed: past --max-open %d", key[0], key[1], max_open)
        self.expire(now)

    def _share_caches(self) -> None:
        """Give each open bundle's search caches an equal share of ``CACHE_BUDGET_BYTES``."""
        with self._guard:
            opened = list(self._opened.values())
        share = max(CACHE_BUDGET_BYTES // max(len(opened), 1), CACHE_FLOOR_BYTES)
        for lib in opened:
            lib.searcher.limit_caches(share, share)

    @contextmanager
    def _key_lock(self, key: Key) -> Iterator[None]:
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
        return OpenedLibrary(entry, bundle, searcher)

    def _reason(self, entry: VersionEntry, exc: Exception) -> str:
        if isinstance(exc, BundleError):
            return relative(str(exc), self.root)
        # Not a bundle error: a bug or an environment problem. Keep the traceback in the log.
        self._log.exception("unexpected error opening %s/%s", entry.library_id, entry.version)
        return relative(f"the bundle cannot be opened ({type(exc).__name__}: {exc})", self.root)

    # -- closing --------------------------------------------------------------------------------------

    def expire(self, now: float | None = None) -> int:
        """Close the replaced builds whose grace time is over; returns how many were closed."""
        now = time.monotonic() if now is None else now
        with self._guard:
            due = [x for x in self._expiring if x.due <= now]
            self._expiring = [x for x in self._expiring if x.due > now]
        for item in due:
            item.close()
        return len(due)

    def close(self) -> None:
        """Close every opened bundle and lease; later opens fail."""
        if self._warmer is not None:
            self._warmer.stop()
        with self._guard:
            self.closed = True
            opened, self._opened = [*self._opened.values(), *self._retired], OrderedDict()
            self._retired = []
            leases, self._leases = list(self._leases.values()), {}
            expiring, self._expiring = self._expiring, []
        for lib in opened:
            lib.close()
        for fd in leases:
            os.close(fd)
        for item in expiring:
            item.close()
