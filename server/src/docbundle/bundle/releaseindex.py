"""The release index ``index.json``: the catalogue of archives a release offers, written and read here.

Every release folder holds one (``docbundle-index package`` and the nightly job write it). The nightly
job also publishes one release index as an asset of the well-known release ``bundles-latest``: every
library version's newest archive, and in which release it is. A catalogue of 10,000 libraries is spread
over several releases (a GitHub release holds at most ``MAX_ASSETS_PER_RELEASE`` assets), so each entry
names its ``release``: the tag of the release folder beside the index's own (``../<release>/<archive>``),
or ``""`` for the index's own folder. ``docbundle pull`` downloads this one file, never one per library.

Format (``format`` first, then ``version``):

- version 1: entries without ``release`` (every archive beside the index); still read.
- version 2: entries may name their ``release``; an index that does is written as version 2, so a reader
  that knows only version 1 refuses it with a clear message instead of looking in the wrong folder.

Optional fields (``description``, ``attestation``) are added without a new version: a reader ignores a
field it does not know (msgspec's default), so an older docbundle reads a newer index and simply does
not use them. ``attestation`` names the Sigstore attestation bundle that signs the entry's archive, a file
in the same release folder (the nightly job signs a release's archives at once and publishes the bundle
as ``ATTESTATION``); ``docbundle pull`` checks it (``docbundle.server.provenance``).

The index is data from the network: ``decode_index`` bounds its size (``MAX_INDEX_BYTES``) and entry count
(``MAX_INDEX_ENTRIES``) and validates every field with msgspec (ids, versions, build ids and tags against
the layout's patterns, lowercase sha256, sizes, lengths). The bounds: an entry the nightly job writes
is about 500 bytes (measured: 10,000 entries encode to about 5 MB), so ``MAX_INDEX_BYTES`` holds the
``MAX_INDEX_ENTRIES`` a reader accepts. Pure msgspec and ``re``: no network here.
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

from .errors import BundleFormatError
from .untrusted import FormatHeader, check_format

INDEX = "index.json"
INDEX_FORMAT = "docbundle-release-index"
INDEX_VERSION = 2
READABLE_INDEX_VERSIONS = (1, 2)
MAX_INDEX_BYTES = 16 * 1024 * 1024
MAX_INDEX_ENTRIES = 30_000
#: GitHub's limit of assets in one release.
MAX_ASSETS_PER_RELEASE = 1000
#: The attestation bundle the nightly job publishes in each release: one Sigstore bundle whose statement
#: names every archive of the release (actions/attest-build-provenance signs them at once).
ATTESTATION = "attestation.sigstore.json"
#: Archives in one release: its ``SHA256SUMS``, ``index.json`` and ``ATTESTATION`` are assets too.
MAX_ARCHIVES_PER_RELEASE = MAX_ASSETS_PER_RELEASE - 3
#: A release tag as a path segment beside the index's folder: no ``/``, never ``.`` or ``..``.
#: Patterns end in ``\Z``, never ``$`` (which also matches before a final newline): msgspec searches.
RELEASE_TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z"
RELEASE_TAG_RE = re.compile(RELEASE_TAG_PATTERN)

_LibraryId = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9-]{0,63}\Z")]
_Version = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")]
_BuildId = Annotated[str, msgspec.Meta(pattern=r"^[0-9]{8}-[0-9a-f]{12}\Z")]
_Sha256 = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}\Z")]
#: The longest name, status or description an entry may carry (a reader refuses the index past it).
MAX_TEXT_CHARS = 500
_Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT_CHARS)]
_Count = Annotated[int, msgspec.Meta(ge=0)]
_Release = Annotated[str, msgspec.Meta(pattern=r"^\Z|" + RELEASE_TAG_PATTERN)]
#: An attestation file beside the archive: one path segment ending in ``.sigstore.json``, or ``""``.
_Attestation = Annotated[
    str, msgspec.Meta(pattern=r"^\Z|^[A-Za-z0-9][A-Za-z0-9._-]{0,219}\.sigstore\.json\Z")
]
#: A docs version's status: a lower-case word (active, deprecated, eol; a newer writer may add one).
_Status = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z-]{0,31}\Z")]
#: When the bundle was built: an ISO 8601 time (``2026-12-02T07:04:58Z``), no spaces or control characters.
_Time = Annotated[str, msgspec.Meta(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[0-9T:.+Z-]{0,40}\Z")]


class PackagedBundle(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One entry of ``index.json``: one archive (``release`` is omitted when it is the index's folder)."""

    library: _LibraryId
    name: _Text
    version: _Version
    status: _Status
    latest: bool
    build_id: _BuildId
    content_hash: _Sha256
    manifest_sha256: _Sha256  # pin it in bundles.lock: it covers every file, the index included
    built_at: _Time
    documents: _Count
    archive: Annotated[str, msgspec.Meta(max_length=200)]
    sha256: _Sha256
    size: _Count
    release: _Release = ""
    description: _Text = ""  # the library's one line (its llms.txt summary when the catalogue gives none)
    attestation: _Attestation = ""  # the Sigstore bundle signing the archive, in the same folder


class ReleaseIndex(msgspec.Struct, kw_only=True):
    """The whole ``index.json``."""

    format: str
    version: int
    bundles: Annotated[list[PackagedBundle], msgspec.Meta(max_length=MAX_INDEX_ENTRIES)]


_header_decoder = msgspec.json.Decoder(FormatHeader)
_index_decoder = msgspec.json.Decoder(ReleaseIndex)
_encoder = msgspec.json.Encoder()


def index_version(entries: list[PackagedBundle]) -> int:
    """The version an index of ``entries`` is written as: 2 when an entry names its release, else 1."""
    return INDEX_VERSION if any(e.release for e in entries) else 1


def encode_index(entries: list[PackagedBundle]) -> bytes:
    """The compact index: the header, then one entry per line (diffable), in the order given."""
    version = index_version(entries)
    lines = b",\n".join(_encoder.encode(e) for e in entries)
    body = b"\n" + lines + b"\n" if entries else b""
    return b'{"format":"%s","version":%d,"bundles":[%s]}\n' % (INDEX_FORMAT.encode(), version, body)


def decode_index(data: bytes, where: str) -> list[PackagedBundle]:
    """The entries of the index ``data`` (read from ``where``), or ``BundleFormatError`` saying what is wrong.

    ``UnsupportedFormatVersionError`` (a ``BundleFormatError``) for a version this reader does not know.
    """
    if len(data) > MAX_INDEX_BYTES:
        raise BundleFormatError(f"{where} is {len(data)} bytes, over the {MAX_INDEX_BYTES}-byte limit")
    try:
        header = _header_decoder.decode(data)
    except RecursionError:
        raise BundleFormatError(
            f"{where} is not a docbundle release index: its JSON is nested too deeply"
        ) from None
    except msgspec.DecodeError as exc:
        raise BundleFormatError(f"{where} is not a docbundle release index: {exc}") from None
    check_format(
        header, where, fmt=INDEX_FORMAT, readable=READABLE_INDEX_VERSIONS, what="release index", word="index"
    )
    try:
        index = _index_decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise BundleFormatError(f"{where} is malformed: {exc}") from None
    except msgspec.DecodeError as exc:
        raise BundleFormatError(f"{where} is not a docbundle release index: {exc}") from None
    for e in index.bundles:
        if e.archive != f"{e.library}-{e.version}-{e.build_id}.tar.gz":
            raise BundleFormatError(
                f"{where} lists an entry with a malformed id or archive name: {e.archive[:120]!r}"
            )
        if e.release and index.version < 2:
            raise BundleFormatError(f"{where} is version 1 but names releases; version 2 does")
    return index.bundles
