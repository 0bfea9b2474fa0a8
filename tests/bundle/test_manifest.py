"""The manifest: encoding, the format-version gate, and the committed JSON Schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from docbundle.bundle import manifest
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
    obtained_mix,
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


_ENCODE_IN_A_FRESH_PROCESS = """
import sys
from {module} import (FORMAT_VERSION, BuildInfo, Counts, FileEntry, LibraryInfo, Manifest, SearchSettings,
    SourceDocument, SourceInfo, VersionInfo, encode_manifest)

names = ["api", "guides", "reference", "tutorials", "faq", "changelog", "zeta", "alpha"]
if sys.argv[1] == "set":  # the order of a set of strings changes with PYTHONHASHSEED
    names = list(set(names))
weights = {{name: 1.0 + i / 10 for i, name in enumerate(sorted(names))}}
manifest = Manifest(
    format_version=FORMAT_VERSION,
    library=LibraryInfo(id="demo", name="Demo", description="d", category="c"),
    version=VersionInfo(),
    source=SourceInfo(llms_txt="http://127.0.0.1:1/llms.txt"),
    build=BuildInfo(
        build_id="20260101-0123456789ab",
        content_hash="0" * 64,
        built_at="x",
        analyzer="a",
        search=SearchSettings(section_weights={{n: weights[n] for n in names}}, synonyms=[["a", "b"]]),
        tools={{n: "1.0" for n in names}},
    ),
    counts=Counts(documents=1, chunks=2),
    documents=[SourceDocument(url="http://127.0.0.1:1/" + n + ".md", path=n + ".md") for n in sorted(names)],
    files=[FileEntry(path="docs.bin", size=3, sha256="f" * 64)],
)
sys.stdout.write(encode_manifest(manifest).hex())
"""


def _encode_with_hash_seed(seed: str, order: str) -> bytes:
    """``encode_manifest`` of the same manifest in a new interpreter run with ``PYTHONHASHSEED=seed``."""
    code = _ENCODE_IN_A_FRESH_PROCESS.format(module=encode_manifest.__module__)
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-c", code, order], capture_output=True, text=True, env=env, check=True, timeout=60
    )
    return bytes.fromhex(out.stdout)


def test_encoding_is_stable_bytes() -> None:
    assert encode_manifest(_manifest()) == encode_manifest(_manifest())
    # The same manifest in processes whose str hashes (and so set and dict-building orders) differ.
    encoded = {seed: _encode_with_hash_seed(seed, "literal") for seed in ("0", "1", "2")}
    assert len(set(encoded.values())) == 1, "manifest bytes depend on PYTHONHASHSEED"
    assert decode_manifest(encoded["0"]).build.tools["alpha"] == "1.0"


def test_dicts_built_in_hash_order_encode_to_the_same_bytes() -> None:
    encoded = {seed: _encode_with_hash_seed(seed, "set") for seed in ("0", "1", "2", "3")}
    assert len(set(encoded.values())) == 1, "manifest bytes depend on the order its dicts were filled"


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


def _indent_descriptions(node: object, indent: str) -> None:
    """Docstring lines after the first indented as an older Python or msgspec leaves them."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                node[key] = value.replace("\n", "\n" + indent)
            else:
                _indent_descriptions(value, indent)
    elif isinstance(node, list):
        for item in node:
            _indent_descriptions(item, indent)


@pytest.mark.parametrize("indent", ["", "    ", "        "])
def test_the_schema_is_the_same_however_docstrings_come_indented(
    indent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pydantic/msgspec and Python versions render a docstring's later lines with or without their
    # indentation ("a reader\nuses" / "a reader\n    uses"): a fresh clone's CI failed on it.
    rendered = manifest.msgspec.json.schema(Manifest)

    def schema(_: type) -> dict[str, object]:
        copy = json.loads(json.dumps(rendered))
        _indent_descriptions(copy, indent)
        return copy

    monkeypatch.setattr(manifest.msgspec.json, "schema", schema)
    assert render_json_schema() == (ROOT / "docs" / "manifest.schema.json").read_text(encoding="utf-8")


def test_the_schema_check_still_sees_a_new_field(monkeypatch: pytest.MonkeyPatch) -> None:
    class Grown(Manifest, kw_only=True):
        """A manifest with one field more, not yet in the committed schema."""

        a_new_field: int = 0

    monkeypatch.setattr(manifest, "Manifest", Grown)
    assert render_json_schema() != (ROOT / "docs" / "manifest.schema.json").read_text(encoding="utf-8")


def test_the_obtained_mix_counts_indexed_documents_in_one_order_for_indexer_and_server() -> None:
    from docbundle.indexer.pipeline import build

    docs = [
        SourceDocument(url="u1", path="a", chunks=2, obtained="html"),
        SourceDocument(url="u2", path="b", chunks=1, obtained="markdown"),
        SourceDocument(url="u3", path="c", chunks=1, obtained="html"),
        SourceDocument(url="u4", path="d", chunks=0, obtained="markdown", error="404"),  # not indexed
        SourceDocument(url="u5", path="e", chunks=1, obtained=""),  # not recorded
        SourceDocument(url="u6", path="f", chunks=1, obtained="pdf"),  # a kind this reader does not know
    ]
    assert list(obtained_mix(docs).items()) == [("markdown", 1), ("html", 2), ("pdf", 1)]
    # One home: the indexer's summary and the server's list_libraries count with this function.
    assert build.obtained_mix is obtained_mix
