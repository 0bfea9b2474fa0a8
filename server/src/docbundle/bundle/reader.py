"""Verify and open bundles.

Opening a whoosh index unpickles data (its TOC, segment list, compound directory, stored fields), so
opening a bundle could run code. Three defences, in order:

- ``verify_bundle`` checks, without touching whoosh: the manifest's format version, that the directory
  holds exactly the files the manifest lists (nothing missing, nothing extra, no path escaping the
  bundle, no symbolic link, no device or FIFO), and every file's size and sha256;
- ``open_bundle`` hashes through descriptors it keeps (``HeldFiles``) and reads the store and the index
  through those same descriptors, so what was checked is what is used;
- every whoosh pickle goes through the restricted unpickler (``safepickle``, handed to whoosh by
  ``whooshio`` for each read), so even a bundle whose manifest was rewritten to match altered files
  cannot run code; the schema comes from code.

The optional vector file (``manifest.vectors``, issue 21) is listed in ``files`` like any other, so it is
hashed with them; ``open_bundle`` then checks its header through the held descriptor with the standard
library alone (size, rows against the bundle's sections, dimensions, value type and embedder key against
the manifest) and its values (every float16 value, or int8 row scale, finite and in range:
``vectors.check_values``), and refuses the bundle when they disagree. The file is memory-mapped from
that same descriptor only when a semantic search first asks for it (``Bundle.vector_file``), which is
when numpy is imported: a keyword search of a bundle with vectors never imports it.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .embed import EmbedderIdentity
from .errors import BundleError, BundleFormatError, BundleIntegrityError
from .manifest import MANIFEST_NAME, Manifest, decode_manifest, manifest_bytes
from .schema import INDEX_DIR, INDEX_NAME, make_schema
from .store import DOCS_BIN, DOCS_IDX, DocStore
from .vectors import HEADER_SIZE, VectorFile, VectorHeader, check_values, parse_header
from .whooshio import Index, check_index, open_held_index, open_index_dir

_PARALLEL_HASH_BYTES = 4 * 1024 * 1024
_HASH_CHUNK = 1024 * 1024


def read_manifest(bundle: Path) -> Manifest:
    """Read and decode a bundle's manifest (format version checked; files not verified)."""
    return decode_manifest(manifest_bytes(bundle))


def _files_on_disk(bundle: Path) -> set[str]:
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(bundle):
        dirnames.sort()
        rel = Path(dirpath).relative_to(bundle)
        for name in filenames:
            found.add((rel / name).as_posix())
    found.discard(MANIFEST_NAME)
    return found


def _check_path(rel: str) -> None:
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or rel in ("", ".") or "\\" in rel:
        raise BundleIntegrityError(f"manifest lists an unsafe path {rel!r}")


class HeldFiles:
    """Read-only descriptors of every file a manifest lists, opened before anything is hashed.

    Verification hashes the bytes read through these descriptors and the opened bundle reads through
    the same ones, so what was checked is what is used: a file replaced, renamed or deleted after the
    check (a rebuild, a prune, an attacker) does not reach an opened bundle.
    """

    def __init__(self) -> None:
        self.fds: dict[str, int] = {}
        self.sizes: dict[str, int] = {}

    def read(self, rel: str) -> bytes:
        """The whole content of a held file."""
        return os.pread(self.fds[rel], self.sizes[rel], 0)

    def close(self) -> None:
        """Close every descriptor (idempotent)."""
        fds, self.fds = self.fds, {}
        for fd in fds.values():
            os.close(fd)


def _hold(bundle: Path, manifest: Manifest) -> HeldFiles:
    """Open every listed file without following symbolic links; only regular files are accepted."""
    held = HeldFiles()
    try:
        for entry in sorted(manifest.files, key=lambda f: f.path):
            rel = entry.path
            try:
                # O_NONBLOCK: a FIFO planted in a bundle must not block the open.
                fd = os.open(bundle / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except FileNotFoundError:
                raise BundleIntegrityError(f"{bundle}: missing file listed in the manifest: {rel}") from None
            except OSError as exc:
                if (bundle / rel).is_symlink():
                    raise BundleIntegrityError(
                        f"{bundle}: {rel} is a symbolic link; bundles hold regular files only"
                    ) from None
                raise BundleIntegrityError(f"{bundle}: {rel} cannot be opened: {exc.strerror}") from None
            held.fds[rel] = fd
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise BundleIntegrityError(f"{bundle}: {rel} is not a regular file")
            if st.st_size != entry.size:
                raise BundleIntegrityError(
                    f"{bundle}: {rel} is {st.st_size} bytes, the manifest says {entry.size}"
                )
            held.sizes[rel] = st.st_size
    except BaseException:
        held.close()
        raise
    return held


def _verify(bundle: Path) -> tuple[Manifest, HeldFiles]:
    manifest = read_manifest(bundle)
    listed = {f.path: f for f in manifest.files}
    for rel in listed:
        _check_path(rel)
    on_disk = _files_on_disk(bundle)
    missing = sorted(set(listed) - on_disk)
    if missing:
        raise BundleIntegrityError(
            f"{bundle}: missing file(s) listed in the manifest: {', '.join(missing[:5])}"
        )
    extra = sorted(on_disk - set(listed))
    if extra:
        raise BundleIntegrityError(
            f"{bundle}: unexpected file(s) not in the manifest: {', '.join(extra[:5])}"
        )
    held = _hold(bundle, manifest)
    try:
        names = sorted(listed)
        fds = [held.fds[rel] for rel in names]
        if sum(listed[rel].size for rel in names) >= _PARALLEL_HASH_BYTES and len(names) > 1:
            # hashlib releases the GIL while hashing, so the big files (index, store) hash side by side.
            with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
                digests = list(pool.map(_sha256_fd, fds))
        else:
            digests = [_sha256_fd(fd) for fd in fds]
        for rel, digest in zip(names, digests, strict=True):
            if digest != listed[rel].sha256:
                raise BundleIntegrityError(f"{bundle}: {rel} does not match its sha256 in the manifest")
    except BaseException:
        held.close()
        raise
    return manifest, held


def verify_bundle(bundle: Path) -> Manifest:
    """Check a bundle against its manifest; returns the manifest or raises a BundleError subclass."""
    manifest, held = _verify(bundle)
    held.close()
    return manifest


def _sha256_fd(fd: int) -> str:
    digest = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fd, _HASH_CHUNK, offset):
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()


@dataclass
class Bundle:
    """An opened, verified bundle: manifest, document store and whoosh index.

    The store and the index read through the descriptors that were hashed (``HeldFiles``), so files
    deleted or replaced on disk after the check (a prune, a rebuild) neither break nor change it.
    """

    path: Path
    manifest: Manifest
    store: DocStore
    index: Index
    held: HeldFiles | None = field(default=None, repr=False)
    # The checked header of the vector file when the manifest lists one (``manifest.vectors``).
    vectors: VectorHeader | None = None
    _vector_file: VectorFile | None = field(default=None, repr=False)
    _vector_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _closed: bool = field(default=False, repr=False)

    def vector_file(self) -> VectorFile:
        """The vector file, memory-mapped from the held descriptor on first use (imports numpy).

        Raises ``BundleFormatError`` when the bundle has no vectors or the file's contents are invalid
        (a row scale that is negative or not finite), ``ImportError`` without numpy.
        """
        with self._vector_lock:
            if self._vector_file is not None:
                return self._vector_file
            info = self.manifest.vectors
            if self._closed or info is None or self.held is None or info.path not in self.held.fds:
                raise BundleFormatError(f"{self.path.name}: the bundle has no vector file open")
            vf = VectorFile.from_held(self.held.fds[info.path])
            self._vector_file = vf
            return vf

    def close(self) -> None:
        """Close the index, the document store, the vector map and the held files."""
        if not self._closed:
            with self._vector_lock:
                self._closed = True
                if self._vector_file is not None:
                    self._vector_file.close()
                    self._vector_file = None
            self.index.close()
            self.store.close()
            if self.held is not None:
                self.held.close()


def section_count(manifest: Manifest) -> int:
    """How many sections (search units) the bundle holds: the chunks of its indexed documents."""
    return sum(d.chunks for d in manifest.documents if d.chunks > 0 and not d.error)


def check_vectors(manifest: Manifest, held: HeldFiles) -> VectorHeader | None:
    """Check the vector file's header (through its held descriptor) against the manifest; None without one.

    Standard library only: the header's size arithmetic, and rows, dimensions, value type and embedder
    key as the manifest records them; the embedder key must also be the hash of the identity the
    manifest spells out; then every value (``vectors.check_values``: a NaN, an infinity or a scale of
    1e30 passed the sha256 of a rewritten manifest, and made scores ``null``). Raises
    ``BundleFormatError`` naming what disagrees (and the row).
    """
    info = manifest.vectors
    if info is None:
        return None
    if info.path not in held.fds:
        raise BundleFormatError(
            f"the manifest's vectors name {info.path!r}, which its file list does not hold"
        )
    header = parse_header(os.pread(held.fds[info.path], HEADER_SIZE, 0), held.sizes[info.path])
    sections = section_count(manifest)
    e = info.embedder
    identity = EmbedderIdentity(e.backend, e.model, e.version, e.dimensions, e.weights_sha256)
    problems = []
    if header.rows != sections or info.rows != sections:
        problems.append(f"{header.rows} rows (manifest: {info.rows}) for {sections} sections")
    if header.dims != info.dims or e.dimensions != info.dims:
        problems.append(f"{header.dims} dimensions (manifest: {info.dims})")
    if header.dtype != info.dtype:
        problems.append(f"values of type {header.dtype} (manifest: {info.dtype})")
    if header.embedder_key != e.key or identity.key() != e.key:
        problems.append("an embedder key that differs from the manifest's embedder")
    if problems:
        raise BundleFormatError(f"{info.path} does not match the manifest: {'; '.join(problems)}")
    check_values(held.fds[info.path], header)  # every row finite and in range, named when not
    return header


def open_index(bundle: Path, *, use_mmap: bool = True) -> Index:
    """Open a bundle's whoosh index by path (read-only, schema from code, restricted unpickling).

    For trusted local tools only: it reads the files as they are on disk now. Servers use
    ``open_bundle``, which reads through the descriptors it verified.
    """
    return open_index_dir(bundle / INDEX_DIR, make_schema(), INDEX_NAME, use_mmap=use_mmap)


def open_bundle(bundle: Path, *, verify: bool = True, use_mmap: bool = False) -> Bundle:
    """Verify (unless told not to) and open a bundle through the descriptors that were checked.

    ``use_mmap`` is accepted for compatibility and ignored: the index is read with ``pread`` from the
    held descriptors (thread-safe, no per-searcher copy of the postings).
    """
    del use_mmap
    if verify:
        manifest, held = _verify(bundle)
    else:
        manifest = read_manifest(bundle)
        held = _hold(bundle, manifest)
    try:
        vectors = check_vectors(manifest, held)
        store = DocStore.from_held(held.fds[DOCS_BIN], held.read(DOCS_IDX))
    except BaseException:
        held.close()
        raise
    prefix = INDEX_DIR + "/"
    files = {
        rel[len(prefix) :]: (fd, held.sizes[rel]) for rel, fd in held.fds.items() if rel.startswith(prefix)
    }
    try:
        index = open_held_index(files, make_schema(), INDEX_NAME)
    except BundleError:
        store.close()
        held.close()
        raise
    except Exception as exc:
        store.close()
        held.close()
        raise BundleFormatError(f"{bundle}: the search index cannot be opened: {exc}") from exc
    return Bundle(bundle, manifest, store, index, held, vectors)


def check_bundle(bundle: Path) -> Manifest:
    """Verify a bundle and load its index structure (TOC, segments, compound directory) once.

    Stricter than ``verify_bundle``: a bundle whose files match a rewritten manifest but whose
    pickles name anything a docbundle index never holds is refused here (``UnsafePickleError``),
    before it is installed or served. Raises a BundleError subclass.
    """
    opened = open_bundle(bundle)
    try:
        check_index(opened.index)
    except BundleError:
        raise
    except Exception as exc:
        raise BundleFormatError(f"{bundle}: the search index cannot be read: {exc}") from exc
    finally:
        opened.close()
    return opened.manifest
