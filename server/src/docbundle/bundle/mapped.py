"""A bundle file read through a read-only memory map: the base of ``DocStore`` and ``VectorFile``.

The map is made from a descriptor the caller keeps or closes (mmap holds its own duplicate, so the map
outlives a deleted or replaced file) and is released by ``close``, or on leaving a ``with`` block.
"""

from __future__ import annotations

import mmap
from types import TracebackType
from typing import Self


class MappedFile:
    """A read-only memory map of one file, released by ``close`` (idempotent) or a ``with`` block."""

    _map: mmap.mmap | None = None

    def _map_file(self, fd: int) -> mmap.mmap:
        """Map the whole file open at ``fd``, read-only, and keep the map until ``close``."""
        self._map = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        return self._map

    def close(self) -> None:
        """Release the map."""
        if self._map is not None:
            self._map.close()
            self._map = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
