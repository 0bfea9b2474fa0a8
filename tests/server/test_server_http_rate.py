"""Rate limits with the default flags (issue 13 item 1): in process through the ASGI app, with a clock the
test moves by hand, so every count is exact; and once over real HTTP on 127.0.0.1, where the CLI's
``--rate``/``--burst`` wiring is itself under test. (``--workers`` sharing one limit across processes:
test_server_http_workers.py.)

The defaults must never trip for one user: a burst of SDK connections (each costs initialize,
notifications/initialized and a call before it does anything), with a key or anonymously on loopback.
They must still hold a client that floods a shared server, per key and per client address.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from asgikit import URL, FakeClock, serving
from docbundle.server.catalog import Catalog
from docbundle.server.http import app as http_app
from docbundle.server.http.options import DEFAULT_BURST, DEFAULT_RATE, HttpOptions
from docbundle.server.keys import KeyStore, create_key
from httpkit import MCP_HEADERS, client, session, url
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from serverkit import HttpServerProcess

# As many connections at once as an IDE starting its agents or a conformance suite: each of them is
# 4 requests, 160 in all, four times the old default burst of 40.
CONNECTIONS = 40
# Distinct keys used for the first time at once from one address: more than the key-check budget's
# burst per address for unproven secrets (AUTH_CLIENT_BURST, 10).
MANY_KEYS = 24
PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
DEFAULTS = HttpOptions(host="127.0.0.1")  # what `docbundle serve --transport http` runs without flags


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def access_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """The HTTP access log's records (one per request, its fields in ``record.fields``)."""
    caplog.set_level(logging.INFO, logger=http_app.log.name)
    yield caplog


def outcomes(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Each request's outcome, from the access log."""
    return [
        r.fields["outcome"]
        for r in caplog.records
        if r.name == http_app.log.name and isinstance(getattr(r, "fields", None), dict)
    ]


async def connect_and_call(app: http_app.HttpApp, headers: dict[str, str]) -> list[int]:
    """One SDK connection from loopback: initialize, list the tools, call one; the HTTP statuses it saw."""
    statuses: list[int] = []

    async def hook(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async with (
        client(app, headers=headers, event_hooks={"response": [hook]}) as http,
        Client(streamable_http_client(URL, http_client=http)) as mcp,
    ):
        await mcp.list_tools()
        result = await mcp.call_tool("list_libraries", {})
        assert not result.is_error
    return statuses


async def burst_of_connections(app: http_app.HttpApp, headers: list[dict[str, str]]) -> list[int]:
    """One SDK client per entry of ``headers``, all connecting and calling at once; every status seen."""
    seen: list[list[int]] = []

    async def one(h: dict[str, str]) -> None:
        seen.append(await connect_and_call(app, h))

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for h in headers:
                tg.start_soon(one, h)
    assert len(seen) == len(headers)
    return [s for statuses in seen for s in statuses]


async def pings(http: httpx2.AsyncClient, count: int) -> list[httpx2.Response]:
    """``count`` pings, one after the other (a refusal does not stop them)."""
    return [await http.post("/mcp", content=PING, headers=MCP_HEADERS) for _ in range(count)]


@pytest.mark.anyio
async def test_a_burst_of_anonymous_connections_on_loopback_is_never_limited(
    catalog: Catalog, clock: FakeClock, access_log: pytest.LogCaptureFixture
) -> None:
    async with serving(catalog, DEFAULTS, clock=clock) as app:
        statuses = await burst_of_connections(app, [{}] * CONNECTIONS)
    assert 429 not in statuses and len(statuses) >= 3 * CONNECTIONS, statuses
    assert "rate_limited" not in outcomes(access_log) and len(outcomes(access_log)) == len(statuses)


@pytest.mark.anyio
async def test_a_burst_of_connections_with_one_key_is_not_limited(
    catalog: Catalog, clock: FakeClock, tmp_path: Path, access_log: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.toml"
    record, secret = create_key(path, "ide")
    key_id = record.id
    async with serving(catalog, DEFAULTS, keys=KeyStore(path), clock=clock) as app:
        statuses = await burst_of_connections(app, [{"X-API-Key": secret}] * CONNECTIONS)
        assert 429 not in statuses and len(statuses) >= 3 * CONNECTIONS, statuses
        assert "rate_limited" not in outcomes(access_log)
        # Every request was counted against the key (the clock stood still): the burst is what is left.
        assert app.limiter is not None
        assert [app.limiter.take(key_id) for _ in range(DEFAULT_BURST - len(statuses))] == [0.0] * (
            DEFAULT_BURST - len(statuses)
        )
        assert app.limiter.take(key_id) == pytest.approx(1 / DEFAULT_RATE)


@pytest.mark.anyio
async def test_first_uses_of_many_keys_at_once_from_one_address_get_in(
    catalog: Catalog, clock: FakeClock, tmp_path: Path, access_log: pytest.LogCaptureFixture
) -> None:
    # Agents started together on one machine, each with its own key (or a proxy in front of them):
    # every first use costs a scrypt, and all come from one address at once (the clock stands still:
    # no budget refills while they wait).
    path = tmp_path / "keys.toml"
    keys = [{"X-API-Key": create_key(path, f"agent {i}")[1]} for i in range(MANY_KEYS)]
    async with serving(catalog, DEFAULTS, keys=KeyStore(path), clock=clock) as app:
        statuses = await burst_of_connections(app, keys)
    assert 429 not in statuses and len(statuses) >= 3 * MANY_KEYS, statuses
    assert "auth_throttled" not in outcomes(access_log)


@pytest.mark.anyio
async def test_the_default_limit_still_holds_a_flooding_address_and_only_it(
    catalog: Catalog, clock: FakeClock
) -> None:
    # Clients of a shared server, anonymous: each address has its own bucket under the default limits
    # (behind a --trusted-proxy, the forwarded address: test_server_http_attacks.py), the flooding one
    # is refused after exactly the burst, and the others are not.
    async with serving(catalog, DEFAULTS, clock=clock) as app:
        async with client(app, "198.51.100.7") as flood, client(app, "198.51.100.8") as other:
            answered = await pings(flood, DEFAULT_BURST + 2)
            assert [r.status_code for r in answered] == [200] * DEFAULT_BURST + [429, 429]
            refusal = answered[-1]
            assert refusal.json()["error"]["message"] == "rate limit exceeded; retry later"
            assert refusal.headers["Retry-After"] == "1"  # 1/DEFAULT_RATE s, rounded up to whole seconds
            assert [r.status_code for r in await pings(other, 5)] == [200] * 5
            clock.advance(1.5 / DEFAULT_RATE)  # one token and a half: one more ping
            assert [r.status_code for r in await pings(flood, 2)] == [200, 429]
            # Any request counts, a GET too: past the limit it is refused before its 405.
            assert (await flood.get("/mcp")).status_code == 429
        # The local user (loopback, no key) is never limited by default: more than a burst, no refusal
        # (GET /mcp passes the limiter, then is answered 405 without the cost of reaching the SDK).
        async with client(app, "127.0.0.1") as local:
            statuses = {(await local.get("/mcp")).status_code for _ in range(DEFAULT_BURST + 1)}
            assert statuses == {405}


@pytest.mark.anyio
async def test_a_keys_rate_limit_trips_with_retry_after_and_recovers(
    catalog: Catalog, clock: FakeClock, tmp_path: Path
) -> None:
    path = tmp_path / "keys.toml"
    secret = create_key(path, "limited")[1]
    burst = 10
    statuses: list[int] = []
    retry_after: list[str | None] = []

    async def hook(response: httpx2.Response) -> None:
        statuses.append(response.status_code)
        retry_after.append(response.headers.get("retry-after"))

    options = HttpOptions(host="127.0.0.1", rate=20.0, burst=burst)
    async with serving(catalog, options, keys=KeyStore(path), clock=clock) as app:
        http = client(app, headers={"X-API-Key": secret}, event_hooks={"response": [hook]})
        async with http, Client(streamable_http_client(URL, http_client=http)) as mcp:
            with pytest.raises(MCPError) as info:
                for _ in range(burst + 1):  # the clock stands still: nothing refills
                    await mcp.call_tool("list_libraries", {})
            assert info.value.error.message == "rate limit exceeded; retry later"
            # The connection's own requests and the calls took the burst exactly; the next was refused.
            assert len(statuses) == burst + 1 and statuses[-1] == 429 and 429 not in statuses[:-1], statuses
            assert retry_after[-1] == "1"  # 1/20 s, rounded up to whole seconds
            clock.advance(1.5 / 20)  # what the client waits: then it is served again
            again = await mcp.call_tool("list_libraries", {})
            assert not again.is_error and statuses[-1] == 200


def ping_until_refused(port: int, forwarded_for: str, limit: int) -> tuple[int, int]:
    """Ping over one keep-alive connection as ``forwarded_for`` until a 429 (at most ``limit`` times).

    Returns how many were answered 200 before the first refusal, and the refusal's status (200 if none).
    """
    with session() as http:
        for n in range(limit):
            response = http.post(
                url(port), content=PING, headers={**MCP_HEADERS, "X-Forwarded-For": forwarded_for}
            )
            body = response.content
            if response.status_code != 200:
                assert response.status_code == 429, (response.status_code, body[:200])
                assert json.loads(body)["error"]["message"] == "rate limit exceeded; retry later"
                assert int(response.headers.get("Retry-After") or "0") >= 1
                return n, response.status_code
        return limit, 200


def test_an_explicit_rate_applies_to_loopback_too(bundles_root: Path) -> None:
    # The real CLI: --rate and --burst parsed, handed to the limiter, and applied to loopback too.
    with HttpServerProcess(bundles_root, "--no-auth", "--rate", "1/s", "--burst", "5") as server:
        served, status = ping_until_refused(server.port, "ignored", 50)
        assert status == 429 and 5 <= served < 50, served
    assert server.returncode == 0
