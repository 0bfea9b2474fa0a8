"""The catalogue of served libraries: manifests read at start-up, bundles opened (verified) on first use.

Start-up reads, for every ``<root>/<libraryId>/<version>/``, the ``CURRENT`` pointer and the manifest of
the bundle it names, nothing else: no hashing and no whoosh, so a server with many large bundles starts
at once. A library version is opened the first time a request needs it: every file is checked against
the manifest's sha256 list (``verify_bundle``) *before* whoosh unpickles anything, then the index is
opened without mmap and a ``BundleSearcher`` built over it. The result is cached; concurrent first
requests for the same version wait on a per-version lock, so it is opened once. A version that fails to
open is remembered with its reason and reported, while every other library keeps serving.

Why ``use_mmap=False``: whoosh's mmap mode still copies the terms and postings of the segment into the
heap for each searcher (~50 ms and RAM equal to their size), while without mmap a searcher costs ~0.3 ms
and almost no memory. A non-mmap searcher must never be shared between threads (its file position
races) and MCP tools run in worker threads, so ``BundleSearcher`` opens one per call.

A lock file (``bundles.lock``, see ``lockfile``) pins what may be served: only the versions it lists,
and each only with the content hash (and manifest bytes) it names.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar, cast

from docbundle.bundle.errors import BundleError, BundleFormatError
from docbundle.bundle.layout import BUILD_ID_RE, CURRENT, LIBRARY_ID_RE, VERSION_RE, read_current, take_lease
from docbundle.bundle.manifest import MAX_MANIFEST_BYTES, Manifest, decode_manifest, manifest_bytes
from docbundle.bundle.summary import (
    SUMMARY_NAME,
    SummaryEntry,
    entry_from_manifest,
    read_summary,
    write_summary_locked,
)

from .encoder import QueryEncoder
from .errors import (
    MAX_LIBRARY_ID_CHARS,
    MAX_VERSION_CHARS,
    InvalidIdError,
    LibraryUnavailableError,
    UnknownLibraryError,
    UnknownVersionError,
    echo,
)
from .lockfile import LockFile
from .observe import span
from .words import NextStep

if TYPE_CHECKING:
    from docbundle.bundle.reader import Bundle
    from docbundle.bundle.search import BundleSearcher

log = logging.getLogger(__name__)

State = Literal["available", "ready", "failed"]
#: What a catalogue tells its listeners: a bundle verified and opened, one that failed to open or stopped
#: serving (its reason is logged), and a reload that changed what is served (with no entry).
Event = Literal["opened", "failed", "reloaded"]
Listener = Callable[[Event, "VersionEntry | None"], None]
RETIRE_AFTER_SECONDS = 60.0  # a build replaced by a reload stays open this long for requests in flight
DEFAULT_RELOAD_SECONDS = 2.0  # how often serve looks for new builds (--reload-interval; 0 = never)
WARM_TERMS = 1_000  # most frequent terms whose postings a server caches in the background per opened bundle
WARM_DELAY_SECONDS = 1.0  # the warm-up starts this long after the bundle opened (the first answer goes first)
WARM_PAUSE_SECONDS = 0.002  # between two terms of the warm-up, for the searches running meanwhile
DEFAULT_ROUTE_LIBRARIES = 10  # libraries a search across libraries searches, chosen by the routing index
MAX_ROUTE_LIBRARIES = 100  # the most --route-libraries may ask for
MAX_READS = 3  # a version whose CURRENT moved while it was read is read again, this many times at most
# Bundles a server keeps open at once (--max-open): past it the least recently used one is closed
# (after RETIRE_AFTER_SECONDS, for the requests still reading it) and opened again, verified, when asked.
DEFAULT_MAX_OPEN = 32
# The search caches of every open bundle together hold at most this many estimated bytes of postings,
# and as many of phrase positions: shared equally among the open bundles, none below the floor.
CACHE_BUDGET_BYTES = 16 * 1024 * 1024
CACHE_FLOOR_BYTES = 512 * 1024
T = TypeVar("T")


# -- catalogue entries ------------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionEntry:
    """One library version as found at start-up: its bundle and what its manifest says (the catalogue
    summary's entry for it: ``docbundle.bundle.summary``), or why it cannot be served."""

    library_id: str
    version: str
    bundle_path: Path | None
    meta: SummaryEntry | None
    problem: str | None = None  # set when the version was refused at start-up
    # No CURRENT yet: a first build or install between taking its lock and publishing (or one that
    # never finished). Listed at start-up with its problem; a reload lists it only once it publishes.
    pending: bool = False
    # Refused by the lock file only: the bundle is intact, its pin names other content.
    pin_refused: bool = False

    @property
    def build_id(self) -> str | None:
        """The build id of the bundle ``CURRENT`` names (None when unknown)."""
        return self.meta.build_id if self.meta else None

    @property
    def content_hash(self) -> str | None:
        """The content hash the manifest records (None when unknown)."""
        return self.meta.content_hash if self.meta else None

    def read_manifest(self) -> Manifest | None:
        """The whole manifest of this version's bundle, read from disk now (None when unreadable or no
        longer the one listed); for the rare needs past the summary (document completions)."""
        if self.bundle_path is None or self.meta is None:
            return None
        try:
            manifest = decode_manifest(manifest_bytes(self.bundle_path))
        except (BundleError, OSError):
            return None
        return manifest if manifest.build.build_id == self.meta.build_id else None


@dataclass(frozen=True)
class LibraryEntry:
    """One library: its versions (default first) and the metadata of its default version."""

    id: str
    versions: dict[str, VersionEntry]
    default_version: str

    @property
    def default(self) -> VersionEntry:
        """The version served when a request names none."""
        return self.versions[self.default_version]

    def _manifest(self) -> SummaryEntry | None:
        if self.default.meta is not None:
            return self.default.meta
        return next((v.meta for v in self.versions.values() if v.meta is not None), None)

    @property
    def name(self) -> str:
        """Display name from the manifest (the id when no manifest could be read)."""
        m = self._manifest()
        return m.library.name if m and m.library.name else self.id

    @property
    def description(self) -> str:
        """One-line description from the manifest."""
        m = self._manifest()
        return m.library.description if m else ""

    @property
    def category(self) -> str:
        """Category from the manifest."""
        m = self._manifest()
        return m.library.category if m else ""


@dataclass
class OpenedLibrary:
    """A verified, opened bundle and its searcher."""

    entry: VersionEntry
    bundle: Bundle
    searcher: BundleSearcher
    _cache: dict[str, object] = field(default_factory=dict, repr=False)
    _cache_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Set when the bundle closes: a background warm-up of the searcher's caches stops at its next term.
    closing: threading.Event = field(default_factory=threading.Event, repr=False)

    def close(self) -> None:
        """Stop any warm-up, then close the bundle's files."""
        self.closing.set()
        self.bundle.close()

    @property
    def manifest(self) -> Manifest:
        """The verified manifest."""
        return self.bundle.manifest

    def cached(self, key: str, make: Callable[[], T]) -> T:
        """A value computed once per opened library and kept as long as it is open."""
        with self._cache_lock:
            if key not in self._cache:
                self._cache[key] = make()
            return cast(T, self._cache[key])


# -- loading ----------------------------------------------------------------------------------------


def _read_manifest(bundle: Path, lease: int | None) -> tuple[Manifest, str]:
    """Decode a bundle's manifest and hash its bytes (one read, so both describe the same file)."""
    if lease is None:
        data = manifest_bytes(bundle)
    else:
        size = os.fstat(lease).st_size
        if size > MAX_MANIFEST_BYTES:
            raise BundleFormatError(
                f"{bundle.name}/manifest.json is over the {MAX_MANIFEST_BYTES} byte limit"
            )
        data = os.pread(lease, size, 0)
    return decode_manifest(data), hashlib.sha256(data).hexdigest()


def _looks_like_version_dir(vdir: Path) -> bool:
    """A version directory holds CURRENT, builds, or the indexer's lock/temp entries."""
    try:
        names = [p.name for p in vdir.iterdir()]
    except OSError:
        return False
    return any(
        n == CURRENT or n == ".lock" or n.startswith(".tmp-") or BUILD_ID_RE.fullmatch(n) for n in names
    )


def _current_text(vdir: Path) -> str:
    """What ``CURRENT`` holds now, raw and stripped ("" when absent or unreadable): only compared, never
    served (``signature`` and the re-read of a version whose CURRENT moved while it was read)."""
    try:
        fd = os.open(vdir / CURRENT, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        return os.read(fd, 200).decode("utf-8", errors="replace").strip()
    except OSError:
        return ""
    finally:
        os.close(fd)


class _Reading:
    """One (re)load's reading of the bundles folder: the summary's entries it may reuse, the leases it
    took, the signature it saw, and whether the summary proved stale (missing, or an entry off)."""

    def __init__(self, root: Path, lock: LockFile | None) -> None:
        self.root = root
        self.lock = lock
        # With a lock file every manifest is read: a pin names the manifest's own sha256.
        found = None if lock is not None else read_summary(root)
        self.known = {e.key: e for e in found or ()}
        self.stale = found is None and lock is None
        self.leases: dict[Path, int] = {}
        self.signature: list[tuple[str, str, str]] = []

    def entries(self) -> list[SummaryEntry]:
        """The summary entries of what was read (for writing the summary back)."""
        return list(self.known.values())

    def load_version(self, library_id: str, version: str, current: str) -> VersionEntry:
        """Read one version; read it again when its CURRENT moved meanwhile (a publish, then a prune, ran).

        A reading taken while a writer replaced CURRENT may describe a build that the writer's prune is
        deleting (no lease was taken yet): its problem would be the race's, not the bundle's.
        """
        vdir = self.root / library_id / version
        before = current
        for _ in range(MAX_READS):
            entry = self._read_version(library_id, version)
            after = _current_text(vdir)
            if after == before:
                break
            before = after
            if entry.bundle_path is not None and entry.bundle_path in self.leases:
                os.close(self.leases.pop(entry.bundle_path))
        self.signature.append((library_id, version, before))
        return entry

    def _read_version(self, library_id: str, version: str) -> VersionEntry:
        root = self.root
        vdir = root / library_id / version
        where = f"{library_id}/{version}"
        try:
            build_id = read_current(vdir)
        except BundleError as exc:
            return VersionEntry(library_id, version, None, None, _relative(str(exc), root))
        if build_id is None:
            return VersionEntry(
                library_id,
                version,
                None,
                None,
                f"no bundle built yet in {where} (no CURRENT file)",
                pending=True,
            )
        bundle = vdir / build_id
        # The lease keeps builds and prunes from deleting this bundle while the server runs. It opens
        # the manifest, so a build CURRENT names but that is missing shows here, without another look.
        lease = take_lease(bundle)
        if lease is None and not bundle.is_dir():
            return VersionEntry(
                library_id, version, None, None, f"{where}/CURRENT names {build_id}, which does not exist"
            )
        if lease is not None:
            self.leases[bundle] = lease
        meta = self.known.get((library_id, version))
        if meta is None or meta.build_id != build_id:
            # Not in the summary, or the summary names another build than CURRENT: never trusted.
            self.stale = self.stale or self.lock is None
            try:
                manifest, manifest_sha = _read_manifest(bundle, lease)
            except BundleError as exc:
                return VersionEntry(library_id, version, bundle, None, _relative(str(exc), root))
            except OSError as exc:
                return VersionEntry(
                    library_id, version, bundle, None, f"{where}/{build_id}: unreadable manifest: {exc}"
                )
            meta = entry_from_manifest(manifest, manifest_sha)
            problem = _check_manifest(meta, library_id, version, build_id)
            if problem is None:
                self.known[(library_id, version)] = meta
            else:
                self.known.pop((library_id, version), None)
        else:
            problem = None
        if problem is None and self.lock is not None:
            problem = _check_pin(self.lock, library_id, version, meta)
            if problem is not None:
                return VersionEntry(library_id, version, bundle, meta, problem, pin_refused=True)
        return VersionEntry(library_id, version, bundle, meta, problem)


def _check_manifest(meta: SummaryEntry, library_id: str, version: str, build_id: str) -> str | None:
    """The manifest must describe the directory it sits in (a misplaced bundle would mislabel answers)."""
    if meta.library.id != library_id:
        return f"the manifest is for library {meta.library.id!r}, but it sits under {library_id!r}"
    if meta.version.name != version:
        return f"the manifest is for version {meta.version.name!r}, but it sits under {version!r}"
    if meta.build_id != build_id:
        return f"the manifest's build id {meta.build_id} differs from its directory {build_id}"
    return None


def _check_pin(lock: LockFile, library_id: str, version: str, meta: SummaryEntry) -> str | None:
    pin = lock.pins.get((library_id, version))
    name = lock.path.name
    if pin is None:
        return f"refused: {library_id}/{version} is not pinned in the lock file {name}"
    if pin.content_hash != meta.content_hash:
        return (
            f"refused: content hash {meta.content_hash[:12]}… does not match "
            f"{pin.content_hash[:12]}… pinned in the lock file {name}"
        )
    if pin.manifest_sha256 is not None and pin.manifest_sha256 != meta.manifest_sha256:
        return f"refused: manifest.json does not match the manifest_sha256 pinned in the lock file {name}"
    return None


def _relative(message: str, root: Path) -> str:
    """Strip the bundles directory from a message (server paths are none of a client's business)."""
    for prefix in {str(root.resolve()), str(root)}:
        message = message.replace(prefix + os.sep, "")
    return message


def _built_at(v: VersionEntry) -> tuple[str, str]:
    return (v.meta.built_at if v.meta else "", v.version)


def _pick_default(versions: dict[str, VersionEntry]) -> str:
    """The manifest marked latest (newest build wins a tie), else "latest", else the newest build."""
    loaded = [v for v in versions.values() if v.meta is not None]
    marked = [v for v in loaded if v.meta is not None and v.meta.version.latest]
    if marked:
        return max(marked, key=_built_at).version
    if "latest" in versions:
        return "latest"
    if loaded:
        return max(loaded, key=_built_at).version
    return sorted(versions)[0]


def _order(versions: dict[str, VersionEntry], default: str) -> dict[str, VersionEntry]:
    """Default first, then the newest builds."""
    rest = sorted((v for v in versions.values() if v.version != default), key=_built_at, reverse=True)
    return {default: versions[default], **{v.version: v for v in rest}}


def _sorted_dirs(path: Path, pattern: re.Pattern[str]) -> list[os.DirEntry[str]]:
    """The sub-folders of ``path`` whose name matches ``pattern``, sorted (none when unreadable)."""
    try:
        found = [e for e in os.scandir(path) if pattern.fullmatch(e.name) and e.is_dir()]
    except OSError:
        return []
    return sorted(found, key=lambda e: e.name)


def _scan(
    root: Path, lockfile: LockFile | None, listed: Collection[tuple[str, str]] | None = None
) -> tuple[dict[str, LibraryEntry], _Reading]:
    """Every library version under ``root`` (CURRENT checked, leases taken), nothing opened; what each
    manifest says comes from the catalogue summary when its entry names the build CURRENT does.

    ``listed`` (a reload's): the versions served so far. A version without CURRENT that is not among
    them is left out: a writer is at work there, and it is listed once its CURRENT names a complete
    build (announcing it earlier would send clients to a library that cannot answer yet).
    """
    libraries: dict[str, LibraryEntry] = {}
    reading = _Reading(root, lockfile)
    for lib_dir in _sorted_dirs(root, LIBRARY_ID_RE):
        versions: dict[str, VersionEntry] = {}
        for vdir in _sorted_dirs(Path(lib_dir.path), VERSION_RE):
            current = _current_text(Path(vdir.path))
            if not current and not _looks_like_version_dir(Path(vdir.path)):
                reading.signature.append((lib_dir.name, vdir.name, current))
                continue
            entry = reading.load_version(lib_dir.name, vdir.name, current)
            if entry.pending and listed is not None and (entry.library_id, entry.version) not in listed:
                log.debug("%s/%s has no CURRENT yet: listed once it publishes", lib_dir.name, vdir.name)
                continue
            versions[vdir.name] = entry
        if not versions:
            # Not a library directory (the bundles folder also holds config and query files).
            continue
        default = _pick_default(versions)
        libraries[lib_dir.name] = LibraryEntry(lib_dir.name, _order(versions, default), default)
    served = {(e.library_id, e.version) for lib in libraries.values() for e in lib.versions.values()}
    for key in [k for k in reading.known if k not in served]:
        reading.stale = reading.stale or lockfile is None
        del reading.known[key]
    return libraries, reading


def signature(root: Path) -> tuple[tuple[str, str, str], ...]:
    """What a reload would change, read cheaply: every ``<library>/<version>/CURRENT`` and its content.

    A new build (CURRENT rewritten), a library or version added or removed all change it; nothing in a
    bundle is read. A folder that cannot be listed counts as empty.
    """
    return tuple(
        (lib.name, v.name, _current_text(Path(v.path)))
        for lib in _sorted_dirs(root, LIBRARY_ID_RE)
        for v in _sorted_dirs(Path(lib.path), VERSION_RE)
    )


@dataclass(frozen=True)
class CatalogChange:
    """What a reload changed: libraries added or removed, library versions whose build changed."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    updated: tuple[tuple[str, str], ...] = ()  # (library id, version) now served from another build

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.updated)

    def describe(self) -> str:
        """One line for the log."""
        parts = []
        if self.added:
            parts.append("added " + ", ".join(self.added))
        if self.removed:
            parts.append("removed " + ", ".join(self.removed))
        if self.updated:
            parts.append("new build of " + ", ".join(f"{lib}/{v}" for lib, v in self.updated))
        return "; ".join(parts) or "no change"


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
        seen: tuple[tuple[str, str, str], ...] | None = None,
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
        self._closed = False
        # What the bundles folder looked like when read (``signature``): given by ``load``, which read it.
        self._signature = signature(root) if seen is None else seen
        # Called (in the thread where it happened) with each event; a serving process's metrics listen.
        self.listeners: list[Listener] = []

    @classmethod
    def load(
        cls, root: Path, *, lock: Path | None = None, retire_after: float = RETIRE_AFTER_SECONDS
    ) -> Catalog:
        """Read every library version's CURRENT under ``root`` and what its manifest says (from the
        catalogue summary when it is current, else from the manifest, and then the summary is written
        back when the folder is writable); nothing is opened."""
        if not root.is_dir():
            raise FileNotFoundError(f"bundles directory {root} does not exist or is not a directory")
        lockfile = LockFile.load(lock) if lock is not None else None
        libraries, reading = _scan(root, lockfile)
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
            seen=tuple(reading.signature),
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
        """The library with this id; raises InvalidIdError or UnknownLibraryError (listing the ids)."""
        lib_id = normalize_library_id(library_id)
        try:
            return self._libraries[lib_id]
        except KeyError:
            raise UnknownLibraryError(lib_id, self.library_ids()) from None

    def resolve(self, library_id: str, version: str | None = None) -> VersionEntry:
        """The entry for a library version (``None`` or an absent "latest" mean the default version)."""
        lib = self.library(library_id)
        if version is None or not version.strip():
            return lib.default
        version = version.strip()
        if len(version) > MAX_VERSION_CHARS or not VERSION_RE.fullmatch(version):
            raise InvalidIdError(
                f"invalid version {echo(version)}: versions are letters, digits, '.', '_' and '-', at most "
                f"{MAX_VERSION_CHARS} characters. Versions of {lib.id!r}: {', '.join(lib.versions)}"
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
        """Open the bundle of a catalogue entry once, whatever the number of concurrent callers."""
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
        """Retire the least recently used bundles past ``max_open``: closed once ``retire_after`` has
        passed (requests in flight finish on them), then opened again, verified, on their next use."""
        now = time.monotonic()
        with self._guard:
            while len(self._opened) > max(self.max_open, 1):
                key, lib = self._opened.popitem(last=False)
                self._expiring.append((now + self.retire_after, lib, None))
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
        if entry_from_manifest(bundle.manifest, entry.meta.manifest_sha256) != entry.meta:
            bundle.close()
            raise BundleError(
                "the bundle's manifest changed after the server started, or the catalogue summary "
                f"({SUMMARY_NAME}) does not describe it; delete {SUMMARY_NAME} and restart the server"
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
            return _relative(str(exc), self.root)
        # Not a bundle error: a bug or an environment problem. Keep the traceback in the log.
        log.exception("unexpected error opening %s/%s", entry.library_id, entry.version)
        return _relative(f"the bundle cannot be opened ({type(exc).__name__}: {exc})", self.root)

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
        """Whether a CURRENT file, a library or a version changed since the last (re)load (cheap)."""
        return signature(self.root) != self._signature

    def reload(self) -> CatalogChange:
        """Serve what the bundles folder holds now: new libraries and versions, new builds, removals.

        A version whose build did not change keeps its entry, its opened bundle and its lease. One that
        now points at another build is served from the new one at the next request; the old one stays
        open and leased for ``retire_after`` seconds (requests in flight finish on it, and a prune
        cannot delete its files meanwhile), then is closed. The lock file read at start still applies.
        """
        if self._closed:
            return CatalogChange()
        with self._guard:
            listed = {(e.library_id, e.version) for e in self.entries()}
        scanned, reading = _scan(self.root, self.lock, listed)
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
                    if before is not None and _same(before, entry):
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
            held = {e.bundle_path for lib in libraries.values() for e in lib.versions.values()}
            for path in [p for p in self._leases if p not in held]:
                self._expiring.append((now + self.retire_after, None, self._leases.pop(path)))
            added = tuple(sorted(set(libraries) - set(old)))
            removed = tuple(sorted(set(old) - set(libraries)))
            self._libraries = libraries
            self.generation += 1
            self._signature = tuple(reading.signature)
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


def _write_back(reading: _Reading) -> None:
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
            f"invalid libraryId {echo(library_id)}: ids are lowercase letters, digits and '-' "
            f"(pattern ^[a-z0-9][a-z0-9-]*$), at most {MAX_LIBRARY_ID_CHARS} characters.",
            NextStep("valid_ids", "list_libraries"),
        )
    return lib_id
