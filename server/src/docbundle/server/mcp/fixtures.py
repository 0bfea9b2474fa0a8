"""The MCP conformance suite's fixture tools, served only when ``DOCBUNDLE_CONFORMANCE_FIXTURES=1``.

Two of the suite's server scenarios that apply to any server with tools, ``tools-call-simple-text`` and
``tools-call-error``, call tools of the suite's own reference server by name (``test_simple_text``,
``test_error_handling``) and check the shape of the answer: text content, and an ``isError`` result
with a message. A server without those tools must answer an unknown tool with the protocol error
-32602 (the MCP specification's tools error handling, which docbundle follows), so those scenarios can
only pass against the fixtures. ``nox -s conformance`` sets the variable for the server it starts; a
normal ``docbundle serve`` never lists these tools.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations

CONFORMANCE_ENV = "DOCBUNDLE_CONFORMANCE_FIXTURES"


def test_simple_text() -> str:
    """Conformance fixture: returns a fixed text."""
    return "This is a simple text response for testing."


def test_error_handling() -> str:
    """Conformance fixture: always fails as a tool (an isError result with a message)."""
    raise ToolError("This tool intentionally returns an error for testing")


def conformance_tools() -> list[Tool]:
    """The fixture tools when ``DOCBUNDLE_CONFORMANCE_FIXTURES`` is ``1``, else none."""
    if os.environ.get(CONFORMANCE_ENV) != "1":
        return []
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    return [
        Tool.from_function(fn, description=fn.__doc__ or "", annotations=read_only)
        for fn in (test_simple_text, test_error_handling)
    ]
