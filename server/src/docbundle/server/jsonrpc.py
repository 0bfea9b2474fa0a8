"""JSON-RPC as the transports see it, before the MCP SDK does and after it answers: error codes, a
linear depth check, the log fields peeked from a request and its reply, and ``bound_reply``, the one
place both transports pass every reply through so that none quotes back a long client string.

Nothing here parses a body recursively: ``json_depth`` is a linear scan, and ``peek_request`` /
``reply_facts`` / ``bound_reply`` decode only the few fields they need with msgspec (the rest is
skipped unread).
"""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Any, NamedTuple

import msgspec

from .bounds import MAX_ECHO_CHARS, MAX_ECHO_ITEMS
from .errors import clip

# The error code of JSON-RPC error bodies the transports write themselves (the server-defined range).
REJECTED = -32001
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
# Codes of a client's own mistake (JSON-RPC 2.0 and MCP: parse error, invalid request, method not found,
# invalid params: an unknown tool, a bad cursor of resources/list), as opposed to a server failure
# (-32603 and the rest). Metrics count them as ``client_error``, not ``error`` (issue 31).
CLIENT_ERROR_CODES = frozenset({PARSE_ERROR, INVALID_REQUEST, -32601, -32602})
# The key the MCP layer sets in an HTTP request's ASGI scope when a tool answered with a client's own
# mistake (an argument the schema or a check refused, an unknown library, version, document or cursor),
# so that the HTTP layer tells it from a tool that failed (``HttpApp``, ``Metrics``).
CLIENT_MISTAKE = "docbundle.clientMistake"
# Deepest JSON nesting a request body may have (an MCP request needs about 6). Checked by a linear scan
# before anything parses the body recursively: msgspec, pydantic and json all recurse per level.
MAX_JSON_DEPTH = 64

# Full matches only (re.fullmatch): "$" would accept a trailing newline.
_REQUEST_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_NAME_RE = re.compile(r"[A-Za-z0-9_./-]{1,64}")
_LIBRARY_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_URI_LIBRARY_RE = re.compile(r"^(?:docs|library)://([^/]+)")
_LIBRARY_ARGS = ("libraryId", "library", "libraryID", "library_id")

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


# -- the envelope: one JSON-RPC 2.0 message, as MCP allows it ----------------------------------------


class _Envelope(msgspec.Struct):
    jsonrpc: Any = msgspec.UNSET
    id: Any = msgspec.UNSET
    method: Any = msgspec.UNSET
    # Kept as raw bytes, never decoded here: only whether they are there (and params' kind) matters.
    params: msgspec.Raw = msgspec.Raw(b"")
    result: msgspec.Raw = msgspec.Raw(b"")
    error: msgspec.Raw = msgspec.Raw(b"")


_envelope_decoder = msgspec.json.Decoder(_Envelope)


def answer_id(value: Any) -> str | int | None:
    """A request id that may be echoed in an answer (a string or integer of at most ``MAX_ECHO_CHARS``)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return value if len(str(value)) <= MAX_ECHO_CHARS else None


def envelope_problem(body: bytes | str, *, unit: str = "request") -> tuple[int, str, str | int | None] | None:
    """None when ``body`` is one JSON-RPC 2.0 message as MCP allows it; else ``(code, message, id)``.

    The answer for what the MCP SDK would misread or answer with a long validation dump: not JSON
    (-32700); a batch, a value that is not an object, no ``"jsonrpc": "2.0"``, a method that is not a
    string, params that are not an object, and an ``id`` that is not a string or an integer (MCP
    forbids null; a fraction is no id either) get -32600 with one short line. A request with such an
    id is not a notification: it gets the error instead of silence. An id longer than
    ``MAX_ECHO_CHARS`` gets -32600 too (every answer would repeat it whole). ``id`` is the request's
    own when it can be echoed. ``unit`` names what the client sends ("request", "line") in the messages.
    """
    try:
        env = _envelope_decoder.decode(body)
    except msgspec.ValidationError:
        kind = _json_kind(body)
        if kind == "array":
            return (
                INVALID_REQUEST,
                f"Invalid Request: batches are not supported; send one JSON-RPC message per {unit}",
                None,
            )
        return INVALID_REQUEST, f"Invalid Request: a JSON-RPC message is a JSON object, not {kind}", None
    except msgspec.DecodeError:
        return PARSE_ERROR, f"Parse error: the {unit} is not valid JSON", None
    rid = answer_id(env.id)
    if env.jsonrpc != "2.0":
        return INVALID_REQUEST, 'Invalid Request: "jsonrpc": "2.0" is required', rid
    has_id = env.id is not msgspec.UNSET
    if env.method is not msgspec.UNSET:
        if not isinstance(env.method, str):
            return INVALID_REQUEST, 'Invalid Request: "method" must be a string', rid
        if has_id and not _valid_id(env.id):
            return (
                INVALID_REQUEST,
                'Invalid Request: "id" must be a string or an integer (MCP allows no null id)',
                None,
            )
        if has_id and rid is None:
            # Every answer repeats its request's id: a long one would be quoted back whole.
            return INVALID_REQUEST, f'Invalid Request: "id" is longer than {MAX_ECHO_CHARS} characters', None
        if env.params and not bytes(env.params).lstrip().startswith(b"{"):
            return INVALID_REQUEST, 'Invalid Request: "params" must be an object', rid
        return None
    if env.result or env.error:
        if env.id is None and env.error and not env.result:
            return None  # an error answer to something the client could not parse: JSON-RPC allows it
        if not _valid_id(env.id):
            return INVALID_REQUEST, 'Invalid Request: a response\'s "id" must be a string or an integer', None
        return None
    return (
        INVALID_REQUEST,
        'Invalid Request: a message needs "method" (request, notification) or "result"/"error"',
        rid,
    )


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _json_kind(body: bytes | str) -> str:
    """What JSON value a body that is not an object starts with (its first character says it)."""
    text = body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass")
    first = text.lstrip(b" \t\r\n")[:1]
    kinds = {b"[": "array", b'"': "a string", b"n": "null", b"t": "a boolean", b"f": "a boolean"}
    return kinds.get(first, "a number")


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


class _SearchFacts(msgspec.Struct):
    mode: Any = None
    stopped: Any = False


class _RpcResult(msgspec.Struct, rename={"is_error": "isError", "structured": "structuredContent"}):
    is_error: Any = False
    # Of a search's structured content, only the mode that ran and whether it stopped at its budget.
    structured: _SearchFacts | None = None


class _RpcReply(msgspec.Struct):
    error: _RpcError | None = None
    # Only isError and two search facts are decoded: msgspec skips the rest of a result (tens of KB
    # for a search) unread.
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


class ReplyFacts(NamedTuple):
    """What the transports read from the SDK's answer (``reply_facts``)."""

    outcome: str  # ok, tool_error, rpc_error or http_<status>
    code: int | None = None  # the JSON-RPC error code of an rpc_error
    mode: str | None = None  # a search's mode that ran (as the reply says it: check it before use)
    stopped: bool = False  # a search that stopped at its time budget


def reply_facts(status: int, body: bytes) -> ReplyFacts:
    """The outcome of the SDK's answer, its error code, and for a search the mode that ran and
    whether it stopped at its time budget."""
    if status == 202:
        return ReplyFacts("ok")
    try:
        reply = _reply_decoder.decode(body) if body else None
    except msgspec.DecodeError:  # not JSON, or a result that is not an object: judged by status alone
        reply = None
    if reply is not None and reply.error is not None:
        return ReplyFacts("rpc_error", reply.error.code if isinstance(reply.error.code, int) else None)
    if status >= 400:
        return ReplyFacts(f"http_{status}")
    result = reply.result if reply is not None else None
    if result is not None and result.is_error is True:
        return ReplyFacts("tool_error")
    facts = result.structured if result is not None else None
    if facts is None:
        return ReplyFacts("ok")
    return ReplyFacts("ok", None, facts.mode if isinstance(facts.mode, str) else None, facts.stopped is True)


# -- what goes back: no reply quotes more than MAX_ECHO_CHARS of a client string ---------------------


class _ReplyError(msgspec.Struct):
    error: msgspec.Raw = msgspec.Raw(b"")


_reply_error_decoder = msgspec.json.Decoder(_ReplyError)
_DATA_DEPTH = 8  # error data is a few levels deep at most; anything deeper is dropped


def bound_reply(body: bytes) -> bytes:
    """``body`` (one JSON-RPC message the server wrote) with any ``error.data`` cut to size.

    The MCP SDK fills ``error.data`` with what the client sent: the whole method name of an unknown
    method, the whole URI of a resource it cannot read, the requested protocol version it does not
    serve. Every string in it is cut to ``MAX_ECHO_CHARS`` characters (then "…"), every list and
    object to ``MAX_ECHO_ITEMS`` entries. A message that is not an error is returned as it is (the
    same object), after a peek that skips its result unread. ``error.message`` is left alone: the
    SDK writes fixed texts there, and docbundle's own quote through ``errors.echo``.
    """
    try:
        if not _reply_error_decoder.decode(body).error:
            return body
        message = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body
    error = message.get("error") if isinstance(message, dict) else None
    if not isinstance(error, dict) or "data" not in error:
        return body
    bounded = _bound(error["data"], 0)
    if bounded == error["data"]:
        return body
    error["data"] = bounded
    return msgspec.json.encode(message)


def _bound(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return clip(value)
    if depth >= _DATA_DEPTH:
        return None
    if isinstance(value, list):
        return [_bound(v, depth + 1) for v in value[:MAX_ECHO_ITEMS]]
    if isinstance(value, dict):
        items = list(value.items())[:MAX_ECHO_ITEMS]
        return {clip(str(k)): _bound(v, depth + 1) for k, v in items}
    return value
