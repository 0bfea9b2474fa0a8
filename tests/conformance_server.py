"""``docbundle serve`` with the MCP conformance suite's two fixture tools: what ``nox -s conformance``
starts. Not part of any distribution, so nothing in the shipped server can turn the fixtures on.

Two of the suite's server scenarios that apply to any server with tools, ``tools-call-simple-text`` and
``tools-call-error``, call tools of the suite's own reference server by name (``test_simple_text``,
``test_error_handling``) and check the shape of the answer: text content, and an ``isError`` result
with a message. docbundle answers an unknown tool with the protocol error -32602 (the MCP
specification's tools error handling), so those scenarios can only pass against the fixtures.

Run as ``python tests/conformance_server.py serve ARGS...``: the production CLI, whose server gets the
two tools added (``with_fixtures``) after ``create_server`` built it.
"""

from __future__ import annotations

import sys
from typing import Any

from docbundle.server import cli
from docbundle.server.catalog import Catalog
from docbundle.server.mcp import server as mcp_server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

FIXTURE_TOOLS = ("test_simple_text", "test_error_handling")


def test_simple_text() -> str:
    """Conformance fixture: returns a fixed text."""
    return "This is a simple text response for testing."


def test_error_handling() -> str:
    """Conformance fixture: always fails as a tool (an isError result with a message)."""
    raise ToolError("This tool intentionally returns an error for testing")


# Not tests, though named like them (the suite chose the names): pytest must not collect them.
test_simple_text.__test__ = False  # type: ignore[attr-defined]
test_error_handling.__test__ = False  # type: ignore[attr-defined]


def with_fixtures(server: MCPServer[Any]) -> MCPServer[Any]:
    """``server`` with the two fixture tools added (read-only, like docbundle's own)."""
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    for fn in (test_simple_text, test_error_handling):
        server.add_tool(fn, description=fn.__doc__ or "", annotations=read_only)
    return server


_production_create_server = mcp_server.create_server


def create_fixture_server(catalog: Catalog) -> mcp_server.DocbundleMCP:
    """The production server over ``catalog``, plus the fixture tools."""
    server = _production_create_server(catalog)
    with_fixtures(server)
    return server


def main(argv: list[str]) -> int:
    """The ``docbundle`` CLI, serving the fixture server in place of the production one."""
    # The CLI imports create_server from its module when it serves: swapped there, in this process only.
    mcp_server.create_server = create_fixture_server
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
