"""The MCP surface (issue 13 items 2, 6, 7, 8 and the resolve tool): tight tool schemas within the
tools/list budget, logging, completions, one set of capabilities in both protocol eras, the libraries
as resources, and resolve_library.

Protocol behaviour runs in memory through the SDK's own client; what depends on the transport (the
size of tools/list on the wire, capabilities of initialize and server/discover, log notifications on
a call's stream) runs over real streamable HTTP on 127.0.0.1 too.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import httpkit
import jsonschema
import pytest
from docbundle.server.catalog import Catalog
from docbundle.server.mcp.schemas import TOOLS_LIST_BUDGET
from docbundle.server.mcp.server import create_server
from httpkit import MCP_HEADERS
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import LoggingMessageNotificationParams, PromptReference, ResourceTemplateReference
from serverkit import HttpServerProcess

pytestmark = pytest.mark.anyio

REQUIRED = {
    "resolve_library": ["name"],
    "list_libraries": [],
    "list_library_versions": ["libraryId"],
    "search_documents": ["query"],
    "get_document": ["libraryId", "id"],
    "list_documents": ["libraryId"],
    "get_chunk_with_context": ["libraryId", "documentId", "chunkId"],
}
# Hand-checked: the published arguments of search_documents, exactly.
SEARCH_INPUT = {
    "type": "object",
    "required": ["query"],
    "properties": {
        "query": {
            "type": "string",
            "description": 'Words, an identifier (useEffect, sap.m.Table) or a question; "quote phrases"',
        },
        "keywords": {"type": "array", "items": {"type": "string"}, "description": "More terms to match"},
        "libraryId": {"type": "string", "description": "From resolve_library; omit to search every library"},
        "version": {"type": "string", "description": "From list_library_versions; omit for the default"},
        "mode": {
            "type": "string",
            "enum": ["hybrid", "semantic", "fulltext", "balanced", "broad", "precise"],
            "description": "hybrid (words + meaning; default with vectors), semantic, "
            "balanced = fulltext (default without), broad, precise",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": 20,
            "default": 5,
            "description": "Hits to return",
        },
        "maxTokens": {
            "type": "integer",
            "minimum": 500,
            "maximum": 50000,
            "default": 5000,
            "description": "Answer budget in tokens",
        },
    },
}


@asynccontextmanager
async def connect(
    catalog: Catalog, mode: Literal["auto", "legacy"] = "auto", **options: Any
) -> AsyncIterator[Client]:
    """An in-memory client on a server over ``catalog``; the whole test is time-boxed."""
    with anyio.fail_after(30):
        async with Client(create_server(catalog), mode=mode, cache=None, **options) as client:
            yield client


@pytest.fixture(scope="module")
def http_server(bundles_root: Path) -> Iterator[HttpServerProcess]:
    with HttpServerProcess(bundles_root, "--no-auth") as server:
        yield server
    assert server.returncode == 0


def _schema_keywords(node: Any, found: list[str], under_properties: bool = False) -> list[str]:
    """Every schema keyword used (property names excluded), with anyOf branches flattened."""
    if isinstance(node, dict):
        for key, value in node.items():
            if not under_properties:
                found.append(key)
                if key == "anyOf":
                    found += [json.dumps(b, sort_keys=True) for b in value]
            _schema_keywords(value, found, under_properties=key == "properties" and not under_properties)
    elif isinstance(node, list):
        for value in node:
            _schema_keywords(value, found)
    return found


async def test_tool_schemas_are_tight(catalog: Catalog) -> None:
    async with connect(catalog) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert {name: t.input_schema.get("required") for name, t in tools.items()} == REQUIRED
    assert tools["search_documents"].input_schema == SEARCH_INPUT
    for name, t in tools.items():
        for schema in (t.input_schema, t.output_schema):
            used = _schema_keywords(schema, [])
            assert "title" not in used, (name, schema)  # no generated "Libraryid" titles
            assert '{"type": "null"}' not in used, (name, schema)  # no anyOf [X, null]
        assert t.output_schema is not None and t.output_schema["type"] == "object"
        jsonschema.Draft202012Validator.check_schema(t.output_schema)
        for prop in t.input_schema["properties"].values():
            assert prop.get("description"), (name, prop)  # every argument says what to pass
            assert prop.get("default", 0) is not None, (name, prop)
        assert t.annotations is not None and t.annotations.read_only_hint and t.annotations.idempotent_hint


async def test_output_schemas_validate_every_result(catalog: Catalog) -> None:
    """Each tool's structured result validates against the schema it publishes (and the server's model)."""
    calls = [
        ("resolve_library", {"name": "demo sdk"}),
        ("resolve_library", {"name": "nothing like it"}),
        ("list_libraries", {}),
        ("list_library_versions", {"libraryId": "demo"}),
        ("search_documents", {"query": "useEffect cleanup", "libraryId": "demo"}),
        ("search_documents", {"query": "webhooks"}),  # every library: searched, skipped, hits of several
        ("get_document", {"libraryId": "demo", "id": "guides/handbook.md", "maxTokens": 500}),
        ("list_documents", {"libraryId": "demo"}),
        ("list_documents", {"libraryId": "demo", "version": "1.x"}),
        ("get_chunk_with_context", {"libraryId": "demo", "documentId": "guides/hooks.md", "chunkId": 1}),
    ]
    async with connect(catalog) as c:
        schemas = {t.name: t.output_schema for t in (await c.list_tools()).tools}
        for name, args in calls:
            result = await c.call_tool(name, args)
            assert not result.is_error, (name, result.content)
            jsonschema.validate(result.structured_content, schemas[name] or {})
        # A null where the schema says [T, "null"] passes, a wrong type does not.
        page = (
            await c.call_tool("get_document", {"libraryId": "demo", "id": "changelog.md"})
        ).structured_content
        assert page is not None and page["nextCursor"] is None
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**page, "nextCursor": 3}, schemas["get_document"] or {})


async def test_documented_aliases_still_work_unpublished(catalog: Catalog) -> None:
    async with connect(catalog) as c:
        by_path = await c.call_tool("get_document", {"libraryId": "demo", "path": "guides/install.md"})
        assert (
            not by_path.is_error and (by_path.structured_content or {})["documentId"] == "guides/install.md"
        )
        by_keywords = await c.call_tool("search_documents", {"keywords": ["useEffect"], "libraryId": "demo"})
        assert not by_keywords.is_error and (by_keywords.structured_content or {})["hits"]
        resolved = await c.call_tool("resolve_library", {"query": "demo"})
        assert [m["id"] for m in (resolved.structured_content or {})["matches"]][:1] == ["demo"]


def test_tools_list_fits_its_budget_on_the_wire(http_server: HttpServerProcess) -> None:
    """The documented size budget of a tools/list answer (docs/server.md), as bytes over real HTTP."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    r = httpkit.request("POST", http_server.url, json=body, headers=MCP_HEADERS, timeout=30)
    assert r.status_code == 200, r.text[:300]
    assert len(r.json()["result"]["tools"]) == len(REQUIRED)
    assert len(r.content) <= TOOLS_LIST_BUDGET, len(r.content)


async def test_resolve_library(catalog: Catalog) -> None:
    async def ids(c: Client, name: str) -> list[str]:
        found = (await c.call_tool("resolve_library", {"name": name})).structured_content or {}
        return [m["id"] for m in found["matches"]]

    async with connect(catalog) as c:
        assert (await ids(c, "Demo SDK"))[:1] == ["demo"]
        assert (await ids(c, "dmeo"))[:1] == ["demo"]  # a typo
        assert (await ids(c, "de mo"))[:1] == ["demo"]  # the words written together
        assert (await ids(c, "payments docs"))[:1] == ["demo"]  # its category
        assert (await ids(c, "docs in Korean"))[:1] == ["cjk"]  # the language of its pages
        assert (await ids(c, "日本語"))[:1] == ["cjk"]
        result = await c.call_tool("resolve_library", {"name": "demo", "limit": 1})
        found = result.structured_content or {}
        (top,) = found["matches"]
        assert (top["id"], top["versions"], top["defaultVersion"]) == ("demo", ["2.x", "1.x"], "2.x")
        assert top["score"] == 1.0 and "'demo'" in top["why"] and "\n" not in top["why"]
        assert "**demo**" in result.content[0].text  # type: ignore[union-attr]
        korean = (await c.call_tool("resolve_library", {"name": "korean"})).structured_content or {}
        assert "ko" in korean["matches"][0]["languages"] and "written in ko" in korean["matches"][0]["why"]
        none = (
            await c.call_tool("resolve_library", {"name": "kubernetes operators"})
        ).structured_content or {}
        assert none["matches"] == [] and "cjk, demo, golden" in none["message"]
        missing = await c.call_tool("resolve_library", {})
        assert missing.is_error and "give name" in missing.content[0].text  # type: ignore[union-attr]


async def test_completions(catalog: Catalog) -> None:
    docs = ResourceTemplateReference(uri="docs://{libraryId}/{version}/{+path}")
    library = ResourceTemplateReference(uri="library://{libraryId}")
    explain = PromptReference(name="explain-with-docs")

    async with connect(catalog) as c:

        async def values(ref: Any, name: str, value: str, given: dict[str, str] | None = None) -> list[str]:
            return (await c.complete(ref, {"name": name, "value": value}, given)).completion.values

        assert await values(library, "libraryId", "") == ["cjk", "demo", "golden"]
        assert await values(library, "libraryId", "de") == ["demo", "golden"]  # prefix, then inside
        assert await values(docs, "libraryId", "dmeo") == ["demo"]  # close match
        assert await values(explain, "libraryId", "GOL") == ["golden"]
        assert await values(docs, "version", "", {"libraryId": "demo"}) == ["2.x", "1.x", "latest"]
        assert await values(docs, "version", "1", {"libraryId": "demo"}) == ["1.x"]
        paths = await values(docs, "path", "guides/", {"libraryId": "demo"})
        assert paths == ["guides/install.md", "guides/hooks.md", "guides/handbook.md"]
        assert await values(docs, "path", "install", {"libraryId": "demo", "version": "1.x"}) == [
            "guides/install.md"
        ]
        assert "reference/missing.md" not in await values(
            docs, "path", "", {"libraryId": "demo"}
        )  # not indexed
        for path in paths:  # a completed id is one get_document takes
            page = await c.call_tool("get_document", {"libraryId": "demo", "id": path, "maxTokens": 500})
            assert not page.is_error
        assert await values(explain, "topic", "hoo", {"libraryId": "demo"}) == ["Hooks", "Webhooks"]
        assert "数据库连接" in await values(PromptReference(name="search-docs"), "query", "数据")
        # What this server does not know completes to nothing (not an error): clients probe.
        assert await values(PromptReference(name="no-such-prompt"), "arg1", "x") == []
        assert await values(docs, "path", "x", {"libraryId": "nope"}) == []
        assert await values(docs, "libraryId", "x" * 5000) == []
        every = (await c.complete(docs, {"name": "path", "value": ""}, {"libraryId": "demo"})).completion
        assert every.total == len(every.values) == 16 and every.has_more is False


def _log_collector() -> tuple[list[LoggingMessageNotificationParams], Any]:
    got: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        got.append(params)

    return got, on_log


async def _set_level(c: Client, level: Any) -> Any:
    with warnings.catch_warnings():  # the SDK marks logging deprecated for 2026-07-28; 2025-11-25 has it
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return await c.set_logging_level(level)


async def _check_log_levels(c: Client, got: list[LoggingMessageNotificationParams]) -> None:
    await c.call_tool("get_document", {"libraryId": "demo", "id": "no/such/page.md"})
    assert got == []  # nothing before the client asks, not even errors
    assert (await _set_level(c, "debug")).model_dump(exclude_none=True) == {}
    await c.call_tool("search_documents", {"query": "useEffect cleanup", "libraryId": "demo"})
    assert [m.level for m in got] == ["debug", "info"]
    assert "useeffect" in str(got[0].data).lower() and "search_documents answered" in str(got[1].data)
    got.clear()
    await _set_level(c, "error")
    await c.call_tool("search_documents", {"query": "useEffect", "libraryId": "demo"})
    assert got == []
    await c.call_tool("get_document", {"libraryId": "demo", "id": "no/such/page.md"})
    assert [m.level for m in got] == ["error"] and "no/such/page.md" in str(got[0].data)
    assert got[0].logger == "docbundle"


async def test_logging_set_level_filters_notifications(catalog: Catalog) -> None:
    got, on_log = _log_collector()
    async with connect(catalog, mode="legacy", logging_callback=on_log) as c:
        await _check_log_levels(c, got)


async def test_logging_over_stdio(bundles_root: Path) -> None:
    """The notifications reach a client of ``docbundle serve`` (stdio) at the level it set."""
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "docbundle.server", "serve", "--bundles", str(bundles_root)]
    )
    got, on_log = _log_collector()
    with anyio.fail_after(60):
        async with Client(server, mode="legacy", logging_callback=on_log, cache=None) as c:
            await _check_log_levels(c, got)


async def test_logging_in_the_2026_era_is_a_per_request_opt_in(catalog: Catalog) -> None:
    got, on_log = _log_collector()
    async with connect(catalog, logging_callback=on_log) as c:
        await c.call_tool("search_documents", {"query": "useEffect", "libraryId": "demo"})
        assert got == []  # no opt-in, nothing sent
    async with connect(catalog, logging_callback=on_log, log_level="info") as c:
        await c.call_tool("search_documents", {"query": "useEffect", "libraryId": "demo"})
        assert [m.level for m in got] == ["info"]


def _capabilities(url: str, mode: Literal["auto", "legacy"]) -> tuple[str, dict[str, Any]]:
    async def main() -> tuple[str, dict[str, Any]]:
        with anyio.fail_after(30):
            async with Client(url, mode=mode, cache=None) as c:
                caps = c.server_capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
                return c.protocol_version, caps

    return anyio.run(main)


def test_capabilities_are_the_same_in_initialize_and_discover(http_server: HttpServerProcess) -> None:
    legacy_version, legacy = _capabilities(http_server.url, "legacy")  # initialize
    modern_version, modern = _capabilities(http_server.url, "auto")  # server/discover
    assert (legacy_version, modern_version) == ("2025-11-25", "2026-07-28")
    assert legacy == modern
    assert legacy == {
        "completions": {},
        "logging": {},
        "prompts": {"listChanged": False},
        "resources": {"listChanged": False, "subscribe": False},
        "tools": {"listChanged": False},
    }


async def test_resources_list_names_every_library(catalog: Catalog) -> None:
    async with connect(catalog) as c:
        listed = (await c.list_resources()).resources
        assert [(r.uri, r.name, r.mime_type) for r in listed] == [
            ("library://cjk", "cjk", "application/json"),
            ("library://demo", "demo", "application/json"),
            ("library://golden", "golden", "application/json"),
        ]
        assert listed[1].title == "Demo SDK" and "demo payment SDK" in (listed[1].description or "")
        for r in listed:
            (content,) = (await c.read_resource(r.uri)).contents
            assert json.loads(content.text)["library"]["id"] == r.name  # type: ignore[union-attr]
