"""The one door to the MCP SDK's private parts: everything docbundle needs that the SDK has no public
API for, in one place, so that an SDK release that moves one of them fails here, loudly, and in
``tests/server/test_server_sdk_door.py``, which names each one.

Everything else in docbundle uses the SDK's public API: ``MCPServer.list_tools`` (published schemas,
unknown tools), ``MCPServer.completion`` (``completion/complete``), ``MCPServer.add_tool``, the
resource and prompt decorators. What remains, and why there is no public way:

- ``MCPServer._lowlevel_server`` (``lowlevel``): the low-level ``Server`` behind an ``MCPServer``. It
  is needed to register request handlers the high-level class has no decorator for
  (``logging/setLevel``, ``server/discover``; ``add_request_handler``), to read the capabilities
  those handlers imply (``capabilities``: one answer for ``initialize`` and ``server/discover``), and
  to run the server over the stdio transport's own streams (``stdio.py``).
- ``ServerSession._connection`` (``connection_state``): the per-connection ``Connection`` whose public
  ``state`` dict holds the level a client set with ``logging/setLevel``. A request handler gets a
  per-request ``ServerSession``; the SDK exposes the connection only on a context it does not build
  yet (``mcp.server.context.Context.connection``).

``PRIVATE`` lists them; the test checks each still exists with the shape used here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.mcpserver import MCPServer
from mcp.types import ServerCapabilities
from pydantic import BaseModel

# (owner, private attribute): every private name of the SDK that docbundle touches.
PRIVATE: tuple[tuple[str, str], ...] = (
    ("mcp.server.mcpserver.MCPServer", "_lowlevel_server"),
    ("mcp.server.session.ServerSession", "_connection"),
)


def lowlevel(server: MCPServer[Any]) -> Server[Any]:
    """The low-level ``Server`` behind ``server`` (its request handlers, capabilities and run loop)."""
    low: Server[Any] = server._lowlevel_server
    return low


def add_request_handler(
    server: MCPServer[Any],
    method: str,
    params_type: type[BaseModel],
    handler: Callable[[ServerRequestContext[Any], Any], Awaitable[Any]],
) -> None:
    """Serve ``method`` with ``handler`` (which also makes the capability it implies advertised)."""
    lowlevel(server).add_request_handler(method, params_type, handler)


def capabilities(
    server: MCPServer[Any], options: NotificationOptions, protocol_version: str | None = None
) -> ServerCapabilities:
    """The capabilities the registered handlers and ``options`` imply, for ``protocol_version``."""
    return lowlevel(server).get_capabilities(options, protocol_version=protocol_version)


def connection_state(ctx: ServerRequestContext[Any]) -> dict[str, Any]:
    """The per-connection scratch state of the connection ``ctx``'s request came on.

    ``Connection.state`` "persists across requests on this connection" (the SDK's words); a test sets
    a log level on one request and checks what a later one sends.
    """
    state: dict[str, Any] = ctx.session._connection.state
    return state
