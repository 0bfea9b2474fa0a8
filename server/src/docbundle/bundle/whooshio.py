"""The one door to whoosh: every whoosh import and every reach into whoosh's private parts is here.

docbundle scores on its own (``search``) and uses whoosh only as a file format. This module is the
whole of that use, so a whoosh upgrade is checked in one place (``tests/bundle/test_whoosh_door.py``
pins what each function returns; ``server/pyproject.toml`` pins whoosh-reloaded to the releases it was
tested on). Nothing else in ``docbundle`` imports whoosh; an import-linter contract (``.importlinter``,
run by ``tests/test_whoosh_contract.py``) keeps it so.

What goes through the door:

- **the schema and the analyzer's base classes** (``build_schema``, ``Tokenizer``, ``Token``,
  ``STOP_WORDS``, ``porter2_stem``): ``analysis.DocTokenizer`` must stay a whoosh ``Tokenizer`` named
  by its own import path, since whoosh pickles the schema into every TOC;
- **reading** (``PostingReader``): a posting list as two arrays, a 128-posting block at a time
  (whoosh's W3 leaf matcher's private ``_read_ids``/``_ids``/``_next_block``), field lengths in one read
  of the length column (the reader's private ``_perdoc`` and the column's ``_dbfile``/``_basepos``/
  ``_count``), positions, document frequencies; each falls back to whoosh's public matcher when a
  private part is missing;
- **restricted unpickling** (``restricted_unpickling``): whoosh unpickles its TOC segment list, compound
  directory, posting-block headers, inlined postings and stored fields with module-level ``load``/
  ``loads`` functions. While a call is inside this context those functions, in the three whoosh modules
  that hold them, dispatch through a context variable: the calling thread (or task) gets
  ``safepickle``'s restricted unpickler, every other thread whoosh's own. The dispatchers are installed
  when the first call enters and removed when the last one leaves (a lock counts them), so nothing stays
  patched between calls, and another thread's use of whoosh is never restricted. An index opened here
  refuses ``reader()``/``searcher()`` outside the context, so it cannot be read with the stock
  unpickler by mistake (``searching`` gives a whoosh searcher inside it, for tests and tools);
- **held-descriptor storage** (``open_held_index``): a read-only ``Storage`` over the descriptors that
  verification hashed (``heldindex.PreadFile``), and a ``FileIndex`` whose TOC was decoded once, at open
  time (whoosh's private ``_read_toc`` returns that copy); TOCs of other whoosh versions are refused
  before whoosh's legacy loader (its own stock unpickler) could see them;
- **writing** (``SegmentBuilder``): one optimized segment from fields analysed elsewhere, bypassing
  whoosh's analysis, its sorting pool (each term's postings are kept together) and its per-posting
  field-length reads and ``add_posting`` calls (``SegmentWriter._flush_segment`` overridden). The
  posting blocks and term infos are encoded here the way the W3 postings writer encodes them (its
  ``_write_block``, ``W3TermInfo``: the same pickle and zlib calls on the same objects, so the same
  bytes), and the term file gets its records in one write, filling the ``OrderedHashWriter``'s
  positions and hash buckets for its own ``close``. A single-threaded process with enough postings
  encodes half the terms in a forked child meanwhile (nothing is pickled across; a child that fails
  costs only time). The segment id comes from a local ``random.Random(seed)`` through the codec (no
  global ``random.seed``), compound mtimes are 0, so equal inputs give equal bytes; garbage collection
  is paused only while the builder is open (``gc_paused`` restores it on every exit), and no lock file
  stays behind;
- **posting values** (``positions_items``, ``frequency_items``, their ``grouped_`` forms that take
  each term's positions already grouped, ``index_field``): what whoosh's
  ``Positions``/``Frequency`` formats store for a field, computed straight from the analyzer's terms
  (the indexer's hot loop: whoosh's generator layers and Token objects cost more than the analysis);
  a test checks them equal to whoosh's ``FieldType.index``.

Bounds: no function here keeps process-global state after it returns; the only module attributes of
whoosh it rebinds are the three unpickling functions, and only while a call is inside
``restricted_unpickling``.
"""

from __future__ import annotations

import abc
import bisect
import contextlib
import contextvars
import functools
import gc
import hashlib
import itertools
import logging
import operator
import os
import pickle
import random
import signal
import struct
import tempfile
import threading
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple, Self

import whoosh.codec.whoosh3 as _w3
import whoosh.columns as _columns
import whoosh.filedb.filetables as _filetables
import whoosh.filedb.structfile as _structfile
from whoosh.analysis import Token, Tokenizer
from whoosh.analysis.filters import STOP_WORDS
from whoosh.fields import ID, STORED, TEXT, Schema
from whoosh.filedb.filestore import FileStorage, ReadOnlyError, Storage
from whoosh.filedb.structfile import StructFile
from whoosh.index import _CURRENT_TOC_VERSION, TOC, FileIndex, Index
from whoosh.lang import porter2 as _porter2
from whoosh.reading import IndexReader, TermNotFound
from whoosh.system import pack_int, pack_long, pack_uint, pack_ushort
from whoosh.util import IDCHARS
from whoosh.util.numeric import byte_to_length, length_to_byte

from . import safepickle
from .errors import BundleFormatError
from .heldindex import PreadFile

__all__ = [
    "STOP_WORDS",
    "CommitOnExit",
    "FieldPostings",
    "Index",
    "PostingItem",
    "PostingReader",
    "Schema",
    "SegmentBuilder",
    "Token",
    "Tokenizer",
    "build_schema",
    "check_index",
    "frequency_items",
    "gc_paused",
    "grouped_frequency_items",
    "grouped_positions_items",
    "index_field",
    "open_held_index",
    "open_index_dir",
    "porter2_stem",
    "positions_items",
    "restricted_unpickling",
    "searching",
    "segment_id",
]

# -- stemming ----------------------------------------------------------------------------------------

# The suffixes steps 2, 3 and 4 of whoosh's porter2 look for: a word ending in none of a step's is left
# as it is by that step, which then reads every suffix of its list through a helper call.
_STEP2_ENDS = tuple(end for end, _, _ in _porter2.s2_triples)
_STEP3_ENDS = tuple(end for end, _, _ in _porter2.s3_triples)
_STEP4_ENDS = (*_porter2.s4_delete_list, "sion", "tion")


def porter2_stem(word: str) -> str:
    """whoosh's ``porter2.stem``, step for step, except that steps 2 to 4 run only on a word ending in
    one of their suffixes (about half the time it took; ``tests/bundle/test_whoosh_door.py`` holds it
    equal to whoosh's)."""
    p = _porter2
    if len(word) <= 2:
        return word
    word = p.remove_initial_apostrophe(word)
    exceptional: str | None = p.exceptional_forms.get(word)
    if exceptional is not None:
        return exceptional
    word = p.capitalize_consonant_ys(word)
    r1 = p.get_r1(word)
    r2 = p.get_r2(word)
    word = p.step_0(word)
    word = p.step_1a(word)
    if word in p.exceptional_early_exit_post_1a:
        return word
    word = p.step_1b(word, r1)
    word = p.step_1c(word)
    if word.endswith(_STEP2_ENDS):
        word = p.step_2(word, r1)
    if word.endswith(_STEP3_ENDS):
        word = p.step_3(word, r1, r2)
    if word.endswith(_STEP4_ENDS):
        word = p.step_4(word, r2)
    word = p.step_5(word, r1, r2)
    return str(p.normalize_ys(word))


#: One posting as whoosh's writer pool takes it: ``(term bytes, frequency, weight, encoded value)``.
PostingItem = tuple[bytes, int, float, bytes]
#: A field's postings for one document, and the field's length in terms.
FieldPostings = tuple[list[PostingItem], int]

_CHECK_EVERY = 4096  # postings between two calls of a reader's ``check``
_BLOCK = 128  # postings in a W3 block

log = logging.getLogger(__name__)

# -- restricted unpickling ---------------------------------------------------------------------------

_RESTRICTED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "docbundle_whoosh_restricted", default=False
)
# (module, attribute, restricted replacement): where whoosh 2.7 unpickles what it reads from an index.
_HOOKS: tuple[tuple[ModuleType, str, Callable[..., Any]], ...] = (
    (_structfile, "load_pickle", safepickle.restricted_load),  # TOC segments, compound dir, block headers
    (_w3, "loads", safepickle.restricted_loads),  # inlined postings, block data
    (_columns, "loads", safepickle.restricted_loads),  # stored fields
)
_hook_lock = threading.Lock()
_hook_users = 0
_hook_saved: list[Any] = []


def _dispatcher(original: Callable[..., Any], restricted: Callable[..., Any]) -> Callable[..., Any]:
    def load(data: Any, *args: Any, **kwargs: Any) -> Any:
        if _RESTRICTED.get():
            return restricted(data)
        return original(data, *args, **kwargs)

    return load


@contextlib.contextmanager
def restricted_unpickling() -> Iterator[None]:
    """Within the block, whatever whoosh unpickles for this thread goes through ``safepickle``."""
    global _hook_users
    token = _RESTRICTED.set(True)
    with _hook_lock:
        if _hook_users == 0:
            _hook_saved[:] = [getattr(module, name) for module, name, _ in _HOOKS]
            for (module, name, restricted), original in zip(_HOOKS, _hook_saved, strict=True):
                setattr(module, name, _dispatcher(original, restricted))
        _hook_users += 1
    try:
        yield
    finally:
        with _hook_lock:
            _hook_users -= 1
            if _hook_users == 0:
                for (module, name, _), original in zip(_HOOKS, _hook_saved, strict=True):
                    setattr(module, name, original)
                _hook_saved.clear()
        _RESTRICTED.reset(token)


def _refuse_outside() -> None:
    if not _RESTRICTED.get():
        raise RuntimeError(
            "a docbundle index is read through docbundle.bundle.whooshio (PostingReader, searching), "
            "where whoosh's pickles go through the restricted unpickler"
        )


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


# -- posting values (the indexer's analysis) --------------------------------------------------------


def positions_items(terms: Iterable[tuple[str, int, int, int]]) -> FieldPostings:
    """Exactly what whoosh's ``Positions`` format + ``FieldType.index`` yield for these analysed terms.

    ``terms`` are ``(term, position, startchar, endchar)`` as ``analysis.iter_terms`` yields them.
    """
    poses: dict[str, list[int]] = {}
    for term, pos, _, _ in terms:
        found = poses.get(term)
        if found is None:
            poses[term] = [pos]
        else:
            found.append(pos)
    return grouped_positions_items(poses)


# The pickled position list of a term found once, by its position: most terms of a chunk occur once.
# Each value is a new bytes object (the prefix + the cached pickle): whoosh pickles a block's values
# together, and pickle would write a shared object once and refer to it after, changing the bytes.
_ONCE: dict[int, bytes] = {}
_ONCE_MAX = 100_000
_ONE = pack_uint(1)


def grouped_positions_items(poses: Mapping[str, list[int]]) -> FieldPostings:
    """``positions_items`` of terms already grouped: each term's positions, terms in first-seen order."""
    items = []
    length = 0
    once = _ONCE
    for term, poslist in poses.items():
        n = len(poslist)
        length += n
        if n == 1:
            pos = poslist[0]
            pickled = once.get(pos)
            if pickled is None:
                if len(once) >= _ONCE_MAX:
                    once.clear()
                pickled = once[pos] = pickle.dumps([pos], 2)
            items.append((term.encode("utf-8"), 1, 1.0, _ONE + pickled))
            continue
        deltas = [poslist[0], *[b - a for a, b in itertools.pairwise(poslist)]]
        items.append((term.encode("utf-8"), n, float(n), pack_uint(n) + pickle.dumps(deltas, 2)))
    return items, length


def frequency_items(terms: Iterable[tuple[str, int, int, int]]) -> FieldPostings:
    """Exactly what whoosh's ``Frequency`` format + ``FieldType.index`` yield for these analysed terms."""
    freqs: dict[str, int] = {}
    for term, _, _, _ in terms:
        freqs[term] = freqs.get(term, 0) + 1
    items = [(term.encode("utf-8"), n, float(n), pack_uint(n)) for term, n in freqs.items()]
    return items, sum(freqs.values())


def grouped_frequency_items(poses: Mapping[str, list[int]]) -> FieldPostings:
    """``frequency_items`` of terms already grouped (their positions are only counted)."""
    items = [(term.encode("utf-8"), len(p), float(len(p)), pack_uint(len(p))) for term, p in poses.items()]
    return items, sum(len(p) for p in poses.values())


def index_field(schema: Schema, name: str, value: str) -> FieldPostings:
    """Field ``name``'s postings for ``value`` through whoosh's own analysis (``FieldType.index``)."""
    field = schema[name]
    items = list(field.index(value))
    length = sum(freq for _, freq, _, _ in items) if field.scorable else 0
    return items, length


# -- writing -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No garbage collection inside the block; the collector's previous state comes back on any exit."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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


#: One posting of a term, as the analysed writer keeps it: ``(docnum, weight, value, field length)``.
_Posting = tuple[int, float, bytes, int]
#: One term to encode: its field format's fixed value size, and its postings in document order.
_TermJob = tuple[int | None, list[_Posting]]
#: One encoded term: where its postings start in the encoded bytes, their length, and its W3 term info
#: without the extent (``W3TermInfo.to_bytes`` minus the offset and length, which depend on the file).
_Encoded = tuple[int, int, bytes]

_TERMINFO = _w3.W3TermInfo._struct
_SPILL_HEAD = struct.Struct("!qq")  # a forked encoder's result: bytes of postings, number of terms
_SPILL_TERM = struct.Struct(f"!qi{_TERMINFO.size}s")  # and per term: start, length, term info
_KEYVAL = struct.Struct("!ii")  # filetables' key and value lengths before each term-file record

#: Postings from which a segment's blocks are encoded in two processes (below it the whole encoding
#: takes under about 0.2 s, and a fork of a 300 MB indexer took 20 ms, plus copy-on-write faults).
PARALLEL_MIN_POSTINGS = 50_000
_TERM_COST = 8  # a term's encoding cost beyond its postings', in postings (fitted on large-en)
_OWN_SHARE = 0.45  # the share of the encoding this process keeps when it forks


class _LengthBytes(dict[int | None, int]):
    """``length_to_byte`` as a lookup (a dictionary read costs less than its Python call)."""

    def __missing__(self, length: int | None) -> int:
        byte = self[length] = length_to_byte(length)
        return int(byte)


def _encode_terms(
    jobs: Sequence[_TermJob], blocklimit: int, compression: int
) -> tuple[bytes, list[_Encoded]]:
    """The W3 posting blocks of consecutive terms, as whoosh's ``W3PostingsWriter`` writes them.

    Per block the same two pickles (protocol 2) and the same ``zlib.compress`` call as its
    ``_write_block``, on the same objects (pickle shares a repeated object, so identity matters too);
    the block and term statistics as its ``W3TermInfo.add_block`` accumulates them, in the same order
    (floating-point sums depend on it). ``tests/indexer/test_write.py`` compares the bytes with
    whoosh's own ``add_document``. whoosh inlines no posting list under the codec's ``inlinelimit`` of 1.
    """
    out = bytearray()
    encoded: list[_Encoded] = []
    dumps = pickle.dumps
    compress = zlib.compress
    l2b = _LengthBytes()
    magic = _w3.WHOOSH3_HEADER_MAGIC
    for fixedsize, postings in jobs:
        start = len(out)
        out += magic
        n = len(postings)
        if n == 1:  # half the terms of a corpus: the general loop below, unrolled for one posting
            docnum, weight0, value, length = postings[0]
            f32 = array("f", (weight0,))[0]
            if fixedsize is None or fixedsize < 0:
                one_values: Any = (value,) if value else ()
            elif fixedsize == 0:
                one_values = None
            else:
                one_values = b"".join((value,) if value else ())
            data = dumps(((docnum,), None if f32 == 1.0 else f32, one_values), 2)
            if compression:
                data = compress(data, compression)
            bweight0 = weight0 if weight0 > 0 else 0
            lbyte = l2b[length or None]
            info = dumps((1, docnum, bweight0, compression, lbyte, lbyte), 2)
            out += pack_int(-(len(info) + len(data)))
            out += info
            out += data
            packed = _TERMINFO.pack(False, 0 + f32, 1, lbyte, lbyte, max(0, bweight0), docnum, docnum)
            encoded.append((start, len(out) - start, packed))
            continue
        weight: float = 0
        df = 0
        minlength: int | None = None
        maxlength = 0
        maxweight: float = 0
        minid = -1
        for lo in range(0, n, blocklimit):
            ids, weights, values, all_lengths = zip(
                *(postings if n <= blocklimit else postings[lo : lo + blocklimit]), strict=True
            )
            stored = array("f", weights).tolist()  # what the block's float array gives back
            lengths = list(filter(None, all_lengths))
            bmin = min(lengths) if lengths else None
            bmax = max(lengths) if lengths else 0
            top = max(weights)
            bweight = top if top > 0 else 0
            # W3TermInfo.add_block
            weight += sum(stored)
            df += len(ids)
            minlength = bmin if minlength is None else min(minlength, bmin)  # type: ignore[type-var]
            maxlength = max(maxlength, bmax)
            maxweight = max(maxweight, bweight)
            if minid < 0:
                minid = ids[0]
            # W3PostingsWriter._write_block (_mini_ids, _mini_weights, _mini_values)
            first = stored[0]
            if stored.count(first) == len(stored):
                mini_weights: Any = None if first == 1.0 else first
            else:
                mini_weights = tuple(stored)
            vals = list(filter(None, values))
            if fixedsize is None or fixedsize < 0:
                mini_values: Any = tuple(vals)
            elif fixedsize == 0:
                mini_values = None
            else:
                mini_values = b"".join(vals)
            deltas = tuple(map(operator.sub, ids, (0, *ids[:-1])))
            data = dumps((deltas, mini_weights, mini_values), 2)
            if compression:
                data = compress(data, compression)
            info = dumps((len(ids), ids[-1], bweight, compression, l2b[bmin], l2b[bmax]), 2)
            size = len(info) + len(data)
            out += pack_int(-size if lo + blocklimit >= n else size)
            out += info
            out += data
        maxid = postings[-1][0]
        minbyte = 0 if minlength is None else l2b[minlength]
        packed = _TERMINFO.pack(False, weight, df, minbyte, l2b[maxlength], maxweight, minid, maxid)
        encoded.append((start, len(out) - start, packed))
    return bytes(out), encoded


def _single_threaded() -> bool:
    """True when this process runs one thread (forking a threaded process can deadlock its child)."""
    if threading.active_count() != 1:
        log.debug(
            "the segment is encoded in one process: threads %s", [t.name for t in threading.enumerate()]
        )
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1  # threads Python did not start count too
    except OSError:
        return True


#: What ``_encode_terms`` returns: a run of terms' posting bytes and each term's place in them.
_EncodedRun = tuple[bytes, list[_Encoded]]


def _encode_forked(
    jobs: Sequence[_TermJob], split: int, blocklimit: int, compression: int
) -> Iterator[_EncodedRun]:
    """``_encode_terms`` of ``jobs[:split]`` here and of ``jobs[split:]`` in a forked child, at once.

    The first run is yielded while the child still works, so the caller writes it meanwhile. The
    child inherits the postings (nothing is pickled across), writes its bytes and term infos to an
    unlinked temporary file and leaves with ``os._exit`` (no atexit handler, no inherited buffer
    flushed twice). Called only when the process is single-threaded. A child that fails, or that is
    killed, costs only time: its half is then encoded here. A caller that stops early kills it.
    """
    first, second = jobs[:split], jobs[split:]
    with tempfile.TemporaryFile() as spill:
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                block, encoded = _encode_terms(second, blocklimit, compression)
                spill.write(_SPILL_HEAD.pack(len(block), len(encoded)))
                spill.write(block)
                spill.write(b"".join(_SPILL_TERM.pack(*e) for e in encoded))
                spill.flush()
                code = 0
            finally:
                os._exit(code)
        status: int | None = None
        try:
            yield _encode_terms(first, blocklimit, compression)
            _, status = os.waitpid(pid, 0)
        finally:
            if status is None:  # this side failed, or its caller stopped: the child's work is moot
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        theirs: _EncodedRun | None = None
        if os.waitstatus_to_exitcode(status) == 0:
            spill.seek(0)
            raw = spill.read()
            if len(raw) >= _SPILL_HEAD.size:
                size, count = _SPILL_HEAD.unpack_from(raw)
                body = _SPILL_HEAD.size + size
                if len(raw) == body + count * _SPILL_TERM.size and count == len(second):
                    theirs = (raw[_SPILL_HEAD.size : body], list(_SPILL_TERM.iter_unpack(raw[body:])))
    if theirs is None:
        log.warning("the forked block encoder failed (wait status %d): encoding its half here", status)
        theirs = _encode_terms(second, blocklimit, compression)
    yield theirs


def _encode_all(jobs: Sequence[_TermJob], blocklimit: int, compression: int) -> Iterator[_EncodedRun]:
    """Every term's encoded blocks, in runs of consecutive terms: in two processes when there is enough
    to share and forking is safe, else in one."""
    total = sum(len(postings) for _, postings in jobs)
    if total < max(PARALLEL_MIN_POSTINGS, 1) or not hasattr(os, "fork") or not _single_threaded():
        yield _encode_terms(jobs, blocklimit, compression)
        return
    # The work grows with the postings (their values are pickled one by one), plus a little per term.
    # This process takes a little less than half: it writes its run while the child works, and it
    # writes the child's run after.
    half = (total + _TERM_COST * len(jobs)) * _OWN_SHARE
    done = 0
    split = 0
    for split, (_, postings) in enumerate(jobs):  # noqa: B007 (split is used after the loop)
        done += len(postings) + _TERM_COST
        if done >= half:
            break
    if split + 1 >= len(jobs):  # one term holds most of the work: nothing to share
        yield _encode_terms(jobs, blocklimit, compression)
        return
    yield from _encode_forked(jobs, split + 1, blocklimit, compression)


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
        self._closing.enter_context(gc_paused())
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
