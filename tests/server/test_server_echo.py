"""No reply quotes back more than 80 characters of anything a client sent (issue 19, defect 6).

One 900 KB value goes into every string position a client controls: the JSON-RPC method, the request
id, a tool name, a prompt name, a resource URI, tool and prompt argument names and values,
completion references and values, list cursors, the progress token (``_meta.progressToken``), the
log level of ``logging/setLevel``, and the protocol version and client name of ``initialize``. Each
request goes to ``docbundle serve`` over stdio (a subprocess) and over real streamable HTTP (a
server on 127.0.0.1), and each whole reply (every line the server writes for it, notifications
included) must be small and hold no run of more than 80 characters of the value. The SDK fills in
``error.data`` itself (the whole URI of a resource it cannot read, the whole name of an unknown
method), so the bound has to hold for what the SDK writes, not only for docbundle's own messages.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpkit
import pytest
from httpkit import MCP_HEADERS
from serverkit import HttpServerProcess, init_params

# A value with no run of 81 characters in common with anything but itself: period 37, so checking the
# 37 distinct 81-character windows finds any run of 81 of it, wherever it starts.
_UNIT = "abcdefghijklmnopqrstuvwxyz0123456789_"
BIG = (_UNIT * (900_000 // len(_UNIT) + 1))[:900_000]
QUOTE_LIMIT = 80
REPLY_LIMIT = 20_000  # bytes: tools/list is the largest honest answer (about 12 KB)
WAIT = 60  # seconds any one answer may take (a 900 KB line is read, parsed and refused)
INIT_PARAMS = init_params("echo-test")


def quotes_big(text: str) -> bool:
    """Whether ``text`` holds a run of more than ``QUOTE_LIMIT`` characters of ``BIG``."""
    return any(BIG[i : i + QUOTE_LIMIT + 1] in text for i in range(len(_UNIT)))


def call(name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return {"method": "tools/call", "params": params}


def complete(
    ref: dict[str, Any], name: str, value: str, given: dict[str, str] | None = None
) -> dict[str, Any]:
    params: dict[str, Any] = {"ref": ref, "argument": {"name": name, "value": value}}
    if given is not None:
        params["context"] = {"arguments": given}
    return {"method": "completion/complete", "params": params}


DOCS_REF = {"type": "ref/resource", "uri": "docs://{libraryId}/{version}/{+path}"}
PROMPT_REF = {"type": "ref/prompt", "name": "search-docs"}

# (position, request without "jsonrpc" and "id"); every one carries BIG somewhere a client may put it.
ATTACKS: list[tuple[str, dict[str, Any]]] = [
    ("method", {"method": BIG, "params": {}}),
    ("method of a notification-shaped name", {"method": "notifications/" + BIG}),
    ("tool name", call(BIG, {})),
    ("prompt name", {"method": "prompts/get", "params": {"name": BIG, "arguments": {}}}),
    ("resource URI", {"method": "resources/read", "params": {"uri": BIG}}),
    ("docs:// URI", {"method": "resources/read", "params": {"uri": "docs://demo/2.x/" + BIG}}),
    ("library:// URI", {"method": "resources/read", "params": {"uri": "library://" + BIG}}),
    ("tool argument name", call("search_documents", {BIG: "x", "query": "hooks"})),
    ("tool argument value: query", call("search_documents", {"query": BIG})),
    ("tool argument value: keywords", call("search_documents", {"query": "a", "keywords": [BIG]})),
    ("tool argument value: keywords string", call("search_documents", {"query": "a", "keywords": BIG})),
    ("tool argument value: libraryId", call("search_documents", {"query": "a", "libraryId": BIG})),
    ("tool argument value: library alias", call("list_documents", {"library": BIG})),
    ("tool argument value: version", call("search_documents", {"query": "a", "version": BIG})),
    ("tool argument value: mode", call("search_documents", {"query": "a", "mode": BIG})),
    ("tool argument value: limit", call("search_documents", {"query": "a", "limit": BIG})),
    ("tool argument value: name", call("resolve_library", {"name": BIG})),
    ("tool argument value: category", call("list_libraries", {"category": BIG})),
    ("tool argument value: document id", call("get_document", {"libraryId": "demo", "id": BIG})),
    ("tool argument value: cursor", call("get_document", {"libraryId": "demo", "id": "x", "cursor": BIG})),
    ("tool argument value: section", call("list_documents", {"libraryId": "demo", "section": BIG})),
    (
        "tool argument value: documentId",
        call("get_chunk_with_context", {"libraryId": "demo", "documentId": BIG, "chunkId": 0}),
    ),
    ("tool arguments not an object", {"method": "tools/call", "params": {"name": "x", "arguments": BIG}}),
    (
        "prompt argument name",
        {"method": "prompts/get", "params": {"name": "search-docs", "arguments": {BIG: "x"}}},
    ),
    (
        "prompt argument value",
        {"method": "prompts/get", "params": {"name": "search-docs", "arguments": {"query": BIG}}},
    ),
    (
        "prompt argument value: libraryId",
        {
            "method": "prompts/get",
            "params": {"name": "explain-with-docs", "arguments": {"topic": "a", "libraryId": BIG}},
        },
    ),
    ("completion prompt name", complete({"type": "ref/prompt", "name": BIG}, "query", "a")),
    ("completion template URI", complete({"type": "ref/resource", "uri": BIG}, "libraryId", "a")),
    ("completion argument name", complete(PROMPT_REF, BIG, "a")),
    ("completion argument value", complete(DOCS_REF, "libraryId", BIG)),
    ("completion context", complete(DOCS_REF, "path", "g", {"libraryId": BIG})),
    ("tools/list cursor", {"method": "tools/list", "params": {"cursor": BIG}}),
    ("resources/list cursor", {"method": "resources/list", "params": {"cursor": BIG}}),
    ("resources/templates/list cursor", {"method": "resources/templates/list", "params": {"cursor": BIG}}),
    ("prompts/list cursor", {"method": "prompts/list", "params": {"cursor": BIG}}),
    ("progress token", call("list_libraries", {}, meta={"progressToken": BIG})),
    (
        "progress token of a refused call",
        call("search_documents", {"query": BIG}, meta={"progressToken": BIG}),
    ),
    ("log level", {"method": "logging/setLevel", "params": {"level": BIG}}),
    ("ping params", {"method": "ping", "params": {"_meta": {BIG: BIG}}}),
    (
        "modern-era protocol version",
        {
            "method": "tools/list",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": BIG}},
        },
    ),
    (
        "initialize protocol version",
        {"method": "initialize", "params": {**INIT_PARAMS, "protocolVersion": BIG}},
    ),
    (
        "initialize client name",
        {"method": "initialize", "params": {**INIT_PARAMS, "clientInfo": {"name": BIG, "version": BIG}}},
    ),
]
IDS = [a[0] for a in ATTACKS]


def request(index: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1000 + index, **body}


def check_reply(position: str, raw: bytes) -> None:
    assert len(raw) < REPLY_LIMIT, (position, len(raw), raw[:300])
    text = raw.decode("utf-8")
    assert not quotes_big(text), (position, text[:300])


# -- stdio ---------------------------------------------------------------------------------------------


class StdioServer:
    """``docbundle serve`` over stdio; stdout read line by line in a thread, every read bounded."""

    def __init__(self, bundles: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "docbundle.server", "serve", "--bundles", str(bundles)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, message: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def answer(self, request_id: Any) -> list[bytes]:
        """Every line up to and including the answer to ``request_id`` (or to an unreadable request)."""
        got: list[bytes] = []
        while True:
            line = self.lines.get(timeout=WAIT)
            assert line, "the server closed stdout"
            got.append(line)
            message = json.loads(line)
            if "method" not in message and message.get("id") in (request_id, None):
                return got

    def close(self) -> int:
        stdin: IO[bytes] | None = self.proc.stdin
        if stdin is not None:
            stdin.close()
        try:
            return self.proc.wait(timeout=WAIT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
            if self.proc.stdout is not None:
                self.proc.stdout.close()


@pytest.fixture(scope="module")
def stdio_server(bundles_root: Path) -> Iterator[StdioServer]:
    server = StdioServer(bundles_root)
    try:
        server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS})
        server.answer(1)
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # Every log notification the server sends rides along with the answers, and is checked too.
        server.send({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}})
        server.answer(2)
        yield server
    finally:
        assert server.close() == 0


@pytest.mark.parametrize(("index", "position"), list(enumerate(IDS)), ids=IDS)
def test_stdio_replies_quote_at_most_80_characters(
    stdio_server: StdioServer, index: int, position: str
) -> None:
    body = ATTACKS[index][1]
    if "method" in body and body["method"].startswith("notifications/"):
        # No id: a notification gets no answer; the ping after it must come back clean.
        stdio_server.send({"jsonrpc": "2.0", **body})
        stdio_server.send({"jsonrpc": "2.0", "id": 7, "method": "ping"})
        for line in stdio_server.answer(7):
            check_reply(position, line)
        return
    stdio_server.send(request(index, body))
    for line in stdio_server.answer(1000 + index):
        check_reply(position, line)


def test_stdio_a_900_kb_request_id_is_not_echoed(stdio_server: StdioServer) -> None:
    stdio_server.send({"jsonrpc": "2.0", "id": BIG, "method": "ping"})
    check_reply("request id", stdio_server.lines.get(timeout=WAIT))
    stdio_server.send(b'{"jsonrpc": "2.0", "id": ' + b"7" * 900_000 + b', "method": "ping"}')
    line = stdio_server.lines.get(timeout=WAIT)
    check_reply("integer request id", line)
    assert b"7" * (QUOTE_LIMIT + 1) not in line
    stdio_server.send({"jsonrpc": "2.0", "id": 8, "method": "ping"})
    assert json.loads(stdio_server.answer(8)[-1]) == {"jsonrpc": "2.0", "id": 8, "result": {}}


# -- streamable HTTP -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_server(bundles_root: Path) -> Iterator[HttpServerProcess]:
    with HttpServerProcess(bundles_root, "--no-auth") as server:
        yield server
    assert server.returncode == 0


@pytest.mark.parametrize(("index", "position"), list(enumerate(IDS)), ids=IDS)
def test_http_replies_quote_at_most_80_characters(
    http_server: HttpServerProcess, index: int, position: str
) -> None:
    body = request(index, ATTACKS[index][1])
    if body["method"].startswith("notifications/"):
        body.pop("id")
    r = httpkit.request("POST", http_server.url, content=json.dumps(body), headers=MCP_HEADERS, timeout=WAIT)
    check_reply(position, r.content)
    for name, value in r.headers.items():
        assert not quotes_big(value), (position, name, value[:300])


def test_http_a_900_kb_request_id_is_not_echoed(http_server: HttpServerProcess) -> None:
    body = {"jsonrpc": "2.0", "id": BIG, "method": "ping"}
    r = httpkit.request("POST", http_server.url, content=json.dumps(body), headers=MCP_HEADERS, timeout=WAIT)
    check_reply("request id", r.content)
    digits = b'{"jsonrpc": "2.0", "id": ' + b"7" * 900_000 + b', "method": "ping"}'
    r = httpkit.request("POST", http_server.url, content=digits, headers=MCP_HEADERS, timeout=WAIT)
    check_reply("integer request id", r.content)
    assert b"7" * (QUOTE_LIMIT + 1) not in r.content


# -- the 2026-07-28 era: the protocol version rides in every request's _meta ------------------------


def modern(version: str) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": version, "version": version},
    }
    return {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": meta}}


def test_stdio_a_first_modern_request_with_a_900_kb_version_is_not_echoed(bundles_root: Path) -> None:
    server = StdioServer(bundles_root)
    try:
        server.send(modern(BIG))
        for line in server.answer(5):
            check_reply("modern protocol version", line)
    finally:
        assert server.close() == 0


def test_http_a_modern_request_with_a_long_version_is_not_echoed(http_server: HttpServerProcess) -> None:
    # The version must match the MCP-Protocol-Version header, and headers are bounded (h11): 8 KB.
    version = BIG[:8000]
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": version, "Mcp-Method": "tools/list"}
    r = httpkit.request(
        "POST", http_server.url, content=json.dumps(modern(version)), headers=headers, timeout=WAIT
    )
    assert not quotes_big(r.text), r.text[:300]
