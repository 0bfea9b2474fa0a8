"""Where bundles live on disk, and the ``CURRENT`` pointer.

::

    <bundles-dir>/<libraryId>/<version>/<buildId>/   one bundle (manifest.json, llms.txt, docs.*, index/)
    <bundles-dir>/<libraryId>/<version>/CURRENT      the buildId being served, replaced atomically
    <bundles-dir>/<libraryId>/<version>/.lock        held (flock) by the build or install writing there
    <bundles-dir>/<libraryId>/<version>/.tmp-*       a bundle being written, renamed into place when done

Writing is one protocol, for the indexer's builds and the server's installs alike: take the version
lock, sweep the ``.tmp-*`` left by killed writers, write into ``new_temp_dir``, then publish
(``docbundle.bundle.publish``: fsync every file and folder, rename to the build id, fsync the version
folder, replace ``CURRENT``, update the catalogue summary).

Leases: a server holds a shared ``flock`` on the ``manifest.json`` of every bundle it serves, from
start-up until it exits (a read-only descriptor; nothing is written, so read-only mounts work). Pruning
takes an exclusive, non-blocking lock on a bundle's manifest before deleting it and keeps a bundle it
cannot lock: a running server never loses a build under it. The kernel drops the lock when the server
exits, whatever way it exits.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from .errors import BundleFormatError, BundleNotFoundError, VersionLockedError
from .untrusted import UnsafeFileError, open_lock, open_regular, read_regular

# ``\Z``, never ``$``: ``$`` also matches before a trailing newline, and "<build id>\n" must not pass.
# Call sites use ``fullmatch`` as well. Ids and versions are at most 64 characters.
LIBRARY_ID_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}\Z")
VERSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
# The two rules in words, for every error that refuses an id or a version (never the raw pattern).
LIBRARY_ID_RULE = "lower-case letters, digits and '-', at most 64 characters, starting with a letter or digit"
VERSION_RULE = "letters, digits, '.', '_' and '-', at most 64 characters, starting with a letter or digit"
BUILD_ID_RE = re.compile(r"[0-9]{8}-[0-9a-f]{12}\Z")
CURRENT = "CURRENT"
LOCK_NAME = ".lock"  # <version>/.lock: held by a build or an install of that version
TMP_PREFIX = ".tmp-"  # <version>/.tmp-*: a bundle being written; swept under the lock
# A CURRENT holds one build id (21 characters) and a newline; a little room for stray whitespace a hand
# edit leaves. Anything larger is not a CURRENT and is refused before it is read.
MAX_CURRENT_BYTES = 256


def make_build_id(date: str, content_hash: str) -> str:
    """``<YYYYMMDD>-<first 12 hex of the content hash>``; ``date`` is an ISO date or datetime."""
    return f"{date[:10].replace('-', '')}-{content_hash[:12]}"


def version_dir(root: Path, library_id: str, version: str) -> Path:
    """The directory holding every build of one library version."""
    if not LIBRARY_ID_RE.fullmatch(library_id):
        raise ValueError(f"invalid libraryId {library_id!r}: use {LIBRARY_ID_RULE}")
    if not VERSION_RE.fullmatch(version):
        raise ValueError(f"invalid version {version!r}: use {VERSION_RULE}")
    return root / library_id / version


def read_current(vdir: Path) -> str | None:
    """The buildId ``CURRENT`` names, or None when there is no ``CURRENT`` yet.

    Read as a file of the bundles folder (``untrusted.read_regular``): a FIFO, a device, a symbolic link
    or a file over ``MAX_CURRENT_BYTES`` is ``UnsafeFileError`` (a ``BundleFormatError``), never a hang.
    """
    try:
        text = read_regular(vdir / CURRENT, MAX_CURRENT_BYTES).decode("ascii").strip()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise BundleFormatError(f"{vdir / CURRENT} is unreadable: {exc}") from exc
    if not BUILD_ID_RE.fullmatch(text):
        raise BundleFormatError(f"{vdir / CURRENT} does not hold a build id: {text[:40]!r}")
    return text


def linked_folder(root: Path, *names: str) -> str | None:
    """The first of ``root/names[0]``, ``root/names[0]/names[1]``, ... that is a symbolic link, as a path
    relative to ``root`` (None when none is, or one is missing).

    A library, version or build folder is served only as a real folder inside the bundles folder: a
    link would serve whatever it points at, outside the folder an operator looks after (the files
    inside a bundle are refused as links when they are opened, ``O_NOFOLLOW``, but that flag looks at
    the last part of a path only). ``root`` itself may be a link: it is the path the user gave.
    """
    path = root
    for name in names:
        path = path / name
        try:
            if os.path.islink(path):
                return path.relative_to(root).as_posix()
        except OSError:
            return None
    return None


def linked_folder_problem(link: str) -> str:
    """Why a library whose folder ``link`` is a symbolic link is not served, and what to do."""
    return (
        f"{link} is a symbolic link: library, version and build folders are served only as real folders "
        "inside the bundles folder; move or copy the bundle in (or install its archive)"
    )


def current_bundle(vdir: Path) -> Path:
    """The bundle directory ``CURRENT`` names; raises BundleNotFoundError when there is none."""
    build_id = read_current(vdir)
    if build_id is None:
        raise BundleNotFoundError(f"no bundle built yet in {vdir} (no {CURRENT} file)")
    path = vdir / build_id
    if not path.is_dir():
        raise BundleNotFoundError(f"{vdir / CURRENT} names {build_id}, which does not exist")
    return path


def _fsync_path(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """fsync a directory, so a rename or new entry in it survives a crash."""
    _fsync_path(path)


def write_atomically(path: Path, data: bytes, tmp: Path | None = None) -> None:
    """Replace ``path`` with ``data`` so a crash leaves the old or the new file, never a part: write a
    temporary file beside it (``tmp``, default ``.<name>.tmp-<pid>``), fsync, rename, fsync the folder.
    The temporary file is removed when that fails (OSError on a read-only folder)."""
    tmp = tmp or path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_current(vdir: Path, build_id: str) -> None:
    """Point ``CURRENT`` at ``build_id`` atomically: write a temporary file, fsync, rename, fsync the dir."""
    if not BUILD_ID_RE.fullmatch(build_id):
        raise ValueError(f"not a build id: {build_id!r}")
    write_atomically(vdir / CURRENT, (build_id + "\n").encode("ascii"), vdir / (CURRENT + ".tmp"))


MANIFEST_FILE = "manifest.json"  # manifest.MANIFEST_NAME, without importing the manifest structs


_NO_MANIFEST = -1


def _lock_manifest(bundle: Path, operation: int) -> int | None:
    """``bundle``'s manifest opened read-only (``untrusted.open_regular``: a FIFO, device or symbolic
    link is ``UnsafeFileError``, never a blocking open) and flocked (non-blocking) with ``operation``.

    The descriptor, or ``_NO_MANIFEST`` when there is no manifest (or no bundle folder), or None when
    the lock is held elsewhere.
    """
    try:
        fd = open_regular(bundle / MANIFEST_FILE)
    except FileNotFoundError:
        return _NO_MANIFEST
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def take_lease(bundle: Path) -> int | None:
    """Hold a shared lease on ``bundle``: an open descriptor of its manifest with a shared flock.

    Returns the descriptor (close it to release the lease), or None when there is no manifest or a
    prune holds it right now. The caller reads the manifest through this descriptor. A manifest that is
    not a regular file (a FIFO, a device, a symbolic link) is ``UnsafeFileError``: the bundle is refused.
    """
    fd = _lock_manifest(bundle, fcntl.LOCK_SH)
    return None if fd == _NO_MANIFEST else fd


def lock_for_removal(bundle: Path) -> int | None:
    """An exclusive lock on ``bundle`` for deleting it, or None when a server holds a lease on it.

    A bundle without a readable manifest (a broken or half-removed one, or one whose manifest is a
    FIFO, a device or a symbolic link, which no server leases) is not leased by anyone: the result is
    then -1, meaning "no lock needed, remove it".
    """
    try:
        return _lock_manifest(bundle, fcntl.LOCK_EX)
    except UnsafeFileError:
        return _NO_MANIFEST


@contextmanager
def version_lock(vdir: Path) -> Iterator[None]:
    """Hold the exclusive lock of a version directory (builds and installs); fails fast when held, and
    when ``.lock`` is not a regular file (a FIFO there would read as held for ever), saying so."""
    vdir.mkdir(parents=True, exist_ok=True)
    try:
        fd = open_lock(vdir / LOCK_NAME)
    except UnsafeFileError as exc:
        raise VersionLockedError(f"{exc}: remove it, then try again") from None
    with open(fd, "rb") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise VersionLockedError(
                f"another build or install of {vdir} is running (lock {vdir / LOCK_NAME} is held); "
                "try again when it has finished"
            ) from exc
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def remove_stale_temps(vdir: Path) -> list[str]:
    """Delete ``.tmp-*`` directories left by killed writers (call with the version lock held)."""
    removed = []
    for p in sorted(vdir.glob(TMP_PREFIX + "*")):
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p.name)
    return removed


def new_temp_dir(vdir: Path, name: str) -> Path:
    """Create the empty temporary directory a bundle is written into (with the version lock held)."""
    tmp = vdir / f"{TMP_PREFIX}{name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


#: Threads that fsync one tree's files at once (fsync releases the GIL; the file system commits
#: concurrent fsyncs together: ~11 files of a small bundle took 66 ms one by one and 11 ms at once).
FSYNC_THREADS = 8


def fsync_tree(root: Path) -> None:
    """fsync every file and directory under ``root`` (the files concurrently, then the directories).

    Returns once all of them are durable; the first error is raised after the others have finished.
    """
    files: list[str] = []
    dirs: list[str] = []
    for dirpath, _dirnames, filenames in os.walk(root):
        files += [os.path.join(dirpath, name) for name in filenames]
        dirs.append(dirpath)
    if len(files) > 1:
        with ThreadPoolExecutor(min(FSYNC_THREADS, len(files)), thread_name_prefix="fsync") as pool:
            for done in [pool.submit(_fsync_path, path) for path in files]:
                done.result()
    else:
        for path in files:
            _fsync_path(path)
    for path in dirs:
        _fsync_path(path)


def bundle_at(path: Path) -> Path:
    """The bundle ``path`` names: itself (it holds a manifest) or the build its version's CURRENT names."""
    if (path / MANIFEST_FILE).is_file():
        return path
    if (path / CURRENT).is_file():
        return current_bundle(path)
    if not path.exists():
        raise BundleNotFoundError(f"{path} does not exist")
    raise BundleNotFoundError(
        f"{path} is neither a bundle (no {MANIFEST_FILE}) nor a version directory (no {CURRENT})"
    )


def current_bundles(bundles_dir: Path) -> list[Path]:
    """Every bundle a ``CURRENT`` names under ``bundles_dir`` (``<lib>/<version>/CURRENT``), sorted."""
    return [current_bundle(cur.parent) for cur in sorted(bundles_dir.glob("*/*/CURRENT"))]
