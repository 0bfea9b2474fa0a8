"""Write a bundle directory atomically, publish it through ``CURRENT``, and prune old builds.

Nothing half-written is ever visible: the bundle is written into ``<version>/.tmp-<buildId>-<pid>``,
every file and directory is fsynced, the directory is renamed to ``<buildId>``, and only then is
``CURRENT`` replaced (written to a temporary name, fsynced, ``os.replace``d). A build killed at any
point leaves at most a ``.tmp-*`` directory, which the next build of that version removes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path

import msgspec
from docbundle.bundle.errors import BundleError
from docbundle.bundle.layout import BUILD_ID_RE, fsync_dir, lock_for_removal, read_current
from docbundle.bundle.manifest import MANIFEST_NAME, FileEntry, Manifest, RoutingInfo, encode_manifest
from docbundle.bundle.publish import note_current_moved
from docbundle.bundle.reader import read_manifest
from docbundle.bundle.routing import ROUTING_FIELDS, ROUTING_FILE, RoutingRecord, make_record, write_record
from docbundle.bundle.schema import INDEX_DIR, INDEX_NAME, make_schema
from docbundle.bundle.whooshio import CommitOnExit, SegmentBuilder

from .prepare import Analysed

log = logging.getLogger(__name__)


class IndexWriter(CommitOnExit):
    """Writes a bundle's whoosh index (``whooshio.SegmentBuilder``): one optimized segment, no lock
    file, stable bytes.

    Garbage collection is paused from here to ``commit`` or ``cancel`` (or the end of a ``with``
    block), whichever way the build ends; the caller calls one of them on every path.
    """

    def __init__(self, directory: Path, seed: str) -> None:
        self._dir = directory / INDEX_DIR
        self._dir.mkdir()
        self._builder = SegmentBuilder(self._dir, make_schema(), INDEX_NAME, seed)
        self.count = 0
        self._frequencies: dict[str, int] = {}

    def add(self, analysed: Analysed, doc: int, chunk: int) -> None:
        """Add one chunk, already analysed, as record ``doc`` / chunk ``chunk``."""
        self._builder.add(analysed, {"doc": doc, "chunk": chunk})
        self.count += 1

    def commit(self) -> None:
        """Write the segment and remove the lock file."""
        # Taken first: the routing record needs every term's document frequency, and the postings
        # are still in memory here (reading them back from the index cost a serial half second).
        self._frequencies = self._builder.doc_frequencies(ROUTING_FIELDS)
        self._builder.commit()

    def routing_record(self, chunks: int) -> RoutingRecord:
        """The bundle's routing record, from the index just committed (the same as read from the disk)."""
        return make_record(self._frequencies, chunks)

    def cancel(self) -> None:
        """Abandon the index (the caller removes the directory)."""
        self._builder.cancel()


def write_routing(directory: Path, record: RoutingRecord) -> RoutingInfo:
    """Write the routing record (``routing.bin``, from ``IndexWriter.routing_record``) into a bundle."""
    write_record(directory, record)
    return RoutingInfo(
        path=ROUTING_FILE, terms=len(record.terms), vocabulary=record.vocabulary, cutoff=record.cutoff
    )


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


def link_tree(source: Path, target: Path) -> None:
    """Give the empty folder ``target`` every file of ``source`` (sub-folders made): hard links, which
    cost nothing and are safe because a bundle's files are never changed once written (copies when the
    file system refuses links)."""
    for path in sorted(source.rglob("*")):
        dest = target / path.relative_to(source)
        if path.is_dir():
            dest.mkdir()
            continue
        try:
            os.link(path, dest)
        except OSError:
            shutil.copyfile(path, dest)


def discard(vdir: Path, build_id: str) -> bool:
    """Delete the build ``build_id`` of ``vdir`` (not the current one) unless a running server holds it
    (it then goes with the next prune); whether it was deleted."""
    if build_id == read_current(vdir) or not BUILD_ID_RE.fullmatch(build_id):
        return False
    if not _remove_unleased(vdir, build_id):
        return False
    fsync_dir(vdir)
    note_current_moved(vdir)
    return True


def _remove_unleased(vdir: Path, name: str) -> bool:
    """Delete the build ``name`` unless a running server holds its lease (``layout.lock_for_removal``)."""
    lock = lock_for_removal(vdir / name)
    if lock is None:
        log.info("keeping %s/%s: a running server holds it", vdir.name, name)
        return False
    try:
        shutil.rmtree(vdir / name, ignore_errors=True)
    finally:
        if lock >= 0:
            os.close(lock)
    return True


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
        if _remove_unleased(vdir, name):
            removed.append(name)
    if removed:
        fsync_dir(vdir)
        note_current_moved(vdir)
    return removed
