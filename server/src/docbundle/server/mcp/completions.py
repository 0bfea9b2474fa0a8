"""``completion/complete``: argument completions for the prompts and resource templates.

MCP completes arguments of prompts and resource templates (there is no completion reference for a
tool's arguments), so the values a tool call needs are offered where those arguments appear:

- ``libraryId`` (both prompts, both templates): installed ids that start with what was typed, then
  ids that contain it, then close matches (``resolve.complete_ids``: typos, names, languages);
- ``version`` (``docs://``): the versions of the ``libraryId`` given in the context (every installed
  version when none is), plus ``latest``;
- ``path`` (``docs://``): the document ids of that library version, the ids ``get_document`` takes,
  read from the manifest (no bundle is opened);
- ``query`` / ``topic`` (the prompts): titles of the library's pages (of the first
  ``MAX_TITLE_LIBRARIES`` libraries in id order when none is given: each costs a read of its manifest)
  that start with or contain what was typed.

Every completion runs in a lookup thread (``lookups.lookup_thread``), never on the event loop.

Matching ignores case. At most ``MAX_VALUES`` values come back, with ``total`` and ``hasMore``. An
argument, prompt or template this server does not know completes to nothing (an empty list, not an
error, as clients probing for completions expect).
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

from ..bounds import MAX_DOCUMENT_ID_CHARS, MAX_LIBRARY_ID_CHARS
from ..catalog import LibraryEntry
from ..docs import Docs
from ..errors import ServerError
from ..lookups import lookup_thread
from ..resolve import complete_ids

MAX_VALUES = 100  # the protocol's cap on values in one completion
# Libraries whose page titles complete a prompt's query or topic when no libraryId is given: each is a
# manifest read and decoded, so not every one of 10,000 per keystroke (issue 31).
MAX_TITLE_LIBRARIES = 20
DOCS_TEMPLATE = "docs://{libraryId}/{version}/{+path}"
LIBRARY_TEMPLATE = "library://{libraryId}"
PROMPTS = ("search-docs", "explain-with-docs")


def add_completions(mcp: MCPServer[Any], docs: Docs) -> None:
    """Register the ``completion/complete`` handler on ``mcp`` (which then declares the capability)."""

    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        given = dict(context.arguments or {}) if context else {}
        # In a lookup thread: the word index, a library's check and its manifest are read off the loop.
        values = await lookup_thread(lambda: candidates(docs, ref, argument.name, argument.value, given))
        return Completion(values=values[:MAX_VALUES], total=len(values), has_more=len(values) > MAX_VALUES)

    register = mcp.completion()  # type: ignore[no-untyped-call]  # the SDK leaves this decorator untyped
    register(complete)


def candidates(
    docs: Docs,
    ref: PromptReference | ResourceTemplateReference,
    name: str,
    value: str,
    given: dict[str, str],
) -> list[str]:
    """Every value for argument ``name`` of ``ref`` that matches ``value``, best first."""
    known = (
        ref.name in PROMPTS
        if isinstance(ref, PromptReference)
        else ref.uri in (DOCS_TEMPLATE, LIBRARY_TEMPLATE)
    )
    if not known or len(value) > MAX_DOCUMENT_ID_CHARS:
        return []
    if name == "libraryId":
        return complete_ids(docs.resolver, value) if len(value) <= MAX_LIBRARY_ID_CHARS else []
    lib = _library(docs, given.get("libraryId"))
    if isinstance(ref, ResourceTemplateReference) and ref.uri == DOCS_TEMPLATE:
        if name == "version":
            libs = [lib] if lib else docs.catalog.libraries()
            versions = list(dict.fromkeys(v for entry in libs for v in entry.versions))
            return _matching([*versions, *(["latest"] if "latest" not in versions else [])], value)
        if name == "path" and lib is not None:
            return _matching(_document_ids(lib, given.get("version")), value)
    if isinstance(ref, PromptReference) and name in ("query", "topic"):
        libs = [lib] if lib else docs.catalog.libraries()[:MAX_TITLE_LIBRARIES]
        titles = [d.title for entry in libs for d in _documents(entry, None) if d.title]
        return _matching(list(dict.fromkeys(titles)), value)
    return []


def _library(docs: Docs, library_id: str | None) -> LibraryEntry | None:
    if not library_id or len(library_id) > MAX_LIBRARY_ID_CHARS:
        return None
    try:
        return docs.catalog.library(library_id)
    except ServerError:
        return None


def _documents(lib: LibraryEntry, version: str | None) -> list[Any]:
    """The indexed documents of a library version, from its manifest (the default version if unknown)."""
    entry = lib.versions.get(version or "") or lib.default
    manifest = entry.read_manifest()
    if manifest is None:
        return []
    return [d for d in manifest.documents if d.chunks > 0 and d.error is None]


def _document_ids(lib: LibraryEntry, version: str | None) -> list[str]:
    return [d.path for d in _documents(lib, version)]


def _matching(values: list[str], typed: str) -> list[str]:
    """``values`` that start with ``typed``, then those that contain it (case ignored)."""
    t = typed.strip().lower()
    first = [v for v in values if v.lower().startswith(t)]
    inside = [v for v in values if t in v.lower() and not v.lower().startswith(t)]
    return first + inside
