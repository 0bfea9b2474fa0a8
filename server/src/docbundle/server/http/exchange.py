"""One HTTP request's state as ``HttpApp`` handles it: the access-log fields, the send wrapper that
records status and reply (and passes the SDK's JSON replies through ``jsonrpc.bound_reply``), and the
small JSON responses and refusals this layer writes itself.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import msgspec

from ..jsonrpc import PARSE_ERROR, REJECTED, ReplyFacts, bound_reply

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_CAPTURE_LIMIT = 1024 * 1024  # response bytes kept to read the JSON-RPC outcome
# A refused request's body is read and thrown away up to this size before the answer goes out: closing
# a socket with unread data makes the kernel send a reset, and the client would lose the answer.
DRAIN_LIMIT = 16 * 1024 * 1024


def headers_of(scope: Scope) -> dict[str, str]:
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


class Exchange:
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
        # Added to the response's headers whoever writes it (the CORS headers of an allowed origin).
        self.extra_headers: list[tuple[bytes, bytes]] = []
        # Whether the MCP SDK writes this response: then its start is held until its body is known, so
        # that a JSON reply can go through bound_reply (which may change its length).
        self.bound = False
        self._held: Message | None = None
        # What the SDK's reply said (outcome, and a search's mode), once it has answered.
        self.facts: ReplyFacts | None = None

    async def send(self, message: Message) -> None:
        """Pass a message on, adding X-Request-Id and remembering the status (and a JSON body).

        With ``bound`` set, a JSON reply sent in one piece goes through ``bound_reply`` first (the
        SDK writes error ``data`` holding what the client sent); its Content-Length is set to match.
        """
        if self.bound and message["type"] == "http.response.start":
            self._held = message
            return
        if self._held is not None and message["type"] == "http.response.body":
            start, self._held = self._held, None
            body = message.get("body", b"")
            if not message.get("more_body", False) and _is_json(start):
                bounded = bound_reply(body)
                if bounded is not body:
                    message = {**message, "body": bounded}
                    start = {
                        **start,
                        "headers": [
                            *(h for h in start.get("headers", []) if h[0].lower() != b"content-length"),
                            (b"content-length", str(len(bounded)).encode()),
                        ],
                    }
            await self._pass(start)
        await self._pass(message)

    async def _pass(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            message = dict(message)
            message["headers"] = [
                *message.get("headers", []),
                (b"x-request-id", self.request_id.encode()),
                *self.extra_headers,
            ]
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
        self, status: int, payload: dict[str, Any] | None, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        """Send a small JSON response (no body at all when ``payload`` is None)."""
        if payload is None:
            await self.respond_bytes(status, b"", None, headers)
        else:
            await self.respond_bytes(status, msgspec.json.encode(payload), b"application/json", headers)

    async def respond_bytes(
        self,
        status: int,
        body: bytes,
        content_type: bytes | None,
        headers: list[tuple[bytes, bytes]] | None = None,
        *,
        head: bool = False,
    ) -> None:
        """Send ``body`` in one piece, as ``content_type``, never to be cached (``head``: its headers only,
        as a HEAD request asks)."""
        typed = [(b"content-type", content_type)] if content_type is not None else []
        await self.send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    *typed,
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store"),
                    *(headers or []),
                ],
            }
        )
        await self.send({"type": "http.response.body", "body": b"" if head else body})

    async def reject(
        self,
        status: int,
        outcome: str,
        message: str,
        headers: list[tuple[bytes, bytes]] | None = None,
        *,
        code: int | None = None,
        request_id: str | int | None = None,
    ) -> None:
        """Refuse the request with a JSON-RPC error body (MCP clients show its message)."""
        self.fields["outcome"] = outcome
        headers = list(headers or [])
        if self.body_pending and not await self.drain():
            # The rest of the body would be read as the next request: this connection is done.
            headers.append((b"connection", b"close"))
        if code is None:
            code = PARSE_ERROR if outcome == "parse_error" else REJECTED
        payload = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
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


def _is_json(start: Message) -> bool:
    """Whether a response start declares a JSON body."""
    for name, value in start.get("headers", []):
        if name.lower() == b"content-type":
            return bytes(value).partition(b";")[0].strip().lower() == b"application/json"
    return False
