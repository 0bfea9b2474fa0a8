"""Catalogue lookups: the libraries (optionally of one category), one library's versions, and the
libraries that match what a person calls one. They read the in-memory catalogue and manifests only:
no bundle is opened. They still grow with the catalogue (a page, or the matches of a resolve, checks
each library it shows, reading its manifest, and may rewrite a stale summary once), so they run in
lookup threads (``lookups``), never on the event loop."""

from __future__ import annotations

import base64
import binascii
import bisect
import hashlib
import json

from docbundle.bundle.manifest import in_obtained_order

from .bounds import MAX_ECHO_CHARS, MAX_ECHO_ITEMS, MAX_LIBRARY_ID_CHARS
from .budget import estimate_tokens
from .catalog import Catalog, LibraryEntry, VersionEntry
from .catalog.projection import holds, words
from .encoder import describe
from .errors import BadCursorError, clip, echo
from .models import LibraryList, LibraryMatch, LibraryMatches, LibrarySummary, VersionList, VersionSummary
from .render import library_lines, render_libraries
from .resolve import MAX_RESOLVE_WORDS, Resolver, library_languages, scored_words
from .semantic import vector_problem
from .words import NextStep

MAX_CATEGORIES_SHOWN = 50
# A resolve ranks at most this many times: again once when checking its matches corrected the summary's
# entries (a second correction, by new matches, is shown checked but ranked by the words it claimed).
RANKINGS = 2


def summary(catalog: Catalog, lib: LibraryEntry) -> LibrarySummary:
    """One library as ``list_libraries`` shows it: its default version's build, counts and status
    (the library checked first, so the build shown is the one its CURRENT names)."""
    lib = catalog.check(lib)
    entry = lib.default
    view = catalog.version_view(entry)
    m = entry.meta if entry.checked else None
    return LibrarySummary(
        id=lib.id,
        name=lib.name,
        description=lib.description,
        category=lib.category,
        versions=list(lib.versions),
        default_version=lib.default_version,
        documents=view.documents,
        built_at=view.built_at,
        build_id=view.build_id,
        content_hash=view.content_hash,
        status=view.state,
        reason=view.reason,
        safety_findings=m.safety_findings if m else 0,
        safety_kinds=list(m.safety_kinds) if m else [],
        obtained=in_obtained_order(m.obtained) if m else {},
        vectors=vectors_summary(catalog, entry),
        provenance=entry.provenance if entry.checked else None,
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


def library_list(
    catalog: Catalog,
    category: str | None,
    query: str | None = None,
    cursor: str | None = None,
    max_tokens: int | None = None,
) -> LibraryList:
    """One page of the libraries of ``category`` (ignoring case) whose id, name, category or description
    hold every word of ``query``, in id order, that fits ``max_tokens`` (None: every one); ``cursor``
    continues after the page it came with."""
    libs = catalog.libraries()
    categories = sorted({lib.category for lib in libs if lib.category})
    wanted = category.strip().lower() if category and category.strip() else None
    terms = words(query or "")
    filters = _filters(wanted, terms)
    after = decode_list_cursor(cursor, filters) if cursor and cursor.strip() else None
    chosen = [
        lib
        for lib in libs
        if (wanted is None or lib.category.lower() == wanted) and (not terms or holds(lib, terms))
    ]
    start = 0 if after is None else bisect.bisect_right([lib.id for lib in chosen], after)
    page: list[LibrarySummary] = []
    frame = LibraryList(
        libraries=[],
        category=wanted,
        query=query,
        total=len(chosen),
        next_cursor=encode_list_cursor(filters, "x" * MAX_LIBRARY_ID_CHARS),
        categories=categories[:MAX_CATEGORIES_SHOWN],
    )
    # What the page costs with no library in it (heading, continuation, categories, in both forms).
    used = estimate_tokens(render_libraries(frame)) + estimate_tokens(frame.model_dump_json(by_alias=True))
    with catalog.summary_batch():  # the libraries checked for this page: one rewrite of a stale summary
        for lib in chosen[start:]:
            item = summary(catalog, lib)
            cost = estimate_tokens(library_lines(item)) + estimate_tokens(item.model_dump_json(by_alias=True))
            if page and max_tokens is not None and used + cost > max_tokens:
                break
            page.append(item)
            used += cost
    more = start + len(page) < len(chosen)
    message = None
    if not libs:
        message = "No libraries are installed: the bundles directory holds no built bundle."
    elif not chosen:
        shown = ", ".join(categories[:MAX_CATEGORIES_SHOWN]) or "(none)"
        if wanted is not None and not any(lib.category.lower() == wanted for lib in libs):
            message = f"No library has category {echo(category)}. Categories: {shown}."
        else:
            message = (
                f"No library matches {echo(query or '')}" + (f" in category {wanted}" if wanted else "") + "."
            )
    return LibraryList(
        libraries=page,
        category=wanted,
        query=clip(query, MAX_ECHO_CHARS) if terms and query else None,
        total=len(chosen),
        next_cursor=encode_list_cursor(filters, page[-1].id) if more and page else None,
        categories=categories[:MAX_CATEGORIES_SHOWN],
        message=message,
    )


def _filters(category: str | None, terms: list[str]) -> str:
    """What a cursor is tied to: the filters of the listing it continues."""
    return hashlib.sha256(json.dumps([category, terms]).encode("utf-8")).hexdigest()[:12]


def encode_list_cursor(filters: str, after: str) -> str:
    """The cursor of the page after the library ``after`` of a listing with ``filters``."""
    data = json.dumps({"v": 1, "f": filters, "a": after}, separators=(",", ":"))
    return base64.urlsafe_b64encode(data.encode("utf-8")).decode("ascii").rstrip("=")


def decode_list_cursor(cursor: str, filters: str, what: str = "list_libraries") -> str:
    """The library id a listing continues after; refused unless ``cursor`` came from one with ``filters``
    (``what`` made it: list_libraries, or resources/list)."""
    restart = (NextStep("list_restart", "list_libraries"),) if what == "list_libraries" else ()
    text = cursor.strip()
    try:
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("utf-8"))
        ok = isinstance(data, dict) and data.get("v") == 1
        made_for, after = data["f"], data["a"]
    except (binascii.Error, ValueError, UnicodeDecodeError, KeyError, TypeError, RecursionError):
        # RecursionError: a cursor of data nested thousands deep (issue 31), bad like any other.
        raise BadCursorError(f"cursor {echo(cursor, 40)} is not one {what} returned.", *restart) from None
    if not ok or not isinstance(after, str) or not isinstance(made_for, str):
        raise BadCursorError(f"cursor {echo(cursor, 40)} is not one {what} returned.", *restart)
    if made_for != filters:
        raise BadCursorError(
            "this cursor continues a listing with another category or query: pass the same ones with it.",
            *restart,
        )
    return after


def library_matches(catalog: Catalog, resolver: Resolver, name: str, limit: int) -> LibraryMatches:
    """The libraries that match ``name``, best first, at most ``limit``; a message when none or more."""
    # The matches are ranked by the words of the summary's entries (checking all 10,000 to rank would
    # read as many manifests), but what an answer shows of each (at most MAX_LIMIT) is its checked entry:
    # the manifest's name and description, never what the summary claims (issue 31, item 10). When
    # checking them corrected an entry (the catalogue then serves a new snapshot), they are ranked again
    # by the checked words.
    with catalog.summary_batch():
        for _ in range(RANKINGS):
            ranked_in = catalog.snapshot()
            found, total, exact = resolver.resolve(name, limit)
            checked = [(m, catalog.check(m.library)) for m in found]
            if catalog.snapshot() is ranked_in:
                break
    matches = [
        LibraryMatch(
            id=lib.id,
            name=lib.name,
            description=lib.description,
            versions=list(lib.versions),
            default_version=lib.default_version,
            languages=list(library_languages(lib)),
            score=m.score,
            why=m.why,
        )
        for m, lib in checked
    ]
    message = None
    if not matches:
        ids = catalog.library_ids()
        shown = ", ".join(ids[:MAX_ECHO_ITEMS]) + (", ..." if len(ids) > MAX_ECHO_ITEMS else "")
        message = (
            f"No library matches {echo(name)}. Installed: {shown or '(none)'}. "
            "Call list_libraries to see them all with their descriptions."
        )
    elif not exact:  # counted among the libraries the query's rarest word reaches
        message = f"{max(total - limit, 0)} or more match(es) left out: raise limit to see them."
    elif total > limit:
        message = f"{total - limit} more match(es) left out: raise limit to see them."
    if scored_words(name)[1]:
        cut = f"Only the first {MAX_RESOLVE_WORDS} distinct words of the name were used."
        message = f"{message} {cut}" if message else cut
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
