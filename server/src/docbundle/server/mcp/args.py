"""Tool arguments: their published types, the other spellings models use for them, and what a missing
one says.

``canonical`` runs once per call, in ``DocbundleMCP.call_tool``, before the SDK validates the arguments
against the tool's function: every other spelling in ``SPELLINGS`` becomes the tool's own parameter
name, a comma-separated ``keywords`` string becomes a list, and a required argument that is missing
(under every spelling) is refused with a message that says where to get it. The tools then take only
their published parameters, each validated once: its type and range by the SDK (the published schema),
its length bound by the tool before any work starts (``docs.check_*``, so an oversized call never
takes a worker thread).

One rule for an argument given under several spellings: a spelling whose value is null or "" counts
as absent; the others must all have the same value, else the call is refused naming the argument
("maxTokens was given twice with different values: 300, 500").

Every string argument is bounded (``bounds.MAX_*``; see docs/server.md): arguments over their bound are
refused with a message that says the limit, and no error quotes back more than ``MAX_ECHO_CHARS``
characters of what was sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Annotated, Any

from docbundle.bundle.query import MAX_QUERY_CHARS
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field, PrivateAttr

from ..bounds import MAX_MAX_TOKENS, MIN_MAX_TOKENS
from ..errors import ServerError, check_length, echo
from ..models import Model
from ..render import Answer

LibraryIdArg = Annotated[str, Field(description="From resolve_library or list_libraries")]
OptLibraryIdArg = Annotated[
    str | None,
    Field(description="From resolve_library; omit to search every library"),
]
VersionArg = Annotated[
    str | None,
    Field(description="From list_library_versions; omit for the default"),
]
MaxTokensArg = Annotated[
    int,
    Field(ge=MIN_MAX_TOKENS, le=MAX_MAX_TOKENS, description="Answer budget in tokens"),
]

# Each parameter, and the other names models send it under. A tool accepts every spelling of each of
# its parameters, except a spelling that is itself one of its parameters (get_document's ``id`` is
# get_chunk_with_context's spelling of ``documentId``; resolve_library's ``name`` is spelled ``query``).
SPELLINGS: dict[str, tuple[str, ...]] = {
    "libraryId": ("library", "libraryID", "library_id"),
    "query": ("question", "q"),
    "name": ("query", "libraryName", "library"),
    "id": ("path", "documentId", "document_id"),
    "documentId": ("id", "document_id"),
    "chunkId": ("chunk_id",),
    "maxTokens": ("max_tokens",),
    "windowSize": ("window_size",),
}

# What a call missing a required argument is told (documentId and chunkId come together).
MISSING: dict[str, str] = {
    "libraryId": "give libraryId (call list_libraries to see the ids)",
    "name": "give name: what the library is called, e.g. 'react' or 'sapui5'",
    "id": "give id (a documentId from search_documents or an id from list_documents)",
    "documentId": "give documentId and chunkId (both come from a search_documents hit)",
    "chunkId": "give documentId and chunkId (both come from a search_documents hit)",
}


def spellings(params: list[str]) -> dict[str, str]:
    """Every other spelling a tool with ``params`` accepts, mapped to the parameter it spells."""
    out: dict[str, str] = {}
    for param in params:
        for spelling in SPELLINGS.get(param, ()):
            if spelling not in params and out.setdefault(spelling, param) != param:
                raise ValueError(f"{spelling!r} would spell both {out[spelling]!r} and {param!r}")
    return out


def _absent(value: Any) -> bool:
    return value is None or value == ""


def canonical(params: list[str], required: list[str], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` under the tool's own parameter names (see the module docstring for the rule)."""
    other = spellings(params)
    out: dict[str, Any] = {}
    given: dict[str, list[Any]] = {}
    for key, value in arguments.items():
        name = other.get(key, key)
        if name == key and name not in params:
            out[key] = value  # not ours: the SDK decides (it ignores unknown arguments)
            continue
        given.setdefault(name, []).append(value)
    for name, values in given.items():
        present = [v for v in values if not _absent(v)]
        distinct: list[Any] = []
        for v in present:
            if not any(type(v) is type(d) and v == d for d in distinct):
                distinct.append(v)
        if len(distinct) > 1:
            shown = ", ".join(echo(v) for v in sorted(distinct, key=repr)[:3])
            raise ToolError(f"{name} was given twice with different values: {shown}")
        out[name] = distinct[0] if distinct else values[0]
    for name in required:
        if _absent(out.get(name)):
            raise ToolError(MISSING.get(name, f"give {name}"))
    keywords = out.get("keywords")
    if "keywords" in params and isinstance(keywords, str):
        with tool_errors():
            check_length("keywords", keywords, MAX_QUERY_CHARS, "Pass a list of terms, or fewer of them.")
        out["keywords"] = keywords.split(",")
    return out


@contextmanager
def tool_errors() -> Iterator[None]:
    """Report server errors as tool errors a model can read and act on."""
    try:
        yield
    except ServerError as exc:
        raise ToolError(str(exc)) from exc


class Reply(CallToolResult):
    """A tool's answer as the SDK sends it, holding the typed result it was made from (for call logs)."""

    _result: Model | None = PrivateAttr(default=None)

    @property
    def result(self) -> Model | None:
        """The result model this answer was made from."""
        return self._result


def reply(done: Answer[Any]) -> Reply:
    """A tool's answer: the markdown, and the result model as its structured content."""
    out = Reply(
        content=[TextContent(type="text", text=done.text)],
        structured_content=done.result.model_dump(mode="json", by_alias=True),
    )
    out._result = done.result
    return out
