"""A bundle's routing record: its vocabulary with document frequencies, capped, for routing searches.

A search across many libraries cannot open and score every one: it asks the route index
(``routeindex``) which libraries hold the question's words, and that index is made of these records.
The record is written at build time as ``routing.bin`` (listed in the manifest's ``files`` with its
sha256, and described by ``manifest.routing``); a reader without one still serves the bundle, and the
same record can be derived from the bundle's search index (``record_from_index``) for bundles built
before records existed.

Layout: one msgpack map (``RoutingRecord``): ``format`` (1), ``chunks`` (sections in the bundle),
``vocabulary`` (distinct terms in the index), ``cutoff`` (0 when every term is kept, else the
document frequency of the least frequent term kept), ``terms`` (sorted) and ``dfs`` (their document
frequencies: the chunks holding the term, the most over the fields title, headings, body, code).

Bounds: at most ``MAX_ROUTING_TERMS`` terms (the most frequent kept, ties by term), each at most
``MAX_TERM_BYTES`` bytes of UTF-8 (longer ones are left out: encoded blobs, not words anyone asks for),
so a record is at most about 1.3 MB (32,768 × (32 + 7) bytes) and, for a small library, a few kilobytes. A reader refuses a file over
``MAX_RECORD_BYTES``, one whose lists disagree in length, are not sorted, or break those bounds.
The terms are the analyzer's (``analysis``): the words a query is analysed into can be looked up as they are.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
from pathlib import Path
from typing import Protocol, TypeVar

import msgspec

from .errors import BundleFormatError, BundleIntegrityError
from .manifest import Manifest
from .untrusted import decode, read_regular

ROUTING_FILE = "routing.bin"
RECORD_FORMAT = 1
MAX_ROUTING_TERMS = 32_768
MAX_TERM_BYTES = 32
MAX_RECORD_BYTES = 2 * 1024 * 1024
# The fields whose terms route: every searched text field (``section`` is an id, not words).
ROUTING_FIELDS = ("title", "headings", "body", "code")


class RoutingRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The routing record of one bundle (see the module docstring)."""

    format: int = RECORD_FORMAT
    chunks: int
    vocabulary: int
    cutoff: int = 0
    terms: list[str]
    dfs: list[int]


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(RoutingRecord)


def make_record(frequencies: dict[str, int], chunks: int, cap: int = MAX_ROUTING_TERMS) -> RoutingRecord:
    """The record of a vocabulary (``term -> document frequency``): the ``cap`` most frequent terms."""
    usable = [(t, df) for t, df in frequencies.items() if 0 < len(t.encode()) <= MAX_TERM_BYTES and df > 0]
    cutoff = 0
    if len(usable) > cap:
        usable.sort(key=lambda item: (-item[1], item[0]))
        usable = usable[:cap]
        cutoff = usable[-1][1] if usable else 0
    usable.sort()
    return RoutingRecord(
        chunks=chunks,
        vocabulary=len(frequencies),
        cutoff=cutoff,
        terms=[t for t, _ in usable],
        dfs=[df for _, df in usable],
    )


def encode_record(record: RoutingRecord) -> bytes:
    """The bytes of ``routing.bin`` (the same record always gives the same bytes)."""
    return _encoder.encode(record)


class _Versioned(Protocol):
    @property
    def format(self) -> int: ...


V = TypeVar("V", bound=_Versioned)


def decode_versioned(
    data: bytes, decoder: msgspec.msgpack.Decoder[V], name: str, limit: int, version: int
) -> V:
    """Decode one of the routing files (``name``): at most ``limit`` bytes, of format ``version``;
    ``BundleFormatError`` otherwise (malformed, of the wrong shape, or nested too deeply: ``untrusted``)."""
    if len(data) > limit:
        raise BundleFormatError(f"{name} is {len(data)} bytes, over the {limit} byte limit")
    value = decode(decoder.decode, data, name)
    if value.format != version:
        raise BundleFormatError(f"{name} has format {value.format}; this reader reads {version}")
    return value


def decode_record(data: bytes) -> RoutingRecord:
    """Decode and check a routing record; ``BundleFormatError`` naming what is wrong."""
    record = decode_versioned(data, _decoder, ROUTING_FILE, MAX_RECORD_BYTES, RECORD_FORMAT)
    problem = _problem(record)
    if problem:
        raise BundleFormatError(f"{ROUTING_FILE}: {problem}")
    return record


def _problem(r: RoutingRecord) -> str | None:
    if len(r.terms) != len(r.dfs):
        return f"{len(r.terms)} terms but {len(r.dfs)} frequencies"
    if len(r.terms) > MAX_ROUTING_TERMS:
        return f"{len(r.terms)} terms, over the {MAX_ROUTING_TERMS} allowed"
    if r.chunks < 0 or r.vocabulary < len(r.terms) or r.cutoff < 0:
        return "negative counts, or a vocabulary smaller than its terms"
    # Each check runs through map and min/max rather than a Python loop: a catalogue of 10,000 small
    # libraries reads millions of terms when its route index is built.
    sizes = list(map(len, map(str.encode, r.terms)))
    if sizes and not 0 < min(sizes) <= max(sizes) <= MAX_TERM_BYTES:
        return f"a term that is empty or over {MAX_TERM_BYTES} bytes"
    if not all(map(operator.lt, r.terms, itertools.islice(r.terms, 1, None))):
        return "terms not sorted, or repeated"
    if r.dfs and not 0 < min(r.dfs) <= max(r.dfs) <= max(r.chunks, 1):
        return "a document frequency outside 1..chunks"
    return None


def read_record(bundle: Path, manifest: Manifest) -> RoutingRecord | None:
    """The routing record a bundle's manifest lists, checked against its sha256; None when it has none.

    Raises ``BundleIntegrityError`` when the file does not match the manifest, ``BundleFormatError``
    when it is malformed, and ``UnsafeFileError`` (a ``BundleFormatError``) when it is not a regular
    file or is larger than the manifest says.
    """
    info = manifest.routing
    if info is None:
        return None
    listed = next((f for f in manifest.files if f.path == info.path), None)
    if listed is None or info.path != ROUTING_FILE:
        raise BundleFormatError(
            f"the manifest's routing names {info.path!r}, which its file list does not hold"
        )
    path = bundle / info.path
    # Through ``untrusted``: a FIFO, a device or a link is refused without blocking, and no more than
    # the listed size (itself bounded) is read, whatever the file claims or turns out to be.
    if listed.size > MAX_RECORD_BYTES:
        raise BundleIntegrityError(
            f"{info.path}: the manifest lists {listed.size} bytes, over {MAX_RECORD_BYTES}"
        )
    try:
        data = read_regular(path, listed.size)
    except FileNotFoundError as exc:
        raise BundleIntegrityError(f"{info.path} is missing") from exc
    if len(data) != listed.size:
        raise BundleIntegrityError(f"{info.path} is {len(data)} bytes, the manifest says {listed.size}")
    if hashlib.sha256(data).hexdigest() != listed.sha256:
        raise BundleIntegrityError(f"{info.path} does not match its sha256 in the manifest")
    return decode_record(data)


def record_from_index(index: object, chunks: int) -> RoutingRecord:
    """Derive the routing record from a whoosh index's term dictionary (no posting list is read)."""
    from .whooshio import PostingReader

    reader = PostingReader(index)  # type: ignore[arg-type]
    try:
        return make_record(reader.doc_frequencies(ROUTING_FIELDS), chunks)
    finally:
        reader.close()


def record_of_directory(directory: Path, chunks: int) -> RoutingRecord:
    """The routing record of the index a build just wrote into ``directory`` (read as it is on disk)."""
    from .reader import open_index

    index = open_index(directory, use_mmap=False)
    try:
        return record_from_index(index, chunks)
    finally:
        index.close()


def derive_record(bundle: Path) -> RoutingRecord:
    """The routing record of a bundle built without one: verified, opened, its term dictionary read."""
    from .reader import open_bundle, section_count

    opened = open_bundle(bundle)
    try:
        return record_from_index(opened.index, section_count(opened.manifest))
    finally:
        opened.close()


def write_record(directory: Path, record: RoutingRecord) -> int:
    """Write ``routing.bin`` into a bundle being built; returns its size."""
    data = encode_record(record)
    (directory / ROUTING_FILE).write_bytes(data)
    return len(data)
