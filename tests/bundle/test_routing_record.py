"""The routing record (``routing.bin``) and the route index (``routing.idx``): their
bounds, and their readers refuse anything malformed with a format error (issue 22)."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import pytest
from docbundle.bundle.errors import BundleFormatError
from docbundle.bundle.routeindex import IndexedLibrary, RouteIndex, hash_record, term_hash
from docbundle.bundle.routing import (
    MAX_RECORD_BYTES,
    MAX_ROUTING_TERMS,
    MAX_TERM_BYTES,
    RoutingRecord,
    decode_record,
    encode_record,
    make_record,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from treekit import build, write_site

terms = st.text(min_size=1, max_size=8)  # at most 32 bytes of UTF-8: none is left out
vocabularies = st.dictionaries(terms, st.integers(1, 50), max_size=60)


def test_a_record_keeps_at_most_the_cap_most_frequent_terms() -> None:
    freq = {f"t{i:05d}": 1 + i % 7 for i in range(MAX_ROUTING_TERMS + 500)}
    record = make_record(freq, chunks=10)
    assert len(record.terms) == MAX_ROUTING_TERMS and record.vocabulary == len(freq)
    kept = set(record.terms)
    # Every term left out is at most as frequent as every term kept; cutoff is the least kept.
    assert max(df for t, df in freq.items() if t not in kept) <= min(record.dfs) == record.cutoff
    assert record.terms == sorted(record.terms)
    small = make_record({"a": 1, "b": 2}, chunks=2)
    assert small.cutoff == 0 and small.terms == ["a", "b"]


def test_the_largest_record_stays_within_the_documented_bound() -> None:
    # The worst case: every term as long as allowed (in bytes), with large frequencies.
    long = "ű" * (MAX_TERM_BYTES // 2)
    freq = {f"{long[:-3]}{i:06d}"[-MAX_TERM_BYTES:]: 4_000_000 for i in range(MAX_ROUTING_TERMS)}
    record = make_record(freq, chunks=4_000_000)
    size = len(encode_record(record))
    assert len(record.terms) == MAX_ROUTING_TERMS
    assert size <= 1.3 * 1000 * 1000 < MAX_RECORD_BYTES, size
    too_long = make_record({"x" * (MAX_TERM_BYTES + 1): 3, "ok": 1}, chunks=3)
    assert too_long.terms == ["ok"]


@given(vocabularies, st.integers(1, 80))
@settings(max_examples=200, deadline=None)
def test_a_record_round_trips_and_decodes_to_what_was_made(freq: dict[str, int], cap: int) -> None:
    chunks = max(freq.values(), default=1)
    record = make_record(freq, chunks, cap=cap)
    assert decode_record(encode_record(record)) == record
    assert len(record.terms) <= cap


@given(st.binary(max_size=400))
@settings(max_examples=300, deadline=None)
def test_any_bytes_decode_to_a_record_or_a_format_error(data: bytes) -> None:
    try:
        record = decode_record(data)
    except BundleFormatError:
        return
    assert len(record.terms) == len(record.dfs)


@pytest.mark.parametrize(
    "record",
    [
        RoutingRecord(chunks=3, vocabulary=2, terms=["b", "a"], dfs=[1, 1]),  # not sorted
        RoutingRecord(chunks=3, vocabulary=2, terms=["a", "b"], dfs=[1]),  # lengths disagree
        RoutingRecord(chunks=3, vocabulary=1, terms=["a"], dfs=[9]),  # df over chunks
        RoutingRecord(chunks=3, vocabulary=1, terms=["a"], dfs=[0]),  # df under 1
        RoutingRecord(chunks=3, vocabulary=2, terms=["a", "a"], dfs=[1, 1]),  # repeated
        RoutingRecord(chunks=3, vocabulary=2, terms=["", "a"], dfs=[1, 1]),  # empty
        RoutingRecord(chunks=3, vocabulary=1, terms=["x" * (MAX_TERM_BYTES + 1)], dfs=[1]),
        RoutingRecord(format=2, chunks=3, vocabulary=1, terms=["a"], dfs=[1]),
    ],
)
def test_a_malformed_record_is_refused(record: RoutingRecord) -> None:
    with pytest.raises(BundleFormatError):
        decode_record(encode_record(record))


def _index(records: dict[str, dict[str, int]]) -> RouteIndex:
    entries = []
    for lib_id, freq in records.items():
        record = make_record(freq, chunks=max(freq.values(), default=1))
        lib = IndexedLibrary(
            lib_id, "latest", "20260101-000000000000", record.chunks, record.vocabulary, 0, False
        )
        entries.append((lib, hash_record(record)))
    return RouteIndex.from_hashed(entries)


@given(st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), vocabularies, max_size=6))
@settings(max_examples=100, deadline=None)
def test_the_routing_index_round_trips_and_finds_each_library_by_its_terms(
    records: dict[str, dict[str, int]],
) -> None:
    index = RouteIndex.decode(_index(records).encode())
    assert {lib.library_id for lib in index.libraries} == set(records)
    for lib_id, freq in records.items():
        for term in list(freq)[:3]:
            assert lib_id in {c.library.library_id for c in index.score([(term,)])}
    split = index.split()
    for lib_id, freq in records.items():
        _, (hashes, dfs) = split[(lib_id, "latest")]
        assert list(hashes) == sorted(hashes)
        assert dict(zip(hashes, dfs, strict=True)) == {term_hash(t): df for t, df in freq.items()}
    # Built again from what it split into, it is the same index, byte for byte.
    again = RouteIndex.from_hashed([split[lib.key] for lib in index.libraries])
    assert again.encode() == index.encode()


_COMMON = ["api", "use", "data", "type", "error"]  # most libraries hold these
_RARE = [f"rare{i}" for i in range(12)]  # a few each
_vocabulary = st.builds(
    lambda common, rare: {**common, **rare},
    st.dictionaries(st.sampled_from(_COMMON), st.integers(1, 3), min_size=3),
    st.dictionaries(st.sampled_from(_RARE), st.integers(1, 9), max_size=2),
)


def _cori(index: RouteIndex, query: list[list[str]]) -> list[tuple[str, float, int]]:
    """CORI as the module docstring states it, posting by posting: (library, score, words held)."""
    libraries = index.libraries
    split = index.split()
    held_dfs = [dict(zip(*split[lib.key][1], strict=True)) for lib in libraries]  # term hash -> df
    avg = sum(max(lib.vocabulary, 1) for lib in libraries) / len(libraries)
    scores: dict[int, float] = {}
    held: dict[int, int] = {}
    for terms in query:
        beliefs: dict[int, float] = {}
        for term in terms:
            h = term_hash(term)
            holders = [n for n in range(len(libraries)) if h in held_dfs[n]]
            if not holders:
                continue
            weight = math.log((len(libraries) + 0.5) / len(holders)) / math.log(len(libraries) + 1.0)
            for n in holders:
                df = held_dfs[n][h]
                damp = 50.0 + 150.0 * max(libraries[n].vocabulary, 1) / avg
                beliefs[n] = beliefs.get(n, 0.0) + df / (df + damp) * (weight * (1.0 / len(terms)))
        for n, b in beliefs.items():
            scores[n] = scores.get(n, 0.0) + b
            held[n] = held.get(n, 0) + 1
    ranked = sorted(scores, key=lambda n: (-scores[n], libraries[n].key))
    return [(libraries[n].library_id, scores[n], held[n]) for n in ranked]


@given(
    st.lists(_vocabulary, min_size=2, max_size=30),
    st.lists(st.lists(st.sampled_from(_COMMON + _RARE), min_size=1, max_size=2), min_size=1, max_size=4),
    st.integers(1, 5),
)
@settings(max_examples=200, deadline=None)
def test_routing_scores_are_cori_posting_by_posting(
    vocabularies: list[dict[str, int]], query: list[list[str]], limit: int
) -> None:
    index = _index({f"lib{i:02d}": v for i, v in enumerate(vocabularies)})
    expected = _cori(index, query)
    assert [(c.library.library_id, c.score, c.matched) for c in index.score(query)] == expected
    assert [c.library.library_id for c in index.score(query, limit=limit)] == [x[0] for x in expected][:limit]


@given(st.binary(max_size=400))
@settings(max_examples=300, deadline=None)
def test_any_bytes_decode_to_a_routing_index_or_a_format_error(data: bytes) -> None:
    with contextlib.suppress(BundleFormatError):
        RouteIndex.decode(data)


def test_a_built_bundle_lists_its_routing_record_with_its_hash(tmp_path: Path) -> None:
    write_site(
        tmp_path / "site",
        {"a.md": "# Alpha\n\nThe zebrafish swims in the aquarium.\n"},
        "# S\n\n- [A](a.md)\n",
    )
    bundle = build(
        tmp_path / "libraries.toml",
        tmp_path / "out",
        f'[[library]]\nid = "s"\nllms_txt = "{tmp_path}/site/llms.txt"\n',
    ).bundle
    from docbundle.bundle.reader import verify_bundle
    from docbundle.bundle.routing import ROUTING_FILE, read_record

    manifest = verify_bundle(bundle)
    assert manifest.routing is not None and manifest.routing.path == ROUTING_FILE
    assert ROUTING_FILE in {f.path for f in manifest.files}
    record = read_record(bundle, manifest)
    assert record is not None and "zebrafish" in record.terms
    assert manifest.routing.terms == len(record.terms)
    # A changed byte is refused: the record is checked against the manifest's sha256.
    data = bytearray((bundle / ROUTING_FILE).read_bytes())
    data[-1] ^= 1
    (bundle / ROUTING_FILE).write_bytes(bytes(data))
    from docbundle.bundle.errors import BundleIntegrityError

    with pytest.raises(BundleIntegrityError):
        read_record(bundle, manifest)
