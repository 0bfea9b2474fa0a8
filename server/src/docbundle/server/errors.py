"""Errors the server reports to a caller (an MCP client, a model, or the command line).

Every message is written for the reader who has to act on it: it names what was asked for, what exists
instead, and which tool or command to use next. The MCP layer turns these into ``ToolError`` (tools),
``ResourceNotFoundError`` / ``ResourceError`` (resources) or ``MCPError`` (prompts); the CLI prints them.

The hierarchy::

    ServerError
    ├── InvalidIdError             a libraryId / version / document id with a bad format
    ├── UnknownLibraryError        no such library (lists the available ids)
    ├── UnknownVersionError        no such version of a library (lists its versions)
    ├── LibraryUnavailableError    the library exists but cannot be served (gives the reason)
    ├── UnknownDocumentError       no such document or chunk (says how to find ids)
    ├── BadCursorError             a cursor that get_document did not produce for this document
    ├── BadRequestError            any other argument problem (query missing, unknown section ...)
    │   └── InputTooLongError      a string or list argument over its documented bound
    ├── CancelledError             the caller went away (or cancelled) while the work ran
    ├── LockFileError              the lock file (bundles.lock) is missing or malformed
    ├── KeyFileError               the API keys file is missing or malformed, or a key id is unknown
    └── InstallError               a release archive cannot be installed (``docbundle install``)
        └── PullError              a release cannot be fetched (``docbundle pull``)

Nothing else leaves the package as an error of its own. Two things cross it unchanged: ``Catalog.load``
raises ``FileNotFoundError`` for a missing bundles directory (the CLI reports it as a usage error), and
``docbundle.bundle`` errors met while opening a bundle become ``LibraryUnavailableError``. The MCP
layer (``mcp/``) turns these errors into the protocol's own (``ToolError``, ``ResourceError``,
``MCPError``), never the other way round.

Every string argument has a documented bound (the ``MAX_*`` constants below, listed in docs/server.md);
a longer one is refused with ``InputTooLongError``, which names the limit and what to do, rather than
cut silently. No message repeats more than ``MAX_ECHO_CHARS`` characters of anything a caller sent
(``echo``, ``clip``), so a large argument never comes back as a large error.
"""

from __future__ import annotations

from docbundle.bundle.query import Cancelled

# -- input bounds: every string a caller sends has one; longer is refused (InputTooLongError) --------
MAX_KEYWORDS = 32  # keywords in one search
# MAX_QUERY_CHARS and MAX_KEYWORD_CHARS live with the engine, in docbundle.bundle.query.
MAX_LIBRARY_ID_CHARS = 100  # libraryId (and its aliases)
MAX_VERSION_CHARS = 100  # version
MAX_DOCUMENT_ID_CHARS = 2048  # document id / path / documentId (a URL is accepted as an id too)
# A cursor is the base64 of a small JSON object holding a document id (non-ASCII escaped as \uXXXX).
MAX_CURSOR_CHARS = 4 * (12 * MAX_DOCUMENT_ID_CHARS + 256) // 3
MAX_CATEGORY_CHARS = 100  # list_libraries category
MAX_SECTION_CHARS = 500  # list_documents section
MAX_NAME_CHARS = 200  # tool, prompt and resource names, and any other string argument

# -- what results and errors quote back ----------------------------------------------------------------
# The most characters of caller input any result or error quotes back (then "…").
MAX_ECHO_CHARS = 80
# The most items of a caller's list (keywords, or terms derived from the query) a result repeats.
MAX_ECHO_ITEMS = 12


def echo(value: object, limit: int = MAX_ECHO_CHARS) -> str:
    """``value`` quoted for a message: its ``repr`` when short, else its first ``limit`` characters + "…"."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit]) + f"… ({len(text)} characters)"


def clip(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` itself when short, else its first ``limit`` characters + "…" (no quotes)."""
    return text if len(text) <= limit else text[:limit] + "…"


def clip_list(items: list[str], limit: int = MAX_ECHO_ITEMS) -> list[str]:
    """The first ``limit`` items, each clipped, then "… N more" when items were left out."""
    out = [clip(i) for i in items[:limit]]
    if len(items) > limit:
        out.append(f"… {len(items) - limit} more")
    return out


def check_length(name: str, value: str | None, limit: int, advice: str) -> None:
    """Refuse ``value`` when it is longer than ``limit`` characters, saying the limit and what to do."""
    if value is not None and len(value) > limit:
        raise InputTooLongError(name, len(value), limit, "characters", advice)


class ServerError(Exception):
    """Base class of every error the server reports to a caller."""


class InvalidIdError(ServerError):
    """An identifier does not have the required format."""


class UnknownLibraryError(ServerError):
    """The library id is not in the catalogue."""

    def __init__(self, library_id: str, available: list[str]) -> None:
        self.library_id = library_id
        self.available = available
        listed = ", ".join(available) if available else "(none: the bundles directory holds no library)"
        super().__init__(
            f"unknown library {echo(library_id)}. Available libraries: {listed}. "
            "Call list_libraries for names and descriptions."
        )


class UnknownVersionError(ServerError):
    """The library exists but has no such version."""

    def __init__(self, library_id: str, version: str, available: list[str]) -> None:
        self.library_id = library_id
        self.version = version
        self.available = available
        super().__init__(
            f"library {library_id!r} has no version {echo(version)}. Versions: {', '.join(available)}. "
            "Omit version to use the default (latest) one, or call list_library_versions."
        )


class LibraryUnavailableError(ServerError):
    """The library version exists but failed to open (verification, lock file, format ...)."""

    def __init__(self, library_id: str, version: str, reason: str) -> None:
        self.library_id = library_id
        self.version = version
        self.reason = reason
        super().__init__(
            f"library {library_id!r} version {version!r} is unavailable: {reason}. "
            "Other libraries still work; the server operator must fix or rebuild this bundle."
        )


class UnknownDocumentError(ServerError):
    """No document (or chunk) with that id in the library version."""


class BadCursorError(ServerError):
    """A ``cursor`` that is malformed or belongs to another document or build."""


class BadRequestError(ServerError):
    """An argument problem not covered by the more specific errors."""


class InputTooLongError(BadRequestError):
    """A string (or list) argument longer than its documented bound: refused, never cut silently."""

    def __init__(self, name: str, size: int, limit: int, unit: str, advice: str) -> None:
        self.name = name
        self.size = size
        self.limit = limit
        super().__init__(f"{name} is too long: {size} {unit}, the limit is {limit}. {advice}")


class CancelledError(ServerError, Cancelled):
    """The request was cancelled (the client disconnected or sent notifications/cancelled)."""

    def __init__(self) -> None:
        super().__init__("the request was cancelled before it finished")


class LockFileError(ServerError):
    """The lock file cannot be read or does not have the documented shape."""


class KeyFileError(ServerError):
    """The keys file is missing, unreadable or not in the documented shape, or a key id is unknown."""


class InstallError(ServerError):
    """The archive cannot be installed; the message says why and what to do."""


class PullError(InstallError):
    """A release cannot be fetched (``docbundle pull``): address, download, size or release index."""
