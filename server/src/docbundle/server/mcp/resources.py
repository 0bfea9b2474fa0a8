"""The two resource templates, ``docs://{libraryId}/{version}/{+path}`` (a page) and ``library://{libraryId}``,
and ``library_resources``: one concrete ``library://{id}`` per installed library, for resources/list."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import Resource

from ..bounds import RESOURCE_MAX_TOKENS
from ..catalog import LibraryEntry
from ..docs import Docs
from ..errors import LibraryUnavailableError, ServerError
from ..libraries import decode_list_cursor, encode_list_cursor

RESOURCES_PAGE = 100  # libraries per resources/list page
RESOURCES_CURSOR = "resources"  # what a resources/list cursor is tied to (list_libraries' are to filters)


def add_resources(mcp: MCPServer[Any], docs: Docs) -> None:
    """Register the resource templates on ``mcp``."""

    @mcp.resource(
        "docs://{libraryId}/{version}/{+path}",
        name="document",
        title="Documentation page",
        description="One page of a library's documentation as markdown (path is the document id; "
        f"version may be 'latest'); a long page is cut at about {RESOURCE_MAX_TOKENS:,} tokens, with the "
        "get_document call that returns the rest",
        mime_type="text/markdown",
    )
    def document_resource(libraryId: str, version: str, path: str) -> str:
        """A page's markdown."""
        with _resource_errors():
            return docs.page_markdown(libraryId, version, path)

    @mcp.resource(
        "library://{libraryId}",
        name="library",
        title="Library metadata",
        description="A library's metadata and versions as JSON",
        mime_type="application/json",
    )
    def library_resource(libraryId: str) -> str:
        """A library's metadata and versions."""
        with _resource_errors():
            return docs.list_versions(libraryId).model_dump_json(by_alias=True, indent=2)


def _resource(lib: LibraryEntry) -> Resource:
    return Resource(
        uri=f"library://{lib.id}",
        name=lib.id,
        title=lib.name,
        description=f"{lib.description} (metadata and versions)"
        if lib.description
        else "Metadata and versions",
        mime_type="application/json",
    )


def library_resources(docs: Docs) -> list[Resource]:
    """``library://{id}`` for every library of the catalogue."""
    return [_resource(lib) for lib in docs.catalog.libraries()]


def library_resource_page(docs: Docs, cursor: str | None) -> tuple[list[Resource], str | None]:
    """One page of resources/list: ``RESOURCES_PAGE`` libraries in id order after the one ``cursor``
    names (from the start without one), and the cursor of the next page (None on the last one).
    Raises BadCursorError for a cursor resources/list did not return."""
    libs = docs.catalog.libraries()
    after = decode_list_cursor(cursor, RESOURCES_CURSOR, "resources/list") if cursor is not None else None
    start = 0 if after is None else bisect.bisect_right([lib.id for lib in libs], after)
    page = libs[start : start + RESOURCES_PAGE]
    more = start + len(page) < len(libs)
    return [_resource(lib) for lib in page], encode_list_cursor(
        RESOURCES_CURSOR, page[-1].id
    ) if more else None


class DocsResourceNotFound(ResourceNotFoundError):
    """A URI that matches a template but names a library, version or document that is not there.

    Raised by the templates here, so ``DocbundleMCP.read_resource`` tells it from the SDK's own
    ``ResourceNotFoundError`` (no template matches) by type, never by its message.
    """


@contextmanager
def _resource_errors() -> Iterator[None]:
    """Unknown things are "not found" (-32602); an unavailable library is a resource error."""
    try:
        yield
    except LibraryUnavailableError as exc:
        raise ResourceError(str(exc)) from exc
    except ServerError as exc:
        raise DocsResourceNotFound(str(exc)) from exc
