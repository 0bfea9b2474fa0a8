"""Errors the server reports to a caller (an MCP client, a model, or the command line).

Every message is written for the reader who has to act on it: it names what was asked for, what exists
instead, and what to do next. What to do next is data (``words.NextStep``: a tool and its arguments),
which each reader gets in its own words: ``str(error)`` is the message for a model (``words.MODEL``),
``error.told(words.SHELL)`` the one for a person at the ``docbundle`` command. The MCP layer turns these
into ``ToolError`` (tools), ``ResourceNotFoundError`` / ``ResourceError`` (resources) or ``MCPError``
(prompts); the CLI prints them.

The hierarchy::

    ServerError
    ├── InvalidIdError             a libraryId / version / document id with a bad format
    ├── UnknownLibraryError        no such library (lists the available ids)
    ├── UnknownVersionError        no such version of a library (lists its versions)
    ├── LibraryUnavailableError    the library exists but cannot be served (gives the reason)
    ├── UnknownDocumentError       no such document or chunk (says how to find ids)
    ├── BadCursorError             a cursor that get_document did not produce for this document
    ├── BadRequestError            any other argument problem (query missing, unknown section ...)
    │   ├── InputTooLongError      a string or list argument over its documented bound
    │   └── OutOfRangeError        a number outside its range (limit, maxTokens, windowSize)
    ├── CancelledError             the caller went away (or cancelled) while the work ran
    ├── LockFileError              the lock file (bundles.lock) is missing or malformed
    ├── KeyFileError               the API keys file is missing or malformed, or a key id is unknown
    └── InstallError               a release archive cannot be installed (``docbundle install``)
        ├── PullError              a release cannot be fetched (``docbundle pull``)
        └── ProvenanceError        an archive's attestation does not verify, or one is required

Nothing else leaves the package as an error of its own. Two things cross it unchanged: ``Catalog.load``
raises ``FileNotFoundError`` for a missing bundles directory (the CLI reports it as a usage error), and
``docbundle.bundle`` errors met while opening a bundle become ``LibraryUnavailableError``. The MCP
layer (``mcp/``) turns these errors into the protocol's own (``ToolError``, ``ResourceError``,
``MCPError``), never the other way round.

Every string argument has a documented bound (the ``MAX_*`` constants of ``bounds``, listed in docs/server.md);
a longer one is refused with ``InputTooLongError``, which names the limit and what to do, rather than
cut silently. No message repeats more than ``MAX_ECHO_CHARS`` characters of anything a caller sent
(``echo``, ``clip``), so a large argument never comes back as a large error.
"""

from __future__ import annotations

from docbundle.bundle.query import MAX_KEYWORD_CHARS, MAX_QUERY_CHARS, Cancelled

from .bounds import (
    MAX_DOCUMENT_ID_CHARS,
    MAX_ECHO_CHARS,
    MAX_ECHO_ITEMS,
    MAX_KEYWORDS,
    MAX_LIBRARY_ID_CHARS,
    MAX_VERSION_CHARS,
)
from .words import MODEL, NextStep, Words


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


def check_length(name: str, value: str | None, limit: int, advice: str | NextStep) -> None:
    """Refuse ``value`` when it is longer than ``limit`` characters, saying the limit and what to do."""
    if value is not None and len(value) > limit:
        raise InputTooLongError(name, len(value), limit, "characters", advice)


def check_range(name: str, value: int, low: int, high: int) -> None:
    """Refuse a number outside ``low..high`` (OutOfRangeError)."""
    if not low <= value <= high:
        raise OutOfRangeError(name, value, low, high)


def check_ids(library_id: str | None, version: str | None = None, document_id: str | None = None) -> None:
    """Refuse a libraryId, version or document id over its bound (InputTooLongError)."""
    check_length("libraryId", library_id, MAX_LIBRARY_ID_CHARS, NextStep("library_ids", "list_libraries"))
    check_length("version", version, MAX_VERSION_CHARS, NextStep("version_names", "list_library_versions"))
    check_length("id", document_id, MAX_DOCUMENT_ID_CHARS, NextStep("document_ids", "list_documents"))


def check_search_input(
    query: str | None,
    keywords: list[str] | None,
    library_id: str | None = None,
    version: str | None = None,
) -> None:
    """Refuse a search whose query, keywords, libraryId or version is over its bound."""
    check_length(
        "query",
        query,
        MAX_QUERY_CHARS,
        "Ask with the words that matter (an API name, an error message); at most "
        f"{MAX_QUERY_CHARS} characters.",
    )
    if keywords is not None and len(keywords) > MAX_KEYWORDS:
        raise InputTooLongError(
            "keywords",
            len(keywords),
            MAX_KEYWORDS,
            "items",
            f"Pass at most {MAX_KEYWORDS} keywords: the most specific ones (only the rarest "
            "words are searched anyway).",
        )
    for k in keywords or []:
        check_length(
            "a keyword",
            k,
            MAX_KEYWORD_CHARS,
            f"Each keyword is a term of at most {MAX_KEYWORD_CHARS} characters.",
        )
    check_ids(library_id, version)


class ServerError(Exception):
    """Base class of every error the server reports to a caller: what went wrong, and the next steps.

    ``facts`` says what went wrong (in a reader's words when it names a parameter); ``steps`` are the
    ``NextStep`` s that follow, which each reader gets in its own words (``told``).
    """

    def __init__(self, message: str, *steps: NextStep) -> None:
        super().__init__(message)
        self.message = message
        self.steps = steps

    def facts(self, words: Words) -> str:
        """What went wrong, with parameters named in ``words``."""
        return self.message

    def told(self, words: Words) -> str:
        """The whole message in ``words``: the facts, then the next steps that reader can take."""
        return " ".join([self.facts(words), *words.advice(self.steps)])

    def __str__(self) -> str:
        return self.told(MODEL)


class InvalidIdError(ServerError):
    """An identifier does not have the required format."""


class UnknownLibraryError(ServerError):
    """The library id is not in the catalogue."""

    def __init__(self, library_id: str, available: list[str]) -> None:
        self.library_id = library_id
        self.available = available
        listed = ", ".join(available) if available else "(none: the bundles directory holds no library)"
        super().__init__(
            f"unknown library {echo(library_id)}. Available libraries: {listed}.",
            NextStep("names", "list_libraries"),
        )


class UnknownVersionError(ServerError):
    """The library exists but has no such version."""

    def __init__(self, library_id: str, version: str, available: list[str]) -> None:
        self.library_id = library_id
        self.version = version
        self.available = available
        super().__init__(
            f"library {library_id!r} has no version {echo(version)}. Versions: {', '.join(available)}.",
            NextStep("versions", "list_library_versions", {"libraryId": library_id}),
        )


class LibraryUnavailableError(ServerError):
    """The library version exists but failed to open (verification, lock file, format ...)."""

    def __init__(self, library_id: str, version: str, reason: str, *, pin: bool = False) -> None:
        """``pin``: refused by the lock file only (the bundle is intact; the pin is what to fix)."""
        self.library_id = library_id
        self.version = version
        self.reason = reason
        super().__init__(
            f"library {library_id!r} version {version!r} is unavailable: {reason}.",
            NextStep("lock_pin" if pin else "operator", "", {"libraryId": library_id}),
        )


class UnknownDocumentError(ServerError):
    """No document (or chunk) with that id in the library version."""


class BadCursorError(ServerError):
    """A ``cursor`` that is malformed or belongs to another document or build."""


class BadRequestError(ServerError):
    """An argument problem not covered by the more specific errors."""


class InputTooLongError(BadRequestError):
    """A string (or list) argument longer than its documented bound: refused, never cut silently."""

    def __init__(self, name: str, size: int, limit: int, unit: str, advice: str | NextStep) -> None:
        self.name = name
        self.size = size
        self.limit = limit
        self.unit = unit
        self.advice = advice if isinstance(advice, str) else ""
        steps = () if isinstance(advice, str) else (advice,)
        super().__init__(f"{name} is too long: {size} {unit}, the limit is {limit}.", *steps)

    def facts(self, words: Words) -> str:
        said = f"{words.param(self.name)} is too long: {self.size} {self.unit}, the limit is {self.limit}."
        return f"{said} {self.advice}" if self.advice else said


class OutOfRangeError(BadRequestError):
    """A number outside its documented range."""

    def __init__(self, name: str, value: int, low: int, high: int) -> None:
        self.name = name
        self.value = value
        self.low = low
        self.high = high
        super().__init__(self.facts(MODEL))

    def facts(self, words: Words) -> str:
        shown = clip(str(self.value), 20)
        return f"{words.param(self.name)} must be between {self.low} and {self.high}, not {shown}"


class CancelledError(ServerError, Cancelled):
    """The request was cancelled (the client disconnected or sent notifications/cancelled)."""

    def __init__(self) -> None:
        ServerError.__init__(self, "the request was cancelled before it finished")


class LockFileError(ServerError):
    """The lock file cannot be read or does not have the documented shape."""


class KeyFileError(ServerError):
    """The keys file is missing, unreadable or not in the documented shape, or a key id is unknown."""


class InstallError(ServerError):
    """The archive cannot be installed; the message says why and what to do."""


class PullError(InstallError):
    """A release cannot be fetched (``docbundle pull``): address, download, size or release index."""


class ProvenanceError(InstallError):
    """An archive's attestation does not verify, or ``--require-provenance`` finds none it can check
    (``docbundle.server.provenance``): the archive is not installed; the message says why."""
