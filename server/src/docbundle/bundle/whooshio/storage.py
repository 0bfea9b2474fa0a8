"""Opening an index: the schema, the held-descriptor storage and index (TOC decoded once, other TOC
versions refused before whoosh's legacy loader sees them), opening by path, and a searcher for tools."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from whoosh.fields import ID, STORED, TEXT, Schema
from whoosh.filedb.filestore import FileStorage, ReadOnlyError, Storage
from whoosh.filedb.structfile import StructFile
from whoosh.index import _CURRENT_TOC_VERSION, TOC, FileIndex, Index
from whoosh.reading import IndexReader

from ..errors import BundleFormatError
from ..heldindex import PreadFile
from .unpickling import _refuse_outside, restricted_unpickling

__all__ = [
    "Index",
    "Schema",
    "build_schema",
    "check_index",
    "open_held_index",
    "open_index_dir",
    "searching",
]

# -- opening -----------------------------------------------------------------------------------------


def build_schema(
    analyzer: Any,
    *,
    positional: Iterable[str],
    frequency: Iterable[str],
    ids: Iterable[str],
    stored: Iterable[str],
) -> Schema:
    """A whoosh schema: text fields with positions, text fields without, ID fields and stored fields.

    Text fields use ``multitoken_query="and"``: one query word that analyses to several terms (CJK
    bigrams, the parts of an identifier) must match all of them, not any one.
    """
    fields: dict[str, Any] = {}
    for name in positional:
        fields[name] = TEXT(analyzer=analyzer, multitoken_query="and")
    for name in frequency:
        fields[name] = TEXT(analyzer=analyzer, multitoken_query="and", phrase=False)
    for name in ids:
        fields[name] = ID()
    for name in stored:
        fields[name] = STORED()
    return Schema(**fields)


class _DoorIndex(FileIndex):  # type: ignore[misc]
    """A ``FileIndex`` that opens readers only inside ``restricted_unpickling``."""

    def reader(self, reuse: Any = None) -> IndexReader:
        _refuse_outside()
        return super().reader(reuse=reuse)


class _HeldStorage(Storage):  # type: ignore[misc]
    """A read-only whoosh storage over held descriptors: ``{name: (fd, size)}``."""

    supports_mmap = False
    readonly = True

    def __init__(self, files: Mapping[str, tuple[int, int]]) -> None:
        self._files = dict(files)

    def open_file(self, name: str, *args: Any, **kwargs: Any) -> StructFile:
        try:
            fd, size = self._files[name]
        except KeyError:
            raise NameError(f"the index has no file {name!r}") from None
        return StructFile(PreadFile(fd, size), name=name)

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
        pass  # the descriptors belong to the caller (reader.HeldFiles)


def _check_toc(storage: Storage, indexname: str) -> int:
    """The latest TOC generation, once its header says whoosh's current format (nothing unpickled).

    whoosh reads other TOC versions with its legacy loader, which uses the stock unpickler.
    """
    generation = int(TOC._latest_generation(storage, indexname))
    if generation < 0:
        raise BundleFormatError("the index has no TOC")
    stream = storage.open_file(TOC._filename(indexname, generation))
    try:
        for _ in range(3):  # the sizes of int, long and float
            stream.read_varint()
        stream.read_int()  # -12345, the byte-order check
        version = int(stream.read_int())
    finally:
        stream.close()
    if version != _CURRENT_TOC_VERSION:
        raise BundleFormatError(
            f"the index TOC has whoosh format {version}, which docbundle never writes; refusing to read it"
        )
    return generation


class _HeldIndex(_DoorIndex):
    """A whoosh index whose TOC was decoded once, when it was opened (whoosh re-reads it per reader)."""

    def __init__(self, storage: _HeldStorage, schema: Schema, indexname: str) -> None:
        self.storage = storage
        self._schema = schema
        self.indexname = indexname
        try:
            generation = _check_toc(storage, indexname)
            with restricted_unpickling():
                self._toc = TOC.read(storage, indexname, gen=generation, schema=schema)
        except BundleFormatError:
            raise
        except Exception as exc:
            raise BundleFormatError(f"the index TOC cannot be read: {exc}") from exc

    def _read_toc(self) -> TOC:
        toc = self._toc  # a fresh segment list: whoosh's reader(reuse=...) extends the one it gets
        return TOC(toc.schema, list(toc.segments), toc.generation, version=toc.version, release=toc.release)

    def latest_generation(self) -> int:
        return int(self._toc.generation)

    def refresh(self) -> _HeldIndex:
        return self

    def up_to_date(self) -> bool:
        return True


def open_held_index(files: Mapping[str, tuple[int, int]], schema: Schema, indexname: str) -> Index:
    """Open the index in ``files`` (``{name: (descriptor, size)}``, names relative to the index
    directory) with ``schema`` from code; the descriptors stay the caller's."""
    return _HeldIndex(_HeldStorage(files), schema, indexname)


def open_index_dir(directory: Path, schema: Schema, indexname: str, *, use_mmap: bool = True) -> Index:
    """Open an index by path, as it is on disk now (trusted local tools; readers still restricted)."""
    storage = FileStorage(str(directory), supports_mmap=use_mmap, readonly=True)
    _check_toc(storage, indexname)
    with restricted_unpickling():
        return _DoorIndex(storage, schema=schema, indexname=indexname)


def check_index(index: Index) -> None:
    """Load the index structure once (segments, compound directory): refused pickles raise here."""
    with restricted_unpickling():
        index.reader().close()


@contextlib.contextmanager
def searching(index: Index) -> Iterator[Any]:
    """A whoosh ``Searcher`` over ``index``, usable inside the block (its pickles restricted)."""
    with restricted_unpickling():
        searcher = index.searcher()
        try:
            yield searcher
        finally:
            searcher.close()
