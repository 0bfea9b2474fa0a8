"""The catalogue's entries and how they are read from a bundles folder (``Catalog.load`` and ``reload``).

For every ``<root>/<libraryId>/<version>/``: the ``CURRENT`` pointer, then what the catalogue summary
(``docbundle.bundle.summary``) says of the build it names, else the manifest itself (with the version's
lease held), checked against the folder's names and the lock file's pins. ``scan`` reads a whole folder,
``signature`` tells whether it changed, ``CatalogChange`` says what a reload changed. Nothing here opens
a bundle: ``catalog`` does, on first use.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from docbundle.bundle.errors import BundleError, BundleFormatError
from docbundle.bundle.layout import BUILD_ID_RE, CURRENT, LIBRARY_ID_RE, VERSION_RE, read_current, take_lease
from docbundle.bundle.manifest import MAX_MANIFEST_BYTES, Manifest, decode_manifest, manifest_bytes
from docbundle.bundle.summary import SummaryEntry, entry_from_manifest, read_summary

from .lockfile import LockFile

if TYPE_CHECKING:
    from docbundle.bundle.reader import Bundle
    from docbundle.bundle.search import BundleSearcher

log = logging.getLogger(__name__)

MAX_READS = 3  # a version whose CURRENT moved while it was read is read again, this many times at most
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


class Reading:
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
            return VersionEntry(library_id, version, None, None, relative(str(exc), root))
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
                return VersionEntry(library_id, version, bundle, None, relative(str(exc), root))
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


def scan(
    root: Path, lockfile: LockFile | None, listed: Collection[tuple[str, str]] | None = None
) -> tuple[dict[str, LibraryEntry], Reading]:
    """Every library version under ``root`` (CURRENT checked, leases taken), nothing opened; what each
    manifest says comes from the catalogue summary when its entry names the build CURRENT does.

    ``listed`` (a reload's): the versions served so far. A version without CURRENT that is not among
    them is left out: a writer is at work there, and it is listed once its CURRENT names a complete
    build (announcing it earlier would send clients to a library that cannot answer yet).
    """
    libraries: dict[str, LibraryEntry] = {}
    reading = Reading(root, lockfile)
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
