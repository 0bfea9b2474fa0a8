"""The catalogue's entries and how they are read from a bundles folder (``Catalog.load`` and ``reload``).

``scan`` reads a folder. With a readable catalogue summary (``docbundle.bundle.summary``) and no lock
file, it lists the folder once and takes every library the summary names from it, unchecked: no
``CURRENT`` is read and no lease taken, so start-up costs the same at 5 libraries as at 10,000. A library
folder the summary does not name is read in full. ``check_library`` then checks an unchecked library on
its first use (listed on a page, resolved, opened): each version's ``CURRENT``, then its manifest, read
through the version's lease; checked against the folder's names (and the lock file's pins). A checked
entry is always the manifest's, never the summary's: the summary only says which libraries there are and
what an unchecked one claims (a summary entry that differs is rewritten). Without a summary, or with a lock file (a pin names the
manifest's own sha256), every version is read and checked at once, as a check would.

``stamp`` tells cheaply (two ``stat`` calls) whether a reload may find a change; ``CatalogChange`` says
what a reload changed. Nothing here opens a bundle: ``catalog`` does, on first use.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from docbundle.bundle.errors import BundleError
from docbundle.bundle.layout import (
    BUILD_ID_RE,
    CURRENT,
    LIBRARY_ID_RE,
    MAX_CURRENT_BYTES,
    VERSION_RE,
    linked_folder,
    linked_folder_problem,
    read_current,
    take_lease,
)
from docbundle.bundle.manifest import (
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    Counts,
    LibraryInfo,
    Manifest,
    VectorsInfo,
    VersionInfo,
    decode_manifest,
    manifest_bytes,
)
from docbundle.bundle.summary import SUMMARY_NAME, SummaryEntry, entry_from_manifest, read_summary
from docbundle.bundle.untrusted import read_descriptor, read_regular

from ..lockfile import LockFile
from ..provenance import record_claim

if TYPE_CHECKING:
    from docbundle.bundle.reader import Bundle
    from docbundle.bundle.search import BundleSearcher

log = logging.getLogger(__name__)

MAX_READS = 3  # a version whose CURRENT moved while it was read is read again, this many times at most
T = TypeVar("T")


# -- catalogue entries ------------------------------------------------------------------------------


class BuildFacts(Protocol):
    """What the catalogue serves and lists of a library version's build: read from the build's own
    manifest once checked, what the summary claims before. The summary's entries (``SummaryEntry``) are
    made to this shape by ``entry_from_manifest`` and read by ``scan``; every other module of the server
    reads these fields only, so none depends on the summary's format."""

    @property
    def library(self) -> LibraryInfo: ...  # id, name, description, category
    @property
    def version(self) -> VersionInfo: ...  # name, status, latest, lts
    @property
    def build_id(self) -> str: ...
    @property
    def content_hash(self) -> str: ...
    @property
    def built_at(self) -> str: ...  # ISO 8601 (``docbundle.bundle.times``)
    @property
    def manifest_sha256(self) -> str: ...  # of the manifest's bytes, as the catalogue read them
    @property
    def counts(self) -> Counts: ...
    @property
    def safety_findings(self) -> int: ...
    @property
    def safety_kinds(self) -> list[str]: ...
    @property
    def obtained(self) -> dict[str, int]: ...
    @property
    def vectors(self) -> VectorsInfo | None: ...
    @property
    def languages(self) -> list[str]: ...  # of the page titles (``resolve``)


@dataclass(frozen=True)
class VersionEntry:
    """One library version as found at start-up: its bundle and what its manifest says (``BuildFacts``),
    or why it cannot be served."""

    library_id: str
    version: str
    bundle: Path | None  # the bundle's folder (None when unknown, or when ``root`` makes it)
    meta: BuildFacts | None
    problem: str | None = None  # set when the version was refused at start-up
    # No CURRENT yet: a first build or install between taking its lock and publishing (or one that
    # never finished). Listed at start-up with its problem; a reload lists it only once it publishes.
    pending: bool = False
    # Refused by the lock file only: the bundle is intact, its pin names other content.
    pin_refused: bool = False
    # False for an entry taken from the catalogue summary and not checked yet (no lease held, its meta
    # only what the summary claims): ``check_library`` reads its CURRENT and manifest on first use.
    checked: bool = True
    # The bundles folder of an unchecked entry: its bundle's path is made from it when first asked for
    # (a start over 10,000 libraries makes no path at all).
    root: Path | None = None
    # What ``docbundle install`` recorded of the bundle's provenance (``provenance.record_claim``), read
    # when the version is checked: a claim of whoever can write the folder, shown as such.
    provenance: str | None = None

    @cached_property
    def bundle_path(self) -> Path | None:
        """The folder of the bundle (None when unknown)."""
        if self.bundle is None and self.root is not None and self.meta is not None:
            return self.root.joinpath(self.library_id, self.version, self.meta.build_id)
        return self.bundle

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

    @property
    def checked(self) -> bool:
        """Whether every version was checked against its CURRENT (``check_library``)."""
        return all(v.checked for v in self.versions.values())

    def _manifest(self) -> BuildFacts | None:
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
    # Set when the bundle leaves the pool (closed past --max-open, replaced, failed) or closes: its
    # warm-up (``warmup``) stops at its next term, or never starts.
    closing: threading.Event = field(default_factory=threading.Event, repr=False)
    warm_asked: bool = field(default=False, repr=False)  # its warm-up was asked (once per opening)
    opened_at: float = field(default_factory=time.monotonic, repr=False)  # when (``time.monotonic``)

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
    """Decode a bundle's manifest and hash its bytes (one read, so both describe the same file): through
    the lease's descriptor (a regular file: ``take_lease``), else read safely by path (a prune held the
    lock a moment ago); at most ``MAX_MANIFEST_BYTES`` either way."""
    if lease is None:
        data = manifest_bytes(bundle)
    else:
        data = read_descriptor(lease, MAX_MANIFEST_BYTES, bundle / MANIFEST_NAME)
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
    served (a reload's look at a version in use, and the re-read of one whose CURRENT moved while it
    was read)."""
    try:
        data = read_regular(vdir / CURRENT, MAX_CURRENT_BYTES)
    except (OSError, BundleError):  # missing, or not a CURRENT: reading it (read_current) says why
        return ""
    return data.decode("utf-8", errors="replace").strip()


class Reading:
    """One reading of the bundles folder (a load, a reload, a check): the summary's entries it may
    reuse, the leases it took, and whether the summary proved stale (missing, or an entry off)."""

    def __init__(self, root: Path, lock: LockFile | None, found: Iterable[SummaryEntry] | None) -> None:
        self.root = root
        self.lock = lock
        # With a lock file every manifest is read: a pin names the manifest's own sha256.
        self.known = {e.key: e for e in found or ()} if lock is None else {}
        self.stale = found is None and lock is None
        self.leases: dict[Path, int] = {}

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
        return entry

    def _read_version(self, library_id: str, version: str) -> VersionEntry:
        root = self.root
        vdir = root / library_id / version
        where = f"{library_id}/{version}"

        def refused(problem: str, bundle: Path | None = None, *, pending: bool = False) -> VersionEntry:
            """This version refused before its manifest was read, for ``problem``."""
            return VersionEntry(library_id, version, bundle, None, problem, pending=pending)

        link = linked_folder(root, library_id, version)
        if link is not None:
            return refused(linked_folder_problem(link))
        try:
            build_id = read_current(vdir)
        except BundleError as exc:
            return refused(relative(str(exc), root))
        if build_id is None:
            return refused(f"no bundle built yet in {where} (no CURRENT file)", pending=True)
        bundle = vdir / build_id
        link = linked_folder(root, library_id, version, build_id)
        if link is not None:
            return refused(linked_folder_problem(link))
        # The lease keeps builds and prunes from deleting this bundle while the server runs. It opens
        # the manifest, so a build CURRENT names but that is missing shows here, without another look;
        # a manifest that is not a regular file (a FIFO, a device, a link) refuses the version here.
        try:
            lease = take_lease(bundle)
        except BundleError as exc:
            return refused(relative(str(exc), root), bundle)
        if lease is None and not bundle.is_dir():
            return refused(f"{where}/CURRENT names {build_id}, which does not exist")
        if lease is not None:
            self.leases[bundle] = lease
        # The entry is always the manifest's own, never the summary's: a summary entry that names the
        # right build may still claim another name, description or counts (issue 31, item 10). The
        # manifest is read through the lease (one bounded read, ~1 ms for a normal one); a summary
        # entry that differs from it marks the summary stale, so it is rewritten from the manifests.
        claimed = self.known.get((library_id, version))
        try:
            manifest, manifest_sha = _read_manifest(bundle, lease)
        except BundleError as exc:
            return refused(relative(str(exc), root), bundle)
        except OSError as exc:
            return refused(f"{where}/{build_id}: unreadable manifest: {exc}", bundle)
        meta = entry_from_manifest(manifest, manifest_sha)
        if claimed != meta:
            # Not in the summary, or the summary misdescribes this build: it is rewritten.
            self.stale = self.stale or self.lock is None
        problem = _check_manifest(meta, library_id, version, build_id)
        if problem is None:
            self.known[(library_id, version)] = meta
        else:
            self.known.pop((library_id, version), None)
        if problem is None and self.lock is not None:
            problem = _check_pin(self.lock, library_id, version, meta)
            if problem is not None:
                return VersionEntry(library_id, version, bundle, meta, problem, pin_refused=True)
        claim = record_claim(vdir, build_id, manifest_sha) if problem is None else None
        return VersionEntry(library_id, version, bundle, meta, problem, provenance=claim)


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


def relative(message: str, root: Path) -> str:
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


def library_entry(library_id: str, versions: dict[str, VersionEntry]) -> LibraryEntry:
    """A library of these versions: its default picked, the default first, then the newest builds."""
    if len(versions) == 1:  # most libraries (and a start over 10,000 of them builds one each)
        return LibraryEntry(library_id, versions, next(iter(versions)))
    default = _pick_default(versions)
    rest = sorted((v for v in versions.values() if v.version != default), key=_built_at, reverse=True)
    return LibraryEntry(library_id, {default: versions[default], **{v.version: v for v in rest}}, default)


def _sorted_dirs(path: Path, pattern: re.Pattern[str]) -> list[os.DirEntry[str]]:
    """The sub-folders of ``path`` whose name matches ``pattern``, sorted (none when unreadable)."""
    try:
        found = [e for e in os.scandir(path) if pattern.fullmatch(e.name) and e.is_dir()]
    except OSError:
        return []
    return sorted(found, key=lambda e: e.name)


def scan(
    root: Path,
    lockfile: LockFile | None,
    listed: Collection[tuple[str, str]] | None = None,
    before: dict[str, LibraryEntry] | None = None,
) -> tuple[dict[str, LibraryEntry], Reading]:
    """Every library version under ``root``, nothing opened: from the catalogue summary, unchecked, when
    it is readable and there is no lock file; else every version read and checked (leases taken).

    ``listed`` (a reload's): the versions served so far. A version without CURRENT that is not among
    them is left out: a writer is at work there, and it is listed once its CURRENT names a complete
    build (announcing it earlier would send clients to a library that cannot answer yet).
    ``before`` (a reload's): the libraries served so far; see ``_from_summary``.
    """
    found = None if lockfile is not None else read_summary(root)
    if found is not None and all(_well_formed(e) for e in found):
        libraries, reading = _from_summary(root, found, listed, before or {})
    else:
        reading = Reading(root, lockfile, None if found is None else [e for e in found if _well_formed(e)])
        reading.stale = reading.stale or found is not None
        libraries = {}
        for lib_dir in _sorted_dirs(root, LIBRARY_ID_RE):
            lib = _read_library(reading, lib_dir, listed)
            if lib is not None:
                libraries[lib.id] = lib
    served = {(e.library_id, e.version) for lib in libraries.values() for e in lib.versions.values()}
    for key in [k for k in reading.known if k not in served]:
        reading.stale = reading.stale or lockfile is None
        del reading.known[key]
    return libraries, reading


def _well_formed(entry: SummaryEntry) -> bool:
    """A summary entry whose names can be paths of the folder (a damaged summary is rebuilt)."""
    return bool(
        LIBRARY_ID_RE.fullmatch(entry.library.id)
        and VERSION_RE.fullmatch(entry.version.name)
        and BUILD_ID_RE.fullmatch(entry.build_id)
    )


def _read_library(
    reading: Reading, lib_dir: os.DirEntry[str], listed: Collection[tuple[str, str]] | None
) -> LibraryEntry | None:
    """Every version of one library folder read and checked; None when it holds no library version
    (the bundles folder also holds config and query files)."""
    versions: dict[str, VersionEntry] = {}
    for vdir in _sorted_dirs(Path(lib_dir.path), VERSION_RE):
        current = _current_text(Path(vdir.path))
        if not current and not _looks_like_version_dir(Path(vdir.path)):
            continue
        entry = reading.load_version(lib_dir.name, vdir.name, current)
        if entry.pending and listed is not None and (entry.library_id, entry.version) not in listed:
            log.debug("%s/%s has no CURRENT yet: listed once it publishes", lib_dir.name, vdir.name)
            continue
        versions[vdir.name] = entry
    return library_entry(lib_dir.name, versions) if versions else None


def _from_summary(
    root: Path,
    found: list[SummaryEntry],
    listed: Collection[tuple[str, str]] | None,
    before: dict[str, LibraryEntry],
) -> tuple[dict[str, LibraryEntry], Reading]:
    """The libraries of the summary that have a folder (one listing of ``root``), unchecked; a library
    folder it does not name, read in full.

    A reload keeps what it served (``before``): an unchecked version the summary still names with the
    same build stays as it was; a checked one stays while its CURRENT names the same build, and is read
    again otherwise (only what was used is read: its CURRENT may have moved without the summary).
    """
    reading = Reading(root, None, found)
    named: dict[str, dict[str, SummaryEntry]] = {}
    for e in found:
        named.setdefault(e.library.id, {})[e.version.name] = e
    libraries: dict[str, LibraryEntry] = {}
    for lib_dir in _sorted_dirs(root, LIBRARY_ID_RE):
        lib_id = lib_dir.name
        if lib_id not in named:
            lib = _read_library(reading, lib_dir, listed)
            if lib is not None:
                libraries[lib_id] = lib
            continue
        served = before.get(lib_id)
        versions: dict[str, VersionEntry] = {}
        for name, e in named[lib_id].items():
            was = served.versions.get(name) if served is not None else None
            if was is not None and was.checked:
                current = _current_text(root / lib_id / name)
                same = was.build_id is not None and current == was.build_id
                versions[name] = was if same else reading.load_version(lib_id, name, current)
            elif was is not None and was.build_id == e.build_id:
                versions[name] = was
            else:
                versions[name] = VersionEntry(lib_id, name, None, e, checked=False, root=root)
        libraries[lib_id] = library_entry(lib_id, versions)
    return libraries, reading


def check_library(root: Path, lock: LockFile | None, lib: LibraryEntry) -> tuple[LibraryEntry, Reading]:
    """``lib`` with each unchecked version checked now: its CURRENT read, its lease taken and its entry
    read from the manifest (``reading.stale`` when the summary named another build or misdescribed it)."""
    # What the summary claimed of each version (its entries, which a reading may write back).
    claimed = [v.meta for v in lib.versions.values() if isinstance(v.meta, SummaryEntry)]
    reading = Reading(root, lock, claimed)
    versions = {
        name: v if v.checked else reading.load_version(lib.id, name, _current_text(root / lib.id / name))
        for name, v in lib.versions.items()
    }
    return library_entry(lib.id, versions), reading


Stamp = tuple[int, ...]


def stamp(root: Path) -> Stamp:
    """What a reload would change, told by two ``stat`` calls whatever the number of libraries: the
    bundles folder's own (a library folder added or removed) and the summary file's identity (every
    publish, install and prune rewrites it). An unreadable folder or a missing summary count as zeros.
    """
    out: list[int] = []
    for path in (root, root / SUMMARY_NAME):
        try:
            st = os.stat(path)
        except OSError:
            out += [0, 0, 0]
        else:
            out += [st.st_ino, st.st_mtime_ns, st.st_size]
    return tuple(out)


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
