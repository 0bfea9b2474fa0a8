"""The document store: ``docs.bin`` (msgpack records back to back) and ``docs.idx`` (their offsets).

``docs.idx`` layout (all integers little-endian uint64)::

    b"DBDOCS1\\n"  count  offset[0] ... offset[count]

Record ``i`` is ``docs.bin[offset[i]:offset[i+1]]``. The reader memory-maps ``docs.bin`` and decodes one
record on demand straight from the map (msgspec decodes a memoryview without copying it), so opening a
store costs one small read whatever the bundle's size.

A document's text is the concatenation of its chunks' texts (chunks tile the page), so it is stored once.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from .errors import BundleFormatError
from .mapped import MappedFile

DOCS_BIN = "docs.bin"
DOCS_IDX = "docs.idx"
_MAGIC = b"DBDOCS1\n"
_HEAD = struct.Struct("<8sQ")


class ChunkRecord(msgspec.Struct, frozen=True, array_like=True):
    """One search unit: a section of a page, as markdown source, with its heading path.

    ``anchor`` is the id of the section's heading on the page (the fragment a hit in it cites), ""
    when it has none. It is written as a fifth element only when it is set (``write_store``): a record
    without one is byte for byte what it was before anchors existed, and readers that know four
    elements ignore a fifth (msgspec drops an array-like struct's extra trailing elements)."""

    text: str
    heading_path: list[str]
    start_line: int
    end_line: int
    anchor: str = ""


class _BareChunk(msgspec.Struct, frozen=True, array_like=True):
    """A ``ChunkRecord`` without an anchor as it is written: its first four elements only."""

    text: str
    heading_path: list[str]
    start_line: int
    end_line: int


class DocMeta(msgspec.Struct, frozen=True, kw_only=True):
    """One document's identity and llms.txt metadata: the fields every view of a document shares (the
    store's record, the export's document, the diff's and the table of contents' entries)."""

    id: str
    url: str
    title: str
    description: str = ""
    section: str = ""
    optional: bool = False

    def meta(self) -> DocMeta:
        """These fields alone, as a ``DocMeta`` (of a record, without its chunks)."""
        return DocMeta(**{name: getattr(self, name) for name in DocMeta.__struct_fields__})


class DocRecord(DocMeta, frozen=True, kw_only=True):
    """One document: identity, llms.txt metadata (``DocMeta``), and its chunks in page order."""

    chunks: list[ChunkRecord] = []

    @property
    def text(self) -> str:
        """The whole page as markdown."""
        return "".join(c.text for c in self.chunks)


class _DocId(msgspec.Struct):
    id: str


_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(DocRecord)
_id_dec = msgspec.msgpack.Decoder(_DocId)


def _written(rec: DocRecord) -> DocRecord:
    """``rec`` as it is written: its chunks without an anchor as four elements (``ChunkRecord``)."""
    if all(c.anchor for c in rec.chunks):
        return rec
    chunks: list[Any] = [
        c if c.anchor else _BareChunk(c.text, c.heading_path, c.start_line, c.end_line) for c in rec.chunks
    ]
    return msgspec.structs.replace(rec, chunks=chunks)


def write_store(directory: Path, records: Iterable[DocRecord]) -> int:
    """Write ``docs.bin`` and ``docs.idx`` into ``directory``; returns the number of records."""
    offsets = array("Q", [0])
    with open(directory / DOCS_BIN, "wb") as fh:
        pos = 0
        for rec in records:
            data = _enc.encode(_written(rec))
            fh.write(data)
            pos += len(data)
            offsets.append(pos)
    if sys.byteorder != "little":
        offsets.byteswap()
    with open(directory / DOCS_IDX, "wb") as fh:
        fh.write(_HEAD.pack(_MAGIC, len(offsets) - 1))
        fh.write(offsets.tobytes())
    return len(offsets) - 1


class DocStore(MappedFile):
    """Random access to a bundle's documents through a read-only memory map."""

    def __init__(self, directory: Path) -> None:
        idx = (directory / DOCS_IDX).read_bytes()
        with open(directory / DOCS_BIN, "rb") as fh:
            self._setup(fh.fileno(), idx)

    @classmethod
    def from_held(cls, bin_fd: int, idx: bytes) -> DocStore:
        """A store over an open descriptor of ``docs.bin`` (mapped; the caller keeps its descriptor)."""
        store = cls.__new__(cls)
        store._setup(bin_fd, idx)
        return store

    def _setup(self, bin_fd: int, idx: bytes) -> None:
        if len(idx) < _HEAD.size:
            raise BundleFormatError(f"{DOCS_IDX} is truncated ({len(idx)} bytes)")
        magic, count = _HEAD.unpack_from(idx)
        if magic != _MAGIC:
            raise BundleFormatError(f"{DOCS_IDX} does not start with the docbundle store magic")
        if len(idx) != _HEAD.size + 8 * (count + 1):
            raise BundleFormatError(
                f"{DOCS_IDX} holds {len(idx)} bytes, expected {_HEAD.size + 8 * (count + 1)}"
            )
        self._offsets = array("Q")
        self._offsets.frombytes(idx[_HEAD.size :])
        if sys.byteorder != "little":
            self._offsets.byteswap()
        self._count: int = count
        size = os.fstat(bin_fd).st_size
        if self._offsets[-1] != size or any(
            a > b for a, b in zip(self._offsets, self._offsets[1:], strict=False)
        ):
            raise BundleFormatError(f"{DOCS_IDX} offsets do not match {DOCS_BIN} ({size} bytes)")
        if size:
            self._map_file(bin_fd)
        self._ids: dict[str, int] | None = None

    def __len__(self) -> int:
        return self._count

    def _slice(self, i: int) -> memoryview:
        if not 0 <= i < self._count:
            raise IndexError(f"document number {i} out of range (0..{self._count - 1})")
        assert self._map is not None
        return memoryview(self._map)[self._offsets[i] : self._offsets[i + 1]]

    def get(self, i: int) -> DocRecord:
        """Decode document number ``i``."""
        view = self._slice(i)
        try:
            return _dec.decode(view)
        except msgspec.DecodeError as exc:
            raise BundleFormatError(f"{DOCS_BIN} record {i} is malformed: {exc}") from exc
        finally:
            view.release()

    def __iter__(self) -> Iterator[DocRecord]:
        return (self.get(i) for i in range(self._count))

    def number_of(self, doc_id: str) -> int | None:
        """The record number of the document with id ``doc_id`` (index built on first use)."""
        if self._ids is None:
            ids: dict[str, int] = {}
            for i in range(self._count):
                view = self._slice(i)
                try:
                    ids[_id_dec.decode(view).id] = i
                finally:
                    view.release()
            self._ids = ids
        return self._ids.get(doc_id)
