"""The server's bounds on what a caller sends and gets back, in one place: how many hits, how many
tokens, how wide a window, how long each string argument may be, how much of it an answer quotes back.

Imports nothing: the tools' schemas and checks (``models``, ``docs``, ``errors``, ``mcp``) and the
``docbundle`` command's ``--help`` (which must not load pydantic) read the same numbers. The two bounds
on a query (``MAX_QUERY_CHARS``, ``MAX_KEYWORD_CHARS``) bound any query of a bundle, so they live with
the engine, in ``docbundle.bundle.query``. docs/server.md lists every bound here (its "Input bounds"
table); a longer string is refused with ``errors.InputTooLongError``, never cut silently.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_WINDOW",
    "LIST_MAX_TOKENS",
    "MAX_CATEGORY_CHARS",
    "MAX_CURSOR_CHARS",
    "MAX_DOCUMENT_ID_CHARS",
    "MAX_ECHO_CHARS",
    "MAX_ECHO_ITEMS",
    "MAX_KEYWORDS",
    "MAX_LIBRARY_ID_CHARS",
    "MAX_LIMIT",
    "MAX_MAX_TOKENS",
    "MAX_NAME_CHARS",
    "MAX_SECTION_CHARS",
    "MAX_URI_CHARS",
    "MAX_VERSION_CHARS",
    "MAX_WINDOW",
    "MIN_MAX_TOKENS",
    "RESOURCE_MAX_TOKENS",
]

# -- how much an operation returns ------------------------------------------------------------------
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
DEFAULT_MAX_TOKENS = 5000
LIST_MAX_TOKENS = 2000  # list_libraries' page: its text and its JSON together stay under ~16 KB
MIN_MAX_TOKENS = 500
MAX_MAX_TOKENS = 50_000
DEFAULT_WINDOW = 1
MAX_WINDOW = 5
# The most a ``docs://`` resource read returns, in estimated tokens (a resource has no maxTokens).
RESOURCE_MAX_TOKENS = DEFAULT_MAX_TOKENS

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
# The longest resource URI: docs://<libraryId>/<version>/<document id>, every character %-encoded.
MAX_URI_CHARS = 16 + MAX_LIBRARY_ID_CHARS + 3 * (MAX_VERSION_CHARS + MAX_DOCUMENT_ID_CHARS)

# -- what results and errors quote back ----------------------------------------------------------------
# The most characters of caller input any result or error quotes back (then "…").
MAX_ECHO_CHARS = 80
# The most items of a caller's list (keywords, or terms derived from the query) a result repeats.
MAX_ECHO_ITEMS = 12
