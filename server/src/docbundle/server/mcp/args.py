"""Tool arguments: their published types, the aliases models invent for them, and the checks that run
on the event loop before any work (so an oversized call never takes a worker thread).

Every string argument is bounded (``errors.MAX_*``; see docs/server.md): tool arguments and their
aliases over their bound are refused with a message that says the limit, and no error quotes back more
than ``MAX_ECHO_CHARS`` characters of what was sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from ..errors import ServerError, echo
from ..models import MAX_MAX_TOKENS, MIN_MAX_TOKENS

LibraryIdArg = Annotated[
    str | None,
    Field(description="From resolve_library or list_libraries"),
]
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
    Field(ge=MIN_MAX_TOKENS, le=MAX_MAX_TOKENS, description="Answer size budget, in tokens"),
]
# Names models invent for the same arguments: accepted, but kept out of the published schema.
Alias = SkipJsonSchema[str | None]
IntAlias = SkipJsonSchema[int | None]


def pick(name: str, *values: str | None) -> str | None:
    """The one value given among an argument and its aliases (an error when they disagree)."""
    given = {v for v in values if v is not None and v != ""}
    if len(given) > 1:
        shown = ", ".join(echo(v) for v in sorted(given)[:3])
        raise ToolError(f"{name} was given twice with different values: {shown}")
    return next(iter(given), None)


def pick_int(name: str, value: int, default: int, *aliases: int | None) -> int:
    """``value`` unless it is the default and an alias was given (then the first alias)."""
    given = [a for a in aliases if a is not None]
    if value != default or not given:
        return value
    return given[0]


def need_library(*values: str | None) -> str:
    """The libraryId among its aliases; a tool error when none was given."""
    lib = pick("libraryId", *values)
    if lib is None:
        raise ToolError("give libraryId (call list_libraries to see the ids)")
    return lib


@contextmanager
def tool_errors() -> Iterator[None]:
    """Report server errors as tool errors a model can read and act on."""
    try:
        yield
    except ServerError as exc:
        raise ToolError(str(exc)) from exc


def result(model: BaseModel, text: str) -> CallToolResult:
    """A tool's answer: the markdown ``text``, and ``model`` as its structured content."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=model.model_dump(mode="json", by_alias=True),
    )
