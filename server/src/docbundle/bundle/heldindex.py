"""Read-only files over the descriptors that verification hashed, each with its own position.

whoosh's ``FileStorage`` opens files by name every time a reader is made, so a bundle checked at open
time could be swapped underneath a running server (by a rebuild, a prune or an attacker) and the new
bytes used unchecked. A bundle's index is therefore served from the descriptors opened *before*
hashing (``reader.HeldFiles``): ``PreadFile`` reads one with ``os.pread`` (no shared file position, so
readers in different threads never race). The whoosh storage around it is ``whooshio``'s; this module
imports no whoosh.
"""

from __future__ import annotations

import io
import os
from typing import Any

_READ_AHEAD = 64 * 1024  # bytes fetched per pread when a read misses the window


class _PreadRaw(io.RawIOBase):
    """A raw read-only file over a shared descriptor, with its own position (``os.preadv``)."""

    def __init__(self, fd: int, size: int) -> None:
        super().__init__()
        self._fd = fd
        self._size = size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = os.preadv(self._fd, [buffer], self._pos)
        self._pos += n
        return n

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        super().close()  # the descriptor belongs to HeldFiles


class PreadFile(io.BufferedReader):
    """Buffered reads (C) of a held descriptor; no ``fileno``, so whoosh never maps or dups it."""

    def __init__(self, fd: int, size: int) -> None:
        super().__init__(_PreadRaw(fd, size), buffer_size=_READ_AHEAD)

    def fileno(self) -> int:
        raise io.UnsupportedOperation("a held index file has no descriptor of its own")
