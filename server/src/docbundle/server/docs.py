"""What the tools do, independent of MCP: ``Docs``, one front door to the operations over a catalogue.

Both front ends call the ``Docs`` operations: the MCP server (``mcp/``) wraps each in a tool, resource or
prompt, and the CLI (``cli/search.py``) calls the same ones for ``docbundle search`` and ``info`` without
importing the MCP SDK. The work is done by ``libraries`` (catalogue lookups), ``hits`` (search) and
``documents`` (a document, its table of contents, a chunk in context); the operations that fit a result
into ``maxTokens`` return an ``Answer``: the result model and its markdown, rendered once (``render``).

Errors are raised as ``docbundle.server.errors`` exceptions whose next steps each reader gets in its own
words (``words``).

Bounds: every argument is checked here against its bound (``errors.check_*``: ranges, and the
``MAX_*`` length of every string) unless the caller passes ``checked=True`` because it checked them
already: the MCP server does, on the event loop before a tool's work starts, so each input is checked
once. Results quote back at most ``MAX_ECHO_CHARS`` characters of any input and ``MAX_ECHO_ITEMS``
items of any list; a search spends at most ``SEARCH_TIME_BUDGET`` seconds scoring (then answers with
what it found and says so) and stops when its ``Deadline`` is cancelled.
"""

from __future__ import annotations

from docbundle.bundle.query import MAX_QUERY_CHARS, SEARCH_MODES, Deadline, SearchMode

from . import documents, hits, libraries, models
from .bounds import (
    DEFAULT_LIMIT,
    DEFAULT_MAX_TOKENS,
    DEFAULT_WINDOW,
    MAX_CATEGORY_CHARS,
    MAX_CURSOR_CHARS,
    MAX_LIMIT,
    MAX_MAX_TOKENS,
    MAX_SECTION_CHARS,
    MAX_WINDOW,
    MIN_MAX_TOKENS,
    RESOURCE_MAX_TOKENS,
)
from .catalog import Catalog
from .errors import BadRequestError, check_ids, check_length, check_range, check_search_input, echo
from .models import SEARCH_TIME_BUDGET
from .observe import span
from .render import Answer, answer
from .resolve import Resolver
from .routing import Router
from .words import NextStep

__all__ = [
    "SEARCH_TIME_BUDGET",
    "Docs",
    "check_category",
    "check_document_args",
    "check_list_args",
    "check_name",
]


def check_document_args(
    library_id: str | None, document_id: str | None, version: str | None, cursor: str | None = None
) -> None:
    """Refuse a get_document call whose ids or cursor are over their bounds."""
    check_ids(library_id, version, document_id)
    check_length(
        "cursor",
        cursor,
        MAX_CURSOR_CHARS,
        "Pass the nextCursor of the previous page unchanged, or no cursor.",
    )


def check_list_args(library_id: str | None, version: str | None, section: str | None) -> None:
    """Refuse a list_documents call whose libraryId, version or section is over its bound."""
    check_ids(library_id, version)
    check_length("section", section, MAX_SECTION_CHARS, "Pass a section name list_documents shows.")


def check_category(
    category: str | None, query: str | None = None, cursor: str | None = None, max_tokens: int | None = None
) -> None:
    """Refuse a list_libraries category, query, cursor or maxTokens over its bound."""
    check_length("category", category, MAX_CATEGORY_CHARS, NextStep("categories", "list_libraries"))
    check_length("query", query, MAX_QUERY_CHARS, "Give a few words of the library's name or description.")
    check_length("cursor", cursor, MAX_CURSOR_CHARS, NextStep("list_restart", "list_libraries"))
    if max_tokens is not None:
        check_range("maxTokens", max_tokens, MIN_MAX_TOKENS, MAX_MAX_TOKENS)


def check_name(name: str) -> None:
    """Refuse a resolve_library name over its bound."""
    check_length("name", name, MAX_QUERY_CHARS, "Give the library's name in a few words.")


class Docs:
    """The operations behind the tools, over one catalogue."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.resolver = Resolver(catalog)
        self.router = Router(catalog)

    # -- catalogue ----------------------------------------------------------------------------------

    def list_libraries(
        self,
        category: str | None = None,
        query: str | None = None,
        cursor: str | None = None,
        max_tokens: int | None = None,
        *,
        checked: bool = False,
    ) -> models.LibraryList:
        """One page of the libraries (optionally of one category, holding the words of ``query``) that
        fits ``max_tokens`` (None: all of them), with each one's status; ``cursor`` continues a listing."""
        if not checked:
            check_category(category, query, cursor, max_tokens)
        return libraries.library_list(self.catalog, category, query, cursor, max_tokens)

    def resolve_library(
        self, name: str, limit: int = DEFAULT_LIMIT, *, checked: bool = False
    ) -> models.LibraryMatches:
        """The libraries that match what a person calls one (``resolve``), best first, at most ``limit``."""
        if not checked:
            check_name(name)
            check_range("limit", limit, 1, MAX_LIMIT)
        if not name.strip():
            raise BadRequestError("give name: what the library is called, e.g. 'react' or 'sapui5'")
        return libraries.library_matches(self.catalog, self.resolver, name, limit)

    def list_versions(self, library_id: str, *, checked: bool = False) -> models.VersionList:
        """A library and every version of it, with lifecycle status and availability."""
        if not checked:
            check_ids(library_id)
        return libraries.version_list(self.catalog, library_id)

    # -- search -------------------------------------------------------------------------------------

    def search(
        self,
        query: str | None = None,
        *,
        keywords: list[str] | None = None,
        library_id: str | None = None,
        version: str | None = None,
        mode: SearchMode | None = None,
        limit: int = DEFAULT_LIMIT,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        cancel: Deadline | None = None,
        checked: bool = False,
    ) -> Answer[models.SearchResult]:
        """Search one library (or every library when ``library_id`` is None), fitted to ``max_tokens``.

        ``mode`` None is the default: hybrid where a library's vectors can be searched, else balanced.
        ``cancel`` is the caller's cancellation token; the search also stops after
        ``SEARCH_TIME_BUDGET`` seconds of scoring and answers with what it found.
        """
        if mode is not None and mode not in SEARCH_MODES:
            raise BadRequestError(f"mode must be one of {', '.join(SEARCH_MODES)}, not {echo(str(mode))}")
        if not checked:
            check_range("limit", limit, 1, MAX_LIMIT)
            check_range("maxTokens", max_tokens, MIN_MAX_TOKENS, MAX_MAX_TOKENS)
            check_search_input(query, keywords, library_id, version)
        query = query.strip() if query and query.strip() else None
        keywords = [k.strip() for k in keywords or [] if k and k.strip()]
        if query is None and not keywords:
            raise BadRequestError("nothing to search for.", NextStep("give_query", "search_documents"))
        if library_id is None and version:
            raise BadRequestError("version needs libraryId: versions belong to one library")
        # Read at call time: a test (or a benchmark) may change this module's SEARCH_TIME_BUDGET.
        budget = SEARCH_TIME_BUDGET
        call = hits.SearchCall(query, keywords, mode, limit, max_tokens, cancel or Deadline(), budget)
        with span("search", library=library_id, mode=mode):
            found = hits.search(self.catalog, call, library_id, version, self.router)
        return answer(found)

    # -- documents ----------------------------------------------------------------------------------

    def get_document(
        self,
        library_id: str,
        document_id: str,
        *,
        version: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        cursor: str | None = None,
        checked: bool = False,
    ) -> Answer[models.DocumentPage]:
        """One page of a document's markdown; ``next_cursor`` continues it."""
        if not checked:
            check_range("maxTokens", max_tokens, MIN_MAX_TOKENS, MAX_MAX_TOKENS)
            check_document_args(library_id, document_id, version, cursor)
        lib = self.catalog.open(library_id, version)
        return answer(documents.document_page(lib, document_id, max_tokens, cursor))

    def page_markdown(self, library_id: str, version: str, path: str) -> str:
        """A document's markdown, its first ``RESOURCE_MAX_TOKENS`` (the ``docs://`` resource).

        A longer document is cut where ``get_document`` would end its first page, and a closing line
        says how much was shown and the ``get_document`` call that returns the rest.
        """
        check_ids(library_id, version, path)
        lib = self.catalog.open(library_id, version)
        first = documents.document_page(lib, path, RESOURCE_MAX_TOKENS, None)
        if first.next_cursor is None:
            return first.text
        return (
            f"{first.text.rstrip()}\n\n[The resource shows characters 0-{first.end} of {first.total_chars} "
            f"(its bound is {RESOURCE_MAX_TOKENS} tokens). get_document(libraryId={lib.entry.library_id!r}, "
            f"version={lib.entry.version!r}, id={first.document_id!r}, cursor={first.next_cursor!r}) returns "
            "the rest, a page at a time.]\n"
        )

    def list_documents(
        self,
        library_id: str,
        *,
        version: str | None = None,
        section: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        checked: bool = False,
    ) -> Answer[models.DocumentList]:
        """The table of contents: sections in llms.txt order, each with its documents."""
        if not checked:
            check_range("maxTokens", max_tokens, MIN_MAX_TOKENS, MAX_MAX_TOKENS)
            check_list_args(library_id, version, section)
        lib = self.catalog.open(library_id, version)
        return answer(documents.document_list(lib, section, max_tokens))

    def chunk_with_context(
        self,
        library_id: str,
        document_id: str,
        chunk_id: int,
        *,
        version: str | None = None,
        window: int = DEFAULT_WINDOW,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        checked: bool = False,
    ) -> Answer[models.ChunkContext]:
        """A chunk with ``window`` chunks either side, the target kept whole first."""
        if not checked:
            check_range("windowSize", window, 0, MAX_WINDOW)
            check_range("maxTokens", max_tokens, MIN_MAX_TOKENS, MAX_MAX_TOKENS)
            check_ids(library_id, version, document_id)
        lib = self.catalog.open(library_id, version)
        return answer(documents.chunk_context(lib, document_id, chunk_id, window, max_tokens))
