"""Tool arguments spelled once (issue 20 item 3) and next steps said per reader (item 5).

Every tool accepts every spelling of each of its parameters (``args.SPELLINGS``), the one conflict
rule holds for strings and numbers alike, and the advice an error or an empty search carries is data
that the MCP server and the ``docbundle`` command each put in their own words.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, get_args

import anyio
import pytest
from docbundle.server import errors
from docbundle.server.catalog import Catalog
from docbundle.server.cli import main
from docbundle.server.mcp.args import SPELLINGS, spellings
from docbundle.server.mcp.server import create_server
from docbundle.server.words import MODEL, SHELL, NextStep, Why
from mcp import Client

PACKAGE = Path(errors.__file__).resolve().parent

# One call per tool whose every argument changes the answer (maxTokens small enough to cut).
CALLS: dict[str, dict[str, Any]] = {
    "resolve_library": {"name": "demo", "limit": 1},
    "list_libraries": {"category": "payments"},
    "list_library_versions": {"libraryId": "demo"},
    "search_documents": {
        "query": "settings operators",
        "libraryId": "demo",
        "version": "2.x",
        "maxTokens": 600,
    },
    "get_document": {"libraryId": "demo", "id": "guides/handbook.md", "maxTokens": 600},
    "list_documents": {"libraryId": "demo", "maxTokens": 600},
    "get_chunk_with_context": {
        "libraryId": "demo",
        "documentId": "guides/handbook.md",
        "chunkId": 5,
        "windowSize": 2,
        "maxTokens": 600,
    },
}


async def _call(catalog: Catalog, tool: str, args: dict[str, Any]) -> tuple[bool, Any]:
    with anyio.fail_after(30):
        async with Client(create_server(catalog)) as client:
            r = await client.call_tool(tool, args)
    return r.is_error, r.structured_content if not r.is_error else r.content[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_every_tool_accepts_every_spelling_of_each_of_its_parameters(catalog: Catalog) -> None:
    async with Client(create_server(catalog)) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) == set(CALLS)
    checked = 0
    for tool, args in CALLS.items():
        params = list(listed[tool].input_schema["properties"])
        other = spellings(params)
        assert set(args) <= set(params)
        failed, want = await _call(catalog, tool, args)
        assert not failed, want
        for spelling, param in other.items():
            if param not in args:
                continue
            respelled = {spelling if k == param else k: v for k, v in args.items()}
            failed, got = await _call(catalog, tool, respelled)
            assert not failed and got == want, (tool, spelling, got)
            checked += 1
    # Each tool takes each of its parameters' spellings (list_documents and get_chunk_with_context too).
    assert checked >= sum(len(SPELLINGS[p]) for p in ("libraryId", "maxTokens")) * 4


@pytest.mark.anyio
async def test_one_rule_for_an_argument_given_twice(catalog: Catalog) -> None:
    base = {"query": "settings", "libraryId": "demo"}
    failed, text = await _call(catalog, "search_documents", {**base, "maxTokens": 2000, "max_tokens": 900})
    assert failed and "maxTokens was given twice with different values: '2000', '900'" in text
    # The default is no exception: a differing spelling is refused whatever the other value is.
    failed, text = await _call(catalog, "search_documents", {**base, "maxTokens": 5000, "max_tokens": 900})
    assert failed and "maxTokens was given twice" in text
    failed, text = await _call(catalog, "search_documents", {**base, "q": "other"})
    assert failed and "query was given twice with different values: 'other', 'settings'" in text
    # The same value twice, or a null or empty spelling beside a value, is one argument.
    same, a = await _call(catalog, "search_documents", {**base, "maxTokens": 900, "max_tokens": 900})
    one, b = await _call(catalog, "search_documents", {**base, "maxTokens": 900, "max_tokens": None})
    empty, c = await _call(catalog, "search_documents", {**base, "maxTokens": 900, "library": ""})
    assert not (same or one or empty) and a == b == c and a["maxTokens"] == 900
    # Missing under every spelling: the tool's own message, worded as the SDK words a tool's errors.
    failed, text = await _call(catalog, "get_chunk_with_context", {"library": "demo", "chunk_id": 1})
    assert failed and text == (
        "Error executing tool get_chunk_with_context: give documentId and chunkId "
        "(both come from a search_documents hit)"
    )


def test_a_spelling_that_would_stand_for_two_parameters_of_one_tool_is_refused() -> None:
    # Every real tool's spellings were built when the first test called it; a clash would fail there.
    for params in (["id", "documentId"], ["name", "libraryId"]):
        with pytest.raises(ValueError, match="would spell both"):
            spellings(params)


def test_both_readers_have_words_for_every_next_step() -> None:
    for why in get_args(Why):
        said = MODEL.step(NextStep(why, args={"libraryId": "demo"}))
        assert said, why  # a model gets every piece of advice
        shell = SHELL.step(NextStep(why, args={"libraryId": "demo"}))
        for tool in ("list_libraries", "list_library_versions", "search_documents", "list_documents"):
            assert shell is None or tool not in shell, (why, shell)


def test_the_command_says_the_next_step_from_its_data(
    capsys: pytest.CaptureFixture[str], bundles_root: Path
) -> None:
    code = main(["search", "demo", "x", "--version", "9.x", "--bundles", str(bundles_root)])
    err = capsys.readouterr().err
    # The library comes from the step's arguments: a rewritten model message could only say LIBRARY.
    assert code == 2 and "Omit --version to use the default (latest) one; `docbundle info demo` lists" in err
    code = main(["search", "demo", "kubernetes", "--bundles", str(bundles_root)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[-2:] == [
        "  - Retry with --mode broad (any word may match instead of most of them).",
        "  - Use fewer or different words: the library's own names for things, or an identifier.",
    ]
    exc = errors.UnknownVersionError("demo", "9.x", ["2.x"])
    assert str(exc).endswith("Omit version to use the default (latest) one, or call list_library_versions.")
    assert exc.steps == (NextStep("versions", "list_library_versions", {"libraryId": "demo"}),)


def test_no_module_rewrites_messages_with_regular_expressions() -> None:
    """Messages are data rendered per reader: no module rewrites one reader's text for another."""
    assert not (PACKAGE / "shellwords.py").exists()
    # The only substitutions left clean input (JSON bodies, HTML comments), never a message; control
    # characters of outside text are cleaned in docbundle.common.terminal, outside this package.
    allowed = {"jsonrpc.py", "comments.py"}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr in ("sub", "subn") and path.name not in allowed:
                raise AssertionError(f"{path.relative_to(PACKAGE)}:{node.lineno} substitutes text")
