"""The release index ``index.json`` (``docbundle.bundle.releaseindex``): written compact, read back the
same, and a malformed, oversized or unknown-version index refused with a message that says what is wrong."""

from __future__ import annotations

import contextlib
import json

import msgspec
import pytest
from docbundle.bundle.errors import BundleFormatError, UnsupportedFormatVersionError
from docbundle.bundle.releaseindex import (
    MAX_INDEX_BYTES,
    MAX_INDEX_ENTRIES,
    PackagedBundle,
    decode_index,
    encode_index,
    index_version,
)
from hypothesis import given, settings
from hypothesis import strategies as st

BUILD = "20261127-0123456789ab"


def entry(i: int, release: str = "bundles-20261127-1-01", version: str = "latest") -> PackagedBundle:
    library = f"lib-{i:05d}"
    return PackagedBundle(
        library=library, name=f"Library {i}", version=version, status="active", latest=True, build_id=BUILD,
        content_hash="a" * 64, manifest_sha256="b" * 64, built_at="2026-11-27T03:17:00Z", documents=i,
        archive=f"{library}-{version}-{BUILD}.tar.gz", sha256="c" * 64, size=1000 + i, release=release,
    )  # fmt: skip


def test_ten_thousand_entries_round_trip_in_a_few_megabytes() -> None:
    entries = [entry(i, release=f"bundles-20261127-1-{i // 998 + 1:02d}") for i in range(10_000)]
    data = encode_index(entries)
    assert decode_index(data, "index.json") == entries
    assert json.loads(data)["version"] == 2
    # About 500 bytes an entry: the byte bound holds the entry bound.
    assert len(data) < 6 * 1024 * 1024
    assert len(data) / len(entries) * MAX_INDEX_ENTRIES < MAX_INDEX_BYTES


def test_an_index_without_releases_stays_version_1() -> None:
    entries = [entry(1, release=""), entry(2, release="")]
    data = encode_index(entries)
    assert index_version(entries) == 1 and json.loads(data)["version"] == 1
    assert "release" not in json.loads(data)["bundles"][0]  # omitted: a version 1 reader sees its fields
    assert decode_index(data, "index.json") == entries


def test_an_entry_may_name_its_attestation_and_older_entries_still_read() -> None:
    """``attestation`` is optional: omitted when empty (an older docbundle reads the index as before), and
    an index that names one is read by a reader that knows the field (version 2 all the same)."""
    plain = entry(1)
    signed = msgspec.structs.replace(entry(2), attestation="attestation.sigstore.json")
    data = encode_index([plain, signed])
    assert json.loads(data)["version"] == 2
    assert "attestation" not in json.loads(data)["bundles"][0]
    assert decode_index(data, "index.json") == [plain, signed]
    assert decode_index(data, "index.json")[1].attestation == "attestation.sigstore.json"


def _doc(bundles: object, version: object = 2) -> bytes:
    return json.dumps({"format": "docbundle-release-index", "version": version, "bundles": bundles}).encode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", r"index.json is not a docbundle release index: Input data was truncated"),
        (b'{"format": "other", "version": 2}', r"not a docbundle release index \(no format"),
        (_doc([], version=3), r"has index version 3; this docbundle reads 1, 2 \(a newer docbundle reads it\)"),
        (_doc([], version="2"), r"is not a docbundle release index: Expected `int \| null`, got `str`"),
        (_doc([{**msgspec.to_builtins(entry(1)), "sha256": "C" * 64}]), r"at `\$.bundles\[0\].sha256`"),
        (_doc([{**msgspec.to_builtins(entry(1)), "size": -1}]), r"Expected `int` >= 0 - at `\$.bundles\[0\].size`"),
        (_doc([{**msgspec.to_builtins(entry(1)), "release": "../x"}]), r"at `\$.bundles\[0\].release`"),
        (_doc([{**msgspec.to_builtins(entry(1)), "release": "a/b"}]), r"at `\$.bundles\[0\].release`"),
        (_doc([{**msgspec.to_builtins(entry(1)), "library": "Lib"}]), r"at `\$.bundles\[0\].library`"),
        (_doc([{**msgspec.to_builtins(entry(1)), "attestation": "../a.sigstore.json"}]), r"at `\$.bundles\[0\].attestation`"),
        (_doc([{**msgspec.to_builtins(entry(1)), "attestation": "a/b.sigstore.json"}]), r"at `\$.bundles\[0\].attestation`"),
        (_doc([{**msgspec.to_builtins(entry(1)), "attestation": "SHA256SUMS"}]), r"at `\$.bundles\[0\].attestation`"),
        (_doc([{**msgspec.to_builtins(entry(1)), "archive": "x.tar.gz"}]), r"malformed id or archive name"),
        (_doc([msgspec.to_builtins(entry(1))], version=1), r"is version 1 but names releases"),
        (b'{"format": "docbundle-release-index", "version": 2, "bundles": ' + b"[" * 100_000, r"nested too deeply"),
    ],
)  # fmt: skip
def test_a_malformed_index_is_refused_with_what_is_wrong(data: bytes, message: str) -> None:
    with pytest.raises(BundleFormatError, match=message):
        decode_index(data, "index.json")


def test_an_unknown_version_is_its_own_error() -> None:
    with pytest.raises(UnsupportedFormatVersionError):
        decode_index(_doc([], version=9), "index.json")


def test_an_oversized_index_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(
        BundleFormatError, match=rf"is {MAX_INDEX_BYTES + 1} bytes, over the {MAX_INDEX_BYTES}-byte"
    ):
        decode_index(b" " * (MAX_INDEX_BYTES + 1), "index.json")


def test_more_entries_than_the_bound_are_refused() -> None:
    one = msgspec.to_builtins(entry(1))
    data = _doc([one] * (MAX_INDEX_ENTRIES + 1))
    assert len(data) <= MAX_INDEX_BYTES
    with pytest.raises(BundleFormatError, match=rf"Expected `array` of length <= {MAX_INDEX_ENTRIES}"):
        decode_index(data, "index.json")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_are_an_index_or_a_format_error(data: bytes) -> None:
    with contextlib.suppress(BundleFormatError):
        decode_index(data, "index.json")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(list(PackagedBundle.__struct_fields__)), _json), max_size=3))
def test_any_json_entries_are_accepted_only_when_valid(bundles: list[dict[str, object]]) -> None:
    try:
        entries = decode_index(_doc(bundles), "index.json")
    except BundleFormatError:
        return
    for e in entries:
        assert e.archive == f"{e.library}-{e.version}-{e.build_id}.tar.gz"
