"""Reading an index: posting lists as two arrays a block at a time, positions as flat arrays, field
lengths in one read of their column, document frequencies; each through restricted unpickling."""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import whoosh.codec.whoosh3 as _w3
from whoosh.index import Index
from whoosh.reading import TermNotFound
from whoosh.util.numeric import byte_to_length

from .unpickling import restricted_unpickling

__all__ = ["PositionLists", "PostingReader"]

_CHECK_EVERY = 4096  # postings between two calls of a reader's ``check``
_BLOCK = 128  # postings in a W3 block

# -- reading -----------------------------------------------------------------------------------------


class PositionLists(NamedTuple):
    """A term's positions in one field, for every document holding it, in three flat arrays (``I``):
    ``docs`` ascending, ``ends[k]`` where the positions of ``docs[k]`` end in ``flat``. A few bytes a
    document and a position, where a dict of sets took about 130 and 40 (issue 22: the positions
    cache held 81 entries of large-en in its 16 MiB, and warm phrase queries read their terms again)."""

    docs: array[int]
    ends: array[int]
    flat: array[int]

    def of(self, docnum: int) -> array[int]:
        """The positions of ``docnum`` (ascending; empty when it does not hold the term)."""
        k = bisect.bisect_left(self.docs, docnum)
        if k == len(self.docs) or self.docs[k] != docnum:
            return array("I")
        return self.flat[self.ends[k - 1] if k else 0 : self.ends[k]]

    def nbytes(self) -> int:
        """The bytes of its arrays."""
        return 4 * (len(self.docs) + len(self.ends) + len(self.flat))


class PostingReader:
    """Reads postings, positions, field lengths and term statistics of an index, for one thread.

    Open one per thread and search (whoosh readers keep file positions); ``close`` it after.
    """

    def __init__(self, index: Index) -> None:
        self._schema = index.schema
        with restricted_unpickling():
            self._reader = index.reader()

    def close(self) -> None:
        """Close the whoosh reader."""
        self._reader.close()

    def doc_frequency(self, field: str, term: str) -> int:
        """How many documents hold ``term`` in ``field``, from the term dictionary (no postings read)."""
        with restricted_unpickling():
            try:
                return int(self._reader.doc_frequency(field, term.encode("utf-8")))
            except TermNotFound:
                return 0

    def most_frequent_terms(self, field: str, number: int) -> list[str]:
        """The ``number`` terms of ``field`` found in most documents' postings (by total weight)."""
        with restricted_unpickling():
            return [t.decode("utf-8") for _, t in self._reader.most_frequent_terms(field, number)]

    def doc_frequencies(self, fields: Iterable[str]) -> dict[str, int]:
        """Every term of ``fields`` with its document frequency: the largest over those fields (whoosh
        keeps one per field; a chunk holding the term in two fields is counted once in each)."""
        out: dict[str, int] = {}
        with restricted_unpickling():
            for field in fields:
                for text, info in self._reader.iter_field(field):
                    term = text.decode("utf-8") if isinstance(text, bytes) else str(text)
                    df = int(info.doc_frequency())
                    if df > out.get(term, 0):
                        out[term] = df
        return out

    def postings(
        self, field: str, term: str, check: Callable[[], None] = lambda: None
    ) -> tuple[array[int], array[float]] | None:
        """Document numbers (``I``) and term frequencies (``f``) of ``term`` in ``field``; None when absent.

        ``check`` (a deadline) is called every few thousand postings and may raise to stop the read.
        """
        with restricted_unpickling():
            try:  # one term lookup: asking "in" first would look the term up twice
                m = self._reader.postings(field, term.encode("utf-8"))
            except TermNotFound:
                return None
            ids: array[int] = array("I")
            tfs: array[float] = array("f")
            _read_postings(m, ids, tfs, check)
            return ids, tfs

    def positions(self, field: str, term: str, check: Callable[[], None] = lambda: None) -> PositionLists:
        """The positions of ``term`` in each document holding it in ``field`` (empty when none)."""
        out = PositionLists(array("I"), array("I"), array("I"))
        fmt = self._schema[field].format
        btext = term.encode("utf-8")
        with restricted_unpickling():
            if (field, btext) not in self._reader:
                return out
            m = self._reader.postings(field, btext)
            n = 0
            while m.is_active():
                out.docs.append(m.id())
                out.flat.extend(fmt.decode_positions(m.value()))
                out.ends.append(len(out.flat))
                m.next()
                n += 1
                if n % _CHECK_EVERY == 0:
                    check()
        return out

    def field_lengths(self, field: str, doc_count: int) -> array[int]:
        """Every document's length in ``field`` (``I``, ``doc_count`` long), as whoosh's byte encodes it."""
        reader = self._reader
        perdoc = getattr(reader, "_perdoc", None)  # whoosh keeps field lengths in a per-segment column
        lenfield = f"_{field}_len"
        with restricted_unpickling():
            if perdoc is None:  # not the one optimized segment a bundle holds: the slow, general way
                return array("I", (reader.doc_field_length(i, field) or 0 for i in range(doc_count)))
            if not perdoc.has_column(lenfield):  # no document has any text in this field
                return array("I", bytes(4 * doc_count))
            table = [byte_to_length(b) or 0 for b in range(256)]
            col = perdoc.column_reader(lenfield, _w3.LENGTHS_COLUMN)
            try:  # one read of the byte column instead of one per document (20 ms on large-en)
                raw = bytes(col._dbfile.get(col._basepos, col._count))
                raw += bytes(doc_count - len(raw))
            except AttributeError:
                raw = bytes(col.load())
            return array("I", (table[b] for b in raw[:doc_count]))


def _read_postings(m: Any, ids: array[int], tfs: array[float], check: Callable[[], None]) -> None:
    """Append every (document, term frequency) of a posting list, a whole block at a time when possible."""
    if all(hasattr(m, a) for a in ("_read_ids", "_read_weights", "_next_block", "_ids", "_weights")):
        # whoosh's W3 leaf matcher decodes 128 postings per block; taking its decoded arrays avoids a
        # Python call per posting (a first search on large-en loads tens of thousands of them).
        blocks = 0
        while m.is_active():
            m._read_ids()
            m._read_weights()
            ids.extend(m._ids)
            tfs.extend(m._weights)
            m._next_block()
            blocks += 1
            if blocks % (_CHECK_EVERY // _BLOCK) == 0:
                check()
        return
    while m.is_active():
        ids.append(m.id())
        tfs.append(m.weight())
        m.next()
        if len(ids) % _CHECK_EVERY == 0:
            check()
