"""Writing an index: one optimized segment from fields analysed elsewhere, equal inputs giving equal
bytes (seeded segment id, mtimes 0), the term file written in one go, the collector paused meanwhile."""

from __future__ import annotations

import abc
import contextlib
import functools
import hashlib
import random
import struct
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import whoosh.codec.whoosh3 as _w3
import whoosh.filedb.filetables as _filetables
from docbundle.common.process import collector_paused
from whoosh.fields import Schema
from whoosh.filedb.filestore import FileStorage
from whoosh.system import pack_int, pack_long, pack_ushort
from whoosh.util import IDCHARS
from whoosh.util.numeric import byte_to_length, length_to_byte

from .encoding import _encode_all, _Posting, _TermJob
from .postings import FieldPostings

__all__ = ["CommitOnExit", "SegmentBuilder", "segment_id"]

# -- writing -----------------------------------------------------------------------------------------


class _StableStorage(FileStorage):  # type: ignore[misc]
    """FileStorage that records mtime 0 in compound segments, so equal inputs give equal bytes."""

    def file_modified(self, name: str) -> float:
        return 0.0


def segment_id(seed: str, size: int = 16) -> str:
    """The segment id whoosh would draw from a ``random`` module seeded with ``seed`` (``random_name``)."""
    rng = random.Random(seed)
    return "".join(rng.choice(IDCHARS) for _ in range(size))


class _SeededCodec(_w3.W3Codec):  # type: ignore[misc]
    """A W3 codec whose new segment takes a given id (whoosh draws one from the global ``random``).

    The segment carries a plain ``W3Codec`` with the same settings, so the TOC pickles (and the
    restricted unpickler admits) exactly what an unseeded writer stores.
    """

    def __init__(self, segid: str) -> None:
        super().__init__()
        self._segid = segid

    def new_segment(self, storage: Any, indexname: str) -> Any:
        codec = _w3.W3Codec(self._blocklimit, self._compression, self._inlinelimit)
        return _w3.W3Segment(codec, indexname, segid=self._segid)


_KEYVAL = struct.Struct("!ii")  # filetables' key and value lengths before each term-file record


def _md5_low32(key: bytes) -> int:
    """``filetables.md5_hash``: the low 32 bits of the key's MD5, without its hex round trip."""
    return int.from_bytes(hashlib.md5(key, usedforsecurity=False).digest()[-4:], "big")


def _write_terms(fieldwriter: Any, keys: Sequence[tuple[str, bytes]], jobs: Sequence[_TermJob]) -> None:
    """Write every term's postings and term-file record, as whoosh's ``W3FieldWriter`` would.

    The postings file gets each part of ``_encode_all`` in one write; the term file
    (``filetables.OrderedHashWriter``) gets its records in one write, with the positions, hash buckets
    and last key its ``close`` needs to write the hash tables, the directory and the key index.
    """
    codec = fieldwriter._codec
    if codec._inlinelimit > 1:  # pragma: no cover - the codec here is always W3Codec()'s defaults
        raise ValueError("inlined posting lists are not written by this writer")
    fmap = fieldwriter._fieldmap
    postfile = fieldwriter._postfile
    tindex = fieldwriter._tindex
    hashfn = _md5_low32 if tindex.hashfn is _filetables.md5_hash else tindex.hashfn
    buckets = tindex.buckets
    dbfile = tindex.dbfile
    pos = dbfile.tell()
    lastkey = tindex.lastkey
    records = bytearray()
    positions: list[int] = []
    prefixes: dict[str, bytes] = {}
    done = 0
    for block, encoded in _encode_all(jobs, codec._blocklimit, codec._compression):
        base = postfile.tell()
        postfile.write(block)
        run = keys[done : done + len(encoded)]
        done += len(encoded)
        for (start, length, terminfo), (name, btext) in zip(encoded, run, strict=True):
            prefix = prefixes.get(name)
            if prefix is None:
                if name not in fmap:
                    fmap[name] = len(fmap)
                prefix = prefixes[name] = pack_ushort(fmap[name])
            key = prefix + btext
            if key <= lastkey:
                raise ValueError(f"keys must increase: {lastkey!r}..{key!r}")
            value = terminfo + pack_long(base + start) + pack_int(length)
            positions.append(pos)
            records += _KEYVAL.pack(len(key), len(value))
            records += key
            records += value
            h = hashfn(key)
            buckets[h & 255].append((h, pos))
            pos += _KEYVAL.size + len(key) + len(value)
            lastkey = key
    dbfile.write(bytes(records))
    tindex.index.extend(positions)
    tindex.lastkey = lastkey
    tindex._write_hashes = functools.partial(_write_hash_tables, tindex)  # what its close() calls


_NULL_POINTER = _filetables._pointer.pack(0, 0)


def _write_hash_tables(tindex: Any) -> None:
    """``HashWriter._write_hashes``, the same bytes: each of the 256 buckets' open-addressing table of
    ``(hash, position)`` pointers, written in one write per bucket instead of one per slot (48,000
    writes through ``StructFile`` for html-python, a tenth of the commit's serial end)."""
    dbfile = tindex.dbfile
    pack = _filetables._pointer.pack
    for entries in tindex.buckets:
        tindex.directory.append((dbfile.tell(), 2 * len(entries)))
        numslots = 2 * len(entries)
        # whoosh marks an empty slot (0, 0); no entry is (0, 0), for no key starts at position 0
        table: list[tuple[int, int] | None] = [None] * numslots
        for hashval, position in entries:
            slot = (hashval >> 8) % numslots
            while table[slot] is not None:
                slot = (slot + 1) % numslots
            table[slot] = (hashval, position)
        dbfile.write(b"".join([_NULL_POINTER if e is None else pack(*e) for e in table]))


_FAILED = "a document could not be added, so this index is incomplete: cancel it"


def _analysed_writer_class() -> type:
    from whoosh.writing import SegmentWriter  # the server never writes: not imported when it reads

    class _AnalysedSegmentWriter(SegmentWriter):  # type: ignore[misc]
        """A SegmentWriter fed with fields analysed elsewhere. It keeps each term's postings together
        (documents come in order, so each list is sorted) instead of in whoosh's sorting pool, and its
        flush writes them term by term, with the field lengths it was given."""

        def __init__(self, ix: Any, **kwargs: Any) -> None:
            super().__init__(ix, **kwargs)
            # field name -> term bytes -> its postings (one dict per field: no (field, term) key to
            # build and hash for each of the build's postings)
            self._postings: dict[str, dict[bytes, list[_Posting]]] = {}
            # A document that failed halfway left some of its postings, field lengths and column
            # values behind (whoosh's cancel_doc undoes none of them): the index can only be cancelled.
            self.failed = False

        def add_analysed(self, analysed: Mapping[str, FieldPostings], stored: Mapping[str, object]) -> None:
            self._check_state()
            if self.failed:
                raise RuntimeError(_FAILED)
            pdw = self.perdocwriter
            docnum = self.docnum
            pdw.start_doc(docnum)
            names = sorted([*analysed, *stored])
            try:
                for name in names:
                    field = self.schema[name]
                    if name in analysed:
                        items, length = analysed[name]
                        pdw.add_field(name, field, None, length)
                        # what whoosh reads back from the length column: the length as its byte encodes it
                        stored_length = byte_to_length(length_to_byte(length)) if length else 0
                        postings = self._postings.get(name)
                        if postings is None:
                            postings = self._postings[name] = {}
                        get = postings.get
                        for tbytes, _freq, weight, vbytes in items:
                            found = get(tbytes)
                            if found is None:
                                postings[tbytes] = [(docnum, weight, vbytes, stored_length)]
                            else:
                                found.append((docnum, weight, vbytes, stored_length))
                    else:
                        pdw.add_field(name, field, stored[name], 0)
            except BaseException:
                self.failed = True
                pdw.cancel_doc()
                raise
            pdw.finish_doc()
            self._added = True
            self.docnum += 1

        def _flush_segment(self) -> None:
            self.perdocwriter.close()
            by_field = self._postings
            keys = [(name, tbytes) for name in sorted(by_field) for tbytes in sorted(by_field[name])]
            fixed = {name: self.schema[name].format.fixed_value_size() for name in by_field}
            _write_terms(self.fieldwriter, keys, [(fixed[name], by_field[name][bt]) for name, bt in keys])
            self.fieldwriter.close()

    return _AnalysedSegmentWriter


class CommitOnExit(abc.ABC):
    """A writer as a context manager: ``commit`` when the ``with`` block ends, ``cancel`` when it raises."""

    @abc.abstractmethod
    def commit(self) -> None: ...

    @abc.abstractmethod
    def cancel(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.cancel()


class SegmentBuilder(CommitOnExit):
    """Writes a new index of one optimized segment into ``directory``; equal inputs give equal bytes.

    Use it as a context manager (or call ``commit`` or ``cancel``): garbage collection is paused while it
    is open (millions of long-lived posting tuples make every full collection crawl through them, and
    nothing here is cyclic: -15% build time) and restored when it closes, whichever way.
    """

    def __init__(
        self, directory: Path, schema: Schema, indexname: str, seed: str, limitmb: int = 256
    ) -> None:
        self._dir = directory
        self._closing = contextlib.ExitStack()
        self._closing.enter_context(collector_paused())
        try:
            ix = _StableStorage(str(directory)).create_index(schema, indexname=indexname)
            self._writer = _analysed_writer_class()(ix, limitmb=limitmb, codec=_SeededCodec(segment_id(seed)))
        except BaseException:
            self._closing.close()
            raise
        self._ix = ix

    def add(self, analysed: Mapping[str, FieldPostings], stored: Mapping[str, object]) -> None:
        """Add one document: its analysed text fields and its stored values."""
        self._writer.add_analysed(analysed, stored)

    def doc_frequencies(self, fields: Iterable[str]) -> dict[str, int]:
        """What ``PostingReader.doc_frequencies`` will read from the committed index, from the postings
        held in memory (one posting per document), without opening the index again."""
        wanted = set(fields)
        out: dict[str, int] = {}
        for field, terms in self._writer._postings.items():
            if field in wanted:
                for btext, postings in terms.items():
                    term = btext.decode("utf-8")
                    if len(postings) > out.get(term, 0):
                        out[term] = len(postings)
        return out

    def commit(self) -> None:
        """Write the segment and the TOC, and remove the lock file (closes the builder)."""
        if self._writer.is_closed:
            return
        if self._writer.failed:
            raise RuntimeError(_FAILED)
        try:
            self._writer.commit(optimize=True)
            self._ix.close()
        finally:
            self._closing.close()
        for leftover in self._dir.glob("*LOCK"):
            leftover.unlink()

    def cancel(self) -> None:
        """Abandon the index (the caller removes the directory); closes the builder."""
        try:
            if not self._writer.is_closed:
                self._writer.cancel()
        finally:
            self._closing.close()
