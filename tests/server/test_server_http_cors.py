"""CORS for browser clients over real HTTP on 127.0.0.1 (issue 13 item 5).

A browser sends a preflight (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``) before
a ``POST`` with custom headers, then reads the answer only if it names its origin. These requests are
the ones a browser sends for an MCP client on a page of ``--allowed-origin`` (or of a loopback origin),
with the MCP headers and an API key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpkit
import pytest
from docbundle.server.keys import create_key
from serverkit import HttpServerProcess, initialize

APP = "https://app.example.com"
LOCAL_APP = "http://localhost:5173"
EVIL = "https://evil.example"
MCP_HEADERS = ["mcp-session-id", "mcp-protocol-version", "authorization", "x-api-key"]
INIT = initialize("browser")
CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "list_libraries", "arguments": {}},
}


@pytest.fixture(scope="module")
def server(
    bundles_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[HttpServerProcess, str]]:
    keys = tmp_path_factory.mktemp("cors-keys") / "keys.toml"
    key = create_key(keys, "browser")[1]
    with HttpServerProcess(bundles_root, "--keys", str(keys), "--allowed-origin", APP) as srv:
        yield srv, key
    assert srv.returncode == 0


def request(
    port: int, method: str, headers: dict[str, str], body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One request to /mcp; the status, the headers (lowercase names) and the body."""
    r = httpkit.request(method, port, content=body, headers=headers)
    return r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content


def preflight(port: int, origin: str) -> tuple[int, dict[str, str], bytes]:
    return request(
        port,
        "OPTIONS",
        {
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,mcp-protocol-version,x-api-key,authorization",
        },
    )


def post(
    port: int, origin: str | None, extra: dict[str, str], message: dict[str, object]
) -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **extra}
    if origin is not None:
        headers["Origin"] = origin
    return request(port, "POST", headers, json.dumps(message).encode())


def listed(value: str) -> set[str]:
    return {part.strip().lower() for part in value.split(",")}


@pytest.mark.parametrize("origin", [APP, LOCAL_APP])
def test_a_preflight_from_an_allowed_origin_allows_the_mcp_headers(
    server: tuple[HttpServerProcess, str], origin: str
) -> None:
    srv, _ = server
    status, headers, body = preflight(srv.port, origin)
    assert status == 204 and body == b"", (status, body[:200])
    assert headers["access-control-allow-origin"] == origin
    assert "post" in listed(headers["access-control-allow-methods"])
    assert set(MCP_HEADERS) | {"content-type"} <= listed(headers["access-control-allow-headers"])
    assert int(headers["access-control-max-age"]) > 0
    assert "access-control-allow-credentials" not in headers  # keys travel in headers, never cookies
    assert "origin" in listed(headers.get("vary", ""))


@pytest.mark.parametrize("origin", [APP, LOCAL_APP])
def test_answers_to_an_allowed_origin_name_it_and_expose_the_mcp_headers(
    server: tuple[HttpServerProcess, str], origin: str
) -> None:
    srv, key = server
    status, headers, body = post(srv.port, origin, {"X-API-Key": key}, INIT)
    assert status == 200, body[:300]
    assert headers["access-control-allow-origin"] == origin
    assert {"mcp-session-id", "mcp-protocol-version"} <= listed(headers["access-control-expose-headers"])
    version = {"MCP-Protocol-Version": "2025-11-25", "Authorization": f"Bearer {key}"}
    status, headers, body = post(srv.port, origin, version, CALL)
    assert status == 200 and not json.loads(body)["result"]["isError"], body[:300]
    assert headers["access-control-allow-origin"] == origin
    # A refusal is readable too, so the page can show why (here: no key).
    status, headers, body = post(srv.port, origin, {}, CALL)
    assert status == 401 and headers["access-control-allow-origin"] == origin
    assert "www-authenticate" in listed(headers["access-control-expose-headers"])
    assert json.loads(body)["error"]["message"].startswith("API key required")


def test_another_origin_gets_no_cors_headers(server: tuple[HttpServerProcess, str]) -> None:
    srv, key = server
    for status, headers, _ in (preflight(srv.port, EVIL), post(srv.port, EVIL, {"X-API-Key": key}, CALL)):
        assert status == 403
        assert not any(name.startswith("access-control-") for name in headers), headers
    # And a client that is no browser (no Origin) is served without them.
    status, headers, _ = post(srv.port, None, {"X-API-Key": key}, CALL)
    assert status == 200 and "access-control-allow-origin" not in headers
