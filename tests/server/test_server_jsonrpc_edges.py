"""JSON-RPC edges on both transports (issue 13 item 3): a stdio subprocess and real HTTP on 127.0.0.1.

Each malformed message gets a JSON-RPC error of the right code with one short line, never silence
and never a validation dump: not JSON -32700; a batch, no ``"jsonrpc"``, an ``id`` that is null or a
fraction (MCP forbids null ids; neither is a notification) -32600; an unknown tool -32602 (a protocol
error, not a tool result); a wrong ``Content-Type`` on HTTP 415 with a JSON-RPC body.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpkit
import pytest
from httpkit import MCP_HEADERS
from serverkit import HttpServerProcess
from test_server_stdio import INIT, finish, receive, send

SHORT = 120  # characters: one short line, not a dump

# (what is sent, the error code, the id the answer carries)
EDGES: list[tuple[str, bytes, int, Any]] = [
    ("not json", b"this is not json", -32700, None),
    ("null id", b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600, None),
    ("fraction id", b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', -32600, None),
    ("boolean id", b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', -32600, None),
    ("batch", b'[{"jsonrpc": "2.0", "id": 3, "method": "ping"}]', -32600, None),
    ("no jsonrpc", b'{"id": 4, "method": "ping"}', -32600, 4),
    ("wrong jsonrpc", b'{"jsonrpc": "1.0", "id": 5, "method": "ping"}', -32600, 5),
    ("array params", b'{"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": [1]}', -32600, 6),
    ("a string", b'"ping"', -32600, None),
]
UNKNOWN_TOOL = {
    "jsonrpc": "2.0",
    "id": 9,
    "method": "tools/call",
    "params": {"name": "no_such_tool", "arguments": {}},
}


def check(name: str, answer: dict[str, Any], code: int, rid: Any, short: int = SHORT) -> None:
    assert answer.get("jsonrpc") == "2.0" and "result" not in answer, (name, answer)
    assert answer["error"]["code"] == code, (name, answer)
    assert answer["id"] == rid, (name, answer)
    message = answer["error"]["message"]
    assert len(message) < short and "\n" not in message, (name, message)


def test_stdio_answers_every_edge_with_one_short_error(golden_root: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "docbundle.server", "serve", "--bundles", str(golden_root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        send(proc.stdin, INIT)
        assert receive(proc.stdout)["id"] == 1
        send(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        for name, line, code, rid in EDGES:
            send(proc.stdin, line)
            check(name, receive(proc.stdout), code, rid)
        send(proc.stdin, UNKNOWN_TOOL)
        answer = receive(proc.stdout)
        check("unknown tool", answer, -32602, 9, short=300)  # it lists the tools
        assert "no_such_tool" in answer["error"]["message"]
        # A notification (no id at all) still gets no answer: the next answer is the ping's.
        send(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})
        send(proc.stdin, {"jsonrpc": "2.0", "id": 10, "method": "ping"})
        assert receive(proc.stdout) == {"jsonrpc": "2.0", "id": 10, "result": {}}
    finally:
        proc.stdin.close()
        code, _ = finish(proc)
    assert code == 0


@pytest.fixture(scope="module")
def http_server(bundles_root: Path) -> Any:
    with HttpServerProcess(bundles_root, "--no-auth") as server:
        yield server
    assert server.returncode == 0


@pytest.mark.parametrize(("name", "body", "code", "rid"), EDGES, ids=[e[0] for e in EDGES])
def test_http_answers_every_edge_with_one_short_error(
    http_server: HttpServerProcess, name: str, body: bytes, code: int, rid: Any
) -> None:
    r = httpkit.request("POST", http_server.url, content=body, headers=MCP_HEADERS, timeout=30)
    assert r.status_code == 400, (name, r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json")
    check(name, r.json(), code, rid)


def test_http_unknown_tool_is_a_protocol_error(http_server: HttpServerProcess) -> None:
    r = httpkit.request(
        "POST", http_server.url, content=json.dumps(UNKNOWN_TOOL), headers=MCP_HEADERS, timeout=30
    )
    assert r.status_code == 200, r.text[:300]
    check("unknown tool", r.json(), -32602, 9, short=300)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_http_wrong_content_type_gets_415_with_a_json_rpc_body(
    http_server: HttpServerProcess, content_type: str | None
) -> None:
    headers = {"Accept": MCP_HEADERS["Accept"]}
    if content_type is not None:
        headers["Content-Type"] = content_type
    r = httpkit.request(
        "POST",
        http_server.url,
        content=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
        headers=headers,
        timeout=30,
    )
    assert r.status_code == 415, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json")
    check("content type", r.json(), -32600, None)
    # With a charset parameter it is still JSON, and served.
    ok = httpkit.request(
        "POST",
        http_server.url,
        content=b'{"jsonrpc": "2.0", "id": 2, "method": "ping"}',
        headers={**MCP_HEADERS, "Content-Type": "application/json; charset=utf-8"},
        timeout=30,
    )
    assert ok.status_code == 200 and ok.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}
