"""The manifest: encoding, the format-version gate, and the committed JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from docbundle.bundle.errors import BundleFormatError, UnsupportedFormatVersionError
from docbundle.bundle.manifest import (
    FORMAT_VERSION,
    SUPPORTED_FORMAT_VERSIONS,
    BuildInfo,
    Counts,
    FileEntry,
    LibraryInfo,
    Manifest,
    SourceDocument,
    SourceInfo,
    VersionInfo,
    decode_manifest,
    encode_manifest,
    render_json_schema,
)

ROOT = Path(__file__).resolve().parents[2]


def _manifest() -> Manifest:
    return Manifest(
        format_version=FORMAT_VERSION,
        library=LibraryInfo(id="demo", name="Demo"),
        version=VersionInfo(),
        source=SourceInfo(llms_txt="http://127.0.0.1:1/llms.txt"),
        build=BuildInfo(build_id="20260101-0123456789ab", content_hash="0" * 64, built_at="x", analyzer="a"),
        counts=Counts(documents=1, chunks=2),
        documents=[SourceDocument(url="http://127.0.0.1:1/a.md", path="a.md", chunks=2)],
        files=[FileEntry(path="docs.bin", size=3, sha256="f" * 64)],
    )


def test_manifest_round_trips_and_puts_format_version_first() -> None:
    data = encode_manifest(_manifest())
    assert data.lstrip().startswith(b'{\n  "format_version": 1')
    assert decode_manifest(data) == _manifest()


def test_encoding_is_stable_bytes() -> None:
    assert encode_manifest(_manifest()) == encode_manifest(_manifest())


@pytest.mark.parametrize("version", [0, 2, 99])
def test_unsupported_format_version_is_refused_before_the_rest_is_read(version: int) -> None:
    # The rest of the document is garbage on purpose: the version gate must fire first.
    data = json.dumps({"format_version": version, "library": 5}).encode()
    with pytest.raises(UnsupportedFormatVersionError, match=f"format_version {version} is not supported"):
        decode_manifest(data)
    assert version not in SUPPORTED_FORMAT_VERSIONS


@pytest.mark.parametrize("data", [b"", b"not json", b"[]", b'{"library": {}}'])
def test_malformed_manifest_is_a_format_error(data: bytes) -> None:
    with pytest.raises(BundleFormatError):
        decode_manifest(data)


def test_unknown_optional_fields_are_ignored_by_this_reader() -> None:
    raw = msgspec.json.decode(encode_manifest(_manifest()))
    raw["a_field_from_the_future"] = {"x": 1}
    assert decode_manifest(msgspec.json.encode(raw)) == _manifest()


def test_committed_json_schema_is_current() -> None:
    committed = (ROOT / "docs" / "manifest.schema.json").read_text(encoding="utf-8")
    assert committed == render_json_schema(), (
        "docs/manifest.schema.json is stale: run python -m docbundle.bundle.manifest > docs/manifest.schema.json"
    )
