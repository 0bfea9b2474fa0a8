"""What to do next, said once as data and put in each reader's words.

An error or an empty result tells its reader what to do next. That advice is a ``NextStep``: the MCP
tool that does it (``tool``, "" when the advice is not a call), the arguments that matter (``args``)
and which advice it is (``why``). Each audience renders it in its own words:

- ``MODEL``: an AI assistant over MCP, which calls tools (``list_libraries``) with parameters
  (``libraryId``, ``maxTokens``, ``mode='broad'``) and sends what it cannot fix to "the server
  operator". This is what ``str(error)`` says, and what result suggestions hold.
- ``SHELL``: the person at the ``docbundle`` command, who *is* the operator: each tool becomes the
  command that does its job, each parameter its option, and advice with no command (browsing a table
  of contents) is left out.

Rewording a message is an edit of one table here; a test checks that both tables cover every step.
Nothing here parses or rewrites text. Also ``plural``, for the shell's counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Why = Literal[
    "names",
    "versions",
    "operator",
    "library_ids",
    "version_names",
    "document_ids",
    "categories",
    "statuses",
    "valid_ids",
    "broad",
    "toc",
    "everywhere",
    "find_document",
    "chunk_ids",
    "restart",
    "list_restart",
    "other_words",
    "faster",
    "give_query",
    "lock_pin",
]


@dataclass(frozen=True)
class NextStep:
    """One piece of advice: call ``tool`` (an MCP tool; "" when none) with ``args``, for reason ``why``."""

    why: Why
    tool: str = ""
    args: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Words:
    """One audience's words: a template per next step (None: no such step for it), a name per parameter."""

    name: str
    steps: Mapping[Why, str | None]
    params: Mapping[str, str]

    def step(self, step: NextStep) -> str | None:
        """``step`` said to this audience, or None when it has no equivalent."""
        template = self.steps[step.why]
        # The template is ours; the arguments are values inserted into it, never parsed as templates.
        return None if template is None else template.format_map(_Args(step.args))

    def param(self, name: str) -> str:
        """What this audience calls the parameter ``name`` (``libraryId`` is ``LIBRARY`` at a shell)."""
        return self.params.get(name, name)

    def advice(self, steps: tuple[NextStep, ...]) -> list[str]:
        """The steps this audience can take, in its words, in order."""
        return [text for text in (self.step(s) for s in steps) if text is not None]


class _Elided:
    """An argument the step does not know (``list_documents(libraryId=...)``)."""

    def __repr__(self) -> str:
        return "..."

    __str__ = __repr__


class _Args(dict[str, object]):
    def __missing__(self, key: str) -> object:
        return _Elided()


MODEL = Words(
    "model",
    {
        "names": "Call list_libraries for names and descriptions.",
        "versions": "Omit version to use the default (latest) one, or call list_library_versions.",
        "operator": "Other libraries still work; the server operator must fix or rebuild this bundle.",
        "library_ids": "Library ids are short: call list_libraries to see them.",
        "version_names": "Call list_library_versions for the version names, or omit version for the default.",
        "document_ids": "Pass a documentId from search_documents or an id from list_documents.",
        "categories": "Categories are short: see list_libraries.",
        "statuses": "Call list_libraries to see each library's status and reason.",
        "valid_ids": "Call list_libraries to see them.",
        "broad": "Retry with mode='broad' (any word may match instead of most of them).",
        "toc": "Browse the table of contents with list_documents(libraryId={libraryId!r}).",
        "everywhere": "Search every library by omitting libraryId.",
        "find_document": "Call list_documents(libraryId={libraryId!r}) for every document id, or "
        "search_documents to find pages by topic.",
        "chunk_ids": "chunkId comes from a search_documents hit; get_document returns the whole document.",
        "restart": "Call get_document without cursor to start at the beginning.",
        "list_restart": "Call list_libraries without cursor for the first page.",
        "other_words": "Use fewer or different words: the library's own names for things, or an identifier.",
        "faster": "Search again with fewer, more specific words.",
        "lock_pin": "The bundle itself is intact: the lock file pins other content, so the server operator "
        "must update the pin (or install the pinned build). Other libraries still work.",
        "give_query": "Give query (words or a question, e.g. 'useEffect cleanup') or keywords (a list of terms).",
    },
    {},
)

SHELL = Words(
    "shell",
    {
        "names": "Run `docbundle info` for names and descriptions.",
        "versions": "Omit --version to use the default (latest) one; `docbundle info {libraryId}` lists the "
        "versions.",
        "operator": "Rebuild it (`docbundle-index build --library {libraryId}`) or reinstall it "
        "(`docbundle install ARCHIVE`); `docbundle verify` checks every bundle.",
        "library_ids": "Library ids are short: run `docbundle info` to see them.",
        "version_names": "Run `docbundle info LIBRARY` for the version names, or omit --version for the "
        "default.",
        "document_ids": None,
        "categories": "Categories are short: see `docbundle info`.",
        "statuses": "Run `docbundle info` to see each library's status and reason.",
        "valid_ids": "Run `docbundle info` to see them.",
        "broad": "Retry with --mode broad (any word may match instead of most of them).",
        "toc": None,
        "everywhere": None,
        "find_document": None,
        "chunk_ids": None,
        "restart": None,
        "list_restart": None,
        "other_words": "Use fewer or different words: the library's own names for things, or an identifier.",
        "faster": "Search again with fewer, more specific words.",
        "lock_pin": "The bundle itself is intact: if it is the one to serve, put its content hash in the lock "
        "file (`docbundle info {libraryId} --json` prints it as contentHash); else install the build the lock "
        "pins.",
        "give_query": 'Give QUERY: words or a question, e.g. `docbundle search LIBRARY "useEffect cleanup"`.',
    },
    {"libraryId": "LIBRARY", "maxTokens": "--max-tokens", "mode": "--mode"},
)


def plural(n: int, one: str, many: str) -> str:
    """``1 library``, ``2 libraries``, ``0 libraries``."""
    return f"{n} {one if n == 1 else many}"
