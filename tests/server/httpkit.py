"""The one HTTP client of the server tests: httpx2 (issue 33, item 9).

``client`` is an async client: in process to an ``HttpApp`` (through ``httpx2.ASGITransport``, as a
chosen client address, no socket; see ``asgikit.serving``), or over sockets to a running server (a
``serverkit.HttpServerProcess``). ``request`` is one synchronous request on a new connection (so the
kernel spreads several over a server's workers); ``session`` keeps one connection alive for several.
``MCP_HEADERS`` are the headers a streamable-HTTP MCP request carries. (The MCP SDK's own client, which
some tests drive over HTTP, is the client under test there, not a test client.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import httpx2
from docbundle.server.http.app import MCP_PATH, HttpApp

# The headers of an MCP request over streamable HTTP: a JSON-RPC body, a JSON or event-stream answer.
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
# The base URL of an in-process app: a name only, no socket is opened.
APP_BASE_URL = "http://127.0.0.1:8000"
# Seconds a request may take before the test fails: a bound on a hang, far above any answer's time.
REQUEST_TIMEOUT = 30.0


def url(port: int, path: str = MCP_PATH) -> str:
    """The URL of ``path`` on a server listening on 127.0.0.1:``port``."""
    return f"http://127.0.0.1:{port}{path}"


def client(
    app: HttpApp | None = None,
    address: str = "127.0.0.1",
    *,
    headers: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> httpx2.AsyncClient:
    """An async HTTP client: to ``app`` in process, its requests coming from ``address`` (as uvicorn
    reports the peer; behind a ``--trusted-proxy`` that is the forwarded address), or over sockets to
    the URLs the test asks for (``app`` None). ``kwargs`` go to ``httpx2.AsyncClient`` (timeout, limits)."""
    if app is None:
        return httpx2.AsyncClient(headers=headers, **{"timeout": REQUEST_TIMEOUT, **kwargs})
    transport = httpx2.ASGITransport(app=app, client=(address, 50_000))
    return httpx2.AsyncClient(transport=transport, base_url=APP_BASE_URL, headers=headers, **kwargs)


def request(
    method: str,
    target: str | int,
    *,
    path: str = MCP_PATH,
    content: bytes | str | Iterator[bytes] | None = None,
    json: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = REQUEST_TIMEOUT,
) -> httpx2.Response:
    """One request on a new connection to ``target``: a URL, or the port of a server on 127.0.0.1 (then
    ``path`` on it)."""
    where = target if isinstance(target, str) else url(target, path)
    return httpx2.request(method, where, content=content, json=json, headers=headers, timeout=timeout)


def session(timeout: float = REQUEST_TIMEOUT) -> httpx2.Client:
    """A synchronous client that keeps its connection alive across requests (use it as a context
    manager)."""
    return httpx2.Client(timeout=timeout)
