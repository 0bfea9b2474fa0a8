"""Streamable HTTP for a shared server: API keys, rate limits, body limits, health and access logs.

``HttpApp`` is a pure ASGI app in front of the MCP SDK's streamable HTTP app (stateless, JSON
responses: every ``POST /mcp`` stands alone, so no session state grows with the number of clients).
For each request, in this order:

1. ``GET /healthz`` and ``GET /readyz`` answer at once, without a key, and say nothing else;
2. the ``Host`` and ``Origin`` headers must be allowed (421 / 403: DNS-rebinding protection);
3. an API key from ``X-API-Key`` or ``Authorization: Bearer`` (401 missing or wrong, 403 revoked or
   expired, 503 when the keys file is unusable), unless the server runs with ``--no-auth``. A wrong
   secret is mostly turned away by its key's ``check`` without a scrypt; the scrypts that remain are
   budgeted per client address and globally (a client over its budget waits a little, or gets 429),
   never per key id, so nobody can lock a key out;
4. a token bucket per key (per client address without keys): 429 with ``Retry-After``;
5. the body: a declared ``Content-Length`` over the limit is refused before reading (413), the bytes
   of a streamed body are counted (413), and the whole body must arrive within a time limit (408);
   then it must be UTF-8 JSON nested at most ``MAX_JSON_DEPTH`` deep (400 with a JSON-RPC error);
6. the MCP SDK app, which checks ``Host``/``Origin`` again with the same explicit settings.

The client address is the TCP peer's, or what ``X-Forwarded-For`` says when the peer is one of the
``--trusted-proxy`` addresses (uvicorn's proxy-headers middleware, configured explicitly here: by
default no forwarded header is believed).

Every request leaves one JSON access-log line: request id, key id (never the key), JSON-RPC method,
tool, libraryId, status, outcome and latency. The request id is echoed in ``X-Request-Id``.
"""

from __future__ import annotations

import ipaddress
import itertools
import logging
import math
import re
import secrets
import socket
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import msgspec
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from .catalog import Catalog
from .keys import AuthResult, KeyStore

if TYPE_CHECKING:
    import uvicorn

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MCP_PATH = "/mcp"
DEFAULT_RATE = 10.0  # requests per second per key
DEFAULT_BURST = 40
DEFAULT_MAX_BODY = 1024 * 1024  # MCP requests to this server are a few hundred bytes
DEFAULT_BODY_TIMEOUT = 10.0
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_BINDS = ("0.0.0.0", "::", "")
# The error code of JSON-RPC error bodies this layer writes (the server-defined range of JSON-RPC).
REJECTED = -32001
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
# Deepest JSON nesting a request body may have (an MCP request needs about 6). Checked by a linear scan
# before anything parses the body recursively: msgspec, pydantic and json all recurse per level.
MAX_JSON_DEPTH = 64
# Budgets for the scrypts (~65 ms and 16 MiB each) that keys not proven yet cost: secrets that passed
# their key's check, and any secret for a key without a check (wrong secrets for a key with a check are
# refused before, for free). Two lanes, one for each kind, each counted by client address and over all
# clients, never by key id; a scrypt whose secret was right is given back. A client over budget waits
# for its turn up to AUTH_MAX_WAIT seconds, else gets 429.
AUTH_CLIENT_BURST = 10  # checks a client address may have at once
AUTH_CLIENT_RATE = 1.0  # then this many per second (about 6 % of a core per guessing address)
AUTH_GLOBAL_BURST = 30  # checks all clients together may have at once
AUTH_GLOBAL_RATE = 3.0  # then this many per second (about 20 % of a core, however many addresses guess)
AUTH_MAX_WAIT = 2.0
# Clients tracked by the key-check budget; over it, the least recently seen are forgotten.
AUTH_MAX_CLIENTS = 10_000
# IPv6 clients are counted per /64: one host usually holds a whole /64.
IPV6_CLIENT_PREFIX = 64

log = logging.getLogger("docbundle.http")

# Full matches only (re.fullmatch): "$" would accept a trailing newline.
_REQUEST_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_NAME_RE = re.compile(r"[A-Za-z0-9_./-]{1,64}")
_LIBRARY_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_URI_LIBRARY_RE = re.compile(r"^(?:docs|library)://([^/]+)")
_LIBRARY_ARGS = ("libraryId", "library", "libraryID", "library_id")
_CAPTURE_LIMIT = 1024 * 1024  # response bytes kept to read the JSON-RPC outcome
# A refused request's body is read and thrown away up to this size before the answer goes out: closing
# a socket with unread data makes the kernel send a reset, and the client would lose the answer.
DRAIN_LIMIT = 16 * 1024 * 1024


# -- options and policies ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpOptions:
    """How the HTTP transport is exposed; the CLI builds it from ``docbundle serve`` options."""

    host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    rate: float | None = DEFAULT_RATE  # None: no rate limit
    burst: int = DEFAULT_BURST
    max_body_size: int = DEFAULT_MAX_BODY
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    # Peers whose X-Forwarded-For is believed: IP addresses or networks (``--trusted-proxy``).
    trusted_proxies: tuple[str, ...] = ()


def _split_host(value: str) -> tuple[str, str | None]:
    """``(hostname, port)`` of a Host header value: ``name``, ``name:port``, ``[v6]`` or ``[v6]:port``."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, None
        rest = value[end + 1 :]
        return value[1:end], (rest[1:] if rest.startswith(":") else None)
    if value.count(":") == 1:
        name, port = value.split(":")
        return name, port
    return value, None  # a bare IPv6 address (only in options) or a name


def _bracket(name: str) -> str:
    return f"[{name}]" if ":" in name else name


class HostPolicy:
    """Which ``Host`` and ``Origin`` values are accepted.

    Hosts: the loopback names, the bind address (unless a wildcard) and every ``--allowed-host``
    (``name`` for any port, ``name:port`` for one port, ``*`` for any host). Origins: ``http`` and
    ``https`` on any allowed host name, plus every ``--allowed-origin`` (``scheme://host[:port]``,
    ``scheme://host:*`` for any port, ``*`` for any origin). No ``Origin`` header (not a browser) is
    always accepted.
    """

    def __init__(
        self, bind_host: str, allowed_hosts: tuple[str, ...], allowed_origins: tuple[str, ...]
    ) -> None:
        self.any_host = "*" in allowed_hosts
        self.any_origin = "*" in allowed_origins
        names: dict[str, str | None] = {}  # hostname -> port, or None for any port
        bind = bind_host.strip("[]").lower()
        for entry in [*LOOPBACK_NAMES, *([bind] if bind not in WILDCARD_BINDS else [])]:
            names[entry] = None
        self._ports: dict[str, set[str]] = {}
        for entry in allowed_hosts:
            if entry == "*":
                continue
            name, port = _split_host(entry) if not _is_bare_ipv6(entry) else (entry.lower(), None)
            if port is None:
                names[name] = None
                self._ports.pop(name, None)
            elif name not in names:
                self._ports.setdefault(name, set()).add(port)
        self.names = names
        self._origins: set[str] = set()
        self._origin_any_port: set[str] = set()
        for name in [*names, *self._ports]:
            for scheme in ("http", "https"):
                self._origin_any_port.add(f"{scheme}://{_bracket(name)}")
        for entry in allowed_origins:
            if entry == "*":
                continue
            origin = entry.strip().rstrip("/").lower()
            if origin.endswith(":*"):
                self._origin_any_port.add(origin[:-2])
            else:
                self._origins.add(origin)

    def host_ok(self, header: str | None) -> bool:
        """Whether a request's ``Host`` header names this server."""
        if self.any_host:
            return True
        if not header:
            return False
        name, port = _split_host(header)
        if name in self.names:
            return True
        return port is not None and port in self._ports.get(name, set())

    def origin_ok(self, header: str | None) -> bool:
        """Whether a request's ``Origin`` header (absent for non-browser clients) is allowed."""
        if header is None or self.any_origin:
            return True
        origin = header.strip().lower()
        if origin in self._origins:
            return True
        scheme, sep, rest = origin.partition("://")
        if not sep:
            return False
        name, _port = _split_host(rest)
        return f"{scheme}://{_bracket(name)}" in self._origin_any_port

    def transport_security(self) -> TransportSecuritySettings:
        """The same policy for the SDK, always explicit (its defaults depend on the bind address)."""
        hosts: list[str] = []
        for name in self.names:
            hosts += [_bracket(name), f"{_bracket(name)}:*"]
        for name, ports in self._ports.items():
            hosts += [f"{_bracket(name)}:{p}" for p in sorted(ports)]
        origins = sorted(self._origins) + [f"{o}:*" for o in sorted(self._origin_any_port)]
        origins += sorted(self._origin_any_port)
        return TransportSecuritySettings(
            # The SDK cannot express "any host" or "any origin"; this layer has checked them already.
            enable_dns_rebinding_protection=not (self.any_host or self.any_origin),
            allowed_hosts=hosts,
            allowed_origins=origins,
        )


def _is_bare_ipv6(value: str) -> bool:
    return value.count(":") > 1 and not value.startswith("[")


class RateLimiter:
    """Token buckets by key: ``rate`` tokens per second up to ``burst``; used from the event loop only."""

    def __init__(
        self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic, max_keys: int = 10_000
    ) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    def _tokens(self, key: str, now: float) -> float:
        tokens, at = self._buckets.get(key, (self.burst, now))
        return min(self.burst, tokens + (now - at) * self.rate)

    def wait_time(self, key: str) -> float:
        """Seconds until ``key`` has a token (0 when it has one now); consumes nothing."""
        tokens = self._tokens(key, self._clock())
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def take(self, key: str) -> float:
        """Consume a token of ``key``: 0 when allowed, else the seconds until one is available."""
        now = self._clock()
        tokens = self._tokens(key, now)
        if tokens < 1:
            self._buckets[key] = (tokens, now)
            return (1 - tokens) / self.rate
        self._buckets[key] = (tokens - 1, now)
        if len(self._buckets) > self._max_keys:
            self._prune(now)
        return 0.0

    def _prune(self, now: float) -> None:
        # A bucket that has refilled is the same as no bucket: forget it (bounds memory per client).
        for k in [k for k in self._buckets if self._tokens(k, now) >= self.burst]:
            del self._buckets[k]


class AuthBudget:
    """How many key checks (scrypts) each client address, and all of them together, may cause.

    Two token buckets, one per client and one global, that may run into debt: ``admit`` books a check
    in both and says how long the caller must wait for it (0 while within the bursts), or None when
    that wait would exceed ``max_wait`` (then nothing is booked: the caller refuses with 429).
    ``give_back`` returns the booking of a check whose secret was right, so legitimate first uses
    never count as failures. A client whose earlier requests have all been answered always gets a
    turn (its debt has been paid by then), so a client asking one thing at a time is slowed, never
    refused. Used from the event loop only.
    """

    def __init__(
        self,
        *,
        client_rate: float = AUTH_CLIENT_RATE,
        client_burst: int = AUTH_CLIENT_BURST,
        global_rate: float = AUTH_GLOBAL_RATE,
        global_burst: int = AUTH_GLOBAL_BURST,
        max_wait: float = AUTH_MAX_WAIT,
        max_clients: int = AUTH_MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client_rate, self.client_burst = client_rate, float(client_burst)
        self.global_rate, self.global_burst = global_rate, float(global_burst)
        self.max_wait = max_wait
        self._max_clients = max_clients
        self._clock = clock
        self._clients: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client -> (tokens, at)
        self._global = (self.global_burst, clock())

    def _client_tokens(self, client: str, now: float) -> float:
        tokens, at = self._clients.get(client, (self.client_burst, now))
        return min(self.client_burst, tokens + (now - at) * self.client_rate)

    def _global_tokens(self, now: float) -> float:
        tokens, at = self._global
        return min(self.global_burst, tokens + (now - at) * self.global_rate)

    def _wait(self, client: str, now: float) -> float:
        mine, everyone = self._client_tokens(client, now), self._global_tokens(now)
        return max(
            0.0 if mine >= 1 else (1 - mine) / self.client_rate,
            0.0 if everyone >= 1 else (1 - everyone) / self.global_rate,
        )

    def admit(self, client: str) -> float | None:
        """Book a check for ``client``: the seconds to wait before running it, or None (refuse)."""
        now = self._clock()
        wait = self._wait(client, now)
        if wait > self.max_wait:
            return None
        self._clients[client] = (self._client_tokens(client, now) - 1, now)
        self._clients.move_to_end(client)
        self._global = (self._global_tokens(now) - 1, now)
        while len(self._clients) > self._max_clients:
            self._clients.popitem(last=False)  # the global budget still holds for a forgotten client
        return wait

    def retry_after(self, client: str) -> float:
        """Seconds until ``admit`` would accept ``client`` again."""
        return max(0.0, self._wait(client, self._clock()) - self.max_wait)

    def give_back(self, client: str) -> None:
        """Return a booking: the check it paid for proved a real secret."""
        now = self._clock()
        if client in self._clients:
            self._clients[client] = (min(self.client_burst, self._client_tokens(client, now) + 1), now)
        self._global = (min(self.global_burst, self._global_tokens(now) + 1), now)


def client_key(scope: Scope) -> str:
    """Who a request comes from, for budgets: its IP address (IPv6 by /64), as uvicorn reports it."""
    client = scope.get("client")
    host = str(client[0]) if client else "?"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host[:64]  # not an IP (a unix socket, or what a trusted proxy sent): bounded anyway
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, IPV6_CLIENT_PREFIX), strict=False))
    return str(ip)


# -- request checks ---------------------------------------------------------------------------------

# A JSON string, terminated or not (an unterminated one runs to the end: the match never fails, so
# the scan stays linear even on a body of unterminated strings full of escaped quotes).
_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_DEPTH_STEP = [0] * 256
for _open, _close in (b"[]", b"{}"):
    _DEPTH_STEP[_open], _DEPTH_STEP[_close] = 1, -1


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text, brackets inside strings ignored.

    Linear and not recursive (C-speed passes over the bytes), so it is safe on any input; on text
    that is not JSON it still gives a number, which is all a depth limit needs.
    """
    if body.count(b"[") + body.count(b"{") == 0:
        return 0
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    return max(0, max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0))


def valid_request_id(value: str) -> bool:
    """Whether a client's ``X-Request-Id`` may be echoed and logged (else a new one is made)."""
    return _REQUEST_ID_RE.fullmatch(value) is not None


# -- request peeking --------------------------------------------------------------------------------


class _RpcParams(msgspec.Struct):
    name: Any = None
    uri: Any = None
    arguments: Any = None


class _RpcRequest(msgspec.Struct):
    method: Any = None
    params: Any = None


class _RpcError(msgspec.Struct):
    code: Any = None


class _RpcResult(msgspec.Struct, rename={"is_error": "isError"}):
    is_error: Any = False


class _RpcReply(msgspec.Struct):
    error: _RpcError | None = None
    # Only isError is decoded: msgspec skips the rest of a result (tens of KB for a search) unread.
    result: _RpcResult | None = None


_request_decoder = msgspec.json.Decoder(_RpcRequest)
_reply_decoder = msgspec.json.Decoder(_RpcReply)


def _clean(value: Any, pattern: re.Pattern[str]) -> str | None:
    if not isinstance(value, str):
        return None
    return value if pattern.fullmatch(value) else "(invalid)"


def peek_request(body: bytes) -> dict[str, Any] | None:
    """Log fields of a JSON-RPC request body (method, tool, libraryId); None if it is not JSON."""
    try:
        req = _request_decoder.decode(body)
    except msgspec.ValidationError:
        return {}  # JSON, but not one request object (a batch, a string ...): the SDK answers it
    except msgspec.DecodeError:
        return None
    fields: dict[str, Any] = {"rpcMethod": _clean(req.method, _NAME_RE)}
    try:
        params = msgspec.convert(req.params, _RpcParams) if isinstance(req.params, dict) else _RpcParams()
    except msgspec.ValidationError:
        params = _RpcParams()
    if req.method in ("tools/call", "prompts/get"):
        fields["tool" if req.method == "tools/call" else "prompt"] = _clean(params.name, _NAME_RE)
    library: Any = None
    if isinstance(params.arguments, dict):
        library = next((params.arguments[a] for a in _LIBRARY_ARGS if params.arguments.get(a)), None)
    if library is None and isinstance(params.uri, str):
        m = _URI_LIBRARY_RE.match(params.uri)
        library = m.group(1) if m else None
    if isinstance(library, str):
        fields["libraryId"] = _clean(library.lower(), _LIBRARY_RE)
    return {k: v for k, v in fields.items() if v is not None}


def reply_outcome(status: int, body: bytes) -> tuple[str, int | None]:
    """``(outcome, JSON-RPC error code)`` of the SDK's answer: ok, tool_error, rpc_error or http_<status>."""
    if status == 202:
        return "ok", None
    try:
        reply = _reply_decoder.decode(body) if body else None
    except msgspec.DecodeError:  # not JSON, or a result that is not an object: judged by status alone
        reply = None
    if reply is not None and reply.error is not None:
        code = reply.error.code if isinstance(reply.error.code, int) else None
        return "rpc_error", code
    if status >= 400:
        return f"http_{status}", None
    if reply is not None and reply.result is not None and reply.result.is_error is True:
        return "tool_error", None
    return "ok", None


# -- the ASGI app -----------------------------------------------------------------------------------


def _headers(scope: Scope) -> dict[str, str]:
    """Request headers by lowercase name (the first of repeated ones)."""
    out: dict[str, str] = {}
    for k, v in scope.get("headers", []):
        out.setdefault(k.decode("latin-1").lower(), v.decode("latin-1"))
    return out


def presented_key(headers: dict[str, str]) -> str | None:
    """The API key of a request: ``X-API-Key`` wins, else an ``Authorization: Bearer`` token."""
    key = headers.get("x-api-key")
    if key is not None and key.strip():
        return key.strip()
    scheme, _, token = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


class _Exchange:
    """One request's state: what the access log line will say, and the send wrapper that records it."""

    def __init__(
        self, scope: Scope, receive: Receive, send: Send, request_id: str, body_timeout: float
    ) -> None:
        self.scope = scope
        self.request_id = request_id
        self._receive = receive
        self._send = send
        self._body_timeout = body_timeout
        # Whether a request body may still be unread (then a refusal drains it first).
        self.body_pending = False
        self.started = time.perf_counter()
        self.status = 0
        self.body_parts: list[bytes] = []
        self.body_len = 0
        self.capture = False
        self.complete = False
        self.fields: dict[str, Any] = {}

    async def send(self, message: Message) -> None:
        """Pass a message on, adding X-Request-Id and remembering the status (and a JSON body)."""
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            message = dict(message)
            message["headers"] = [*message.get("headers", []), (b"x-request-id", self.request_id.encode())]
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            self.body_len += len(chunk)
            if self.capture and self.body_len > _CAPTURE_LIMIT:
                # Too big to be worth parsing for the log: judge it by its status alone.
                self.capture = False
                self.body_parts.clear()
            if self.capture:
                self.body_parts.append(chunk)
            if not message.get("more_body", False):
                self.complete = True
        await self._send(message)

    async def respond(
        self, status: int, payload: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        """Send a small JSON response."""
        body = msgspec.json.encode(payload)
        await self.send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store"),
                    *(headers or []),
                ],
            }
        )
        await self.send({"type": "http.response.body", "body": body})

    async def reject(
        self,
        status: int,
        outcome: str,
        message: str,
        headers: list[tuple[bytes, bytes]] | None = None,
        *,
        code: int | None = None,
    ) -> None:
        """Refuse the request with a JSON-RPC error body (MCP clients show its message)."""
        self.fields["outcome"] = outcome
        headers = list(headers or [])
        if self.body_pending and not await self.drain():
            # The rest of the body would be read as the next request: this connection is done.
            headers.append((b"connection", b"close"))
        if code is None:
            code = PARSE_ERROR if outcome == "parse_error" else REJECTED
        payload = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
        await self.respond(status, payload, headers)

    async def drain(self) -> bool:
        """Read and discard the rest of the body (bounded in bytes and time); True if it all came."""
        self.body_pending = False
        size = 0
        with anyio.move_on_after(self._body_timeout):
            while size <= DRAIN_LIMIT:
                message = await self._receive()
                if message["type"] == "http.disconnect":
                    return False
                size += len(message.get("body", b""))
                if not message.get("more_body", False):
                    return True
        return False


class HttpApp:
    """The ASGI app ``docbundle serve --transport http`` runs (see the module docstring)."""

    def __init__(
        self, mcp: MCPServer[Any], catalog: Catalog, keys: KeyStore | None, options: HttpOptions
    ) -> None:
        self.catalog = catalog
        self.keys = keys
        self.options = options
        self.policy = HostPolicy(options.host, options.allowed_hosts, options.allowed_origins)
        self.inner = mcp.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=self.policy.transport_security(),
            max_request_body_size=options.max_body_size,
            host=options.host,
        )
        self.limiter = RateLimiter(options.rate, options.burst) if options.rate else None
        # Keys not proven yet cost a scrypt each: that work is budgeted per client and globally, in two
        # lanes. Secrets that passed their key's check are almost always right: guesses at keys
        # without a check (written before checks existed) cannot crowd them out.
        self.auth_budget = AuthBudget()
        self.checked_budget = AuthBudget()
        self._scrypt_slots: anyio.CapacityLimiter | None = None
        self._reported = -1
        # Request ids: a random prefix per process and a counter; unique without a syscall each.
        self._id_prefix = secrets.token_hex(4)
        self._id_counter = itertools.count(1)
        self.ready = False

    def _next_id(self) -> str:
        return f"{self._id_prefix}{next(self._id_counter):08x}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point: lifespan goes to the SDK app (it runs the session manager), HTTP to us."""
        if scope["type"] == "lifespan":
            await self.inner(scope, receive, self._lifespan_send(send))
        elif scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})

    def _lifespan_send(self, send: Send) -> Send:
        async def relay(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete":
                self.ready = True
            elif message["type"].startswith("lifespan.shutdown"):
                self.ready = False
            await send(message)

        return relay

    # -- per request --------------------------------------------------------------------------------

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope)
        incoming = headers.get("x-request-id", "")
        rid = incoming if valid_request_id(incoming) else self._next_id()
        ex = _Exchange(scope, receive, send, rid, self.options.body_timeout)
        path, method = scope.get("path", ""), scope.get("method", "")
        try:
            if path in ("/healthz", "/readyz"):
                await self._health(ex, path, method)
                return
            await self._guarded(ex, headers, receive)
        finally:
            self._log(ex, health=path in ("/healthz", "/readyz"))

    async def _health(self, ex: _Exchange, path: str, method: str) -> None:
        ex.fields["outcome"] = "ok"
        if method not in ("GET", "HEAD"):
            await ex.respond(405, {"status": "method not allowed"}, [(b"allow", b"GET, HEAD")])
            return
        if path == "/healthz":
            await ex.respond(200, {"status": "ok"})
            return
        status, payload = self.readiness()
        await ex.respond(status, payload)

    def readiness(self) -> tuple[int, dict[str, Any]]:
        """``/readyz``: 200 when serving with at least one usable library, else 503; ids only.

        ``status`` is ``ready`` when every library version is usable and ``degraded`` when some failed
        (at start-up, on first open, or later because its data went bad); ``failed`` lists them.
        """
        failed = []
        usable = 0
        for entry in self.catalog.entries():
            if self.catalog.state(entry)[0] == "failed":
                failed.append({"libraryId": entry.library_id, "version": entry.version})
            else:
                usable += 1
        payload: dict[str, Any] = {"libraries": self.catalog.library_ids(), "failed": failed}
        if not self.ready:
            return 503, {"status": "starting", **payload}
        if self.keys is not None and self.keys.error is not None:
            return 503, {"status": "unavailable", **payload}
        if usable == 0:
            return 503, {"status": "no libraries", **payload}
        return 200, {"status": "degraded" if failed else "ready", **payload}

    async def _guarded(self, ex: _Exchange, headers: dict[str, str], receive: Receive) -> None:
        scope = ex.scope
        ex.body_pending = headers.get("content-length", "0") != "0" or "transfer-encoding" in headers
        if not self.policy.host_ok(headers.get("host")):
            await ex.reject(421, "bad_host", "Host header not allowed (see --allowed-host)")
            return
        if not self.policy.origin_ok(headers.get("origin")):
            await ex.reject(403, "bad_origin", "Origin header not allowed (see --allowed-origin)")
            return
        bucket = f"client:{client_key(scope)}"
        if self.keys is not None:
            key_id = await self._authenticate(ex, headers)
            if key_id is None:
                return
            bucket = key_id
        if self.limiter is not None:
            wait = self.limiter.take(bucket)
            if wait > 0:
                retry = str(max(1, math.ceil(wait))).encode()
                await ex.reject(
                    429, "rate_limited", "rate limit exceeded; retry later", [(b"retry-after", retry)]
                )
                return
        declared = headers.get("content-length")
        if declared is not None and not declared.isdigit():
            ex.body_pending = False  # unknowable length: nothing can be drained, the reply closes
            await ex.reject(400, "bad_request", "bad Content-Length", [(b"connection", b"close")])
            return
        if declared is not None and int(declared) > self.options.max_body_size:
            # Refused on the header alone: nothing of it is kept (a body too big to drain is cut off).
            ex.body_pending = int(declared) <= DRAIN_LIMIT
            close = [] if ex.body_pending else [(b"connection", b"close")]
            await ex.reject(413, "too_large", f"request body over {self.options.max_body_size} bytes", close)
            return
        if scope.get("path") == MCP_PATH and scope.get("method") != "POST":
            # Stateless: no session to delete, and no server-initiated messages for a GET stream to
            # carry (the SDK would hold such a stream open for as long as the client likes).
            await ex.reject(405, "method_not_allowed", "only POST is supported here", [(b"allow", b"POST")])
        elif scope.get("method") in ("POST", "PUT", "PATCH"):
            await self._with_body(ex, receive)
        else:
            await self.inner(scope, receive, ex.send)
            ex.fields["outcome"] = "ok" if ex.status < 400 else f"http_{ex.status}"

    async def _authenticate(self, ex: _Exchange, headers: dict[str, str]) -> str | None:
        """The proven key id, or None once a refusal has been sent."""
        assert self.keys is not None
        challenge = b'Bearer realm="docbundle"'
        key = presented_key(headers)
        if key is None:
            await ex.reject(
                401,
                "no_key",
                "API key required: send X-API-Key: <id>.<secret> or Authorization: Bearer <id>.<secret>",
                [(b"www-authenticate", challenge)],
            )
            return None
        result = self.keys.check_cached(key)
        if result is None:
            # Budgeted by who asks, never by the key id asked about: guessing secrets for a known id
            # must not lock that key out for its owner.
            client = client_key(ex.scope)
            budget = self.checked_budget if self.keys.prechecked(key) else self.auth_budget
            wait = budget.admit(client)
            if wait is None:
                retry = max(1, math.ceil(budget.retry_after(client)))
                await ex.reject(
                    429,
                    "auth_throttled",
                    f"too many failed API key attempts from this address; retry in {retry} s",
                    [(b"retry-after", str(retry).encode())],
                )
                return None
            if wait > 0:
                await anyio.sleep(wait)
            if self._scrypt_slots is None:
                # One scrypt at a time (16 MiB, ~65 ms each); created here, inside the event loop.
                self._scrypt_slots = anyio.CapacityLimiter(1)
            result = await anyio.to_thread.run_sync(self.keys.verify, key, limiter=self._scrypt_slots)
            if result.verdict != "invalid":
                budget.give_back(client)  # the secret was right (or never checked)
        return await self._verdict(ex, result, challenge)

    async def _verdict(self, ex: _Exchange, result: AuthResult, challenge: bytes) -> str | None:
        ex.fields["keyId"] = result.key_id
        if result.verdict == "ok":
            return result.key_id
        if result.verdict == "invalid":
            await ex.reject(
                401,
                "invalid_key",
                "invalid API key",
                [(b"www-authenticate", challenge + b', error="invalid_token"')],
            )
        elif result.verdict == "unavailable":
            if self.keys is not None and self._reported != self.keys.generation:
                self._reported = self.keys.generation  # once per broken version of the file
                log.error("refusing every request until the keys file is fixed: %s", self.keys.error)
            await ex.reject(503, "keys_unavailable", "server cannot check API keys; see its log")
        else:
            await ex.reject(403, f"key_{result.verdict}", f"API key {result.verdict}")
        return None

    async def _with_body(self, ex: _Exchange, receive: Receive) -> None:
        ex.body_pending = False
        body, problem = await self._read_body(receive)
        ex.fields["bytesIn"] = len(body)
        if problem == "disconnect":
            ex.fields["outcome"] = "client_disconnected"
            return
        if problem == "timeout":
            msg = f"request body not received within {self.options.body_timeout:g} s"
            await ex.reject(408, "body_timeout", msg, [(b"connection", b"close")])
            return
        if problem == "too_large":
            ex.body_pending = True  # the rest of it is drained (bounded) so the client reads the 413
            await ex.reject(413, "too_large", f"request body over {self.options.max_body_size} bytes")
            return
        if ex.scope.get("path") == MCP_PATH:
            try:
                body.decode("utf-8")
            except UnicodeDecodeError as exc:
                msg = f"Parse error: the body is not valid UTF-8 (byte {exc.start}); send JSON in UTF-8"
                await ex.reject(400, "parse_error", msg)
                return
            if json_depth(body) > MAX_JSON_DEPTH:
                msg = f"Invalid Request: JSON nested more than {MAX_JSON_DEPTH} levels deep"
                await ex.reject(400, "too_deep", msg, code=INVALID_REQUEST)
                return
            peeked = peek_request(body)
            if peeked is None:
                await ex.reject(400, "parse_error", "Parse error: the body is not JSON")
                return
            ex.fields.update(peeked)
        ex.capture = True
        await self._forward(ex, body, receive)

    async def _read_body(self, receive: Receive) -> tuple[bytes, str | None]:
        """The whole request body, or what went wrong: ``disconnect``, ``timeout`` or ``too_large``."""
        parts: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.options.body_timeout):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return b"".join(parts), "disconnect"
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.options.max_body_size:
                    return b"", "too_large"
                parts.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(parts), None
        return b"".join(parts), "timeout"

    async def _forward(self, ex: _Exchange, body: bytes, receive: Receive) -> None:
        """Run the SDK app on the buffered body; a client that goes away cancels its request."""
        pending = deque([{"type": "http.request", "body": body, "more_body": False}])
        gone = anyio.Event()

        async def replay() -> Message:
            if pending:
                return pending.popleft()
            await gone.wait()
            return {"type": "http.disconnect"}

        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                # After the body, the next receive() returns only when the client disconnects (or
                # once the response is complete, which is no disconnect at all).
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone.set()
                    if not ex.complete:
                        ex.fields["outcome"] = "client_disconnected"
                        tg.cancel_scope.cancel()

            tg.start_soon(watch)
            await self.inner(ex.scope, replay, ex.send)
            tg.cancel_scope.cancel()
        if "outcome" not in ex.fields:
            outcome, code = reply_outcome(ex.status, b"".join(ex.body_parts))
            ex.fields["outcome"] = outcome
            if code is not None:
                ex.fields["rpcError"] = code

    # -- logging ------------------------------------------------------------------------------------

    def _log(self, ex: _Exchange, *, health: bool) -> None:
        scope = ex.scope
        client = scope.get("client")
        fields: dict[str, Any] = {
            "event": "request",
            "requestId": ex.request_id,
            "method": scope.get("method"),
            "path": scope.get("path"),
            "status": ex.status or None,
            "keyId": None,
            "client": client[0] if client else None,
            **ex.fields,
            "latencyMs": round((time.perf_counter() - ex.started) * 1000, 2),
        }
        fields.setdefault("outcome", "error" if ex.status >= 500 or not ex.status else "ok")
        level = logging.DEBUG if health else logging.ERROR if ex.status >= 500 else logging.INFO
        if log.isEnabledFor(level):
            summary = " ".join(
                str(p)
                for p in (
                    fields["method"],
                    fields["path"],
                    ex.status or "-",
                    fields.get("tool"),
                    fields["outcome"],
                )
                if p
            )
            log.log(level, summary, extra={"fields": fields})


# -- serving ----------------------------------------------------------------------------------------


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one), before uvicorn starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say they are TCP,
    # and accepted sockets inherit this. With Nagle on, a response written as headers then body waits
    # for the client's delayed ACK: +40 ms on every request.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def http_server(app: HttpApp, *, log_level: str = "info") -> uvicorn.Server:
    """A uvicorn server for ``app``; run it with ``.run(sockets=[bind_socket(...)])``."""
    import uvicorn

    trusted = list(app.options.trusted_proxies)
    config = uvicorn.Config(
        app,
        # Explicit, so neither uvicorn's default (trust 127.0.0.1) nor $FORWARDED_ALLOW_IPS applies:
        # X-Forwarded-For is believed from the --trusted-proxy peers only, else from nobody.
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted,
        log_level=log_level,
        access_log=False,  # HttpApp writes the access log, with more in it
        lifespan="on",
        log_config=None,  # the JSON logging configured by the CLI stays in charge
        server_header=False,
        # A stuck client must not hold shutdown (systemctl stop, docker stop) for ever.
        timeout_graceful_shutdown=10,
    )
    return uvicorn.Server(config)
