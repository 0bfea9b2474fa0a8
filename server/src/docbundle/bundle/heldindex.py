"""Open a bundle's whoosh index over the file descriptors that verification hashed.

whoosh's ``FileStorage`` opens files by name every time a reader is made, and ``FileIndex`` re-reads
and re-unpickles its TOC on every ``reader()``/``searcher()`` call. A bundle checked at open time could
therefore be swapped underneath a running server (by a rebuild, a prune or an attacker) and the new
bytes used unchecked. ``HeldStorage`` serves the index from descriptors opened *before* hashing
(``reader.HeldFiles``) with ``os.pread`` (no shared file position, so readers in different threads
never race), and ``HeldIndex`` decodes the TOC once, at open time, through the restricted unpickler.
"""

from __future__ import annotations

import io
import os
from typing import Any

from whoosh.filedb.filestore import ReadOnlyError, Storage
from whoosh.filedb.structfile import StructFile
from whoosh.index import TOC, FileIndex

from . import safepickle
from .errors import BundleFormatError

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


class _PreadFile(io.BufferedReader):
    """Buffered reads (C) over ``_PreadRaw``; no ``fileno``, so whoosh never maps or dups it."""

    def __init__(self, fd: int, size: int, name: str) -> None:
        super().__init__(_PreadRaw(fd, size), buffer_size=_READ_AHEAD)
        del name  # BufferedReader's name comes from its raw file; StructFile keeps its own

    def fileno(self) -> int:
        raise io.UnsupportedOperation("a held index file has no descriptor of its own")


class HeldStorage(Storage):  # type: ignore[misc]
    """A read-only whoosh storage over held descriptors: ``{name: (fd, size)}``."""

    supports_mmap = False
    readonly = True

    def __init__(self, files: dict[str, tuple[int, int]]) -> None:
        self._files = dict(files)

    def open_file(self, name: str, *args: Any, **kwargs: Any) -> StructFile:
        try:
            fd, size = self._files[name]
        except KeyError:
            raise NameError(f"the index has no file {name!r}") from None
        return StructFile(_PreadFile(fd, size, name), name=name)

    def list(self) -> list[str]:
        return sorted(self._files)

    def file_exists(self, name: str) -> bool:
        return name in self._files

    def file_length(self, name: str) -> int:
        return self._files[name][1]

    def file_modified(self, name: str) -> float:
        return 0.0

    def create_file(self, name: str, *args: Any, **kwargs: Any) -> Any:
        raise ReadOnlyError(f"a bundle's index is read-only ({name})")

    def delete_file(self, name: str) -> None:
        raise ReadOnlyError(f"a bundle's index is read-only ({name})")

    def rename_file(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyError("a bundle's index is read-only")

    def lock(self, name: str) -> Any:
        raise ReadOnlyError("a bundle's index is read-only")

    def close(self) -> None:
        pass  # the descriptors belong to HeldFiles


class HeldIndex(FileIndex):  # type: ignore[misc]
    """A whoosh index whose TOC was decoded once, when it was opened."""

    def __init__(self, storage: HeldStorage, schema: Any, indexname: str) -> None:
        self.storage = storage
        self._schema = schema
        self.indexname = indexname
        try:
            self._toc = TOC.read(storage, indexname, schema=schema)
        except BundleFormatError:
            raise
        except Exception as exc:
            raise BundleFormatError(f"the index TOC cannot be read: {exc}") from exc

    def _read_toc(self) -> TOC:
        toc = self._toc  # a fresh segment list: whoosh's reader(reuse=...) extends the one it gets
        return TOC(toc.schema, list(toc.segments), toc.generation, version=toc.version, release=toc.release)

    def latest_generation(self) -> int:
        return int(self._toc.generation)

    def refresh(self) -> HeldIndex:
        return self

    def up_to_date(self) -> bool:
        return True


def open_held_index(files: dict[str, tuple[int, int]], schema: Any, indexname: str) -> HeldIndex:
    """Open the index in ``files`` (names relative to the index directory) with ``schema`` from code."""
    safepickle.install()
    return HeldIndex(HeldStorage(files), schema, indexname)
