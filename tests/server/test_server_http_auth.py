"""HTTP hardening over real streamable HTTP on 127.0.0.1: keys, rate limits, health, hosts, body limits, logs.

One ``docbundle serve --transport http --keys FILE`` subprocess serves the module; the MCP SDK
client drives it with headers on its httpx2 client, and an httpx2 response hook records the status
and headers of every HTTP exchange. The server's stderr is kept to check its JSON access log.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import date
from pathlib import Path

import anyio
import httpkit
import httpx2
import pytest
from docbundle.server.cli import _parser, main
from docbundle.server.http.exchange import presented_key
from docbundle.server.http.policy import HostPolicy
from docbundle.server.http.ratelimit import RateLimiter
from docbundle.server.jsonrpc import peek_request, reply_facts
from docbundle.server.keys import create_key, revoke_key
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from serverkit import HttpServerProcess

DOCS = Path(__file__).resolve().parents[2] / "docs"
RATE, BURST = "20/s", 10
WRONG_SECRET = "W" * 43


@pytest.fixture(scope="module")
def keyset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A keys file with an active, a revoked, an expired and a rate-limit key; name -> full key."""
    path = tmp_path_factory.mktemp("keys") / "keys.toml"
    made = {name: create_key(path, name) for name in ("app", "limited", "revoked")}
    made["expired"] = create_key(path, "expired", expires=date(2020, 1, 1))
    revoke_key(path, made["revoked"][0].id)
    return path, {name: key for name, (_, key) in made.items()}


@pytest.fixture(scope="module")
def server(bundles_root: Path, keyset: tuple[Path, dict[str, str]]) -> Iterator[HttpServerProcess]:
    """The HTTP server with keys and a small rate limit."""
    with HttpServerProcess(
        bundles_root, "--keys", str(keyset[0]), "--rate", RATE, "--burst", str(BURST)
    ) as srv:
        yield srv
    assert srv.returncode == 0


class Seen:
    """Status and headers of every HTTP response the client received."""

    def __init__(self) -> None:
        self.responses: list[tuple[int, httpx2.Headers]] = []

    async def hook(self, response: httpx2.Response) -> None:
        """httpx2 response hook."""
        self.responses.append((response.status_code, response.headers))

    def statuses(self) -> list[int]:
        """Every status so far."""
        return [s for s, _ in self.responses]

    def first(self, status: int) -> httpx2.Headers:
        """Headers of the first response with ``status``."""
        return next(h for s, h in self.responses if s == status)


@asynccontextmanager
async def mcp_client(url: str, headers: dict[str, str], seen: Seen) -> AsyncIterator[Client]:
    """The SDK's Client over streamable HTTP, with ``headers`` on its httpx2 client."""
    async with create_mcp_http_client(headers=headers) as http:
        http.event_hooks["response"].append(seen.hook)
        async with Client(streamable_http_client(url, http_client=http)) as c:
            yield c


def key_headers(kind: str, key: str) -> dict[str, str]:
    """The key in the X-API-Key header or as a bearer token."""
    return {"X-API-Key": key} if kind == "x-api-key" else {"Authorization": f"Bearer {key}"}


def mcp_error(exc: BaseException) -> MCPError | None:
    """The MCPError inside an exception (group), if any."""
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = mcp_error(inner)
            if found is not None:
                return found
    return None


async def refused(url: str, headers: dict[str, str]) -> tuple[str, Seen]:
    """Connect and call a tool, expecting a refusal; returns the error message and the responses."""
    seen = Seen()
    # The MCPError arrives inside ExceptionGroups; checked below.
    with pytest.raises(BaseException) as info:
        with anyio.fail_after(30):
            async with mcp_client(url, headers, seen) as c:
                await c.call_tool("list_libraries", {})
    err = mcp_error(info.value)
    assert err is not None, repr(info.value)
    return err.error.message, seen


def get(
    port: int, path: str, headers: dict[str, str] | None = None, method: str = "GET"
) -> tuple[int, bytes]:
    """A plain HTTP request to the server (no MCP)."""
    r = httpkit.request(method, port, path=path, headers=headers, timeout=10)
    return r.status_code, r.content


# -- keys -------------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["x-api-key", "bearer"])
async def test_a_valid_key_in_either_header_is_served(
    server: HttpServerProcess, keyset: tuple[Path, dict[str, str]], kind: str
) -> None:
    seen = Seen()
    with anyio.fail_after(30):
        async with mcp_client(server.url, key_headers(kind, keyset[1]["app"]), seen) as c:
            libs = await c.call_tool("list_libraries", {})
            hit = await c.call_tool("search_documents", {"query": "useEffect cleanup", "libraryId": "golden"})
    assert not libs.is_error and not hit.is_error
    assert (
        hit.structured_content is not None
        and hit.structured_content["hits"][0]["documentId"] == "guides/hooks.md"
    )
    assert seen.statuses() and set(seen.statuses()) == {200}
    assert all(len(h["x-request-id"]) == 16 for _, h in seen.responses)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["x-api-key", "bearer"])
@pytest.mark.parametrize(
    ("which", "message"),
    [
        ("none", "API key required"),
        ("wrong secret", "invalid API key"),
        ("unknown id", "invalid API key"),
        ("malformed", "invalid API key"),
    ],
)
async def test_a_missing_or_wrong_key_is_401(
    server: HttpServerProcess, keyset: tuple[Path, dict[str, str]], kind: str, which: str, message: str
) -> None:
    app_id = keyset[1]["app"].split(".")[0]
    presented = {
        "wrong secret": f"{app_id}.{WRONG_SECRET}",
        "unknown id": f"0123456789ab.{WRONG_SECRET}",
        "malformed": "not-a-key",
    }
    headers = key_headers(kind, presented[which]) if which != "none" else {}
    text, seen = await refused(server.url, headers)
    assert message in text
    assert set(seen.statuses()) == {401}
    challenge = seen.first(401)["www-authenticate"]
    assert challenge.startswith('Bearer realm="docbundle"')
    assert ('error="invalid_token"' in challenge) == (which != "none")


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["x-api-key", "bearer"])
@pytest.mark.parametrize("which", ["revoked", "expired"])
async def test_a_revoked_or_expired_key_is_403(
    server: HttpServerProcess, keyset: tuple[Path, dict[str, str]], kind: str, which: str
) -> None:
    text, seen = await refused(server.url, key_headers(kind, keyset[1][which]))
    assert text == f"API key {which}"
    assert set(seen.statuses()) == {403}


# -- health, hosts, bodies --------------------------------------------------------------------------


def test_health_endpoints_are_public_and_say_nothing_else(
    server: HttpServerProcess, bundles_root: Path, keyset: tuple[Path, dict[str, str]]
) -> None:
    status, body = get(server.port, "/healthz")
    assert (status, json.loads(body)) == (200, {"status": "ok"})
    status, body = get(server.port, "/readyz")
    assert status == 200
    assert json.loads(body) == {"status": "ready", "libraries": ["cjk", "demo", "golden"], "failed": []}
    text = body.decode()
    assert str(bundles_root) not in text and "key" not in text.lower()
    assert get(server.port, "/healthz", method="HEAD")[0] == 200
    assert get(server.port, "/healthz", method="POST")[0] == 405
    # Everything else needs a key, even what does not exist.
    assert get(server.port, "/nothing-here")[0] == 401
    assert get(server.port, "/mcp")[0] == 401
    assert get(server.port, "/nothing-here", {"X-API-Key": keyset[1]["app"]})[0] == 404
    assert get(server.port, "/mcp", {"X-API-Key": keyset[1]["app"]})[0] == 405  # stateless: POST only


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("header", "value", "status", "message"),
    [
        ("Host", "evil.example", 421, "Host header not allowed"),
        ("Host", "evil.example:8000", 421, "Host header not allowed"),
        ("Origin", "http://evil.example", 403, "Origin header not allowed"),
        ("Origin", "https://localhost.evil.example", 403, "Origin header not allowed"),
    ],
)
async def test_a_foreign_host_or_origin_is_refused(
    server: HttpServerProcess,
    keyset: tuple[Path, dict[str, str]],
    header: str,
    value: str,
    status: int,
    message: str,
) -> None:
    text, seen = await refused(server.url, {"X-API-Key": keyset[1]["app"], header: value})
    assert message in text and set(seen.statuses()) == {status}


@pytest.mark.anyio
async def test_a_local_origin_is_allowed(
    server: HttpServerProcess, keyset: tuple[Path, dict[str, str]]
) -> None:
    seen = Seen()
    headers = {"X-API-Key": keyset[1]["app"], "Origin": "http://localhost:6274"}
    with anyio.fail_after(30):
        async with mcp_client(server.url, headers, seen) as c:
            assert not (await c.call_tool("list_libraries", {})).is_error


@pytest.mark.anyio
async def test_a_five_mib_body_is_refused_with_413(
    server: HttpServerProcess, keyset: tuple[Path, dict[str, str]]
) -> None:
    seen = Seen()
    with anyio.fail_after(30):
        async with mcp_client(server.url, {"X-API-Key": keyset[1]["app"]}, seen) as c:
            with pytest.raises(MCPError) as info:
                await c.call_tool(
                    "search_documents", {"query": "x" * (5 * 1024 * 1024), "libraryId": "golden"}
                )
            assert info.value.error.message == "request body over 1048576 bytes"
            assert seen.statuses()[-1] == 413
            # The same connection and client go on working.
            assert not (await c.call_tool("list_libraries", {})).is_error

    def chunks() -> Iterator[bytes]:
        yield b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "'
        for _ in range(80):
            yield b"x" * 65536
        yield b'"}}'

    # An iterator body goes chunked, without Content-Length: the streamed bytes are counted.
    headers = {"Content-Type": "application/json", "X-API-Key": keyset[1]["app"]}
    assert (
        httpkit.request("POST", server.port, content=chunks(), headers=headers, timeout=10).status_code == 413
    )


# -- logs -------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_log_is_json_lines_without_secrets(
    server: HttpServerProcess, keyset: tuple[Path, dict[str, str]]
) -> None:
    keys = keyset[1]
    app_id = keys["app"].split(".")[0]
    wrong = f"{app_id}.{WRONG_SECRET}"
    with anyio.fail_after(30):
        async with mcp_client(
            server.url, {"X-API-Key": keys["app"], "X-Request-Id": "log-check-1"}, Seen()
        ) as c:
            await c.call_tool("search_documents", {"query": "tables", "libraryId": "demo"})
    for n, headers in enumerate(
        [
            {"Authorization": f"Bearer {wrong}"},
            {"X-API-Key": keys["revoked"]},
            {"Authorization": f"Bearer {keys['expired']}"},
            {},
        ]
    ):
        assert get(server.port, "/mcp", {**headers, "X-Request-Id": f"log-check-refused-{n}"})[0] in (
            401,
            403,
        )
    server.wait_for(lambda line: "log-check-refused-3" in line)
    lines = server.lines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"ts", "level", "logger", "msg"} <= set(r) for r in records)
    search = next(
        r for r in records if r.get("requestId") == "log-check-1" and r.get("tool") == "search_documents"
    )
    assert search["keyId"] == app_id and search["libraryId"] == "demo" and search["outcome"] == "ok"
    assert search["status"] == 200 and search["rpcMethod"] == "tools/call" and search["latencyMs"] > 0
    refusals = {r["requestId"]: r for r in records if r.get("requestId", "").startswith("log-check-refused-")}
    assert [
        (refusals[f"log-check-refused-{n}"]["outcome"], refusals[f"log-check-refused-{n}"]["keyId"])
        for n in range(4)
    ] == [
        ("invalid_key", None),
        ("key_revoked", keys["revoked"].split(".")[0]),
        ("key_expired", keys["expired"].split(".")[0]),
        ("no_key", None),
    ]
    # No secret of any key, presented or stored, ever reaches the log.
    everything = "\n".join(lines)
    for key in [*keys.values(), wrong]:
        assert key.split(".")[1] not in everything
    assert "$scrypt$" not in everything
    assert not [r for r in records if r["level"] in ("warning", "error")]


# -- the command line -------------------------------------------------------------------------------


def test_http_needs_keys_unless_no_auth_is_explicit(
    capsys: pytest.CaptureFixture[str], bundles_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DOCBUNDLE_KEYS", raising=False)
    serve = ["serve", "--bundles", str(bundles_root)]
    assert main([*serve, "--transport", "http"]) == 2
    err = capsys.readouterr().err
    assert "needs API keys" in err and "docbundle keys create" in err and "--no-auth" in err
    assert main([*serve, "--transport", "http", "--no-auth", "--keys", "k.toml"]) == 2
    assert "exclude each other" in capsys.readouterr().err
    assert main([*serve, "--transport", "http", "--keys", str(tmp_path / "absent.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main([*serve, "--keys", "k.toml", "--rate", "5/s"]) == 2
    assert "--keys, --rate apply only to --transport http" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*serve, "--transport", "http", "--rate", "fast"])
    assert "give N/s, N/m or N/h" in capsys.readouterr().err


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def test_every_serve_and_keys_option_is_documented() -> None:
    server_md = (DOCS / "server.md").read_text(encoding="utf-8")
    deployment_md = (DOCS / "deployment.md").read_text(encoding="utf-8")
    commands = _subcommands(_parser())
    parsers = {
        "serve": commands["serve"],
        **{f"keys {k}": p for k, p in _subcommands(commands["keys"]).items()},
    }
    assert set(parsers) == {"serve", "keys create", "keys list", "keys revoke"}
    for name, parser in parsers.items():
        options = [
            o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"
        ]
        assert options, name
        for option in options:
            mentioned = re.compile(rf"(?<![\w-]){re.escape(option)}(?![\w-])")
            assert mentioned.search(server_md), (name, option)
            if name != "serve" or option not in ("--bundles", "--lock", "--transport"):
                assert mentioned.search(deployment_md), (name, option)


# -- units ------------------------------------------------------------------------------------------


def test_host_policy() -> None:
    loopback = HostPolicy("127.0.0.1", (), ())
    assert all(loopback.host_ok(h) for h in ("127.0.0.1:8000", "localhost", "LOCALHOST:1", "[::1]:8000"))
    assert not any(loopback.host_ok(h) for h in (None, "", "evil.example", "127.0.0.1.evil.example:80"))
    assert loopback.origin_ok(None) and loopback.origin_ok("http://localhost:3000")
    assert not loopback.origin_ok("http://evil.example") and not loopback.origin_ok("null")
    proxied = HostPolicy(
        "0.0.0.0", ("docs.example.com", "alt.example.com:8443"), ("https://app.example.com",)
    )
    assert proxied.host_ok("docs.example.com") and proxied.host_ok("docs.example.com:443")
    assert proxied.host_ok("alt.example.com:8443") and not proxied.host_ok("alt.example.com:80")
    assert not proxied.host_ok("0.0.0.0:8000")
    assert proxied.origin_ok("https://docs.example.com") and proxied.origin_ok("https://app.example.com")
    assert not proxied.origin_ok("https://app.example.com:8443") and not proxied.origin_ok(
        "https://evil.example"
    )
    settings = proxied.transport_security()  # always explicit, never the SDK's bind-host-dependent default
    assert settings.enable_dns_rebinding_protection
    assert {"docs.example.com", "docs.example.com:*", "alt.example.com:8443"} <= set(settings.allowed_hosts)
    assert "https://app.example.com" in settings.allowed_origins
    anyhost = HostPolicy("0.0.0.0", ("*",), ())
    assert anyhost.host_ok("whatever.example") and not anyhost.origin_ok("http://whatever.example")
    assert not anyhost.transport_security().enable_dns_rebinding_protection


def test_rate_limiter_is_a_token_bucket() -> None:
    now = [0.0]
    limiter = RateLimiter(2.0, 3, clock=lambda: now[0])
    assert [limiter.take("k") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("k") == pytest.approx(0.5)
    assert limiter.take("other") == 0.0  # buckets are per key
    now[0] = 0.5
    assert limiter.take("k") == 0.0 and limiter.take("k") == pytest.approx(0.5)
    now[0] = 100.0
    assert [limiter.take("k") for _ in range(4)][-1] > 0  # refills to the burst, not beyond


def test_request_peeking_and_outcomes() -> None:
    call = {"name": "search_documents", "arguments": {"query": "secret words", "library": "Demo"}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}).encode()
    assert peek_request(body) == {"rpcMethod": "tools/call", "tool": "search_documents", "libraryId": "demo"}
    read = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "resources/read",
        "params": {"uri": "docs://golden/latest/a.md"},
    }
    assert peek_request(json.dumps(read).encode()) == {"rpcMethod": "resources/read", "libraryId": "golden"}
    odd = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "x\ny", "arguments": {"libraryId": 7}},
    }
    assert peek_request(json.dumps(odd).encode()) == {"rpcMethod": "tools/call", "tool": "(invalid)"}
    assert peek_request(b"[1, 2]") == {} and peek_request(b"{nope") is None
    ok = {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": False}}
    failed = {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": True}}
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}}
    assert reply_facts(200, json.dumps(ok).encode())[:2] == ("ok", None)
    assert reply_facts(200, json.dumps(failed).encode())[:2] == ("tool_error", None)
    assert reply_facts(400, json.dumps(error).encode())[:2] == ("rpc_error", -32602)
    assert reply_facts(406, b"Not Acceptable")[:2] == ("http_406", None)
    search = {
        "content": [],
        "structuredContent": {"hits": [{"mode": "x"}], "mode": "hybrid", "stopped": True},
    }
    assert reply_facts(200, json.dumps({"id": 1, "result": search}).encode()) == ("ok", None, "hybrid", True)
    odd_facts = {"content": [], "structuredContent": {"mode": 3, "stopped": "yes"}}
    assert reply_facts(200, json.dumps({"id": 1, "result": odd_facts}).encode()) == ("ok", None, None, False)
    assert presented_key({"x-api-key": " a.b ", "authorization": "Bearer c.d"}) == "a.b"
    assert presented_key({"authorization": "bearer c.d"}) == "c.d"
    assert presented_key({"authorization": "Basic dXNlcjpwdw=="}) is None
