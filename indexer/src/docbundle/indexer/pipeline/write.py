"""Write a bundle directory atomically, publish it through ``CURRENT``, and prune old builds.

Nothing half-written is ever visible: the bundle is written into ``<version>/.tmp-<buildId>-<pid>``,
every file and directory is fsynced, the directory is renamed to ``<buildId>``, and only then is
``CURRENT`` replaced (written to a temporary name, fsynced, ``os.replace``d). A build killed at any
point leaves at most a ``.tmp-*`` directory, which the next build of that version removes.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import random
import shutil
from pathlib import Path
from typing import Any

import msgspec
from docbundle.bundle.errors import BundleError
from docbundle.bundle.layout import BUILD_ID_RE, fsync_dir, lock_for_removal, read_current
from docbundle.bundle.manifest import MANIFEST_NAME, FileEntry, Manifest, encode_manifest
from docbundle.bundle.reader import read_manifest
from docbundle.bundle.schema import INDEX_DIR, INDEX_NAME, make_schema
from whoosh.filedb.filestore import FileStorage
from whoosh.util.numeric import byte_to_length, length_to_byte
from whoosh.writing import SegmentWriter

from .prepare import Analysed

log = logging.getLogger(__name__)


class _StableStorage(FileStorage):  # type: ignore[misc]
    """FileStorage that records mtime 0 in compound segments, so equal inputs give equal bytes."""

    def file_modified(self, name: str) -> float:
        return 0.0


class _AnalysedSegmentWriter(SegmentWriter):  # type: ignore[misc]
    """A whoosh SegmentWriter fed with fields analysed elsewhere (see ``prepare``).

    ``add_analysed`` does what ``add_document`` does minus the analysis, and the segment flush looks
    field lengths up in a dict instead of reading each one back from the length columns (whoosh does
    that once per posting). A test checks the index files are byte-identical to ``add_document``'s.
    """

    def __init__(self, ix: Any, **kwargs: Any) -> None:
        super().__init__(ix, **kwargs)
        self._lengths: dict[str, dict[int, int]] = {}

    def add_analysed(self, analysed: Analysed, stored: dict[str, object]) -> None:
        self._check_state()
        pdw = self.perdocwriter
        docnum = self.docnum
        add_post = self.pool.add
        pdw.start_doc(docnum)
        try:
            for name in sorted([*analysed, *stored]):
                field = self.schema[name]
                if name in analysed:
                    items, length = analysed[name]
                    for tbytes, _freq, weight, vbytes in items:
                        add_post((name, tbytes, docnum, weight, vbytes))
                    pdw.add_field(name, field, None, length)
                    if length:
                        self._lengths.setdefault(name, {})[docnum] = byte_to_length(length_to_byte(length))
                else:
                    pdw.add_field(name, field, stored[name], 0)
        except BaseException:
            pdw.cancel_doc()
            raise
        pdw.finish_doc()
        self._added = True
        self.docnum += 1

    def _flush_segment(self) -> None:
        self.perdocwriter.close()
        lengths = self._lengths

        class _Lengths:
            @staticmethod
            def doc_field_length(docnum: int, fieldname: str, default: int = 0) -> int:
                return lengths.get(fieldname, {}).get(docnum, default)

        self.fieldwriter.add_postings(self.schema, _Lengths, self.pool.iter_postings())
        self.fieldwriter.close()


class IndexWriter:
    """Writes a bundle's whoosh index: one optimized segment, no lock file, stable bytes."""

    def __init__(self, directory: Path, seed: str) -> None:
        self._dir = directory / INDEX_DIR
        self._dir.mkdir()
        # Millions of long-lived posting tuples make every full garbage collection crawl through them;
        # nothing the writer builds is cyclic, so collection waits until the index is written (-15%).
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        storage = _StableStorage(str(self._dir))
        self._random_state = random.getstate()
        random.seed(seed)  # whoosh names segments with the global random module
        try:
            ix = storage.create_index(make_schema(), indexname=INDEX_NAME)
            self._writer = _AnalysedSegmentWriter(ix, limitmb=256)
        except BaseException:
            self._restore()
            raise
        self._ix = ix
        self.count = 0

    def add(self, analysed: Analysed, doc: int, chunk: int) -> None:
        """Add one chunk, already analysed, as record ``doc`` / chunk ``chunk``."""
        self._writer.add_analysed(analysed, {"doc": doc, "chunk": chunk})
        self.count += 1

    def commit(self) -> None:
        """Write the segment and remove the lock file."""
        try:
            self._writer.commit(optimize=True)
            self._ix.close()
        finally:
            self._restore()
        for leftover in self._dir.glob("*LOCK"):
            leftover.unlink()

    def cancel(self) -> None:
        """Abandon the index (the caller removes the directory)."""
        try:
            self._writer.cancel()
        finally:
            self._restore()

    def _restore(self) -> None:
        random.setstate(self._random_state)
        if self._gc_was_enabled:
            gc.enable()


def list_files(directory: Path) -> list[FileEntry]:
    """Every file under ``directory`` except the manifest, sorted, with size and sha256."""
    entries = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        rel = path.relative_to(directory).as_posix()
        if rel == MANIFEST_NAME:
            continue
        with open(path, "rb") as fh:
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
        entries.append(FileEntry(path=rel, size=path.stat().st_size, sha256=digest))
    return entries


def finish_manifest(directory: Path, manifest: Manifest) -> Manifest:
    """Fill in the file list and write ``manifest.json`` into ``directory``."""
    done = msgspec.structs.replace(manifest, files=list_files(directory))
    (directory / MANIFEST_NAME).write_bytes(encode_manifest(done))
    return done


def current_manifest(vdir: Path) -> Manifest | None:
    """The manifest of the bundle ``CURRENT`` names, or None when there is none or it is unreadable."""
    try:
        build_id = read_current(vdir)
        if build_id is None:
            return None
        return read_manifest(vdir / build_id)
    except (BundleError, OSError):
        return None


def prune(vdir: Path, keep: int) -> list[str]:
    """Delete all but the newest ``keep`` builds, never the one ``CURRENT`` names; returns removed ids.

    A build a running server holds (its lease, see ``docbundle.bundle.layout``) is kept; the next
    build prunes it once that server has exited.

    The current build always counts as one of the ``keep``; the rest are the newest by build time,
    then by when their directory was published (builds in the same second, or under a fixed
    ``SOURCE_DATE_EPOCH``, share a build time).
    """
    current = read_current(vdir)
    others = []
    for p in vdir.iterdir():
        if p.is_dir() and BUILD_ID_RE.fullmatch(p.name) and p.name != current:
            try:
                built_at = read_manifest(p).build.built_at
            except (BundleError, OSError):
                built_at = ""
            others.append((built_at, p.stat().st_mtime_ns, p.name))
    others.sort(reverse=True)
    room = max(keep - (1 if current else 0), 0)
    removed = []
    for _, _, name in others[room:]:
        lock = lock_for_removal(vdir / name)
        if lock is None:
            log.info("keeping %s/%s: a running server holds it", vdir.name, name)
            continue
        try:
            shutil.rmtree(vdir / name, ignore_errors=True)
        finally:
            if lock >= 0:
                os.close(lock)
        removed.append(name)
    if removed:
        fsync_dir(vdir)
    return removed
