"""The vector file: round trip, determinism, every malformed file refused, pages ranked by best chunk."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

np = pytest.importorskip("numpy", reason="the vector file needs numpy (the `semantic` extra)")

from docbundle.bundle.errors import BundleFormatError  # noqa: E402
from docbundle.bundle.vectors import (  # noqa: E402
    HEADER_SIZE,
    VectorFile,
    encode_quantized,
    encode_vectors,
    parse_header,
    rank_documents,
    write_vectors,
)

KEY = hashlib.sha256(b"test embedder").hexdigest()


def unit_rows(rows: int, dims: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((rows, dims)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


@pytest.mark.parametrize("dtype", ["int8", "float16"])
def test_round_trip_keeps_rows_close_and_header_exact(tmp_path: Path, dtype: str) -> None:
    m = unit_rows(37, 24)
    path = tmp_path / "vectors.bin"
    size = write_vectors(path, m, KEY, dtype)  # type: ignore[arg-type]
    assert size == path.stat().st_size
    with VectorFile(path) as vf:
        assert (vf.rows, vf.dims, vf.header.dtype, vf.header.embedder_key) == (37, 24, dtype, KEY)
        back = vf.matrix()
        assert back.shape == (37, 24)
        tol = 1 / 127 if dtype == "int8" else 1e-3
        assert np.abs(back - m).max() <= tol
        q = m[5]
        assert np.allclose(vf.scores(q), m @ q, atol=24 * tol)
        assert int(np.argmax(vf.scores(q))) == 5
        vf.check(37, KEY)
        with pytest.raises(BundleFormatError, match="38 chunks"):
            vf.check(38, KEY)
        with pytest.raises(BundleFormatError, match="embedder"):
            vf.check(37, hashlib.sha256(b"other").hexdigest())


def test_same_input_gives_byte_identical_files(tmp_path: Path) -> None:
    m = unit_rows(50, 16)
    for dtype in ("int8", "float16"):
        a, b = tmp_path / f"a-{dtype}", tmp_path / f"b-{dtype}"
        write_vectors(a, m, KEY, dtype)  # type: ignore[arg-type]
        write_vectors(b, m.copy(), KEY, dtype)  # type: ignore[arg-type]
        assert a.read_bytes() == b.read_bytes()
    # and the file depends on the vectors and on the embedder
    assert encode_vectors(m, KEY) != encode_vectors(unit_rows(50, 16, seed=8), KEY)
    assert encode_vectors(m, KEY) != encode_vectors(m, hashlib.sha256(b"x").hexdigest())


def test_zero_rows_and_zero_vectors_are_valid(tmp_path: Path) -> None:
    path = tmp_path / "v.bin"
    write_vectors(path, np.zeros((0, 8), dtype=np.float32), KEY)
    with VectorFile(path) as vf:
        assert vf.rows == 0 and vf.scores(np.ones(8)).shape == (0,)
    write_vectors(path, np.zeros((3, 8), dtype=np.float32), KEY)
    with VectorFile(path) as vf:
        assert (vf.scores(np.ones(8)) == 0).all()


@pytest.mark.parametrize("cut", [0, 10, HEADER_SIZE - 1, HEADER_SIZE, HEADER_SIZE + 5, -1, -4])
def test_truncated_file_is_refused(tmp_path: Path, cut: int) -> None:
    data = encode_vectors(unit_rows(4, 8), KEY)
    path = tmp_path / "v.bin"
    path.write_bytes(data[:cut])
    with pytest.raises(BundleFormatError, match="truncated|needs"):
        VectorFile(path)


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v.bin"
    path.write_bytes(encode_vectors(unit_rows(4, 8), KEY) + b"\0")
    with pytest.raises(BundleFormatError, match="holds .* bytes, but its header"):
        VectorFile(path)


def test_header_claiming_huge_rows_is_refused_before_mapping(tmp_path: Path) -> None:
    data = bytearray(encode_vectors(unit_rows(4, 8), KEY))
    struct.pack_into("<Q", data, 16, 2**63)  # rows
    path = tmp_path / "v.bin"
    path.write_bytes(bytes(data))
    with pytest.raises(BundleFormatError, match="needs"):
        VectorFile(path)


@pytest.mark.parametrize(
    ("offset", "value", "message"),
    [
        (0, b"NOTVECS\n", "magic"),
        (8, struct.pack("<H", 2), "format version 2"),
        (10, b"\x07", "unknown value type"),
        (11, b"\x01", "reserved"),
        (12, struct.pack("<I", 0), "dimensions"),
        (60, b"\x01", "reserved"),
    ],
)
def test_garbage_header_is_refused(tmp_path: Path, offset: int, value: bytes, message: str) -> None:
    data = bytearray(encode_vectors(unit_rows(4, 8), KEY))
    data[offset : offset + len(value)] = value
    path = tmp_path / "v.bin"
    path.write_bytes(bytes(data))
    with pytest.raises(BundleFormatError, match=message):
        VectorFile(path)


def test_bad_row_scale_is_refused(tmp_path: Path) -> None:
    data = bytearray(encode_vectors(unit_rows(4, 8), KEY))
    struct.pack_into("<f", data, len(data) - 4, float("nan"))
    path = tmp_path / "v.bin"
    path.write_bytes(bytes(data))
    with pytest.raises(BundleFormatError, match="scale"):
        VectorFile(path)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=0, max_value=1 << 70))
def test_any_header_bytes_parse_consistently_or_are_refused(data: bytes, size: int) -> None:
    try:
        h = parse_header(data, size)
    except BundleFormatError:
        return
    assert h.expected_size() == size and h.dims >= 1


def test_encode_rejects_what_cannot_be_stored() -> None:
    with pytest.raises(ValueError, match="NaN"):
        encode_vectors(np.array([[np.nan, 0.0]]), KEY)
    with pytest.raises(ValueError, match="matrix"):
        encode_vectors(np.zeros(4), KEY)
    with pytest.raises(ValueError, match="sha256"):
        encode_vectors(np.zeros((1, 4)), "abcd")


def test_query_of_wrong_dimensions_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v.bin"
    write_vectors(path, unit_rows(3, 8), KEY)
    with VectorFile(path) as vf, pytest.raises(ValueError, match="dimensions"):
        vf.scores(np.ones(9))


def test_pages_rank_by_their_best_chunk_ties_by_number() -> None:
    # records: 0 -> rows 0-1, 1 -> no chunk, 2 -> rows 2-4, 3 -> row 5
    scores = np.array([0.1, 0.5, 0.2, 0.9, 0.3, 0.5], dtype=np.float32)
    starts = [0, 2, 2, 5]
    ranked = rank_documents(scores, starts)
    assert [d for d, _ in ranked] == [2, 0, 3]
    assert ranked[0][1] == pytest.approx(0.9)
    assert rank_documents(scores, starts, limit=1) == ranked[:1]
    assert rank_documents(np.zeros(0), []) == []
    with pytest.raises(ValueError, match="starts"):
        rank_documents(scores, [0, 4, 2])


def test_stored_rows_copy_into_another_file_byte_for_byte(tmp_path: Path) -> None:
    m = unit_rows(5, 8)
    path = tmp_path / "v.bin"
    write_vectors(path, m, KEY)
    with VectorFile(path) as vf:
        again = encode_quantized(vf.stored(range(5)), KEY)
        picked = vf.stored([3, 1])
    assert again == path.read_bytes()
    assert encode_quantized(picked, KEY) == encode_vectors(m[[3, 1]], KEY)
    with VectorFile(path) as vf, pytest.raises(IndexError):
        vf.stored([5])
