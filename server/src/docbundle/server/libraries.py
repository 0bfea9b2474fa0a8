"""Catalogue lookups: the libraries (optionally of one category), one library's versions, and the
libraries that match what a person calls one. They read the in-memory catalogue and manifests only:
no bundle is opened, so they are cheap enough to run on the event loop."""

from __future__ import annotations

from .catalog import Catalog, LibraryEntry, VersionEntry
from .encoder import describe
from .errors import MAX_ECHO_CHARS, MAX_ECHO_ITEMS, clip, echo
from .models import (
    LibraryList,
    LibraryMatch,
    LibraryMatches,
    LibrarySummary,
    VersionList,
    VersionSummary,
)
from .resolve import Resolver
from .semantic import vector_problem


def summary(catalog: Catalog, lib: LibraryEntry) -> LibrarySummary:
    """One library as ``list_libraries`` shows it: its default version's build, counts and status."""
    entry = lib.default
    state, reason = catalog.state(entry)
    m = entry.meta
    return LibrarySummary(
        id=lib.id,
        name=lib.name,
        description=lib.description,
        category=lib.category,
        versions=list(lib.versions),
        default_version=lib.default_version,
        documents=m.counts.documents if m else None,
        built_at=m.built_at if m else None,
        build_id=m.build_id if m else None,
        content_hash=m.content_hash if m else None,
        status=state,
        reason=reason,
        safety_findings=m.safety_findings if m else 0,
        safety_kinds=list(m.safety_kinds) if m else [],
        obtained=dict(m.obtained) if m else {},
        vectors=vectors_summary(catalog, entry),
    )


def vectors_summary(catalog: Catalog, entry: VersionEntry) -> str | None:
    """A version's semantic vectors in one line: the embedder, and whether this server can search them.

    None when it has none. Reads the manifest and the query encoder's state only; nothing is loaded.
    """
    m = entry.meta
    if m is None or m.vectors is None:
        return None
    made = f"{m.vectors.rows} sections embedded by {describe(m.vectors.embedder)}"
    problem = vector_problem(m.vectors, catalog.encoder)
    if problem is not None:
        return f"{made}; keyword search only here, as {problem}"
    status = catalog.encoder.status()
    note = {"idle": " (the query encoder loads on first use)", "loading": " (the query encoder is loading)"}
    return f"{made}; hybrid and semantic search{note.get(status, '')}"


def library_list(catalog: Catalog, category: str | None) -> LibraryList:
    """Every library (of ``category`` when given, ignoring case), with the categories there are."""
    libs = catalog.libraries()
    categories = sorted({lib.category for lib in libs if lib.category})
    wanted = category.strip().lower() if category and category.strip() else None
    chosen = [lib for lib in libs if wanted is None or lib.category.lower() == wanted]
    message = None
    if not libs:
        message = "No libraries are installed: the bundles directory holds no built bundle."
    elif not chosen:
        message = (
            f"No library has category {echo(category)}. Categories: {', '.join(categories) or '(none)'}."
        )
    return LibraryList(
        libraries=[summary(catalog, lib) for lib in chosen],
        category=wanted,
        categories=categories,
        message=message,
    )


def library_matches(catalog: Catalog, resolver: Resolver, name: str, limit: int) -> LibraryMatches:
    """The libraries that match ``name``, best first, at most ``limit``; a message when none or more."""
    found = resolver.resolve(name)
    matches = [
        LibraryMatch(
            id=m.library.id,
            name=m.library.name,
            description=m.library.description,
            versions=list(m.library.versions),
            default_version=m.library.default_version,
            languages=list(m.languages),
            score=m.score,
            why=m.why,
        )
        for m in found[:limit]
    ]
    message = None
    if not matches:
        ids = catalog.library_ids()
        shown = ", ".join(ids[:MAX_ECHO_ITEMS]) + (", ..." if len(ids) > MAX_ECHO_ITEMS else "")
        message = (
            f"No library matches {echo(name)}. Installed: {shown or '(none)'}. "
            "Call list_libraries to see them all with their descriptions."
        )
    elif len(found) > limit:
        message = f"{len(found) - limit} more match(es) left out: raise limit to see them."
    return LibraryMatches(query=clip(name, MAX_ECHO_CHARS), matches=matches, message=message)


def version_list(catalog: Catalog, library_id: str) -> VersionList:
    """A library and every version of it, with lifecycle status and availability."""
    lib = catalog.library(library_id)
    versions = []
    for v in lib.versions.values():
        state, reason = catalog.state(v)
        m = v.meta
        versions.append(
            VersionSummary(
                version=v.version,
                status=m.version.status if m else None,
                latest=m.version.latest if m else False,
                lts=m.version.lts if m else False,
                default=v.version == lib.default_version,
                availability=state,
                reason=reason,
                build_id=v.build_id,
                content_hash=v.content_hash,
                built_at=m.built_at if m else None,
                documents=m.counts.documents if m else None,
            )
        )
    return VersionList(library=summary(catalog, lib), versions=versions)
