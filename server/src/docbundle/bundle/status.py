"""The catalogue's health ``status.json``: what last night did with every library version, written and read here.

The nightly job's ``--roll`` step writes it beside the release index ``index.json`` of ``bundles-latest``
(issue 32); ``docbundle pull --list`` and the catalogue page read it. One entry per library version:

- ``state``: one of ``STATES``. ``built`` (a new bundle was published tonight), ``unchanged`` (the site
  was read and nothing changed), ``failed`` (tonight's build failed or was refused; the previous bundle,
  if any, is still the one ``index.json`` names and ``pull`` installs), ``unavailable`` (failed
  ``unavailable_after`` nights in a row or more: the site is probably gone or moved; still listed, its
  last good bundle still pullable).
- ``reason``: for ``failed`` and ``unavailable``, one class of ``REASONS`` (a closed list, documented in
  docs/releases.md), and ``message``, the build's own words (cut to ``MAX_MESSAGE_CHARS``).
- ``pages``, ``chunks``, ``vectors``, ``bytes``, ``build_id``, ``built_at``: the bundle the catalogue
  serves for this version (its documents, search chunks, embedded rows, archive size and build), zero
  and empty when no bundle was ever published.
- ``checked_at``: the night this entry was last reported; ``last_success``: the last night it was built
  or found unchanged (``""`` if never); ``failed_nights``: failed nights in a row up to ``checked_at``.

Format (``format`` first, then ``version``): version 1. A reader refuses other formats and versions with
a clear message. The file is data from the network for ``pull``: ``decode_status`` bounds its size
(``MAX_STATUS_BYTES``) and entry count (``MAX_STATUS_ENTRIES``, that of ``index.json``), decodes it
through ``untrusted.decode`` (too deep a nesting is a clear error) and validates every field with msgspec
(ids, versions, build ids against the layout's patterns, states, reason classes, times, counts, lengths);
anything else is ``BundleFormatError`` naming the field. An entry the nightly job writes is about 425
bytes (measured: 10,000 make 4.3 MB, decoded in 0.1 s); ``MAX_STATUS_BYTES`` holds 30,000 entries of
1,100 bytes, and ``encode_status`` refuses to write a larger file, so no reader meets one.
Pure msgspec and ``re``: no network here.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .errors import BundleFormatError
from .releaseindex import MAX_INDEX_ENTRIES, MAX_TEXT_CHARS
from .untrusted import FormatHeader, check_format, decode

__all__ = [
    "MAX_STATUS_BYTES",
    "MAX_STATUS_ENTRIES",
    "REASONS",
    "STATES",
    "STATUS",
    "CatalogueStatus",
    "LibraryStatus",
    "decode_status",
    "encode_status",
]

STATUS = "status.json"
STATUS_FORMAT = "docbundle-catalogue-status"
STATUS_VERSION = 1
READABLE_STATUS_VERSIONS = (1,)
#: As many library versions as the release index may list.
MAX_STATUS_ENTRIES = MAX_INDEX_ENTRIES
#: 30,000 entries of 1,100 bytes (long descriptions and messages); a real entry is about 425 bytes.
MAX_STATUS_BYTES = 32 * 1024 * 1024
#: The longest message an entry keeps (the build's words; the class is in ``reason``).
MAX_MESSAGE_CHARS = 300
#: The longest category (the shipped taxonomy's words are at most 15 characters).
MAX_STATUS_CATEGORY_CHARS = 64

State = Literal["built", "unchanged", "failed", "unavailable"]
STATES: tuple[str, ...] = ("built", "unchanged", "failed", "unavailable")

#: Why a library version failed: the closed list of ``reason`` classes, each with what it means.
#: docs/releases.md lists the same; a test holds the writer to these.
REASONS: dict[str, str] = {
    "http-404": "the llms.txt answered 404 Not Found (or a local source is missing): moved or removed",
    "http-410": "the llms.txt answered 410 Gone",
    "http-4xx": "the llms.txt answered another client error (401, 403, 451, ...)",
    "http-5xx": "the site answered a server error (500, 502, 503, ...) after the retries",
    "rate-limited": "the site answered 429 Too Many Requests after the retries (Retry-After honoured)",
    "timeout": "the site did not answer within the crawl's timeout, after the retries",
    "network": "the connection failed: DNS, refused, reset, TLS",
    "refused": "the crawl boundaries refused it: a redirect to another scheme or a refused address",
    "redirects": "a redirect loop or too many redirects",
    "too-large": "the llms.txt is over the crawl's max_bytes",
    "content-type": "the llms.txt is not text (markdown, plain text or HTML)",
    "encoding": "the llms.txt could not be decoded",
    "no-content": "nothing to index: the llms.txt lists no page, or no page gave any text",
    "regressed": "a new bundle was built but failed its golden queries; it was not published",
    "build-error": "the bundle could not be written (disk, lock held by another build)",
    "no-report": "the shard that should have built it reported nothing (its job failed or timed out)",
    "error": "any other failure (the message says what)",
}

# Patterns end in ``\Z``, never ``$`` (which also matches before a final newline): msgspec searches.
_LibraryId = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9-]{0,63}\Z")]
_Version = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")]
_BuildId = Annotated[str, msgspec.Meta(pattern=r"^\Z|^[0-9]{8}-[0-9a-f]{12}\Z")]
_Time = Annotated[str, msgspec.Meta(pattern=r"^\Z|^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")]
_Reason = Annotated[str, msgspec.Meta(pattern=r"^\Z|^[a-z0-9][a-z0-9-]{0,31}\Z")]
_Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT_CHARS)]
_Message = Annotated[str, msgspec.Meta(max_length=MAX_MESSAGE_CHARS)]
_Category = Annotated[str, msgspec.Meta(max_length=MAX_STATUS_CATEGORY_CHARS)]
_Count = Annotated[int, msgspec.Meta(ge=0)]


class LibraryStatus(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One library version's health (see the module docstring for each field)."""

    library: _LibraryId
    version: _Version
    name: _Text
    category: _Category = ""
    description: _Text = ""
    latest: bool = False
    state: State
    reason: _Reason = ""  # one of REASONS when failed or unavailable (a newer writer may add classes)
    message: _Message = ""
    failed_nights: _Count = 0
    checked_at: _Time = ""
    last_success: _Time = ""
    build_id: _BuildId = ""
    built_at: _Time = ""
    pages: _Count = 0
    chunks: _Count = 0
    vectors: _Count = 0
    bytes: _Count = 0


class CatalogueStatus(msgspec.Struct, kw_only=True):
    """The whole ``status.json``."""

    format: str
    version: int
    generated_at: _Time
    unavailable_after: _Count  # failed nights in a row that make a library version unavailable
    libraries: Annotated[list[LibraryStatus], msgspec.Meta(max_length=MAX_STATUS_ENTRIES)]


_header_decoder = msgspec.json.Decoder(FormatHeader)
_status_decoder = msgspec.json.Decoder(CatalogueStatus)
_encoder = msgspec.json.Encoder()


def encode_status(generated_at: str, unavailable_after: int, entries: list[LibraryStatus]) -> bytes:
    """The compact file: the header, then one entry per line (diffable), in the order given.

    ``BundleFormatError`` when it would be over the bounds a reader accepts."""
    lines = b",\n".join(_encoder.encode(e) for e in entries)
    body = b"\n" + lines + b"\n" if entries else b""
    head = _encoder.encode(
        {
            "format": STATUS_FORMAT,
            "version": STATUS_VERSION,
            "generated_at": generated_at,
            "unavailable_after": unavailable_after,
        }
    )
    data = head[:-1] + b',"libraries":[' + body + b"]}\n"
    if len(data) > MAX_STATUS_BYTES or len(entries) > MAX_STATUS_ENTRIES:
        raise BundleFormatError(
            f"the catalogue status would be {len(data)} bytes and {len(entries)} entries, over the "
            f"{MAX_STATUS_BYTES}-byte or {MAX_STATUS_ENTRIES}-entry limit readers accept"
        )
    return data


def decode_status(data: bytes, where: str) -> CatalogueStatus:
    """The status ``data`` (read from ``where``), or ``BundleFormatError`` saying what is wrong and where.

    ``UnsupportedFormatVersionError`` (a ``BundleFormatError``) for a version this reader does not know.
    """
    if len(data) > MAX_STATUS_BYTES:
        raise BundleFormatError(f"{where} is {len(data)} bytes, over the {MAX_STATUS_BYTES}-byte limit")
    header = decode(_header_decoder.decode, data, where)
    check_format(
        header,
        where,
        fmt=STATUS_FORMAT,
        readable=READABLE_STATUS_VERSIONS,
        what="catalogue status",
        word="status",
    )
    return decode(_status_decoder.decode, data, where)
