"""The seven tools: one function each, which builds the tool over a ``Docs``; ``TOOLS`` lists them in order.

Tools are coroutines that run their work in a worker thread (``_in_thread``) with a ``Deadline`` as
cancellation token: when the request is cancelled (the HTTP client disconnected, the client sent
``notifications/cancelled``, the stdio client went away) the coroutine stops waiting at once and
cancels the token, and the search engine, which checks it between units of work, stops too, so no
thread keeps burning CPU for a caller that is gone. ``resolve_library``, ``list_libraries`` and
``list_library_versions`` only read the in-memory catalogue and run on the event loop, so they never
queue behind searches for a worker thread. Everything the threads touch is safe for that (the catalogue opens each bundle once
behind a per-version lock, the searcher opens a whoosh reader per call, the document store reads from
a read-only memory map).

Each tool returns ``Annotated[CallToolResult, Model]``: the SDK publishes the pydantic model's JSON
Schema as the tool's output schema and checks the structured content against it, and the text content
is a markdown rendering a model reads more easily than JSON. The function's docstring is the
description the model reads.

To add a tool: write ``<name>_tool(docs)`` here (arguments from ``args``, an operation on ``Docs``, a
result model in ``models``, a renderer in ``render``) and append it to ``TOOLS``.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from docbundle.bundle.query import MAX_QUERY_CHARS, Cancelled, Deadline, Mode
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from ..docs import Docs, check_ids, check_search_input
from ..errors import check_length
from ..models import (
    DEFAULT_LIMIT,
    DEFAULT_MAX_TOKENS,
    DEFAULT_WINDOW,
    MAX_LIMIT,
    MAX_WINDOW,
    ChunkContext,
    DocumentList,
    DocumentPage,
    LibraryList,
    LibraryMatches,
    SearchResult,
    VersionList,
)
from ..render import (
    render_chunks,
    render_document,
    render_documents,
    render_libraries,
    render_matches,
    render_search,
    render_versions,
)
from .args import (
    Alias,
    IntAlias,
    LibraryIdArg,
    MaxTokensArg,
    OptLibraryIdArg,
    VersionArg,
    need_library,
    pick,
    pick_int,
    result,
    tool_errors,
)

# The logger keeps the name it had before the package split: it is part of every log line.
log = logging.getLogger(__name__)
T = TypeVar("T")

# destructiveHint is left out: the spec gives it meaning only when readOnlyHint is false.
_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


# Arguments each tool publishes as required, though its function takes them as optional so that an
# alias can stand in (``schemas.publish``, which ``DocbundleMCP.list_tools`` applies).
REQUIRED: dict[str, tuple[str, ...]] = {}


def _tool(
    fn: Callable[..., Coroutine[Any, Any, CallToolResult]], title: str, required: tuple[str, ...] = ()
) -> Tool:
    """``fn`` as a read-only tool; ``required`` arguments are published as required."""
    # cleandoc: the docstring is the description the model reads, without code indentation.
    t = Tool.from_function(
        fn, title=title, description=inspect.cleandoc(fn.__doc__ or ""), annotations=_READ_ONLY
    )
    REQUIRED[t.name] = required
    return t


async def _in_thread(work: Callable[[Deadline], T], what: str) -> T:
    """Run ``work(token)`` in a worker thread; when this call is cancelled, cancel the token.

    The thread is abandoned rather than waited for (the caller is gone) and the token makes the search
    engine stop at its next check; the log (INFO) says how long a cancelled call's thread ran.
    """
    token = Deadline()
    started = time.monotonic()

    def run() -> T:
        try:
            return work(token)
        except ToolError as exc:
            if isinstance(exc.__cause__, Cancelled):
                log.info(
                    "%s: cancelled by its caller; the work stopped after %.3f s",
                    what,
                    time.monotonic() - started,
                )
            raise

    try:
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except BaseException:
        token.cancel()
        raise


def list_libraries_tool(docs: Docs) -> Tool:
    """The ``list_libraries`` tool over ``docs``."""

    async def list_libraries(
        category: Annotated[str | None, Field(description="Only libraries of this category")] = None,
    ) -> Annotated[CallToolResult, LibraryList]:
        """List every documentation library this server holds.

        Each has its id (the libraryId of the other tools), name, description, category, versions,
        document count, buildId and status (available, ready, or failed with a reason).
        """
        with tool_errors():
            r = docs.list_libraries(category)
        return result(r, render_libraries(r))

    return _tool(list_libraries, "List libraries")


def resolve_library_tool(docs: Docs) -> Tool:
    """The ``resolve_library`` tool over ``docs``."""

    async def resolve_library(
        name: Annotated[
            str | None,
            Field(description="What the library is called, e.g. 'sapui5' or 'react docs in Korean'"),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="Matches to return")] = DEFAULT_LIMIT,
        query: Alias = None,
        libraryName: Alias = None,
        library: Alias = None,
    ) -> Annotated[CallToolResult, LibraryMatches]:
        """Find a library's libraryId from its name: call this first when you do not know the id.

        Matches words against ids, names, descriptions, categories and page languages, allowing
        prefixes and typos. Each match has its id, versions, a score (0-1) and why it matched.
        """
        with tool_errors():
            text = pick("name", name, query, libraryName, library)
            if text is None:
                raise ToolError("give name: what the library is called, e.g. 'react' or 'sapui5'")
            r = docs.resolve_library(text, limit)
        return result(r, render_matches(r))

    return _tool(resolve_library, "Resolve a library", required=("name",))


def list_library_versions_tool(docs: Docs) -> Tool:
    """The ``list_library_versions`` tool over ``docs``."""

    async def list_library_versions(
        libraryId: LibraryIdArg = None,
        library: Alias = None,
        libraryID: Alias = None,
        library_id: Alias = None,
    ) -> Annotated[CallToolResult, VersionList]:
        """List the documentation versions of one library.

        Each has its status (active, deprecated, eol), whether it is latest, LTS or the default, its
        buildId and availability. Pass a version name as `version` to other tools.
        """
        with tool_errors():
            r = docs.list_versions(need_library(libraryId, library, libraryID, library_id))
        return result(r, render_versions(r))

    return _tool(list_library_versions, "List library versions", required=("libraryId",))


def search_documents_tool(docs: Docs) -> Tool:
    """The ``search_documents`` tool over ``docs``."""

    async def search_documents(
        query: Annotated[
            str | None,
            Field(description='Words, an identifier (useEffect, sap.m.Table) or a question; "quote phrases"'),
        ] = None,
        keywords: Annotated[
            list[str] | SkipJsonSchema[str] | None, Field(description="More terms to match")
        ] = None,
        libraryId: OptLibraryIdArg = None,
        version: VersionArg = None,
        mode: Annotated[
            Mode, Field(description="balanced: most words match; broad: any word; precise: every word")
        ] = "balanced",
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="Hits to return")] = DEFAULT_LIMIT,
        maxTokens: MaxTokensArg = DEFAULT_MAX_TOKENS,
        question: Alias = None,
        q: Alias = None,
        library: Alias = None,
        libraryID: Alias = None,
        library_id: Alias = None,
        max_tokens: IntAlias = None,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Search documentation; returns the best-matching sections as markdown.

        Each hit has libraryId, documentId, chunkId, title, URL and the section's text (cut to fit
        maxTokens); at most 2 hits per document. Read more with get_chunk_with_context or
        get_document. No hits comes with suggestions (mode="broad", fewer words). The query is
        matched literally: no wildcards or query syntax.
        """
        with tool_errors():
            text = pick("query", query, question, q)
            lib = pick("libraryId", libraryId, library, libraryID, library_id)
            if isinstance(keywords, str):
                check_length("keywords", keywords, MAX_QUERY_CHARS, "Pass a list of terms, or fewer of them.")
            words = keywords.split(",") if isinstance(keywords, str) else keywords
            budget = pick_int("maxTokens", maxTokens, DEFAULT_MAX_TOKENS, max_tokens)
            # Bounds first, on the event loop: an oversized call never takes a worker thread.
            check_search_input(text, words, lib, version)

        def work(token: Deadline) -> CallToolResult:
            with tool_errors():
                r = docs.search(
                    text,
                    keywords=words,
                    library_id=lib,
                    version=version,
                    mode=mode,
                    limit=limit,
                    max_tokens=budget,
                    cancel=token,
                )
            return result(r, render_search(r))

        return await _in_thread(work, "search_documents")

    return _tool(search_documents, "Search documentation", required=("query",))


def get_document_tool(docs: Docs) -> Tool:
    """The ``get_document`` tool over ``docs``."""

    async def get_document(
        libraryId: LibraryIdArg = None,
        id: Annotated[
            str | None, Field(description="documentId of a search hit, or an id from list_documents")
        ] = None,
        path: Alias = None,
        version: VersionArg = None,
        maxTokens: MaxTokensArg = DEFAULT_MAX_TOKENS,
        cursor: Annotated[str | None, Field(description="nextCursor of the previous page")] = None,
        documentId: Alias = None,
        document_id: Alias = None,
        library: Alias = None,
        libraryID: Alias = None,
        library_id: Alias = None,
        max_tokens: IntAlias = None,
    ) -> Annotated[CallToolResult, DocumentPage]:
        """Return a whole document's markdown, in pages that fit maxTokens.

        A longer document comes with truncated=true and nextCursor: call again with the same
        arguments plus cursor=nextCursor for the next page. Pages end at section boundaries.
        """
        with tool_errors():
            lib = need_library(libraryId, library, libraryID, library_id)
            doc = pick("id", id, path, documentId, document_id)
            if doc is None:
                raise ToolError("give id (a documentId from search_documents or an id from list_documents)")
            budget = pick_int("maxTokens", maxTokens, DEFAULT_MAX_TOKENS, max_tokens)
            check_ids(lib, version, doc)

        def work(token: Deadline) -> CallToolResult:
            with tool_errors():
                r = docs.get_document(lib, doc, version=version, max_tokens=budget, cursor=cursor)
            return result(r, render_document(r))

        return await _in_thread(work, "get_document")

    return _tool(get_document, "Get a document", required=("libraryId", "id"))


def list_documents_tool(docs: Docs) -> Tool:
    """The ``list_documents`` tool over ``docs``."""

    async def list_documents(
        libraryId: LibraryIdArg = None,
        version: VersionArg = None,
        section: Annotated[str | None, Field(description="Only this llms.txt section")] = None,
        maxTokens: MaxTokensArg = DEFAULT_MAX_TOKENS,
        library: Alias = None,
        libraryID: Alias = None,
        library_id: Alias = None,
    ) -> Annotated[CallToolResult, DocumentList]:
        """Return a library's table of contents as its llms.txt gives it.

        Sections in order, each with its documents (id for get_document, title, URL, description).
        Pages that could not be indexed are listed with why. A long table is cut to fit maxTokens
        and names the sections to ask for with `section`.
        """
        with tool_errors():
            lib = need_library(libraryId, library, libraryID, library_id)
            check_ids(lib, version)

        def work(token: Deadline) -> CallToolResult:
            with tool_errors():
                r = docs.list_documents(lib, version=version, section=section, max_tokens=maxTokens)
            return result(r, render_documents(r))

        return await _in_thread(work, "list_documents")

    return _tool(list_documents, "List documents", required=("libraryId",))


def get_chunk_with_context_tool(docs: Docs) -> Tool:
    """The ``get_chunk_with_context`` tool over ``docs``."""

    async def get_chunk_with_context(
        libraryId: LibraryIdArg = None,
        documentId: Annotated[str | None, Field(description="documentId of a search hit")] = None,
        chunkId: Annotated[int | None, Field(ge=0, description="chunkId of a search hit")] = None,
        windowSize: Annotated[
            int, Field(ge=0, le=MAX_WINDOW, description="Chunks to add on each side")
        ] = DEFAULT_WINDOW,
        version: VersionArg = None,
        maxTokens: MaxTokensArg = DEFAULT_MAX_TOKENS,
        id: Alias = None,
        document_id: Alias = None,
        chunk_id: IntAlias = None,
        library: Alias = None,
        libraryID: Alias = None,
        library_id: Alias = None,
    ) -> Annotated[CallToolResult, ChunkContext]:
        """Return one section (chunk) of a document with the sections around it, in page order.

        Pass a search hit's libraryId, documentId and chunkId to read around it. The requested
        chunk is kept whole first when maxTokens is tight.
        """
        with tool_errors():
            lib = need_library(libraryId, library, libraryID, library_id)
            doc = pick("documentId", documentId, id, document_id)
            chunk = chunkId if chunkId is not None else chunk_id
            if doc is None or chunk is None:
                raise ToolError("give documentId and chunkId (both come from a search_documents hit)")
            check_ids(lib, version, doc)

        def work(token: Deadline) -> CallToolResult:
            with tool_errors():
                r = docs.chunk_with_context(
                    lib, doc, chunk, version=version, window=windowSize, max_tokens=maxTokens
                )
            return result(r, render_chunks(r))

        return await _in_thread(work, "get_chunk_with_context")

    return _tool(
        get_chunk_with_context, "Get a chunk with context", required=("libraryId", "documentId", "chunkId")
    )


# In the order list_tools gives them.
TOOLS: tuple[Callable[[Docs], Tool], ...] = (
    resolve_library_tool,
    list_libraries_tool,
    list_library_versions_tool,
    search_documents_tool,
    get_document_tool,
    list_documents_tool,
    get_chunk_with_context_tool,
)
