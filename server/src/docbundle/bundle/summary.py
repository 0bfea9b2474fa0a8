"""The catalogue summary, ``<bundles-dir>/catalog.json``: what a server needs of every library version to
start, list and resolve libraries without parsing every manifest.

One entry per ``<libraryId>/<version>`` whose ``CURRENT`` names a build, holding that build's id and
the small facts a listing shows (name, description, category, version status, counts, safety finding
kinds, how the text was obtained, the vectors' embedder, the languages of the page titles). It is a
cache, never the truth: a reader checks each entry against its version's ``CURRENT`` and reads the
manifest of any version whose entry is missing or names another build, and a summary that is missing,
unreadable, of another format or over ``MAX_SUMMARY_BYTES`` is rebuilt from the manifests.

Writers: whoever moves a ``CURRENT`` (``publish.publish`` for builds and installs, a nightly rollback)
or prunes calls ``update_summary``; it takes ``catalog.lock`` (flock, waits at most
``LOCK_WAIT_SECONDS``, then leaves the summary stale for readers to rebuild), rewrites the one entry,
and replaces the file atomically (temporary file, fsync, rename, fsync of the folder). Text fields are
clipped (``MAX_*_CHARS``) so an entry stays small; the whole file is refused past ``MAX_SUMMARY_BYTES``.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import msgspec

from .errors import BundleError
from .layout import LIBRARY_ID_RE, VERSION_RE, linked_folder, read_current, write_atomically
from .manifest import (
    Counts,
    LibraryInfo,
    Manifest,
    VectorsInfo,
    VersionInfo,
    decode_manifest,
    manifest_bytes,
    obtained_mix,
)
from .untrusted import UnsafeFileError, decode, open_lock, read_regular

log = logging.getLogger(__name__)

SUMMARY_NAME = "catalog.json"
SUMMARY_LOCK = "catalog.lock"
SUMMARY_VERSION = 1
MAX_SUMMARY_BYTES = 64 * 1024 * 1024  # ~100,000 libraries of ordinary entries (~600 bytes each)
MAX_SUMMARY_NAME_CHARS = 200  # a library name, cut to this in the summary
MAX_DESCRIPTION_CHARS = 500
MAX_SUMMARY_CATEGORY_CHARS = 100  # a category, cut to this in the summary
MAX_KINDS = 20
LOCK_WAIT_SECONDS = 10.0


class SummaryEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One library version as the summary holds it: its build and what listing and resolving show."""

    library: LibraryInfo
    version: VersionInfo
    build_id: str
    content_hash: str
    built_at: str
    manifest_sha256: str
    counts: Counts
    safety_findings: int = 0
    safety_kinds: list[str] = []
    obtained: dict[str, int] = {}
    vectors: VectorsInfo | None = None
    languages: list[str] = []

    @property
    def key(self) -> tuple[str, str]:
        """``(library id, version)``."""
        return (self.library.id, self.version.name)


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    """The whole file: its format, then the entries sorted by library id and version."""

    format: Literal["docbundle-catalog"] = "docbundle-catalog"
    format_version: int = SUMMARY_VERSION
    entries: list[SummaryEntry] = []


_encoder = msgspec.json.Encoder(order="deterministic")
_decoder = msgspec.json.Decoder(Summary)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def script_language(text: str) -> str | None:
    """The language a title is written in, by script: Hangul, kana (Japanese), Han, Latin letters."""
    han = latin = False
    for ch in text:
        o = ord(ch)
        if 0xAC00 <= o <= 0xD7AF or 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F:
            return "ko"
        if 0x3040 <= o <= 0x30FF:
            return "ja"
        han = han or 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF
        latin = latin or (ch.isascii() and ch.isalpha())
    return "zh" if han else "en" if latin else None


def title_languages(titles: Iterable[str]) -> list[str]:
    """The languages of at least a fifth of ``titles``, in code order."""
    counts = Counter(lang for t in titles if (lang := script_language(t)))
    total = sum(counts.values())
    return sorted(lang for lang, n in counts.items() if n * 5 >= total)


def entry_from_manifest(manifest: Manifest, manifest_sha256: str) -> SummaryEntry:
    """The summary entry of a bundle, from its manifest (text fields clipped)."""
    lib = manifest.library
    titles = [d.title for d in manifest.documents if d.title] or [lib.name, lib.description]
    return SummaryEntry(
        library=LibraryInfo(
            id=lib.id,
            name=_clip(lib.name, MAX_SUMMARY_NAME_CHARS),
            description=_clip(lib.description, MAX_DESCRIPTION_CHARS),
            category=_clip(lib.category, MAX_SUMMARY_CATEGORY_CHARS),
        ),
        version=manifest.version,
        build_id=manifest.build.build_id,
        content_hash=manifest.build.content_hash,
        built_at=manifest.build.built_at,
        manifest_sha256=manifest_sha256,
        counts=manifest.counts,
        safety_findings=len(manifest.safety),
        safety_kinds=sorted({f.kind for f in manifest.safety})[:MAX_KINDS],
        obtained=obtained_mix(manifest.documents),
        vectors=manifest.vectors,
        languages=title_languages(titles),
    )


def read_entry(vdir: Path) -> SummaryEntry | None:
    """The entry of the build ``vdir``'s ``CURRENT`` names, from its manifest; None when there is none
    or it does not describe the folder it sits in (a reader then reports the problem itself)."""
    try:
        build_id = read_current(vdir)
        if build_id is None or linked_folder(vdir.parent.parent, vdir.parent.name, vdir.name, build_id):
            return None
        data = manifest_bytes(vdir / build_id)
        manifest = decode_manifest(data)
    except (BundleError, OSError):
        return None
    entry = entry_from_manifest(manifest, hashlib.sha256(data).hexdigest())
    if entry.key != (vdir.parent.name, vdir.name) or entry.build_id != build_id:
        return None
    return entry


def read_summary(root: Path) -> list[SummaryEntry] | None:
    """The entries of ``root``'s summary; None when it is missing, unreadable or of another format.

    Read as a file of the bundles folder (``untrusted``): a FIFO, a device, a symbolic link, a file over
    ``MAX_SUMMARY_BYTES`` or JSON nested too deeply is logged and ignored, never a hang or a crash; the
    caller rebuilds the summary from the manifests.
    """
    try:
        data = read_regular(root / SUMMARY_NAME, MAX_SUMMARY_BYTES)
        summary = decode(_decoder.decode, data, SUMMARY_NAME)
    except FileNotFoundError:
        return None
    except BundleError as exc:
        log.warning("%s: rebuilt from the manifests", _relative(str(exc), root))
        return None
    if summary.format_version != SUMMARY_VERSION:
        return None
    return summary.entries


def _relative(message: str, root: Path) -> str:
    """``message`` without the bundles folder's path (a log line names the file, not where it lives)."""
    return message.replace(str(root) + os.sep, "")


def version_dirs(root: Path) -> Iterator[Path]:
    """Every ``<libraryId>/<version>`` folder under ``root``, sorted; folders that are symbolic links are
    left out (never served: ``layout.linked_folder``; a server that finds one says why)."""
    try:
        libs = sorted(
            e.name
            for e in os.scandir(root)
            if LIBRARY_ID_RE.fullmatch(e.name) and e.is_dir(follow_symlinks=False)
        )
    except OSError:
        return
    for lib in libs:
        try:
            names = sorted(
                e.name
                for e in os.scandir(root / lib)
                if VERSION_RE.fullmatch(e.name) and e.is_dir(follow_symlinks=False)
            )
        except OSError:
            continue
        for name in names:
            yield root / lib / name


def scan_entries(root: Path, known: Iterable[SummaryEntry] = ()) -> list[SummaryEntry]:
    """Every version's entry under ``root``: one of ``known`` when it names the build ``CURRENT`` does,
    else read from the manifest."""
    by_key = {e.key: e for e in known}
    out = []
    for vdir in version_dirs(root):
        before = by_key.get((vdir.parent.name, vdir.name))
        try:
            current = read_current(vdir)
        except BundleError:
            continue
        if current is None:
            continue
        entry = before if before is not None and before.build_id == current else read_entry(vdir)
        if entry is not None:
            out.append(entry)
    return out


def write_summary(root: Path, entries: Iterable[SummaryEntry]) -> bool:
    """Replace ``root``'s summary atomically; returns False (and removes it) when it would be too big."""
    data = _encoder.encode(Summary(entries=sorted(entries, key=lambda e: e.key)))
    path = root / SUMMARY_NAME
    if len(data) > MAX_SUMMARY_BYTES:
        log.warning(
            "the catalogue summary would be %d bytes, over %d: not written", len(data), MAX_SUMMARY_BYTES
        )
        path.unlink(missing_ok=True)
        return False
    write_atomically(path, data)
    return True


@contextmanager
def _summary_lock(root: Path) -> Iterator[str | None]:
    """Hold ``catalog.lock`` (waiting at most ``LOCK_WAIT_SECONDS``); yields None when it is held, else
    why not. A lock file that is not a regular file (``untrusted.open_lock``) is not waited on."""
    try:
        fd = open_lock(root / SUMMARY_LOCK)
    except UnsafeFileError as exc:
        yield _relative(str(exc), root)
        return
    except OSError as exc:
        yield f"{SUMMARY_LOCK} cannot be opened ({exc.strerror})"
        return
    with open(fd, "rb") as fh:
        until = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > until:
                    yield f"{SUMMARY_LOCK} is held by another writer"
                    return
                time.sleep(0.01)
        try:
            yield None
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def write_summary_locked(root: Path, entries: Iterable[SummaryEntry]) -> bool:
    """``write_summary`` under ``catalog.lock`` (a reader that found the summary stale writes it back);
    returns False when the lock stayed held or the summary would be too big."""
    with _summary_lock(root) as why_not:
        return why_not is None and write_summary(root, entries)


def update_summary(root: Path, library_id: str | None = None, version: str | None = None) -> bool:
    """Rewrite ``root``'s summary after a publish, install or prune of ``library_id``/``version``
    (None: every version is checked). Returns whether the summary was written.

    Best effort: a summary that cannot be locked or written is left as it is, and readers, who check
    every entry against ``CURRENT``, rebuild what is stale.
    """
    keys = None if library_id is None or version is None else [(library_id, version)]
    return update_summary_versions(root, keys)


def update_summary_versions(root: Path, keys: Iterable[tuple[str, str]] | None) -> bool:
    """``update_summary`` for every ``(library id, version)`` of ``keys`` at once: one read, one write,
    one fsync, whatever their number (None: every version is checked). A server that found many
    entries stale rewrites the summary once, not once per library (issue 31: 370 rewrites in one call).
    """
    try:
        with _summary_lock(root) as why_not:
            if why_not is not None:
                log.warning("%s: the summary is left for readers to rebuild", why_not)
                return False
            known = read_summary(root)
            if known is None or keys is None:
                entries = scan_entries(root, known or ())
            else:
                wanted = set(keys)
                entries = [e for e in known if e.key not in wanted]
                for library_id, version in sorted(wanted):
                    fresh = read_entry(root / library_id / version)
                    if fresh is not None:
                        entries.append(fresh)
            return write_summary(root, entries)
    except OSError as exc:
        log.warning("the catalogue summary was not written: %s", exc)
        return False
