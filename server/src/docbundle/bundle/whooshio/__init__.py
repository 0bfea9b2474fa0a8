"""The one door to whoosh: every whoosh import and every reach into whoosh's private parts is here.

docbundle scores on its own (``search``) and uses whoosh only as a file format. This package is the
whole of that use, so a whoosh upgrade is checked in one place (``tests/bundle/test_whoosh_door.py``
pins what each function returns; ``server/pyproject.toml`` pins whoosh-reloaded to the releases it was
tested on). Nothing else in ``docbundle`` imports whoosh; an import-linter contract (``.importlinter``,
run by ``tests/test_whoosh_contract.py``) keeps it so.

One module per concern, and this facade, which re-exports what the rest of ``docbundle`` uses: other
modules import ``docbundle.bundle.whooshio``, never one of its modules (``tests/test_whoosh_contract.py``
checks that, and that the facade offers every public name of its modules):

- ``stemming``: the analyzer's base classes, the stop words, ``porter2_stem``;
- ``unpickling``: ``restricted_unpickling`` and the dispatchers it installs;
- ``storage``: the schema, opening an index (over held descriptors or by path), ``check_index``,
  ``searching``;
- ``reading``: ``PostingReader`` and its ``PositionLists``;
- ``postings``: the posting values of a field, computed from analysed terms;
- ``encoding``: a segment's W3 posting blocks, half of them in a forked child; its tunable
  ``PARALLEL_MIN_POSTINGS`` is read there, so a test or benchmark sets it there (the facade has no copy);
- ``writing``: ``SegmentBuilder``, the term file and its hash tables.

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
  is paused only while the builder is open (``docbundle.common.process.collector_paused`` restores it on every exit), and no lock file
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

from .postings import (
    FieldPostings,
    PostingItem,
    frequency_items,
    grouped_frequency_items,
    grouped_positions_items,
    index_field,
    positions_items,
)
from .reading import PositionLists, PostingReader
from .stemming import STOP_WORDS, Token, Tokenizer, porter2_stem
from .storage import (
    Index,
    Schema,
    build_schema,
    check_index,
    open_held_index,
    open_index_dir,
    searching,
)
from .unpickling import restricted_unpickling
from .writing import CommitOnExit, SegmentBuilder, segment_id

__all__ = [
    "STOP_WORDS",
    "CommitOnExit",
    "FieldPostings",
    "Index",
    "PositionLists",
    "PostingItem",
    "PostingReader",
    "Schema",
    "SegmentBuilder",
    "Token",
    "Tokenizer",
    "build_schema",
    "check_index",
    "frequency_items",
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
