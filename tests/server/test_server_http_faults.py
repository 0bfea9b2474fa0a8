"""Faults over real streamable HTTP on 127.0.0.1: the server keeps answering others and logs each once.

The faults: a client that disconnects halfway through its body, one that disconnects before the
answer, a slowloris trickling its body (cut off by the body timeout, 0.5 s here), and 1,000
malformed JSON-RPC bodies. Meanwhile an MCP client keeps searching and must see no error. This
module's server runs with ``--no-auth`` (so it also covers that mode) and no rate limit.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpkit
import httpx2
import pytest
from mcp import Client
from serverkit import HttpServerProcess

BODY_TIMEOUT = 0.5
SEARCH = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search_documents", "arguments": {"query": "webhooks", "libraryId": "demo"}},
    }
).encode()
MALFORMED = [
    b"{",
    b"not json at all",
    b'{"jsonrpc": "2.0", "method": ',
    b"\xff\xfe\x00garbage",
    b"",
    b'{"jsonrpc": "2.0"}',  # JSON, but no JSON-RPC message: -32600 with one short line
    b"[]",
    b'"just a string"',
]


@pytest.fixture(scope="module")
def server(bundles_root: Path) -> Iterator[HttpServerProcess]:
    """An unauthenticated HTTP server with a short body timeout."""
    with HttpServerProcess(
        bundles_root, "--no-auth", "--rate", "off", "--body-timeout", str(BODY_TIMEOUT)
    ) as srv:
        yield srv
    assert srv.returncode == 0


def head(server: HttpServerProcess, request_id: str, length: int) -> bytes:
    """The head of a POST /mcp request carrying ``length`` body bytes."""
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nX-Request-Id: {request_id}\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


async def read_status(stream: anyio.abc.ByteStream) -> int:
    """The status code of the HTTP response arriving on ``stream``."""
    data = b""
    while b"\r\n" not in data:
        data += await stream.receive()
    return int(data.split(b" ", 2)[1])


@pytest.mark.anyio
async def test_no_auth_serves_loopback_without_a_key(server: HttpServerProcess) -> None:
    banner = server.wait_for(lambda line: '"event":"listening"' in line)
    assert "(no authentication)" in banner and server.url.startswith("http://127.0.0.1:")
    with anyio.fail_after(30):
        async with Client(server.url) as c:
            assert not (await c.call_tool("list_libraries", {})).is_error


@pytest.mark.anyio
async def test_faults_leave_others_served_and_are_logged_once(server: HttpServerProcess) -> None:
    stop = anyio.Event()
    steady: Counter[str] = Counter()

    async def steady_client() -> None:
        async with Client(server.url) as c:
            while not stop.is_set():
                r = await c.call_tool(
                    "search_documents", {"query": "useEffect cleanup", "libraryId": "golden"}
                )
                steady["error" if r.is_error else "ok"] += 1

    async def mid_body_disconnect() -> None:
        stream = await anyio.connect_tcp("127.0.0.1", server.port)
        await stream.send(head(server, "fault-midbody", len(SEARCH)) + SEARCH[:20])
        await anyio.sleep(0.05)  # let the server start reading the body, then vanish
        await stream.aclose()

    async def disconnect_before_answer() -> None:
        stream = await anyio.connect_tcp("127.0.0.1", server.port)
        await stream.send(head(server, "fault-gone", len(SEARCH)) + SEARCH)
        await stream.aclose()

    async def slowloris() -> int:
        """Trickle the body a byte at a time; returns the status the server cut it off with."""
        before = steady["ok"]
        stream = await anyio.connect_tcp("127.0.0.1", server.port)
        async with stream:
            await stream.send(head(server, "fault-slow", len(SEARCH)))
            async with anyio.create_task_group() as tg:
                status: list[int] = []

                async def answer() -> None:
                    status.append(await read_status(stream))
                    tg.cancel_scope.cancel()

                tg.start_soon(answer)
                for byte in SEARCH:
                    try:
                        await stream.send(bytes([byte]))
                    except (anyio.BrokenResourceError, OSError):
                        break  # the server has hung up: its answer is what matters
                    await anyio.sleep(0.05)
        # The others were answered while the slowloris held its connection.
        assert steady["ok"] - before >= 3
        return status[0]

    async def malformed(http: httpx2.AsyncClient, first: int, count: int, codes: Counter[int]) -> None:
        for i in range(first, first + count):
            r = await http.post(
                server.url,
                content=MALFORMED[i % len(MALFORMED)],
                headers={"X-Request-Id": f"bad-{i:04d}", "Content-Type": "application/json"},
            )
            body: dict[str, Any] = r.json()
            assert r.status_code == 400 and body["error"]["code"] in (-32700, -32600), r.text
            codes[r.status_code] += 1

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(steady_client)
            while steady["ok"] < 2:
                await anyio.sleep(0.01)
            await mid_body_disconnect()
            await disconnect_before_answer()
            assert await slowloris() == 408
            codes: Counter[int] = Counter()
            headers = {"Accept": "application/json, text/event-stream"}
            async with (
                httpkit.client(headers=headers, timeout=10) as http,
                anyio.create_task_group() as bad,
            ):
                for worker in range(8):
                    bad.start_soon(malformed, http, worker * 125, 125, codes)
            assert codes == {400: 1000}
            stop.set()
        async with httpkit.client(timeout=10) as http:  # a fence: once logged, everything before is
            r = await http.post(
                server.url,
                content=SEARCH,
                headers={
                    "X-Request-Id": "fence",
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
            )
            assert r.status_code == 200
    assert steady["error"] == 0 and steady["ok"] > 10

    server.wait_for(lambda line: '"requestId":"fence"' in line)
    records = [json.loads(line) for line in server.lines()]
    by_id: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_id.setdefault(r.get("requestId", ""), []).append(r)

    def only(request_id: str) -> dict[str, Any]:
        found = by_id.get(request_id, [])
        assert len(found) == 1, (request_id, found)
        return found[0]

    for i in range(1000):
        rec = only(f"bad-{i:04d}")
        assert rec["status"] == 400 and rec["outcome"] in ("parse_error", "invalid_request")
    assert only("fault-midbody")["outcome"] == "client_disconnected"
    assert only("fault-gone")["outcome"] in ("client_disconnected", "ok")  # a race the client may lose
    slow = only("fault-slow")
    assert (slow["status"], slow["outcome"]) == (408, "body_timeout")
    assert BODY_TIMEOUT <= slow["latencyMs"] / 1000 < BODY_TIMEOUT + 2
    # Nothing else said anything about them: no warnings, errors or tracebacks.
    assert [r for r in records if r["level"] in ("warning", "error") or "exc" in r] == []
