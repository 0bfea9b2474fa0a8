"""The vector file: one embedding per chunk, quantized, memory-mapped, scored with one matrix product.

Layout (integers little-endian)::

    header, 64 bytes:
        magic        8s   b"DBVEC1\\n\\0"
        version      u16  FORMAT_VERSION (1)
        dtype        u8   1 = int8 with a float32 scale per row, 2 = float16
        reserved     u8   0
        dims         u32  vector dimensions (1 .. MAX_DIMS)
        rows         u64  number of chunks
        embedder     32s  sha256 of the embedder identity (``EmbedderIdentity.key``), raw bytes
        reserved     8x   zero
    matrix:  rows × dims values of the dtype, row-major
    scales:  rows float32 (int8 only): row i ≈ matrix[i] * scales[i]

Row ``i`` is chunk number ``i`` of the bundle: the chunks of the docs store's records, in record order
(the same numbering as the whoosh index's document numbers). A reader checks every bound before it maps
anything: the file size must be exactly header + matrix + scales, and it refuses a file that is not,
with the sizes named. Writing is deterministic: the same matrix and identity give the same bytes
(quantization is round-half-to-even on each value, no randomness, no timestamps).

int8 with one scale per row (the largest magnitude of the row maps to 127) keeps rankings within noise
of float32 at a quarter of the size; see docs/semantic.md for the measurement.

Values: rows are unit vectors (an ``Embedder`` returns them L2-normalised), so a stored value is at most 1
in magnitude and an int8 row's scale at most 1/127. ``check_values`` refuses, naming the row, a float16
value that is not finite or not below ``MAX_VALUE``, and an int8 scale that is not finite or not within
0..``MAX_SCALE``: such a row makes scores NaN or infinite (a hit with ``score: null``, which the search
tool's own output schema refuses) or lets one planted row outrank every other. A bundle's vector file is
checked when the bundle is opened (``reader.check_vectors``: ``verify``, ``install``, a server's first
open) and again when it is mapped (``VectorFile``).

Bounds: numpy is imported only by the functions that need it (the optional ``semantic`` extra); reading
the header and checking the values need only the standard library, reading ``_CHECK_BYTES`` at a time.
"""

from __future__ import annotations

import math
import os
import struct
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from .errors import BundleFormatError
from .mapped import MappedFile
from .untrusted import open_regular

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

VECTORS_FILE = "vectors.bin"
MAGIC = b"DBVEC1\n\0"
FORMAT_VERSION = 1
SUPPORTED_VERSIONS = (1,)
MAX_DIMS = 4096
_HEAD = struct.Struct("<8sHBBIQ32s8x")
HEADER_SIZE = _HEAD.size  # 64
DTYPES: dict[int, tuple[str, int]] = {1: ("int8", 1), 2: ("float16", 2)}
Dtype = Literal["int8", "float16"]
# Rows widened to float32 at a time when scoring: bounds the temporary (1.5 MB at 384 dims) and keeps
# each product small. Products go through numpy's own loops (einsum), not BLAS: a threaded BLAS gemv
# waited 20 ms for its second thread on a busy 2-core machine, against 0.5 ms for all of large-en here.
_BLOCK_ROWS = 1024
# The largest magnitude a stored value may have: rows are unit vectors (values at most 1), with a margin for
# float rounding that lets a float16 value be judged by its high byte alone (below 1.25: exponent and the
# top two mantissa bits). An int8 row's scale maps 127 to its largest magnitude, hence MAX_SCALE.
MAX_VALUE = 1.25
MAX_SCALE = MAX_VALUE / 127
_CHECK_BYTES = 1 << 20  # checking values reads at most 1 MiB at a time (plus one row)
# For each high byte of a little-endian float16: 1 when the value is infinite, NaN or at least MAX_VALUE.
_FLOAT16_OUT = bytes(1 if (b & 0x7F) > 0x3C else 0 for b in range(256))


@dataclass(frozen=True)
class VectorHeader:
    """The decoded header of a vector file."""

    version: int
    dtype: Dtype
    dims: int
    rows: int
    embedder_key: str  # hex sha256 of the embedder identity

    @property
    def itemsize(self) -> int:
        """Bytes per matrix value."""
        return 1 if self.dtype == "int8" else 2

    def expected_size(self) -> int:
        """The exact file size this header implies."""
        scales = 4 * self.rows if self.dtype == "int8" else 0
        return HEADER_SIZE + self.rows * self.dims * self.itemsize + scales


def parse_header(data: bytes, file_size: int) -> VectorHeader:
    """Decode and check a vector file's header against the file's size; BundleFormatError when wrong."""
    if file_size < HEADER_SIZE or len(data) < HEADER_SIZE:
        raise BundleFormatError(f"{VECTORS_FILE} is truncated ({file_size} bytes, header is {HEADER_SIZE})")
    magic, version, code, reserved, dims, rows, key = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise BundleFormatError(f"{VECTORS_FILE} does not start with the docbundle vector magic")
    if version not in SUPPORTED_VERSIONS:
        raise BundleFormatError(
            f"{VECTORS_FILE} has format version {version}; this reader supports {SUPPORTED_VERSIONS}"
        )
    if code not in DTYPES:
        raise BundleFormatError(f"{VECTORS_FILE} has unknown value type {code}")
    if reserved or any(data[HEADER_SIZE - 8 : HEADER_SIZE]):
        raise BundleFormatError(f"{VECTORS_FILE} has non-zero reserved header bytes")
    if not 1 <= dims <= MAX_DIMS:
        raise BundleFormatError(f"{VECTORS_FILE} has {dims} dimensions (1..{MAX_DIMS} allowed)")
    dtype: Dtype = "int8" if code == 1 else "float16"
    header = VectorHeader(version, dtype, dims, rows, key.hex())
    # rows is a u64 from the file: compare sizes as Python integers, no overflow possible.
    if header.expected_size() != file_size:
        raise BundleFormatError(
            f"{VECTORS_FILE} holds {file_size} bytes, but its header ({rows} rows × {dims} {dtype}) "
            f"needs {header.expected_size()}"
        )
    return header


def check_values(fd: int, header: VectorHeader) -> None:
    """Refuse (``BundleFormatError`` naming the row) a vector file whose float16 values or int8 scales are
    not finite or out of range (see the module's docstring); reads through ``fd`` with ``pread``.

    Standard library only: the header was checked first (``parse_header``), so the sizes add up.
    """
    if header.dtype == "float16":
        _check_float16(fd, header)
    else:
        _check_scales(fd, header)


def _read_at(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise BundleFormatError(f"{VECTORS_FILE} is shorter than its header says (it changed while read)")
    return data


def _check_float16(fd: int, h: VectorHeader) -> None:
    row_bytes = 2 * h.dims
    step = max(1, _CHECK_BYTES // row_bytes)  # rows per read
    for first in range(0, h.rows, step):
        block = _read_at(fd, min(step, h.rows - first) * row_bytes, HEADER_SIZE + first * row_bytes)
        at = block[1::2].translate(_FLOAT16_OUT).find(1)  # the high byte of each value says enough
        if at >= 0:
            row, dim = divmod(at, h.dims)
            (value,) = struct.unpack_from("<e", block, 2 * at)
            what = "is not finite" if not math.isfinite(value) else f"is not below {MAX_VALUE:g} in magnitude"
            raise BundleFormatError(
                f"{VECTORS_FILE}: row {first + row}, dimension {dim}: value {value!r} {what} (rows are unit "
                "vectors); the file is damaged or was not written by docbundle: rebuild or reinstall the bundle"
            )


def _check_scales(fd: int, h: VectorHeader) -> None:
    start = HEADER_SIZE + h.rows * h.dims
    step = _CHECK_BYTES // 4  # scales per read
    for first in range(0, h.rows, step):
        scales = array("f", _read_at(fd, 4 * min(step, h.rows - first), start + 4 * first))
        if sys.byteorder == "big":
            scales.byteswap()
        for i, scale in enumerate(scales):
            if not 0.0 <= scale <= MAX_SCALE:  # NaN fails the comparison too
                raise BundleFormatError(
                    f"{VECTORS_FILE}: row {first + i} has a row scale of {scale!r}, which is negative, not "
                    f"finite or above {MAX_SCALE:.6g} (rows are unit vectors, so a scale is at most 1/127); "
                    "the file is damaged or was not written by docbundle: rebuild or reinstall the bundle"
                )


class Quantized(NamedTuple):
    """Rows as a vector file stores them: ``values`` (rows × dims, int8 or float16) and, for int8, one
    float32 ``scales`` per row. Each row is quantized on its own, so rows can be copied between files."""

    values: npt.NDArray[Any]
    scales: npt.NDArray[np.float32] | None


def quantize(matrix: npt.ArrayLike, dtype: Dtype = "int8") -> Quantized:
    """``matrix`` (rows × dims, float) as stored rows: int8 with a scale per row, or float16."""
    import numpy as np

    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2 or not 1 <= m.shape[1] <= MAX_DIMS:
        raise ValueError(f"need a rows × dims matrix with 1..{MAX_DIMS} dims, got shape {m.shape}")
    if not np.isfinite(m).all():
        raise ValueError("the matrix holds a NaN or an infinity")
    if m.size and float(np.abs(m).max()) >= MAX_VALUE:
        raise ValueError(
            f"the matrix holds a value of magnitude {MAX_VALUE:g} or more: rows must be unit vectors"
        )
    if dtype == "float16":
        return Quantized(m.astype("<f2"), None)
    rows = m.shape[0]
    peak = np.abs(m).max(axis=1) if rows else np.zeros(0, dtype=np.float32)
    scales = (peak / np.float32(127)).astype(np.float32)
    safe = np.where(scales > 0, scales, np.float32(1))
    q = np.clip(np.rint(m / safe[:, None]), -127, 127).astype(np.int8)
    return Quantized(q, scales)


def encode_quantized(rows: Quantized, embedder_key: str) -> bytes:
    """The bytes of a vector file holding ``rows`` (as ``quantize`` or ``VectorFile.stored`` give them)."""
    import numpy as np

    key = bytes.fromhex(embedder_key)
    if len(key) != 32:
        raise ValueError("embedder_key must be a sha256 in hex")
    values = rows.values
    if values.ndim != 2 or not 1 <= values.shape[1] <= MAX_DIMS:
        raise ValueError(f"need a rows × dims matrix with 1..{MAX_DIMS} dims, got shape {values.shape}")
    n, dims = values.shape
    if values.dtype == np.int8:
        if rows.scales is None or rows.scales.shape != (n,):
            raise ValueError("int8 rows need one scale per row")
        head = _HEAD.pack(MAGIC, FORMAT_VERSION, 1, 0, dims, n, key)
        return head + values.astype("<i1").tobytes() + rows.scales.astype("<f4").tobytes()
    if values.dtype == np.float16:
        head = _HEAD.pack(MAGIC, FORMAT_VERSION, 2, 0, dims, n, key)
        return head + values.astype("<f2").tobytes()
    raise ValueError(f"rows must be int8 or float16, not {values.dtype}")


def encode_vectors(matrix: npt.ArrayLike, embedder_key: str, dtype: Dtype = "int8") -> bytes:
    """The bytes of a vector file for ``matrix`` (rows × dims, float) made by the embedder ``embedder_key``."""
    return encode_quantized(quantize(matrix, dtype), embedder_key)


def write_vectors(path: Path, matrix: npt.ArrayLike, embedder_key: str, dtype: Dtype = "int8") -> int:
    """Write a vector file (see ``encode_vectors``); returns its size in bytes."""
    data = encode_vectors(matrix, embedder_key, dtype)
    with open(path, "wb") as fh:
        fh.write(data)
    return len(data)


class VectorFile(MappedFile):
    """A vector file opened read-only through a memory map, every bound checked first."""

    def __init__(self, path: Path) -> None:
        fd = open_regular(path)  # no symbolic link, FIFO or device (docbundle.bundle.untrusted)
        try:
            self._setup(fd)
        finally:
            os.close(fd)

    @classmethod
    def from_held(cls, fd: int) -> VectorFile:
        """A vector file over an open descriptor (mapped; the caller keeps its descriptor)."""
        vf = cls.__new__(cls)
        vf._setup(fd)
        return vf

    def _setup(self, fd: int) -> None:
        import numpy as np

        size = os.fstat(fd).st_size
        head = os.pread(fd, HEADER_SIZE, 0)
        self.header = parse_header(head, size)
        h = self.header
        check_values(fd, h)  # before anything is mapped: nothing to release when it refuses
        mapped = self._map_file(fd)
        n = h.rows * h.dims
        kind = np.dtype("<i1") if h.dtype == "int8" else np.dtype("<f2")
        self._matrix = np.frombuffer(mapped, dtype=kind, count=n, offset=HEADER_SIZE).reshape(h.rows, h.dims)
        self._scales: npt.NDArray[np.float32] | None = None
        if h.dtype == "int8":
            self._scales = np.frombuffer(
                mapped, dtype=np.dtype("<f4"), count=h.rows, offset=HEADER_SIZE + n
            ).astype(np.float32)

    @property
    def rows(self) -> int:
        """Number of rows (chunks)."""
        return self.header.rows

    @property
    def dims(self) -> int:
        """Vector dimensions."""
        return self.header.dims

    def check(self, rows: int, embedder_key: str) -> None:
        """Refuse the file unless it has ``rows`` rows and was made by the embedder ``embedder_key``."""
        if self.header.rows != rows:
            raise BundleFormatError(
                f"{VECTORS_FILE} has {self.header.rows} rows; the bundle has {rows} chunks"
            )
        if self.header.embedder_key != embedder_key:
            raise BundleFormatError(
                f"{VECTORS_FILE} was made by embedder {self.header.embedder_key[:12]}, "
                f"not {embedder_key[:12]}"
            )

    def stored(self, rows: npt.ArrayLike) -> Quantized:
        """Copies of the rows ``rows`` (row numbers) exactly as stored: the bytes another file can reuse."""
        import numpy as np

        pick = np.asarray(rows, dtype=np.int64).reshape(-1)
        if pick.size and (pick.min() < 0 or pick.max() >= self.header.rows):
            raise IndexError(f"row out of range 0..{self.header.rows - 1}")
        values = self._matrix[pick].copy()
        return Quantized(values, None if self._scales is None else self._scales[pick].copy())

    def matrix(self) -> npt.NDArray[np.float32]:
        """Every row as float32 (dequantized): a copy, rows × dims."""
        import numpy as np

        out = self._matrix.astype(np.float32)
        if self._scales is not None:
            out *= self._scales[:, None]
        return out

    def scores(self, query: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """The dot product of ``query`` (dims floats) with every row: one score per chunk."""
        import numpy as np

        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.header.dims:
            raise ValueError(f"query has {q.shape[0]} dimensions, the file {self.header.dims}")
        out = np.empty(self.header.rows, dtype=np.float32)
        for start in range(0, self.header.rows, _BLOCK_ROWS):
            block = self._matrix[start : start + _BLOCK_ROWS].astype(np.float32)
            out[start : start + block.shape[0]] = np.einsum("ij,j->i", block, q)
        if self._scales is not None:
            out *= self._scales
        return out

    def close(self) -> None:
        """Release the map (the matrix viewing it first: a map with views cannot close)."""
        if self._map is not None:
            del self._matrix
        super().close()


def rank_documents(
    scores: npt.ArrayLike, starts: list[int], limit: int | None = None
) -> list[tuple[int, float]]:
    """Rank documents by their best chunk: (record number, best score), best first, ties by number.

    ``starts[i]`` is the first row of record ``i``; a record's rows run to the next record's start (the
    last to the end), and a record with no row is left out.
    """
    import numpy as np

    s = np.asarray(scores, dtype=np.float32).reshape(-1)
    total = s.shape[0]
    if not starts:
        if total:
            raise ValueError("starts must cover the scores: no record for any row")
        return []
    ends = [*starts[1:], total]
    if starts[0] != 0 or any(a > b for a, b in zip(starts, ends, strict=True)):
        raise ValueError("starts must be non-decreasing row numbers from 0 within the scores")
    docs = np.array([i for i, (a, b) in enumerate(zip(starts, ends, strict=True)) if b > a], dtype=np.int64)
    if docs.size == 0:
        return []
    best = np.maximum.reduceat(s, np.asarray(starts, dtype=np.int64)[docs])
    order = np.lexsort((docs, -best))
    if limit is not None:
        order = order[:limit]
    return [(int(docs[j]), float(best[j])) for j in order]
