"""Attacks on the HTTP front door, each over real streamable HTTP on 127.0.0.1 against the real CLI.

- Guessing secrets for a known key id must never lock that key out (issue 9, item 5). A key with a
  ``check`` turns a wrong secret away without a scrypt; for keys written before checks existed,
  every guess costs a scrypt, and those are budgeted per client address and globally.
- ``X-Forwarded-For`` is believed only from ``--trusted-proxy`` addresses (item 13).
- A too-deep JSON body and invalid UTF-8 get a JSON-RPC error, not a traceback (item 11).
- Ids, names and hashes are full-matched: a trailing newline is not accepted (item 8 for this layer).

Client addresses other than 127.0.0.1 are simulated through a server started with
``--trusted-proxy 127.0.0.1``: the test is then the proxy, and says who the client is.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpkit
import httpx2
import pytest
from docbundle.server.cli import main
from docbundle.server.errors import KeyFileError
from docbundle.server.http.ratelimit import (
    AUTH_CLIENT_BURST,
    AUTH_CLIENT_RATE,
    AUTH_GLOBAL_BURST,
    AUTH_GLOBAL_RATE,
    AUTH_MAX_WAIT,
    AuthBudget,
    client_key,
)
from docbundle.server.jsonrpc import MAX_JSON_DEPTH, json_depth, peek_request, valid_request_id
from docbundle.server.keys import create_key, load_keys, save_keys, split_key
from serverkit import HttpServerProcess

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LIST = json.dumps(
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_libraries", "arguments": {}}}
).encode()
PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'


def wrong_secret(n: int) -> str:
    """A distinct well-formed wrong secret (43 characters), so no failure is answered from a cache."""
    return f"W{n:042d}"


LEGACY = ("old-a", "old-b", "old-c")


@pytest.fixture(scope="module")
def keyset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A keys file with active keys a and b, and old-a, old-b, old-c without a check (as written
    before checks existed); name -> full key."""
    path = tmp_path_factory.mktemp("attack-keys") / "keys.toml"
    made = {name: create_key(path, name)[1] for name in ("a", "b", *LEGACY)}
    records = load_keys(path)
    save_keys(path, {k: replace(r, check=None) if r.name in LEGACY else r for k, r in records.items()})
    assert "check = " in path.read_text(encoding="utf-8")
    return path, made


@pytest.fixture(scope="module")
def keys(keyset: tuple[Path, dict[str, str]]) -> dict[str, str]:
    """The keyset's keys: name -> full key."""
    return keyset[1]


def key_id(key: str) -> str:
    return key.split(".")[0]


async def post(
    http: httpx2.AsyncClient, url: str, headers: dict[str, str], body: bytes = LIST
) -> httpx2.Response:
    return await http.post(url, content=body, headers={**ACCEPT, **headers})


async def flood(url: str, requests: list[dict[str, str]]) -> tuple[list[httpx2.Response], float]:
    """Send every request (its headers) at once; the responses in order, and the seconds it took."""
    out: list[httpx2.Response | None] = [None] * len(requests)
    limits = httpx2.Limits(max_connections=len(requests))
    async with httpkit.client(timeout=60, limits=limits) as http:

        async def one(i: int) -> None:
            out[i] = await post(http, url, requests[i])

        started = anyio.current_time()
        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:
                for i in range(len(requests)):
                    tg.start_soon(one, i)
        took = anyio.current_time() - started
    return [r for r in out if r is not None], took


async def pings(url: str, requests: list[dict[str, str]]) -> list[int]:
    """Send a ping with each request's headers, one after another; the statuses in order."""
    async with httpkit.client(timeout=30) as http:
        with anyio.fail_after(60):
            return [(await post(http, url, headers, PING)).status_code for headers in requests]


def records(server: HttpServerProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in server.lines()]


# -- item 5: no lockout by key id -------------------------------------------------------------------


@pytest.mark.anyio
async def test_eleven_wrong_secrets_do_not_lock_out_the_real_key(
    bundles_root: Path, keyset: tuple[Path, dict[str, str]], keys: dict[str, str]
) -> None:
    """The issue's reproduction: 11 wrong secrets for a known id, then the real key, from one client."""
    with HttpServerProcess(bundles_root, "--keys", str(keyset[0])) as server:
        for name in ("a", "old-a"):
            real = keys[name]
            statuses = []
            async with httpkit.client(timeout=30) as http:
                with anyio.fail_after(60):
                    for n in range(11):
                        r = await post(http, server.url, {"X-API-Key": f"{key_id(real)}.{wrong_secret(n)}"})
                        statuses.append(r.status_code)
                    ok = await post(http, server.url, {"X-API-Key": real})
            # One client asking one thing at a time is slowed at most, never refused.
            assert statuses == [401] * 11, name
            assert ok.status_code == 200, (name, ok.text)
    assert server.returncode == 0


@pytest.mark.anyio
async def test_a_guess_flood_from_one_client_is_throttled_and_the_keys_still_work(
    bundles_root: Path, keyset: tuple[Path, dict[str, str]], keys: dict[str, str]
) -> None:
    guesser = {"X-Forwarded-For": "203.0.113.7"}
    with HttpServerProcess(bundles_root, "--keys", str(keyset[0]), "--trusted-proxy", "127.0.0.1") as server:
        # 50 distinct wrong secrets at once, for the ids of two real keys without a check: each
        # guess the server takes on costs it a scrypt.
        guesses = [
            {**guesser, "X-API-Key": f"{key_id(keys['old-a' if n % 2 else 'old-b'])}.{wrong_secret(n)}"}
            for n in range(50)
        ]
        answers, took = await flood(server.url, guesses)
        counts = Counter(r.status_code for r in answers)
        # Each 401 cost a scrypt. The client's budget is its burst plus what refilled before the flood
        # had its answers (a check admitted in debt waits for its token: up to AUTH_MAX_WAIT).
        assert AUTH_CLIENT_BURST <= counts[401] <= AUTH_CLIENT_BURST + AUTH_CLIENT_RATE * took + 1, counts
        assert counts[401] + counts[429] == 50, counts
        throttled = next(r for r in answers if r.status_code == 429)
        assert throttled.json()["error"]["message"].startswith("too many failed API key attempts")
        assert 1 <= int(throttled.headers["retry-after"]) <= 60
        async with httpkit.client(timeout=30) as http:
            with anyio.fail_after(60):
                # The real keys work, first used from the guesser's own address and from another one.
                same = await post(http, server.url, {**guesser, "X-API-Key": keys["old-a"]})
                other = await post(
                    http, server.url, {"X-Forwarded-For": "198.51.100.9", "X-API-Key": keys["old-b"]}
                )
        assert (same.status_code, other.status_code) == (200, 200), (same.text, other.text)
        server.wait_for(lambda line: '"client":"198.51.100.9"' in line)
        logged = [r for r in records(server) if r.get("event") == "request"]
        refused = [r for r in logged if r["outcome"] == "auth_throttled"]
        assert len(refused) == counts[429] and {r["client"] for r in refused} == {"203.0.113.7"}
        assert {r["keyId"] for r in logged if r["status"] == 200} == {
            key_id(keys["old-a"]),
            key_id(keys["old-b"]),
        }
    assert server.returncode == 0


@pytest.mark.anyio
async def test_a_distributed_guess_flood_meets_the_global_ceiling_and_crowds_out_no_real_key(
    bundles_root: Path, keyset: tuple[Path, dict[str, str]], keys: dict[str, str]
) -> None:
    n = 4 * AUTH_GLOBAL_BURST
    # One wrong secret from each of many addresses, so no address is over its own budget: for a key
    # without a check (each costs a scrypt) and for a key with one (each is turned away at once).
    legacy = [
        {
            "X-Forwarded-For": f"10.77.{i // 200}.{i % 200 + 1}",
            "X-API-Key": f"{key_id(keys['old-c'])}.{wrong_secret(i)}",
        }
        for i in range(n)
    ]
    checked = [
        {
            "X-Forwarded-For": f"10.76.{i // 200}.{i % 200 + 1}",
            "X-API-Key": f"{key_id(keys['a'])}.{wrong_secret(i)}",
        }
        for i in range(n)
    ]
    with HttpServerProcess(bundles_root, "--keys", str(keyset[0]), "--trusted-proxy", "127.0.0.1") as server:
        statuses: dict[str, Counter[int]] = {"legacy": Counter(), "checked": Counter()}
        real: list[httpx2.Response] = []
        started = anyio.current_time()
        limits = httpx2.Limits(max_connections=2 * n + 1)
        async with httpkit.client(timeout=60, limits=limits) as http:
            spent = anyio.Event()  # the global budget for unchecked keys is spent: a legacy guess got 429

            async def guess(kind: str, headers: dict[str, str]) -> None:
                status = (await post(http, server.url, headers)).status_code
                statuses[kind][status] += 1
                if kind == "legacy" and status == 429:
                    spent.set()

            async def first_use_mid_flood() -> None:
                await spent.wait()
                real.append(
                    await post(http, server.url, {"X-Forwarded-For": "10.75.0.1", "X-API-Key": keys["a"]})
                )

            with anyio.fail_after(90):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(first_use_mid_flood)
                    for headers in legacy:
                        tg.start_soon(guess, "legacy", headers)
                    for headers in checked:
                        tg.start_soon(guess, "checked", headers)
            took = anyio.current_time() - started
            # Once the flood has its answers, a key without a check gets in from a new address too.
            with anyio.fail_after(60):
                late = await post(
                    http, server.url, {"X-Forwarded-For": "10.78.0.1", "X-API-Key": keys["old-c"]}
                )
        warning = json.loads(server.wait_for(lambda line: "have no check" in line))
        assert warning["level"] == "warning" and key_id(keys["old-c"]) in warning["msg"]
        assert key_id(keys["a"]) not in warning["msg"]
        counts = statuses["legacy"]
        assert AUTH_GLOBAL_BURST <= counts[401] <= AUTH_GLOBAL_BURST + AUTH_GLOBAL_RATE * took + 1, counts
        assert counts[429] > 0 and counts[401] + counts[429] == n, counts
        # Wrong secrets for a key with a check cost no scrypt, so no budget: each is simply wrong.
        assert statuses["checked"] == {401: n}
        # The real key's first use, in the middle of it all, got in at the first try.
        assert real[0].status_code == 200, real[0].text
        assert late.status_code == 200, late.text
    assert server.returncode == 0


def test_the_key_check_budget_slows_a_patient_client_and_refuses_only_a_flood() -> None:
    now = [0.0]
    budget = AuthBudget(clock=lambda: now[0])
    assert [budget.admit("a") for _ in range(AUTH_CLIENT_BURST)] == [0.0] * AUTH_CLIENT_BURST
    waits = [budget.admit("a") for _ in range(int(AUTH_MAX_WAIT * AUTH_CLIENT_RATE))]
    assert waits == [pytest.approx((i + 1) / AUTH_CLIENT_RATE) for i in range(len(waits))]
    assert budget.admit("a") is None  # more would wait too long: refused, and nothing booked
    assert budget.retry_after("a") == pytest.approx(1 / AUTH_CLIENT_RATE)
    assert budget.admit("b") == 0.0  # another address is not held back by this one
    # Once its flood has been answered, a client that waits for each answer before asking again is
    # slowed, never refused.
    now[0] += AUTH_MAX_WAIT + 0.065
    for _ in range(50):
        wait = budget.admit("a")
        assert wait is not None
        now[0] += wait + 0.065  # its turn, then a scrypt
    # A right secret gives its booking back.
    now[0] += 1000
    for _ in range(3 * AUTH_CLIENT_BURST):
        assert budget.admit("c") == 0.0
        budget.give_back("c")


def test_the_key_check_budget_has_a_global_ceiling() -> None:
    now = [0.0]
    budget = AuthBudget(clock=lambda: now[0], max_clients=100)
    admitted = [budget.admit(f"10.0.{i // 250}.{i % 250}") for i in range(1000)]
    assert admitted[:AUTH_GLOBAL_BURST] == [0.0] * AUTH_GLOBAL_BURST
    assert sum(w is not None for w in admitted) == AUTH_GLOBAL_BURST + int(AUTH_MAX_WAIT * AUTH_GLOBAL_RATE)
    assert budget.admit("192.0.2.1") is None  # a new address too, while the flood's debt lasts
    now[0] += AUTH_MAX_WAIT  # the flood's last admitted check has had its turn
    assert budget.admit("192.0.2.1") is not None
    assert len(budget._clients) <= 100  # addresses remembered are bounded


def test_clients_are_counted_by_address_and_ipv6_by_prefix() -> None:
    assert client_key({"client": ("203.0.113.7", 5000)}) == "203.0.113.7"
    assert client_key({"client": ("2001:db8:1:2:aaaa::1", 5000)}) == client_key(
        {"client": ("2001:db8:1:2:bbbb::9", 1)}
    )
    assert client_key({"client": ("2001:db8:1:3::1", 5000)}) != client_key({"client": ("2001:db8:1:2::1", 1)})
    assert client_key({"client": ("::ffff:203.0.113.7", 1)}) == "203.0.113.7"
    assert client_key({"client": ("x" * 1000, 0)}) == "x" * 64
    assert client_key({}) == "?"


# -- item 13: forwarded headers only from trusted proxies ------------------------------------------


@pytest.mark.anyio
async def test_forwarded_for_from_an_untrusted_client_changes_nothing(bundles_root: Path) -> None:
    with HttpServerProcess(bundles_root, "--no-auth", "--rate", "1/s", "--burst", "5") as server:
        statuses = await pings(
            server.url,
            [{"X-Forwarded-For": f"192.0.2.{i + 1}", "X-Request-Id": f"xff-{i}"} for i in range(15)],
        )
        assert statuses[:5] == [200] * 5 and 429 in statuses[5:], statuses
        server.wait_for(lambda line: '"requestId":"xff-14"' in line)
        clients = {r["client"] for r in records(server) if r.get("requestId", "").startswith("xff-")}
        assert clients == {"127.0.0.1"}
    assert server.returncode == 0


@pytest.mark.anyio
async def test_forwarded_for_from_a_trusted_proxy_names_the_client(bundles_root: Path) -> None:
    with HttpServerProcess(
        bundles_root, "--no-auth", "--rate", "1/s", "--burst", "5", "--trusted-proxy", "127.0.0.1"
    ) as server:
        # What nginx's $proxy_add_x_forwarded_for sends: the client's own claim first, then the address
        # the proxy saw.
        rotating = await pings(
            server.url,
            [{"X-Forwarded-For": f"6.6.6.6, 192.0.2.{i + 1}", "X-Request-Id": f"fwd-{i}"} for i in range(15)],
        )
        same = await pings(server.url, [{"X-Forwarded-For": "192.0.2.200"}] * 15)
        assert rotating == [200] * 15  # each forwarded client has its own bucket
        assert same[:5] == [200] * 5 and 429 in same[5:], same  # and is limited in it
        server.wait_for(lambda line: '"requestId":"fwd-14"' in line)
        clients = [r["client"] for r in records(server) if r.get("requestId", "").startswith("fwd-")]
        assert sorted(clients) == sorted(f"192.0.2.{i + 1}" for i in range(15))
    assert server.returncode == 0


@pytest.mark.parametrize("value", ["*", "proxy.example", "10.0.0.0/33", ""])
def test_a_bad_trusted_proxy_is_refused(
    capsys: pytest.CaptureFixture[str], bundles_root: Path, value: str
) -> None:
    with pytest.raises(SystemExit) as info:
        main(
            [
                "serve",
                "--bundles",
                str(bundles_root),
                "--transport",
                "http",
                "--no-auth",
                "--trusted-proxy",
                value,
            ]
        )
    assert info.value.code == 2
    assert "--trusted-proxy" in capsys.readouterr().err


def test_trusted_proxy_needs_http(capsys: pytest.CaptureFixture[str], bundles_root: Path) -> None:
    assert main(["serve", "--bundles", str(bundles_root), "--trusted-proxy", "127.0.0.1"]) == 2
    assert "--trusted-proxy applies only to --transport http" in capsys.readouterr().err


# -- item 11: answers instead of tracebacks ---------------------------------------------------------


@pytest.mark.anyio
async def test_deep_nesting_and_invalid_utf8_get_json_rpc_errors(bundles_root: Path) -> None:
    deep = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}}"
    )
    bad_utf8 = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "\xff\xfe"}}'
    truncated = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_li'
    with HttpServerProcess(bundles_root, "--no-auth", "--rate", "off") as server:
        async with httpkit.client(timeout=30) as http:
            with anyio.fail_after(60):
                answers = {
                    name: await post(http, server.url, {"X-Request-Id": f"bad-{name}"}, body)
                    for name, body in (("deep", deep), ("utf8", bad_utf8), ("truncated", truncated))
                }
                after = await post(http, server.url, {"X-Request-Id": "after"})
        expected = {"deep": -32600, "utf8": -32700, "truncated": -32700}
        for name, r in answers.items():
            assert r.status_code == 400, (name, r.status_code, r.text[:200])
            body = r.json()
            assert body["jsonrpc"] == "2.0" and body["id"] is None
            assert body["error"]["code"] == expected[name], (name, body)
        assert str(MAX_JSON_DEPTH) in answers["deep"].json()["error"]["message"]
        assert "UTF-8" in answers["utf8"].json()["error"]["message"]
        assert after.status_code == 200 and not after.json()["result"]["isError"]
        server.wait_for(lambda line: '"requestId":"after"' in line)
        lines = records(server)
        for name in expected:
            mine = [r for r in lines if r.get("requestId") == f"bad-{name}"]
            assert len(mine) == 1 and mine[0]["status"] == 400, mine
        assert [r for r in lines if r["level"] in ("warning", "error") or "exc" in r] == []
    assert server.returncode == 0


def test_json_depth_is_counted_outside_strings() -> None:
    assert json_depth(b'{"a": [1, {"b": []}]}') == 4
    assert json_depth(b'"[[[[[[" ') == 0
    assert json_depth(b'{"a": "\\"[[[[", "b": ["]]]"]}') == 2
    assert json_depth(b"[" * (MAX_JSON_DEPTH + 1)) == MAX_JSON_DEPTH + 1
    assert json_depth(b'{"unterminated": "[[[[') == 1
    assert json_depth(b'"\\' + b'"\\' * 1000) == 0  # an unterminated string full of escapes
    nested = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert json_depth(nested) == MAX_JSON_DEPTH


# -- full-match patterns: a trailing newline is never accepted ---------------------------------------


def test_ids_names_and_hashes_refuse_a_trailing_newline(tmp_path: Path) -> None:
    record, key = create_key(tmp_path / "keys.toml", "n")
    kid, secret = key.split(".")
    assert split_key(key) == (kid, secret)
    assert split_key(key + "\n") is None and split_key(f"{kid}\n.{secret}") is None
    text = (tmp_path / "keys.toml").read_text(encoding="utf-8")
    for broken in (
        text.replace(f'id = "{kid}"', f'id = "{kid}\\n"'),
        text.replace(f'hash = "{record.hash}"', f'hash = "{record.hash}\\n"'),
    ):
        (tmp_path / "bad.toml").write_text(broken, encoding="utf-8")
        with pytest.raises(KeyFileError):
            load_keys(tmp_path / "bad.toml")
    assert valid_request_id("abc-1") and not valid_request_id("abc-1\n")
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call\n", "params": {"name": "search_documents\n"}}
    assert peek_request(json.dumps(call).encode()) == {"rpcMethod": "(invalid)"}
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "x", "arguments": {"libraryId": "demo\n"}},
    }
    assert peek_request(json.dumps(call).encode()) == {
        "rpcMethod": "tools/call",
        "tool": "x",
        "libraryId": "(invalid)",
    }
