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
    └── LockFileError              the lock file (bundles.lock) is missing or malformed
"""

from __future__ import annotations


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
            f"unknown library {library_id!r}. Available libraries: {listed}. "
            "Call list_libraries for names and descriptions."
        )


class UnknownVersionError(ServerError):
    """The library exists but has no such version."""

    def __init__(self, library_id: str, version: str, available: list[str]) -> None:
        self.library_id = library_id
        self.version = version
        self.available = available
        super().__init__(
            f"library {library_id!r} has no version {version!r}. Versions: {', '.join(available)}. "
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


class LockFileError(ServerError):
    """The lock file cannot be read or does not have the documented shape."""
