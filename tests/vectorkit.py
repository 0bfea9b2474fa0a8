"""Vector files as an attacker, or an older build, leaves them: rewritten manifests, float16 rows, planted
values (issue 31). Shared by the server's tests and the indexer's end-to-end tests."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import msgspec
from docbundle.bundle.manifest import MANIFEST_NAME, FileEntry, decode_manifest, encode_manifest
from docbundle.bundle.summary import SUMMARY_NAME
from docbundle.bundle.vectors import HEADER_SIZE, VECTORS_FILE, VectorFile, write_vectors


def rewrite_manifest_hash(bundle: Path, rel: str) -> None:
    """List ``rel``'s current size and sha256 in the manifest (what an attacker who rewrites one does)."""
    m = decode_manifest((bundle / MANIFEST_NAME).read_bytes())
    data = (bundle / rel).read_bytes()
    files = [
        FileEntry(path=f.path, size=len(data), sha256=hashlib.sha256(data).hexdigest())
        if f.path == rel
        else f
        for f in m.files
    ]
    (bundle / MANIFEST_NAME).write_bytes(encode_manifest(msgspec.structs.replace(m, files=files)))


def to_float16(bundle: Path) -> None:
    """Rewrite ``bundle``'s vectors as float16 rows (a format the reader accepts and the indexer can meet in
    a previous bundle), listing the new file in the manifest as a build would."""
    path = bundle / VECTORS_FILE
    with VectorFile(path) as vf:
        matrix, key = vf.matrix(), vf.header.embedder_key
    path.chmod(0o644)
    write_vectors(path, matrix, key, "float16")
    rewrite_manifest_hash(bundle, VECTORS_FILE)
    m = decode_manifest((bundle / MANIFEST_NAME).read_bytes())
    assert m.vectors is not None
    vectors = msgspec.structs.replace(m.vectors, dtype="float16")
    (bundle / MANIFEST_NAME).write_bytes(encode_manifest(msgspec.structs.replace(m, vectors=vectors)))


#: Planted values that pass the sha256 of a rewritten manifest, by name: (value type, what is planted).
PLANTS = {
    "float16 NaN": ("float16", float("nan")),
    "float16 infinity": ("float16", float("-inf")),
    "int8 scale 1e30": ("int8", 1e30),
}


def plant(bundle: Path, name: str, row: int) -> None:
    """Plant ``PLANTS[name]`` in row ``row`` of ``bundle``'s vectors and rewrite the manifest to match (what
    an attacker with write access to the folder does); a float16 plant rewrites the file as float16 first."""
    dtype, value = PLANTS[name]
    if dtype == "float16":
        to_float16(bundle)
    path = bundle / VECTORS_FILE
    with VectorFile(path) as vf:
        rows, dims = vf.rows, vf.dims
    data = bytearray(path.read_bytes())
    if dtype == "float16":
        struct.pack_into("<e", data, HEADER_SIZE + 2 * (row * dims + 5), value)  # dimension 5
    else:
        struct.pack_into("<f", data, HEADER_SIZE + rows * dims + 4 * row, value)
    path.chmod(0o644)
    path.write_bytes(bytes(data))
    rewrite_manifest_hash(bundle, VECTORS_FILE)
    (bundle.parents[2] / SUMMARY_NAME).unlink(missing_ok=True)  # as add_vectors: the summary is rebuilt
