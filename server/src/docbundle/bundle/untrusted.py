"""One way to read a file of the bundles folder, and one way to decode untrusted bytes (issue 31).

Every file a server or the indexer reads from a bundles folder (``catalog.json``, a version's
``CURRENT``, a manifest, ``routing.idx``, ``routing.bin``, ``vectors.bin``, lock and timings files) may
have been planted by someone with write access to that folder: a FIFO (``open`` blocks for ever), a
symbolic link to ``/dev/zero`` (``stat`` says 0 bytes, ``read`` never ends) or a sparse file of many
gigabytes. So a file is read here only:

- opened with ``O_NOFOLLOW | O_NONBLOCK``: a symbolic link is refused, a FIFO does not block the open;
- checked to be a regular file (``S_ISREG``) on the descriptor it was opened as;
- read through that descriptor, at most ``limit`` bytes: a file larger than its bound is refused from its
  size before a byte is read, and one that grows while it is read stops at ``limit + 1`` bytes.

Anything else is ``UnsafeFileError`` (a ``BundleFormatError``) whose text names the file and the reason. A
missing file stays ``FileNotFoundError``, since callers tell "not there yet" from "wrong".

Decoding: msgspec raises ``RecursionError``, not ``DecodeError``, on input nested ~2,000 deep (4 KB of
``[``). ``decode`` turns either (and msgspec's ``ValidationError``) into ``BundleFormatError`` naming
what was read, so one hostile file fails the one library or feature that reads it, never a command.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import msgspec

from .errors import BundleFormatError, UnsupportedFormatVersionError

__all__ = [
    "FormatHeader",
    "UnsafeFileError",
    "check_format",
    "decode",
    "open_lock",
    "open_regular",
    "read_descriptor",
    "read_regular",
]

T = TypeVar("T")

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1024 * 1024


class UnsafeFileError(BundleFormatError):
    """A file of the bundles folder that is not a regular file, is a symbolic link, or is over its bound."""


def open_regular(path: Path | str) -> int:
    """A read-only descriptor of the regular file ``path`` (close it when done).

    ``FileNotFoundError`` when there is no such file; ``UnsafeFileError`` for a symbolic link, a FIFO, a
    device, a socket or a folder, and for any other reason it cannot be opened.
    """
    try:
        fd = os.open(path, _FLAGS)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeFileError(f"{path} is a symbolic link; it is read only as a regular file") from None
        raise UnsafeFileError(f"{path} cannot be opened: {exc.strerror}") from None
    return _regular(fd, path)


def open_lock(path: Path | str) -> int:
    """A read-write descriptor of the lock file ``path`` (created when missing), for ``flock``.

    Nothing is read or written through it, but a FIFO planted as a lock file makes every ``flock`` fail
    as "held" (a writer then waits its full timeout each time): a symbolic link, a FIFO or any other
    non-regular file is ``UnsafeFileError``; another failure to open it stays ``OSError``.
    """
    try:
        fd = os.open(path, _LOCK_FLAGS, 0o644)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeFileError(f"{path} is a symbolic link; a lock file must be a regular file") from None
        raise exc from None
    return _regular(fd, path)


def _regular(fd: int, path: Path | str) -> int:
    """``fd`` when it is a regular file; else it is closed and ``UnsafeFileError`` names what it is."""
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafeFileError(f"{path} is {_kind(mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


def read_descriptor(fd: int, limit: int, name: Path | str) -> bytes:
    """The content of the open regular file ``fd`` (called ``name`` in errors): at most ``limit`` bytes.

    Refused from its size when the file is larger; a file that grows while it is read is refused once it
    passes ``limit``. Read with ``pread`` from offset 0 (the descriptor's offset is not moved).
    """
    size = os.fstat(fd).st_size
    if size > limit:
        raise UnsafeFileError(f"{name} is {size} bytes, over the {limit}-byte limit")
    parts: list[bytes] = []
    got = 0
    while True:
        try:
            part = os.pread(fd, min(_CHUNK, limit + 1 - got), got)
        except OSError as exc:
            raise UnsafeFileError(f"{name} cannot be read: {exc.strerror}") from None
        if not part:
            break
        parts.append(part)
        got += len(part)
        if got > limit:
            raise UnsafeFileError(f"{name} grew past the {limit}-byte limit while it was read")
    return b"".join(parts)


def read_regular(path: Path | str, limit: int) -> bytes:
    """The content of the regular file ``path``, at most ``limit`` bytes (see the module's rules)."""
    fd = open_regular(path)
    try:
        return read_descriptor(fd, limit, path)
    finally:
        os.close(fd)


def decode(decoder: Callable[[bytes], T], data: bytes, what: str) -> T:
    """``decoder(data)``, with every way untrusted bytes can fail it turned into ``BundleFormatError``
    that names ``what`` (e.g. ``"catalog.json"``): malformed, of the wrong shape, nested too deeply."""
    try:
        return decoder(data)
    except RecursionError:
        raise BundleFormatError(f"{what} is nested too deeply to be read") from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # ValidationError is a DecodeError
        raise BundleFormatError(f"{what} is malformed: {exc}") from None


class FormatHeader(msgspec.Struct):
    """What is read of a versioned JSON file before its body: which format and version it claims."""

    format: str = ""
    version: int | None = None


def check_format(
    header: FormatHeader, where: str, *, fmt: str, readable: tuple[int, ...], what: str, word: str
) -> None:
    """Refuse ``header`` (read from ``where``) unless it claims format ``fmt`` in a ``readable`` version:
    ``BundleFormatError`` names the file as not a docbundle ``what``, ``UnsupportedFormatVersionError`` names
    its ``word`` version (e.g. "index") and the versions this reader knows, so a newer file says to upgrade.
    """
    if header.format != fmt:
        raise BundleFormatError(f"{where} is not a docbundle {what} (no format {fmt!r})")
    if header.version not in readable:
        raise UnsupportedFormatVersionError(
            f"{where} has {word} version {header.version!r}; this docbundle reads "
            f"{', '.join(map(str, readable))} (a newer docbundle reads it)"
        )
