"""The conformance suite's fixture tools live outside the product (issue 19).

``nox -s conformance`` runs the suite's ``tools-call-simple-text`` and ``tools-call-error`` scenarios,
which call ``test_simple_text`` and ``test_error_handling`` by name. The shipped server has no way to
serve them: it never lists them, even with the variable that once turned them on, and answers them as
unknown tools (-32602). ``tests/conformance_server.py``, the entry point the nox session starts, serves
the production server plus the two tools, and they answer as the suite expects: checked in memory with
the SDK's own client, and over real streamable HTTP through that entry point.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpkit
import pytest
from conformance_server import FIXTURE_TOOLS, create_fixture_server
from docbundle.server.catalog import Catalog
from docbundle.server.mcp.server import create_server
from httpkit import MCP_HEADERS
from mcp import Client
from mcp.shared.exceptions import MCPError
from serverkit import HttpServerProcess

pytestmark = pytest.mark.anyio
FIXTURES = set(FIXTURE_TOOLS)
ENTRY = Path(__file__).resolve().parents[1] / "conformance_server.py"
PACKAGE = Path(__file__).resolve().parents[2] / "server" / "src" / "docbundle"


async def test_a_normal_server_has_no_fixture_tools(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCBUNDLE_CONFORMANCE_FIXTURES", "1")  # the switch of old: it must do nothing
    async with Client(create_server(catalog)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert not names & FIXTURES and len(names) == 7
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("test_simple_text", {})
        assert unknown.value.error.code == -32602


def test_the_shipped_package_holds_no_fixture() -> None:
    """No module of the distribution names the fixture tools or a switch for them."""
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not any(name in text for name in (*FIXTURE_TOOLS, "CONFORMANCE_FIXTURES")), path


async def test_the_fixture_tools_answer_as_the_suite_expects(catalog: Catalog) -> None:
    async with Client(create_fixture_server(catalog)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names >= FIXTURES and len(names) == 9
        text = await client.call_tool("test_simple_text", {})
        assert not text.is_error and text.content[0].text  # type: ignore[union-attr]
        error = await client.call_tool("test_error_handling", {})
        assert error.is_error and "intentionally" in error.content[0].text  # type: ignore[union-attr]


def test_the_conformance_entry_point_serves_them_over_http(bundles_root: Path) -> None:
    server = HttpServerProcess(bundles_root, "--no-auth")
    assert server.cmd[1:4] == ["-m", "docbundle.server", "serve"]
    server.cmd = [sys.executable, str(ENTRY), *server.cmd[3:]]  # the same CLI, through the entry point
    with server:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        listed = httpkit.request(
            "POST", server.url, content=json.dumps(body), headers=MCP_HEADERS, timeout=30
        ).json()
        assert {t["name"] for t in listed["result"]["tools"]} >= FIXTURES
        params = {"name": "test_simple_text", "arguments": {}}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
        answer = httpkit.request(
            "POST", server.url, content=json.dumps(call), headers=MCP_HEADERS, timeout=30
        ).json()
        assert answer["result"]["content"][0]["text"].startswith("This is a simple text")
    assert server.returncode == 0
