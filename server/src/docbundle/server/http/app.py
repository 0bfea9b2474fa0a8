"""Streamable HTTP for a shared server: API keys, rate limits, body limits, health and access logs.

``HttpApp`` is a pure ASGI app in front of the MCP SDK's streamable HTTP app (stateless, JSON
responses: every ``POST /mcp`` stands alone, so no session state grows with the number of clients).
For each request, in this order:

1. the public endpoints (``PUBLIC``: ``GET /healthz``, ``/readyz`` and ``/info``) answer at once,
   without a key, and say nothing else;
2. the ``Host`` and ``Origin`` headers must be allowed (421 / 403: DNS-rebinding protection); a
   browser's CORS preflight (``OPTIONS`` with ``Access-Control-Request-Method``) from an allowed
   origin is answered here (204), and every answer to an allowed origin carries the CORS headers;
3. an API key from ``X-API-Key`` or ``Authorization: Bearer`` (401 missing or wrong, 403 revoked or
   expired, 503 when the keys file is unusable), unless the server runs with ``--no-auth``. A wrong
   secret is mostly turned away by its key's ``check`` without a scrypt; the scrypts that remain are
   budgeted per client address and globally (a client over its budget waits a little, or gets 429),
   never per key id, so nobody can lock a key out. Before it, the operator page's static files (``/``
   and the ``/ui/`` assets: ``page.py``) are served without a key, as they hold no data;
4. a token bucket per key (per client address without keys; anonymous loopback clients, the local
   user, only when ``--rate`` or ``--burst`` is given): 429 with ``Retry-After``;
5. the body: a declared ``Content-Length`` over the limit is refused before reading (413), the bytes
   of a streamed body are counted (413), and the whole body must arrive within a time limit (408);
   then it must be UTF-8 JSON nested at most ``MAX_JSON_DEPTH`` deep, with ``Content-Type:
   application/json`` (415), and one JSON-RPC message as MCP allows it (``jsonrpc.envelope_problem``:
   no batch, ``"jsonrpc": "2.0"``, a string or integer ``id``); else 400 with a one-line JSON-RPC error;
6. the endpoints this layer answers behind those checks (``KEYED``: ``GET /metrics`` and the operator
   page's ``GET /ui/libraries`` and ``GET /ui/requests``), else the MCP
   SDK app, which checks ``Host``/``Origin`` again with the same explicit settings; its JSON replies
   pass ``jsonrpc.bound_reply`` on the way out, so none quotes back a long client string.

The client address is the TCP peer's, or what ``X-Forwarded-For`` says when the peer is one of the
``--trusted-proxy`` addresses (uvicorn's proxy-headers middleware, configured explicitly here: by
default no forwarded header is believed).

Every request leaves one JSON access-log line: request id, key id (never the key), JSON-RPC method,
tool, libraryId, status, outcome and latency. The request id is echoed in ``X-Request-Id``. It is
counted in the metrics (``metrics.Metrics``), and with the ``otel`` extra and an OTLP endpoint set,
an MCP request is a span (``tracing``).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread
from docbundle.bundle.manifest import SUPPORTED_FORMAT_VERSIONS
from mcp.server.mcpserver import MCPServer

from ..catalog import Catalog
from ..catalog.watch import serving
from ..jsonrpc import (
    CLIENT_ERROR_CODES,
    CLIENT_MISTAKE,
    INVALID_REQUEST,
    MAX_JSON_DEPTH,
    PARSE_ERROR,
    envelope_problem,
    json_depth,
    peek_request,
    reply_facts,
    valid_request_id,
)
from ..keys import AuthResult, KeyStore
from ..lookups import lookup_thread
from ..observe import span
from .exchange import DRAIN_LIMIT, Exchange, Message, Receive, Scope, Send, headers_of, presented_key
from .metrics import CONTENT_TYPE_LATEST, MCP_ROUTE, Metrics
from .options import HttpOptions
from .page import (
    LIBRARIES_PATH,
    PAGE_HEADERS,
    PAGE_PATHS,
    REQUESTS_PATH,
    library_rows,
    page_file,
    request_figures,
)
from .policy import HostPolicy, cors_headers, preflight_headers
from .ratelimit import AUTH_CHECKED_CLIENT_BURST, AuthBudget, RateLimiter, client_key, is_loopback_client
from .tracing import start_tracing

MCP_PATH = MCP_ROUTE
METRICS_PATH = "/metrics"
# The endpoints this layer answers itself (GET and HEAD): public ones before any check, keyed ones after
# the Host, Origin, key and rate-limit checks of /mcp. Their handlers are ``HttpApp.routes``.
PUBLIC = ("/healthz", "/readyz", "/info")
KEYED = (METRICS_PATH, LIBRARIES_PATH, REQUESTS_PATH)
# The paths counted by name in the metrics' ``route`` label (any other path counts as ``_other``): /mcp,
# the operator page and its data. The public endpoints and scrapes are not counted as requests.
COUNTED_ROUTES = (MCP_PATH, *PAGE_PATHS, *(path for path in KEYED if path != METRICS_PATH))
log = logging.getLogger(__name__)


class HttpApp:
    """The ASGI app ``docbundle serve --transport http`` runs (see the module docstring)."""

    def __init__(
        self,
        mcp: MCPServer[Any],
        catalog: Catalog,
        keys: KeyStore | None,
        options: HttpOptions,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock`` (seconds, never going back) drives the rate limit and key-check budgets: a test
        passes a fake one; worker processes share ``time.monotonic``, the same in each of them."""
        self.mcp = mcp
        self.catalog = catalog
        self.keys = keys
        self.options = options
        self.metrics = Metrics(catalog, COUNTED_ROUTES)
        self.routes: dict[str, Callable[[Exchange], Awaitable[None]]] = {
            "/healthz": self._healthz,
            "/readyz": self._readyz,
            "/info": self._info,
            METRICS_PATH: self._metrics,
            LIBRARIES_PATH: self._libraries,
            REQUESTS_PATH: self._requests,
        }
        self._stop_watch: Callable[[], None] | None = None
        self._stop_tracing: Callable[[], None] | None = None
        self.policy = HostPolicy(options.host, options.allowed_hosts, options.allowed_origins)
        self.inner = mcp.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=self.policy.transport_security(),
            max_request_body_size=options.max_body_size,
            host=options.host,
        )
        shared = options.workers > 1  # worker processes forked later share these budgets
        self.limiter = (
            RateLimiter(options.rate, options.burst, clock=clock, shared=shared) if options.rate else None
        )
        # Keys not proven yet cost a scrypt each: that work is budgeted per client and globally, in two
        # lanes. Secrets that passed their key's check are almost always right: guesses at keys
        # without a check (written before checks existed) cannot crowd them out.
        self.auth_budget = AuthBudget(clock=clock, shared=shared)
        self.checked_budget = AuthBudget(client_burst=AUTH_CHECKED_CLIENT_BURST, clock=clock, shared=shared)
        self._scrypt_slots: anyio.CapacityLimiter | None = None
        # Keys being checked right now (by a digest of the presented string), each with its end.
        self._checking: dict[bytes, anyio.Event] = {}
        self._reported = -1
        # Request ids: a random prefix per process and a counter; unique without a syscall each.
        self._id_prefix = secrets.token_hex(4)
        self._id_counter = itertools.count(1)
        self.ready = False
        self.worker: int | None = None  # set in worker processes

    def after_fork(self, worker: int) -> None:
        """In a worker process just forked (``--workers``): its own request ids, and its number in logs."""
        self._id_prefix = secrets.token_hex(4)
        self._id_counter = itertools.count(1)
        self.worker = worker

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
                # Tool names are metric labels; nothing a client sends adds one.
                self.metrics.tools = frozenset(tool.name for tool in await self.mcp.list_tools())
                if self._stop_tracing is None:  # each serving process exports its own spans
                    self._stop_tracing = start_tracing(self.mcp.version)
                self.ready = True
                # Semantic search's query encoder, loaded in the background, and live reload: in this
                # process (a worker forked after start-up serves for itself), as stdio does.
                if self._stop_watch is None:
                    self._stop_watch = serving(self.catalog, self.options.reload_interval)
            elif message["type"].startswith("lifespan.shutdown"):
                self.ready = False
                if self._stop_watch is not None:
                    self._stop_watch()
                    self._stop_watch = None
                if self._stop_tracing is not None:
                    self._stop_tracing()
                    self._stop_tracing = None
            await send(message)

        return relay

    # -- per request --------------------------------------------------------------------------------

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = headers_of(scope)
        incoming = headers.get("x-request-id", "")
        rid = incoming if valid_request_id(incoming) else self._next_id()
        ex = Exchange(scope, receive, send, rid, self.options.body_timeout)
        path = scope.get("path", "")
        try:
            if path in PUBLIC:
                await self._route(ex, path)
                return
            await self._guarded(ex, headers, receive)
        finally:
            public = path in PUBLIC
            # Probes and scrapes come every few seconds: logged at DEBUG unless refused.
            scrape = path == METRICS_PATH
            self._log(ex, health=public or (scrape and ex.status == 200))
            if not public:
                seconds = time.perf_counter() - ex.started
                self.metrics.record(path, ex.fields, seconds, ex.facts, scrape=scrape)

    # -- the endpoints this layer answers -----------------------------------------------------------

    async def _route(self, ex: Exchange, path: str) -> None:
        ex.fields["outcome"] = "ok"
        if ex.scope.get("method") not in ("GET", "HEAD"):
            await ex.respond(405, {"status": "method not allowed"}, [(b"allow", b"GET, HEAD")])
            return
        await self.routes[path](ex)

    async def _healthz(self, ex: Exchange) -> None:
        await ex.respond(200, {"status": "ok"})

    async def _readyz(self, ex: Exchange) -> None:
        # In a lookup thread: a pass over every library version (30 ms at 10,000), for anyone who asks.
        status, payload = await lookup_thread(self.readiness)
        await ex.respond(status, payload)

    async def _info(self, ex: Exchange) -> None:
        await ex.respond(200, self.info())

    async def _metrics(self, ex: Exchange) -> None:
        # Off the event loop: the catalogue's lock and the multiprocess files are read.
        body = await lookup_thread(self.metrics.scrape)
        await ex.respond_bytes(200, body, CONTENT_TYPE_LATEST.encode())

    def info(self) -> dict[str, Any]:
        """``/info``: the version, the bundle format versions this server reads, how many libraries.

        Public, so nothing else: no path, no key, no library id.
        """
        return {
            "name": "docbundle",
            "version": self.mcp.version,
            "formatVersions": list(SUPPORTED_FORMAT_VERSIONS),
            "libraries": len(self.catalog.library_ids()),
        }

    def readiness(self) -> tuple[int, dict[str, Any]]:
        """``/readyz``: 200 when serving with at least one usable library, else 503; ids only.

        ``status`` is ``ready`` when every library version is usable and ``degraded`` when some failed
        (at start-up, on first open, or later because its data went bad); ``failed`` lists them. With
        keys, the server is ``unavailable`` (503, with a ``reason``) while no key can authenticate: the
        keys file is unusable, or every key in it is revoked or expired, so every request would fail.
        """
        failed = []
        usable = 0
        for view in map(self.catalog.version_view, self.catalog.entries()):
            if view.state == "failed":
                failed.append({"libraryId": view.library_id, "version": view.version})
            else:
                usable += 1
        payload: dict[str, Any] = {"libraries": self.catalog.library_ids(), "failed": failed}
        if not self.ready:
            return 503, {"status": "starting", **payload}
        if self.keys is not None:
            self.keys.refresh()  # at most once a second: a revocation shows here as it does to requests
            if self.keys.error is not None:
                return 503, {"status": "unavailable", "reason": "the keys file cannot be used", **payload}
            if not self.keys.any_active():
                reason = "no API key can authenticate: every key is revoked or expired"
                return 503, {"status": "unavailable", "reason": reason, **payload}
        if usable == 0:
            return 503, {"status": "no libraries", **payload}
        return 200, {"status": "degraded" if failed else "ready", **payload}

    async def _guarded(self, ex: Exchange, headers: dict[str, str], receive: Receive) -> None:
        scope = ex.scope
        ex.body_pending = headers.get("content-length", "0") != "0" or "transfer-encoding" in headers
        if not self.policy.host_ok(headers.get("host")):
            await ex.reject(421, "bad_host", "Host header not allowed (see --allowed-host)")
            return
        origin = headers.get("origin")
        if not self.policy.origin_ok(origin):
            await ex.reject(403, "bad_origin", "Origin header not allowed (see --allowed-origin)")
            return
        if origin is not None:
            # An allowed browser origin may read every answer, refusals included (CORS).
            ex.extra_headers = cors_headers(origin)
            if scope.get("method") == "OPTIONS" and "access-control-request-method" in headers:
                # A preflight: answered before the key check (browsers send no credentials with it).
                ex.fields["outcome"] = "preflight"
                await ex.respond(204, None, preflight_headers())
                return
        if scope.get("path") in PAGE_PATHS:
            await self._page(ex)  # static, holds no data: no key needed, so that the page can ask for one
            return
        bucket = f"client:{client_key(scope)}"
        limited = self.options.limit_loopback or not is_loopback_client(scope)
        if self.keys is not None:
            key_id = await self._authenticate(ex, headers)
            if key_id is None:
                return
            bucket, limited = key_id, True
        if self.limiter is not None and limited:
            wait = self.limiter.take(bucket)
            if wait > 0:
                retry = str(max(1, math.ceil(wait))).encode()
                await ex.reject(
                    429, "rate_limited", "rate limit exceeded; retry later", [(b"retry-after", retry)]
                )
                return
        if scope.get("path") in KEYED:
            if ex.body_pending:
                await ex.drain()  # a GET has no use for a body: read (bounded) and dropped
            await self._route(ex, scope["path"])
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
        if scope.get("path") == MCP_PATH and scope.get("method") == "POST" and not _json_media(headers):
            await ex.reject(
                415,
                "bad_content_type",
                "Invalid Request: Content-Type must be application/json",
                code=INVALID_REQUEST,
            )
        elif scope.get("path") == MCP_PATH and scope.get("method") != "POST":
            # Stateless: no session to delete, and no server-initiated messages for a GET stream to
            # carry (the SDK would hold such a stream open for as long as the client likes).
            await ex.reject(405, "method_not_allowed", "only POST is supported here", [(b"allow", b"POST")])
        elif scope.get("method") in ("POST", "PUT", "PATCH"):
            await self._with_body(ex, receive)
        else:
            ex.bound = True
            await self.inner(scope, receive, ex.send)
            ex.fields["outcome"] = "ok" if ex.status < 400 else f"http_{ex.status}"

    async def _page(self, ex: Exchange) -> None:
        """``/``, ``/ui/page.js``, ``/ui/page.css``: the operator's page (``page.py``), GET or HEAD."""
        method = ex.scope.get("method")
        if method not in ("GET", "HEAD"):
            await ex.reject(
                405, "method_not_allowed", "only GET is supported here", [(b"allow", b"GET, HEAD")]
            )
            return
        body, content_type = page_file(ex.scope["path"])
        ex.fields["outcome"] = "ok"
        await ex.respond_bytes(200, body, content_type, PAGE_HEADERS, head=method == "HEAD")

    async def _libraries(self, ex: Exchange) -> None:
        """``GET /ui/libraries``: the page's table (after the key and rate checks, like ``/mcp``)."""
        query = ex.scope.get("query_string", b"")
        rows = await lookup_thread(lambda: library_rows(self.catalog, query))
        ex.fields["outcome"] = "ok"
        await ex.respond(200, rows, PAGE_HEADERS)

    async def _requests(self, ex: Exchange) -> None:
        """``GET /ui/requests``: the page's request figures, from the scrape ``/metrics`` answers."""
        figures = await lookup_thread(lambda: request_figures(self.metrics.scrape()))
        ex.fields["outcome"] = "ok"
        await ex.respond(200, figures, PAGE_HEADERS)

    async def _authenticate(self, ex: Exchange, headers: dict[str, str]) -> str | None:
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
            result = await self._check_once(ex, key)
            if result is None:
                return None
        return await self._verdict(ex, result, challenge)

    async def _check_once(self, ex: Exchange, key: str) -> AuthResult | None:
        """Check a key not proven yet; the same key presented again meanwhile waits for this check.

        An IDE connecting several agents at once sends its key many times before the first scrypt
        ends: they share that scrypt (and its one booking in the key-check budget).
        """
        assert self.keys is not None
        token = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
        running = self._checking.get(token)
        if running is not None:
            await running.wait()
            result = self.keys.check_cached(key)
            if result is not None:
                return result
        done = self._checking.setdefault(token, anyio.Event())
        try:
            return await self._check(ex, key)
        finally:
            if self._checking.get(token) is done:
                del self._checking[token]
            done.set()

    async def _check(self, ex: Exchange, key: str) -> AuthResult | None:
        """Run the scrypt for a key, within the key-check budget; None once refused (429 sent)."""
        assert self.keys is not None
        # Budgeted by who asks, never by the key id asked about: guessing secrets for a known id must
        # not lock that key out for its owner.
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
        return result

    async def _verdict(self, ex: Exchange, result: AuthResult, challenge: bytes) -> str | None:
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

    async def _with_body(self, ex: Exchange, receive: Receive) -> None:
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
            invalid = envelope_problem(body)
            if invalid is not None:
                code, message, request_id = invalid
                outcome = "parse_error" if code == PARSE_ERROR else "invalid_request"
                await ex.reject(400, outcome, message, code=code, request_id=request_id)
                return
        ex.capture = True
        ex.bound = True  # every reply the SDK writes passes jsonrpc.bound_reply (exchange.Exchange.send)
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

    async def _forward(self, ex: Exchange, body: bytes, receive: Receive) -> None:
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
            fields = ex.fields
            with span(
                f"mcp {fields.get('rpcMethod') or 'request'}",
                method=fields.get("rpcMethod"),
                tool=fields.get("tool"),
                library=fields.get("libraryId"),
                request_id=ex.request_id,
            ):
                await self.inner(ex.scope, replay, ex.send)
            tg.cancel_scope.cancel()
        if "outcome" not in ex.fields:
            ex.facts = reply_facts(ex.status, b"".join(ex.body_parts))
            ex.fields["outcome"] = ex.facts.outcome
            if ex.facts.code is not None:
                ex.fields["rpcError"] = ex.facts.code
            if ex.facts.code in CLIENT_ERROR_CODES or (
                ex.facts.outcome == "tool_error" and ex.scope.get(CLIENT_MISTAKE)
            ):
                ex.fields["clientError"] = True  # the client's own mistake (metrics: client_error)

    # -- logging ------------------------------------------------------------------------------------

    def _log(self, ex: Exchange, *, health: bool) -> None:
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
            **({"worker": self.worker} if self.worker is not None else {}),
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


def _json_media(headers: dict[str, str]) -> bool:
    """Whether a request's ``Content-Type`` is ``application/json`` (parameters such as charset allowed)."""
    return headers.get("content-type", "").partition(";")[0].strip().lower() == "application/json"
