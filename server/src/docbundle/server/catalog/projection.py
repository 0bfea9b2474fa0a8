"""One library version as every listing shows it, and the one rule a listing's words match by.

``list_libraries``, ``/ui/libraries``, ``/metrics`` and ``/readyz`` each show a library version's id,
name, version, build, age, counts, vectors and state. They read it here, from one ``VersionView``, so
they cannot drift apart: the build, its age and its counts only once the version was checked (its
``CURRENT`` and its build's own manifest read on first use), as before that they are only what
``catalog.json`` claims, which anyone who can write the folder can make up (issue 31); the age from one
time parser (``docbundle.bundle.times``).

The match rule (``holds``) is the one ``docs/server.md`` documents for ``list_libraries``' ``query``:
every word of the query (``words``) is in the library's id, name, category or description, ignoring
case. The page's filter (``?q=``) uses it too.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from docbundle.bundle.layout import BUILD_ID_RE
from docbundle.bundle.times import seconds_since

from .entries import LibraryEntry, VersionEntry

State = Literal["available", "ready", "failed"]
_WORD = re.compile(r"\w+")
_HASH_RE = re.compile(r"[0-9a-f]{64}\Z")  # a content hash: sha256, lowercase hex (fullmatch)


@dataclass(frozen=True)
class VersionView:
    """One library version as a listing shows it; the build's fields None until the version is checked."""

    library_id: str
    version: str
    checked: bool
    state: State  # available (not opened yet), ready (opened and verified) or failed
    reason: str | None  # why it failed
    build_id: str | None
    content_hash: str | None
    built_at: str | None
    documents: int | None
    chunks: int | None
    vectors: bool  # the build has semantic vectors

    def age(self, now: float) -> float | None:
        """Seconds since the build (None when unknown or unreadable)."""
        return seconds_since(self.built_at, now) if self.built_at is not None else None

    @property
    def shaped_build_id(self) -> str | None:
        """The build id only in its one shape: a made-up value is never shown nor a metric label."""
        return self.build_id if self.build_id is not None and BUILD_ID_RE.fullmatch(self.build_id) else None

    @property
    def shaped_content_hash(self) -> str | None:
        """The content hash only in its one shape (64 lowercase hex digits)."""
        ok = self.content_hash is not None and _HASH_RE.fullmatch(self.content_hash)
        return self.content_hash if ok else None


def project(entry: VersionEntry, state: State, reason: str | None) -> VersionView:
    """``entry`` as a listing shows it, in ``state`` (``Catalog.version_view`` gives the state)."""
    m = entry.meta if entry.checked else None
    return VersionView(
        library_id=entry.library_id,
        version=entry.version,
        checked=entry.checked,
        state=state,
        reason=reason,
        build_id=m.build_id if m else None,
        content_hash=m.content_hash if m else None,
        built_at=m.built_at if m else None,
        documents=m.counts.documents if m else None,
        chunks=m.counts.chunks if m else None,
        vectors=m is not None and m.vectors is not None,
    )


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (Unicode-normalized; ``_`` and ``-`` separate words)."""
    return [w for w in _WORD.findall(unicodedata.normalize("NFKC", text).lower().replace("_", " ")) if w]


def holds(lib: LibraryEntry, terms: list[str]) -> bool:
    """Whether every term (``words``) is in the library's id, name, category or description (ignoring
    case)."""
    text = f"{lib.id} {lib.name} {lib.category} {lib.description}".lower()
    return all(t in text for t in terms)
