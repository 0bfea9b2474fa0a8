"""Messages written for a model, reworded for a person at a shell.

``Docs`` and the catalogue speak to an AI assistant: they name MCP tools (``list_libraries``), their
parameters (``libraryId``, ``maxTokens``, ``mode='broad'``) and send it to "the server operator". The
``docbundle`` command prints the same messages to the person who *is* the operator, so it passes them
through ``shell_words``: each tool becomes the command that does its job, each parameter its option, and
advice that has no command (browsing a table of contents) is left out.
"""

from __future__ import annotations

import re

from .errors import LibraryUnavailableError

__all__ = ["plural", "shell_suggestions", "shell_words", "unavailable_for_shell"]

# (pattern, replacement), applied in order. A replacement of None drops the whole sentence.
_REWRITES: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(r"\s*Browse the table of contents with list_documents\([^)]*\)\."), None),
    (re.compile(r"\s*Search every library by omitting libraryId\."), None),
    (
        re.compile(r"[Cc]all list_libraries for names and descriptions"),
        "Run `docbundle info` for names and descriptions",
    ),
    (
        re.compile(r"[Cc]all list_libraries to see (them|each library's status and reason)"),
        r"Run `docbundle info` to see \1",
    ),
    (re.compile(r"see list_libraries"), "see `docbundle info`"),
    (
        re.compile(r"Omit version to use the default \(latest\) one, or call list_library_versions"),
        "Omit --version to use the default (latest) one; `docbundle info LIBRARY` lists the versions",
    ),
    (re.compile(r"[Cc]all list_library_versions"), "run `docbundle info LIBRARY`"),
    (re.compile(r"mode='(\w+)'"), r"--mode \1"),
    (re.compile(r"\bmaxTokens\b"), "--max-tokens"),
    (re.compile(r"\blibraryId\b"), "LIBRARY"),
    (re.compile(r" \(see skipped\)"), ""),
]

_TOOLS = re.compile(
    r"\b(list_libraries|list_library_versions|search_documents|get_document|list_documents|"
    r"get_chunk_with_context)\b"
)


def shell_words(message: str) -> str:
    """``message`` with MCP tool and parameter names replaced by the commands and options a user types."""
    for pattern, replacement in _REWRITES:
        message = pattern.sub(replacement if replacement is not None else "", message)
    return message


def shell_suggestions(suggestions: list[str]) -> list[str]:
    """The suggestions that mean something at a shell, reworded; advice naming a tool with no command
    equivalent is left out."""
    out = []
    for s in suggestions:
        reworded = shell_words(s).strip()
        if reworded and not _TOOLS.search(reworded):
            out.append(reworded)
    return out


def unavailable_for_shell(exc: LibraryUnavailableError) -> str:
    """A bundle that cannot be opened, said to the person who can fix it."""
    return (
        f"{exc.library_id}@{exc.version} cannot be opened: {exc.reason}. Rebuild it "
        f"(`docbundle-index build --library {exc.library_id}`) or reinstall it (`docbundle install ARCHIVE`); "
        "`docbundle verify` checks every bundle."
    )


def plural(n: int, one: str, many: str) -> str:
    """``1 library``, ``2 libraries``, ``0 libraries``."""
    return f"{n} {one if n == 1 else many}"
