"""Verify and open bundles.

Opening a whoosh index unpickles data (its TOC, segment list, compound directory, stored fields), so
opening a bundle can run code. ``verify_bundle`` therefore runs first and checks, without touching
whoosh: the manifest's format version, that the directory holds exactly the files the manifest lists
(nothing missing, nothing extra, no path escaping the bundle), and every file's size and sha256.
``open_bundle`` verifies, then opens the index with the schema from code (so the pickled schema in the
TOC is never loaded).
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from whoosh.filedb.filestore import FileStorage
from whoosh.index import Index

from .errors import BundleError, BundleFormatError, BundleIntegrityError
from .manifest import MANIFEST_NAME, Manifest, decode_manifest, manifest_bytes
from .schema import INDEX_DIR, INDEX_NAME, make_schema
from .store import DocStore

_PARALLEL_HASH_BYTES = 4 * 1024 * 1024


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


def verify_bundle(bundle: Path) -> Manifest:
    """Check a bundle against its manifest; returns the manifest or raises a BundleError subclass."""
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
    for rel, entry in sorted(listed.items()):
        path = bundle / rel
        if path.is_symlink():
            raise BundleIntegrityError(f"{bundle}: {rel} is a symbolic link; bundles hold regular files only")
        size = path.stat().st_size
        if size != entry.size:
            raise BundleIntegrityError(f"{bundle}: {rel} is {size} bytes, the manifest says {entry.size}")
    names = sorted(listed)
    paths = [bundle / rel for rel in names]
    if sum(listed[rel].size for rel in names) >= _PARALLEL_HASH_BYTES and len(names) > 1:
        # hashlib releases the GIL while hashing, so the big files (index, store) hash side by side.
        with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
            digests = list(pool.map(_sha256, paths))
    else:
        digests = [_sha256(p) for p in paths]
    for rel, digest in zip(names, digests, strict=True):
        if digest != listed[rel].sha256:
            raise BundleIntegrityError(f"{bundle}: {rel} does not match its sha256 in the manifest")
    return manifest


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


@dataclass
class Bundle:
    """An opened, verified bundle: manifest, document store and whoosh index."""

    path: Path
    manifest: Manifest
    store: DocStore
    index: Index
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        """Close the index and the document store."""
        if not self._closed:
            self._closed = True
            self.index.close()
            self.store.close()


def open_index(bundle: Path, *, use_mmap: bool = True) -> Index:
    """Open a bundle's whoosh index read-only with the schema from code. Verify the bundle first."""
    storage = FileStorage(str(bundle / INDEX_DIR), supports_mmap=use_mmap, readonly=True)
    return storage.open_index(INDEX_NAME, schema=make_schema())


def open_bundle(bundle: Path, *, verify: bool = True, use_mmap: bool = True) -> Bundle:
    """Verify (unless told not to) and open a bundle."""
    manifest = verify_bundle(bundle) if verify else read_manifest(bundle)
    store = DocStore(bundle)
    try:
        index = open_index(bundle, use_mmap=use_mmap)
    except BundleError:
        store.close()
        raise
    except Exception as exc:
        store.close()
        raise BundleFormatError(f"{bundle}: the search index cannot be opened: {exc}") from exc
    return Bundle(bundle, manifest, store, index)
