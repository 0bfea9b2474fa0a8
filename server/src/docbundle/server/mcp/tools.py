"""The seven tools: one function each, which builds the tool over a ``Docs``; ``TOOLS`` lists them in order.

Tools are coroutines that run their work in a worker thread (``_in_thread``) with a ``Deadline`` as
cancellation token: when the request is cancelled (the HTTP client disconnected, the client sent
``notifications/cancelled``, the stdio client went away) the coroutine stops waiting at once and
cancels the token, and the search engine, which checks it between units of work, stops too, so no
thread keeps burning CPU for a caller that is gone. ``resolve_library``, ``list_libraries`` and
``list_library_versions`` (catalogue lookups: the word index, the check of a library on first use, a
page of summaries) run in a thread too, never on the event loop (issue 31: a hostile resolve query held
it 16 s), but on threads of their own (``lookups.lookup_thread``), so they never queue
behind searches for a worker thread. Everything the threads touch is safe for that (the catalogue opens each bundle once
behind a per-version lock, the searcher opens a whoosh reader per call, the document store reads from
a read-only memory map).

Each tool returns ``Annotated[CallToolResult, Model]``: the SDK publishes the pydantic model's JSON
Schema as the tool's output schema and checks the structured content against it, and the text content
is the markdown the operation rendered once (``render.Answer``), which a model reads more easily than
JSON. The function's docstring is the description the model reads. A tool takes only its published
parameters: other spellings and missing arguments are handled once, before the SDK validates
(``args.canonical``), and each tool checks its arguments' length bounds once, before its work starts,
then calls its ``Docs`` operation with ``checked=True``.

To add a tool: write ``<name>_tool(docs)`` here (arguments from ``args``, an operation on ``Docs``, a
result model in ``models``, a renderer in ``render``) and append it to ``TOOLS``.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

import anyio
import anyio.to_thread
from docbundle.bundle.query import Cancelled, Deadline, SearchMode
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from .. import models
from ..bounds import DEFAULT_LIMIT, DEFAULT_MAX_TOKENS, DEFAULT_WINDOW, LIST_MAX_TOKENS, MAX_LIMIT, MAX_WINDOW
from ..docs import Docs, check_category, check_document_args, check_list_args, check_name
from ..errors import check_ids, check_search_input
from ..lookups import lookup_thread
from ..render import Answer, answer
from .args import LibraryIdArg, MaxTokensArg, OptLibraryIdArg, Reply, VersionArg, reply, tool_errors

log = logging.getLogger(__name__)

# destructiveHint is left out: the spec gives it meaning only when readOnlyHint is false.
_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

# Arguments published as required though the tool takes them as optional: search_documents documents
# ``query`` as required, and accepts ``keywords`` alone (``schemas.publish``; ``DocbundleMCP.list_tools``).
PUBLISHED_REQUIRED: dict[str, tuple[str, ...]] = {"search_documents": ("query",)}


def _tool(fn: Callable[..., Coroutine[Any, Any, CallToolResult]], title: str) -> Tool:
    """``fn`` as a read-only tool."""
    # cleandoc: the docstring is the description the model reads, without code indentation.
    return Tool.from_function(
        fn, title=title, description=inspect.cleandoc(fn.__doc__ or ""), annotations=_READ_ONLY
    )


async def _in_thread(
    check: Callable[[], None], work: Callable[[Deadline], Answer[Any]], what: str, *, lookup: bool = False
) -> Reply:
    """``check`` the arguments here, then run ``work(token)`` in a worker thread (a lookup thread when
    ``lookup``); when this call is cancelled, cancel the token.

    The thread is abandoned rather than waited for (the caller is gone) and the token makes the search
    engine stop at its next check; the log (INFO) says how long a cancelled call's thread ran.
    """
    with tool_errors():
        check()  # on the event loop: an oversized call never takes a worker thread
    token = Deadline()
    started = time.monotonic()

    def run() -> Reply:
        try:
            with tool_errors():
                return reply(work(token))
        except ToolError as exc:
            if isinstance(exc.__cause__, Cancelled):
                log.info(
                    "%s: cancelled by its caller; the work stopped after %.3f s",
                    what,
                    time.monotonic() - started,
                )
            raise

    try:
        if lookup:
            return await lookup_thread(run)
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except BaseException:
        token.cancel()
        raise


def list_libraries_tool(docs: Docs) -> Tool:
    """The ``list_libraries`` tool over ``docs``."""

    async def list_libraries(
        category: Annotated[str | None, Field(description="Only this category")] = None,
        query: Annotated[str | None, Field(description="Words of its id, name or description")] = None,
        cursor: Annotated[str | None, Field(description="nextCursor of the previous page")] = None,
        maxTokens: MaxTokensArg = LIST_MAX_TOKENS,
    ) -> Annotated[CallToolResult, models.LibraryList]:
        """List the documentation libraries, a page at a time (total counts every match).

        Each: id (the libraryId of other tools), name, description, category, versions, status
        (available, ready, failed + reason).
        """
        return await _in_thread(
            lambda: check_category(category, query, cursor, maxTokens),
            lambda token: answer(docs.list_libraries(category, query, cursor, maxTokens, checked=True)),
            "list_libraries",
            lookup=True,
        )

    return _tool(list_libraries, "List libraries")


def resolve_library_tool(docs: Docs) -> Tool:
    """The ``resolve_library`` tool over ``docs``."""

    async def resolve_library(
        name: Annotated[str, Field(description="Its name, e.g. 'sapui5' or 'react docs in Korean'")],
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="Matches to return")] = DEFAULT_LIMIT,
    ) -> Annotated[CallToolResult, models.LibraryMatches]:
        """Find a library's libraryId by name; call this first when you lack the id.

        Matches ids, names, descriptions, categories and page languages (prefixes, typos too).
        Each match: id, versions, score (0-1), why it matched.
        """
        return await _in_thread(
            lambda: check_name(name),
            lambda token: answer(docs.resolve_library(name, limit, checked=True)),
            "resolve_library",
            lookup=True,
        )

    return _tool(resolve_library, "Resolve a library")


def list_library_versions_tool(docs: Docs) -> Tool:
    """The ``list_library_versions`` tool over ``docs``."""

    async def list_library_versions(libraryId: LibraryIdArg) -> Annotated[CallToolResult, models.VersionList]:
        """List one library's documentation versions.

        Each: status (active, deprecated, eol), whether latest, LTS or default, buildId and
        availability. Pass a name as `version` to other tools.
        """
        return await _in_thread(
            lambda: check_ids(libraryId),
            lambda token: answer(docs.list_versions(libraryId, checked=True)),
            "list_library_versions",
            lookup=True,
        )

    return _tool(list_library_versions, "List library versions")


def search_documents_tool(docs: Docs) -> Tool:
    """The ``search_documents`` tool over ``docs``."""

    async def search_documents(
        query: Annotated[
            str | None,
            Field(description='Words, an identifier (useEffect, sap.m.Table) or a question; "quote phrases"'),
        ] = None,
        keywords: Annotated[list[str] | None, Field(description="More terms to match")] = None,
        libraryId: OptLibraryIdArg = None,
        version: VersionArg = None,
        mode: Annotated[
            SearchMode | None,
            Field(
                description="hybrid (words + meaning; default with vectors), semantic, "
                "balanced = fulltext (default without), broad, precise"
            ),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="Hits to return")] = DEFAULT_LIMIT,
        maxTokens: MaxTokensArg = DEFAULT_MAX_TOKENS,
    ) -> Annotated[CallToolResult, models.SearchResult]:
        """Search documentation: the best-matching sections.

        Each hit: libraryId, documentId, chunkId, the section's text (cut to fit maxTokens); at most
        2 per document. More text: get_chunk_with_context, get_document. Weak or no hits get a
        note. The query is literal (no wildcards).
        """
        return await _in_thread(
            lambda: check_search_input(query, keywords, libraryId, version),
            lambda token: docs.search(
                query,
                keywords=keywords,
                library_id=libraryId,
                version=version,
                mode=mode,
                limit=limit,
                max_tokens=maxTokens,
                cancel=token,
                checked=True,
            ),
            "search_documents",
        )

    return _tool(search_documents, "Search documentation")


def get_document_tool(docs: Docs) -> Tool:
    """The ``get_document`` tool over ``docs``."""

    async def get_document(
        libraryId: LibraryIdArg,
        id: Annotated[str, Field(description="documentId of a search hit, or an id from list_documents")],
        version: VersionArg = None,
        maxTokens: MaxTokensArg = DEFAULT_MAX_TOKENS,
        cursor: Annotated[str | None, Field(description="nextCursor of the previous page")] = None,
    ) -> Annotated[CallToolResult, models.DocumentPage]:
        """Return a document's markdown in pages that fit maxTokens.

        While truncated, call again adding cursor=nextCursor. Pages end at section boundaries.
        """
        return await _in_thread(
            lambda: check_document_args(libraryId, id, version, cursor),
            lambda token: docs.get_document(
                libraryId, id, version=version, max_tokens=maxTokens, cursor=cursor, checked=True
            ),
            "get_document",
        )

    return _tool(get_document, "Get a document")


def list_documents_tool(docs: Docs) -> Tool:
    """The ``list_documents`` tool over ``docs``."""

    async def list_documents(
        libraryId: LibraryIdArg,
        version: VersionArg = None,
        section: Annotated[str | None, Field(description="Only this llms.txt section")] = None,
        maxTokens: MaxTokensArg = DEFAULT_MAX_TOKENS,
    ) -> Annotated[CallToolResult, models.DocumentList]:
        """Return a library's table of contents as its llms.txt gives it.

        Sections in order with their documents (id, title, URL, description); pages not indexed,
        with why. A long table is cut to fit maxTokens, naming the sections
        to ask for with `section`.
        """
        return await _in_thread(
            lambda: check_list_args(libraryId, version, section),
            lambda token: docs.list_documents(
                libraryId, version=version, section=section, max_tokens=maxTokens, checked=True
            ),
            "list_documents",
        )

    return _tool(list_documents, "List documents")


def get_chunk_with_context_tool(docs: Docs) -> Tool:
    """The ``get_chunk_with_context`` tool over ``docs``."""

    async def get_chunk_with_context(
        libraryId: LibraryIdArg,
        documentId: Annotated[str, Field(description="documentId of a search hit")],
        chunkId: Annotated[int, Field(ge=0, description="chunkId of a search hit")],
        windowSize: Annotated[
            int, Field(ge=0, le=MAX_WINDOW, description="Chunks to add on each side")
        ] = DEFAULT_WINDOW,
        version: VersionArg = None,
        maxTokens: MaxTokensArg = DEFAULT_MAX_TOKENS,
    ) -> Annotated[CallToolResult, models.ChunkContext]:
        """Return a search hit's chunk (section) with its neighbours, in page order.

        Pass its libraryId, documentId and chunkId; it is kept whole first when maxTokens is tight.
        """
        return await _in_thread(
            lambda: check_ids(libraryId, version, documentId),
            lambda token: docs.chunk_with_context(
                libraryId,
                documentId,
                chunkId,
                version=version,
                window=windowSize,
                max_tokens=maxTokens,
                checked=True,
            ),
            "get_chunk_with_context",
        )

    return _tool(get_chunk_with_context, "Get a chunk with context")


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
