"""Rate limits with the default flags, over real streamable HTTP on 127.0.0.1 (issue 13 item 1).

The defaults must never trip for one user: a burst of SDK connections (each costs initialize,
notifications/initialized and a call before it does anything), with a key or anonymously on loopback.
They must still hold a client that floods a shared server, per key and per client address.
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import anyio
import httpx2
import pytest
from docbundle.server.http.app import DEFAULT_BURST
from docbundle.server.keys import create_key
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from serverkit import HttpServerProcess

# As many connections at once as an IDE starting its agents or a conformance suite: each of them is
# 4 requests, 160 in all, four times the old default burst of 40.
CONNECTIONS = 40
# Distinct keys used for the first time at once from one address: more than the key-check budget's
# burst per address for unproven secrets (AUTH_CLIENT_BURST, 10).
MANY_KEYS = 24
PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("rate-keys") / "keys.toml"
    return path, create_key(path, "ide")[1]


async def connect_and_call(url: str, headers: dict[str, str]) -> list[int]:
    """One SDK connection: initialize, list the tools, call one; the HTTP statuses it saw."""
    statuses: list[int] = []

    async def hook(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async with create_mcp_http_client(headers=headers) as http:
        http.event_hooks["response"].append(hook)
        async with Client(streamable_http_client(url, http_client=http)) as client:
            await client.list_tools()
            result = await client.call_tool("list_libraries", {})
            assert not result.is_error
    return statuses


async def burst_of_connections(url: str, headers: dict[str, str]) -> list[int]:
    """``CONNECTIONS`` SDK clients connecting and calling at once; every status they saw."""
    seen: list[list[int]] = []

    async def one() -> None:
        seen.append(await connect_and_call(url, headers))

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for _ in range(CONNECTIONS):
                tg.start_soon(one)
    assert len(seen) == CONNECTIONS
    return [s for statuses in seen for s in statuses]


def rate_limited(server: HttpServerProcess) -> list[str]:
    return [line for line in server.lines() if '"outcome":"rate_limited"' in line]


@pytest.mark.anyio
async def test_a_burst_of_anonymous_connections_on_loopback_is_never_limited(bundles_root: Path) -> None:
    with HttpServerProcess(bundles_root, "--no-auth") as server:
        statuses = await burst_of_connections(server.url, {})
        assert 429 not in statuses and len(statuses) >= 3 * CONNECTIONS, statuses
        assert rate_limited(server) == []
    assert server.returncode == 0


@pytest.mark.anyio
async def test_a_burst_of_connections_with_one_key_is_not_limited(
    bundles_root: Path, key: tuple[Path, str]
) -> None:
    path, secret = key
    with HttpServerProcess(bundles_root, "--keys", str(path)) as server:
        statuses = await burst_of_connections(server.url, {"X-API-Key": secret})
        assert 429 not in statuses and len(statuses) >= 3 * CONNECTIONS, statuses
        assert rate_limited(server) == []
    assert server.returncode == 0


@pytest.mark.anyio
async def test_first_uses_of_many_keys_at_once_from_one_address_get_in(
    bundles_root: Path, tmp_path: Path
) -> None:
    # Agents started together on one machine, each with its own key (or a proxy in front of them):
    # every first use costs a scrypt, and all come from one address at once.
    path = tmp_path / "keys.toml"
    keys = [create_key(path, f"agent {i}")[1] for i in range(MANY_KEYS)]
    with HttpServerProcess(bundles_root, "--keys", str(path)) as server:
        seen: list[list[int]] = []

        async def one(key: str) -> None:
            seen.append(await connect_and_call(server.url, {"X-API-Key": key}))

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for key in keys:
                    tg.start_soon(one, key)
        statuses = [s for one_client in seen for s in one_client]
        assert len(seen) == MANY_KEYS and 429 not in statuses, statuses
        assert [line for line in server.lines() if '"outcome":"auth_throttled"' in line] == []
    assert server.returncode == 0


def ping_until_refused(port: int, forwarded_for: str, limit: int) -> tuple[int, int]:
    """Ping over one keep-alive connection as ``forwarded_for`` until a 429 (at most ``limit`` times).

    Returns how many were answered 200 before the first refusal, and the refusal's status (200 if none).
    """
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for n in range(limit):
            conn.request("POST", "/mcp", body=PING, headers={**HEADERS, "X-Forwarded-For": forwarded_for})
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                assert response.status == 429, (response.status, body[:200])
                assert json.loads(body)["error"]["message"] == "rate limit exceeded; retry later"
                assert int(response.getheader("Retry-After") or "0") >= 1
                return n, response.status
        return limit, 200
    finally:
        conn.close()


def test_the_default_limit_still_holds_a_flooding_address_and_only_it(bundles_root: Path) -> None:
    # Clients of a shared server, anonymous, behind a proxy that names them: each address has its own
    # bucket under the default limits, the flooding one is refused, and the others are not.
    with HttpServerProcess(bundles_root, "--no-auth", "--trusted-proxy", "127.0.0.1") as server:
        served, status = ping_until_refused(server.port, "198.51.100.7", 20 * DEFAULT_BURST)
        assert status == 429 and served >= DEFAULT_BURST, served
        assert ping_until_refused(server.port, "198.51.100.8", 5) == (5, 200)
        # And the local user (a request with no forwarded address) is never limited by default.
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            for _ in range(3 * DEFAULT_BURST):
                conn.request("POST", "/mcp", body=PING, headers=HEADERS)
                response = conn.getresponse()
                response.read()
                assert response.status == 200
        finally:
            conn.close()
    assert server.returncode == 0


def test_an_explicit_rate_applies_to_loopback_too(bundles_root: Path) -> None:
    with HttpServerProcess(bundles_root, "--no-auth", "--rate", "1/s", "--burst", "5") as server:
        served, status = ping_until_refused(server.port, "ignored", 50)
        assert status == 429 and 5 <= served < 50, served
    assert server.returncode == 0
