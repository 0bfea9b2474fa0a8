"""The document store: random access, ids, and refusal of damaged files."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from docbundle.bundle.errors import BundleFormatError
from docbundle.bundle.store import DOCS_BIN, DOCS_IDX, ChunkRecord, DocMeta, DocRecord, DocStore, write_store
from hypothesis import given, settings
from hypothesis import strategies as st


def _doc(i: int, text: str = "body") -> DocRecord:
    return DocRecord(
        id=f"page-{i}.md",
        url=f"http://127.0.0.1/page-{i}.md",
        title=f"Page {i}",
        section="Guides",
        chunks=[ChunkRecord(f"# Page {i}\n\n", [f"Page {i}"], 0, 2), ChunkRecord(text, [f"Page {i}"], 2, 3)],
    )


def test_records_come_back_by_number_and_by_id(tmp_path: Path) -> None:
    docs = [_doc(i) for i in range(50)]
    assert write_store(tmp_path, docs) == 50
    with DocStore(tmp_path) as store:
        assert len(store) == 50
        assert store.get(17) == docs[17]
        assert store.get(17).text == "# Page 17\n\nbody"
        assert store.number_of("page-42.md") == 42
        assert store.number_of("nope.md") is None
        assert list(store) == docs
        with pytest.raises(IndexError):
            store.get(50)


def test_an_empty_store_opens(tmp_path: Path) -> None:
    write_store(tmp_path, [])
    with DocStore(tmp_path) as store:
        assert len(store) == 0
        assert list(store) == []


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=12))
def test_any_text_round_trips(tmp_path_factory: pytest.TempPathFactory, texts: list[str]) -> None:
    d = tmp_path_factory.mktemp("store")
    docs = [_doc(i, t) for i, t in enumerate(texts)]
    write_store(d, docs)
    with DocStore(d) as store:
        assert list(store) == docs


def test_truncated_index_is_refused(tmp_path: Path) -> None:
    write_store(tmp_path, [_doc(1), _doc(2)])
    idx = tmp_path / DOCS_IDX
    idx.write_bytes(idx.read_bytes()[:-8])
    with pytest.raises(BundleFormatError, match="docs.idx"):
        DocStore(tmp_path)


def test_offsets_that_do_not_match_the_data_are_refused(tmp_path: Path) -> None:
    write_store(tmp_path, [_doc(1), _doc(2)])
    (tmp_path / DOCS_BIN).write_bytes((tmp_path / DOCS_BIN).read_bytes() + b"x")
    with pytest.raises(BundleFormatError, match="do not match"):
        DocStore(tmp_path)


def test_wrong_magic_is_refused(tmp_path: Path) -> None:
    write_store(tmp_path, [_doc(1)])
    idx = tmp_path / DOCS_IDX
    idx.write_bytes(b"XXXXXXXX" + idx.read_bytes()[8:])
    with pytest.raises(BundleFormatError, match="magic"):
        DocStore(tmp_path)


def test_a_garbled_record_is_a_format_error(tmp_path: Path) -> None:
    write_store(tmp_path, [_doc(1)])
    data = bytearray((tmp_path / DOCS_BIN).read_bytes())
    data[0] = 0xC1  # never used in msgpack
    (tmp_path / DOCS_BIN).write_bytes(bytes(data))
    with DocStore(tmp_path) as store, pytest.raises(BundleFormatError, match="record 0"):
        store.get(0)


class _FourElementChunk(msgspec.Struct, frozen=True, array_like=True):
    """A chunk record as it was before anchors, and as a reader that predates them decodes it."""

    text: str
    heading_path: list[str]
    start_line: int
    end_line: int


class _RecordBeforeAnchors(DocMeta, frozen=True, kw_only=True):
    chunks: list[_FourElementChunk]


def test_a_record_without_anchors_is_stored_as_before_and_one_with_them_reads_in_an_older_reader(
    tmp_path: Path,
) -> None:
    plain = _doc(1)
    before = _RecordBeforeAnchors(
        **{f: getattr(plain, f) for f in DocMeta.__struct_fields__},
        chunks=[_FourElementChunk(c.text, c.heading_path, c.start_line, c.end_line) for c in plain.chunks],
    )
    write_store(tmp_path, [plain])
    assert (tmp_path / DOCS_BIN).read_bytes() == msgspec.msgpack.encode(before)

    anchored = msgspec.structs.replace(
        plain, chunks=[plain.chunks[0], msgspec.structs.replace(plain.chunks[1], anchor="body-id")]
    )
    write_store(tmp_path, [anchored])
    with DocStore(tmp_path) as store:
        assert store.get(0) == anchored and store.get(0).chunks[1].anchor == "body-id"
    older = msgspec.msgpack.decode((tmp_path / DOCS_BIN).read_bytes(), type=_RecordBeforeAnchors)
    assert [c.text for c in older.chunks] == [c.text for c in plain.chunks]
