"""The content hash: what makes two builds "the same bundle".

sha256 over a canonical msgpack encoding of: the format version, the analyzer and schema identities,
the chunking settings, the library's served metadata and search settings, and every document's id, URL, title,
description, section, optional flag and NFC-normalised text (and its chunks' anchors, when any has one),
sorted by document id. Timestamps, HTTP
headers and crawl order are not part of it, so an unchanged site hashes the same and no new bundle is
written.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable

import msgspec

from .analysis import ANALYZER_ID
from .manifest import FORMAT_VERSION, ChunkingInfo, LibraryInfo, SearchSettings, VersionInfo
from .schema import SCHEMA_ID
from .store import DocRecord

_enc = msgspec.msgpack.Encoder()


def content_hash(
    library: LibraryInfo,
    version: VersionInfo,
    chunking: ChunkingInfo,
    search: SearchSettings,
    documents: Iterable[DocRecord],
) -> str:
    """Hex sha256 content hash of a bundle's inputs (see the module docstring)."""
    h = hashlib.sha256()
    h.update(_enc.encode(["docbundle-content", FORMAT_VERSION, ANALYZER_ID, SCHEMA_ID, chunking]))
    h.update(_enc.encode([library, version, search]))
    for doc in sorted(documents, key=lambda d: d.id):
        text = unicodedata.normalize("NFC", doc.text)
        fields: list[object] = [doc.id, doc.url, doc.title, doc.description, doc.section, doc.optional, text]
        if any(c.anchor for c in doc.chunks):  # only then: a page without anchors hashes as it did
            fields.append([c.anchor for c in doc.chunks])
        h.update(_enc.encode(fields))
    return h.hexdigest()
