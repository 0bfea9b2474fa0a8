"""The one door to whoosh (``docbundle.bundle.whooshio``): what it reads, writes and refuses, pinned.

A whoosh upgrade that changes any private part the door uses fails here: postings, positions, field
lengths and frequencies must equal what whoosh's public API gives; a segment must come out byte for
byte the same; hostile pickles must be refused; and no call may leave whoosh's modules, the garbage
collector or the global ``random`` changed after it returns.
"""

from __future__ import annotations

import gc
import os
import pickle
import random
import shutil
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import whoosh.codec.whoosh3
import whoosh.columns
import whoosh.filedb.structfile
import whoosh.index
import whoosh.lang.porter2
import whoosh.legacy
from docbundle.bundle import whooshio
from docbundle.bundle.analysis import iter_terms
from docbundle.bundle.errors import BundleFormatError, UnsafePickleError
from docbundle.bundle.reader import open_bundle
from docbundle.bundle.schema import INDEX_NAME, make_schema
from docbundle.bundle.search import BundleSearcher
from hypothesis import example, given, settings
from hypothesis import strategies as st
from treekit import build, write_site
from whoosh.filedb.filestore import FileStorage
from whoosh.index import TOC
from whoosh.system import pack_int
from whoosh.util import random_name

GOLDEN = Path(__file__).resolve().parent / "golden" / "v1"
TEXT_FIELDS = ("title", "headings", "body", "code")
QUERIES = ["useEffect", "effect cleanup", "sap.m.Table rows", "결제위젯", '"running effects"', "install"]


class _Payload:
    """Pickles as a call to os.system: a shell command that leaves a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def _stock_whoosh() -> dict[str, Any]:
    return {
        "whoosh3.loads": whoosh.codec.whoosh3.loads,
        "columns.loads": whoosh.columns.loads,
        "structfile.load_pickle": whoosh.filedb.structfile.load_pickle,
        "index.pickle": whoosh.index.pickle,
        "toc_loaders": dict(whoosh.index.toc_loaders),
        "legacy.toc_loaders": whoosh.legacy.toc_loaders,
    }


STOCK = {
    "whoosh3.loads": pickle.loads,
    "columns.loads": pickle.loads,
    "structfile.load_pickle": pickle.load,
    "index.pickle": pickle,
    "toc_loaders": {-110: whoosh.legacy.load_110_toc},
    "legacy.toc_loaders": whoosh.index.toc_loaders,
}


@pytest.fixture
def golden() -> Iterator[Any]:
    bundle = open_bundle(GOLDEN)
    try:
        yield bundle
    finally:
        bundle.close()


def _held(index_dir: Path) -> tuple[dict[str, tuple[int, int]], list[int]]:
    files = {}
    for p in sorted(index_dir.iterdir()):
        fd = os.open(p, os.O_RDONLY)
        files[p.name] = (fd, p.stat().st_size)
    return files, [fd for fd, _ in files.values()]


# -- reading ----------------------------------------------------------------------------------------


def test_postings_positions_lengths_and_frequencies_equal_whoosh_public_api(golden: Any) -> None:
    count = golden.manifest.counts.chunks
    reader = whooshio.PostingReader(golden.index)
    try:
        with whooshio.searching(golden.index) as s:
            ref = s.reader()
            checked = 0
            for field, bterm in ref.all_terms():
                if field not in TEXT_FIELDS:
                    continue
                term = bterm.decode("utf-8")
                m = ref.postings(field, bterm)
                expected = []
                positions = {}
                while m.is_active():
                    expected.append((m.id(), m.weight()))
                    if field != "code":
                        positions[m.id()] = set(m.value_as("positions"))
                    m.next()
                found = reader.postings(field, term)
                assert found is not None
                assert list(zip(*found, strict=True)) == expected
                if field != "code":
                    found_positions = reader.positions(field, term)
                    assert {d: set(found_positions.of(d)) for d in found_positions.docs} == positions
                assert reader.doc_frequency(field, term) == ref.doc_frequency(field, bterm)
                checked += 1
            assert checked > 50
            for field in TEXT_FIELDS:
                lengths = [ref.doc_field_length(i, field) or 0 for i in range(count)]
                assert list(reader.field_lengths(field, count)) == lengths
            top = [t.decode("utf-8") for _, t in ref.most_frequent_terms("body", 5)]
            assert reader.most_frequent_terms("body", 5) == top
        assert reader.postings("body", "zzznotaterm") is None
        assert not reader.positions("body", "zzznotaterm").docs
        assert reader.doc_frequency("body", "zzznotaterm") == 0
    finally:
        reader.close()


def _deep_size(value: object) -> int:
    """Bytes of ``value`` and of everything it holds (containers, arrays, numbers)."""
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(_deep_size(k) + _deep_size(v) for k, v in value.items())
    elif isinstance(value, tuple | list | set | frozenset):
        size += sum(_deep_size(v) for v in value)
    return size


def test_positions_take_a_few_bytes_each_and_the_cache_counts_them_all(tmp_path: Path) -> None:
    """Phrase queries cache their words' positions (16 MiB a bundle): held as a dict of sets, large-en's
    cache kept 81 entries and warm phrase queries read their positions from the index again."""
    pages = {f"p{i}.md": f"# Page {i}\n\n" + "The widget turns. " * 40 + "\n" for i in range(60)}
    write_site(
        tmp_path / "site",
        pages,
        "# Site\n\n## Pages\n\n" + "".join(f"- [P{i}](p{i}.md)\n" for i in range(60)),
    )
    config = tmp_path / "libraries.toml"
    config.write_text('[[library]]\nid = "pos"\nllms_txt = "site/llms.txt"\n', encoding="utf-8")
    bundle = open_bundle(build(config, tmp_path / "out").bundle)
    try:
        searcher = BundleSearcher(bundle)
        held = searcher._positions("body", "widget")
        used = _deep_size(held)
        count = len(held.docs) + len(held.flat)
        assert count >= 60 * 41
        assert used <= 6 * count + 1024  # a dict of sets: about 130 bytes a document and 40 a position
        assert searcher._pos_cache.bytes >= used  # the budget counts what the cache holds
        assert searcher.search('"widget turns"').hits  # and phrases still match
    finally:
        bundle.close()


def test_a_bundle_index_refuses_whoosh_readers_outside_the_door(golden: Any) -> None:
    with pytest.raises(RuntimeError, match="whooshio"):
        golden.index.searcher()
    with pytest.raises(RuntimeError, match="whooshio"):
        golden.index.reader()


# -- writing ----------------------------------------------------------------------------------------

DOCS = [
    {"title": "Hooks", "headings": "Hooks › Cleanup", "body": "Running effects with useEffect.", "code": ""},
    {"title": "Tables", "headings": "Columns", "body": "Rows of sap.m.Table bound to a model.", "code": "x"},
    {"title": "결제위젯", "headings": "결제 요청", "body": "결제위젯을 연동하는 방법.", "code": "pay()"},
]


def _write(directory: Path, seed: str) -> dict[str, bytes]:
    directory.mkdir()
    schema = make_schema()
    with whooshio.SegmentBuilder(directory, schema, INDEX_NAME, seed) as builder:
        for n, doc in enumerate(DOCS * 40):
            analysed = {
                name: (
                    whooshio.frequency_items(iter_terms(text))
                    if name == "code"
                    else whooshio.positions_items(iter_terms(text))
                )
                for name, text in doc.items()
            }
            analysed["section"] = whooshio.index_field(schema, "section", "Guides")
            builder.add(analysed, {"doc": n, "chunk": 0})
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_a_segment_is_byte_identical_across_two_runs_and_named_as_whoosh_would(tmp_path: Path) -> None:
    first = _write(tmp_path / "a", "seed-1")
    second = _write(tmp_path / "b", "seed-1")
    assert first == second
    assert not [n for n in first if n.endswith("LOCK")]
    # whoosh names a segment with random_name() from the global random module; seeded with the same
    # seed it draws the same id, so bundles built before the door keep their file names and bytes.
    state = random.getstate()
    try:
        random.seed("seed-1")
        expected = random_name(size=16)
    finally:
        random.setstate(state)
    assert sorted(first) == sorted(["_MAIN_1.toc", f"MAIN_{expected}.seg"])
    assert whooshio.segment_id("seed-1") == expected
    other = _write(tmp_path / "c", "seed-2")
    assert sorted(other) != sorted(first)


def test_writing_never_seeds_the_global_random_and_restores_gc(tmp_path: Path) -> None:
    """The segment id comes from a local Random: draws from the global one (another thread's, during a
    build) stay the process's own, whatever the build's seed (whoosh only takes temp-file names there)."""
    schema = make_schema()
    draws = []
    for n, gc_on in enumerate((True, False)):
        (gc.enable if gc_on else gc.disable)()
        try:
            directory = tmp_path / f"w{n}"
            directory.mkdir()
            random.seed(n)
            builder = whooshio.SegmentBuilder(directory, schema, INDEX_NAME, "same seed")
            draws.append(random.random())
            builder.add({"body": whooshio.positions_items(iter_terms("hello world"))}, {"doc": 0, "chunk": 0})
            assert not gc.isenabled()  # paused while the builder is open
            builder.commit()
            assert gc.isenabled() is gc_on
        finally:
            gc.enable()
    assert draws[0] != draws[1]


def test_the_collector_comes_back_when_a_build_fails(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    assert gc.isenabled()
    with (
        pytest.raises(KeyError),
        whooshio.SegmentBuilder(tmp_path / "x", make_schema(), INDEX_NAME, "s") as b,
    ):
        b.add({"nosuchfield": ([], 0)}, {})
    assert gc.isenabled()


# -- restricted unpickling -------------------------------------------------------------------------


def test_opening_and_searching_a_bundle_leaves_whoosh_as_it_was(golden: Any) -> None:
    searcher = BundleSearcher(golden)
    for q in QUERIES:
        searcher.search(q)
    assert searcher.search("useEffect").hits
    assert _stock_whoosh() == STOCK


def test_the_restricted_unpickler_is_scoped_to_the_calling_thread(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    hostile = pickle.dumps(_Payload(marker), 2)
    harmless = pickle.dumps(Fraction(1, 3), 2)  # a global no index holds, yet harmless to others
    inside = threading.Event()
    checked = threading.Event()
    other: list[Any] = []

    def elsewhere() -> None:
        assert inside.wait(10)
        try:
            other.append(whoosh.codec.whoosh3.loads(harmless))
            other.append(whoosh.columns.loads(harmless))
        finally:
            checked.set()

    thread = threading.Thread(target=elsewhere)
    thread.start()
    with whooshio.restricted_unpickling():
        inside.set()
        for load in (whoosh.codec.whoosh3.loads, whoosh.columns.loads):
            with pytest.raises(UnsafePickleError, match=r"names posix\.system"):
                load(hostile)
            with pytest.raises(UnsafePickleError, match="fractions.Fraction"):
                load(harmless)
        with open(tmp_path / "p", "wb") as fh:
            fh.write(hostile)
        with open(tmp_path / "p", "rb") as fh, pytest.raises(UnsafePickleError):
            whoosh.filedb.structfile.load_pickle(fh)
        assert checked.wait(10)  # the other thread unpickled while this one was inside
    thread.join(10)
    assert other == [Fraction(1, 3), Fraction(1, 3)]
    assert not marker.exists()
    assert _stock_whoosh() == STOCK


def test_searches_from_many_threads_agree_and_leave_whoosh_as_it_was(golden: Any) -> None:
    expected = {q: BundleSearcher(golden).search(q) for q in QUERIES}
    searcher = BundleSearcher(golden)  # cold caches: every thread reads through the door at once
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda q: (q, searcher.search(q)), QUERIES * 8))
    assert all(outcome == expected[q] for q, outcome in results)
    assert _stock_whoosh() == STOCK


def _copy_index(tmp_path: Path) -> Path:
    index_dir = tmp_path / "index"
    shutil.copytree(GOLDEN / "index", index_dir)
    return index_dir


def test_a_hostile_toc_is_refused_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    index_dir = _copy_index(tmp_path)
    (index_dir / "_MAIN_1.toc").unlink()
    TOC(make_schema(), [_Payload(marker)], 1).write(FileStorage(str(index_dir)), INDEX_NAME)
    files, fds = _held(index_dir)
    try:
        with pytest.raises(UnsafePickleError, match=r"posix\.system"):
            whooshio.open_held_index(files, make_schema(), INDEX_NAME)
    finally:
        for fd in fds:
            os.close(fd)
    assert not marker.exists()


def test_a_toc_of_another_whoosh_version_is_refused_before_whoosh_reads_it(tmp_path: Path) -> None:
    index_dir = _copy_index(tmp_path)
    toc = index_dir / "_MAIN_1.toc"
    data = bytearray(toc.read_bytes())
    at = 3 + 4  # three one-byte varints (int, long and float sizes), then the byte-order int
    assert data[at : at + 4] == pack_int(whoosh.index._CURRENT_TOC_VERSION)
    data[at : at + 4] = pack_int(-110)  # whoosh 2.x's legacy TOC: read with the stock unpickler
    toc.write_bytes(bytes(data))
    files, fds = _held(index_dir)
    try:
        with pytest.raises(BundleFormatError, match="whoosh format -110"):
            whooshio.open_held_index(files, make_schema(), INDEX_NAME)
        with pytest.raises(BundleFormatError, match="whoosh format -110"):
            whooshio.open_index_dir(index_dir, make_schema(), INDEX_NAME)
    finally:
        for fd in fds:
            os.close(fd)


_STEM_PIECES = [
    *"abcdefghiklmnoprstuvwxyz'",
    *(end for end, _, _ in whoosh.lang.porter2.s2_triples),
    *(end for end, _, _ in whoosh.lang.porter2.s3_triples),
    *whoosh.lang.porter2.s4_delete_list,
    *whoosh.lang.porter2.exceptional_forms,
    *whoosh.lang.porter2.exceptional_early_exit_post_1a,
    "sion",
    "tion",
    "y",
    "Y",
    "eedly",
    "ingly",
    "gener",
    "commun",
    "arsen",
]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(_STEM_PIECES), max_size=5).map("".join))
@example("generalization")
@example("communication")
@example("skies")
@example("")
def test_porter2_stem_is_whooshs(word: str) -> None:
    # The door's stemmer skips porter2's steps 2-4 where no suffix of theirs ends the word (issue 22).
    assert whooshio.porter2_stem(word) == whoosh.lang.porter2.stem(word)


def test_porter2_stem_is_whooshs_on_an_english_vocabulary() -> None:
    text = Path(__file__).read_text(encoding="utf-8") + whooshio.__doc__ + str(whoosh.lang.porter2.__doc__)
    words = {w.lower() for w in text.split() if w.isalpha()}
    words |= {w + suffix for w in list(words) for suffix in ("s", "ing", "ed", "ly", "ness", "ational")}
    assert len(words) > 1000
    for word in sorted(words):
        assert whooshio.porter2_stem(word) == whoosh.lang.porter2.stem(word), word
