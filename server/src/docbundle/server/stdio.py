"""The stdio transport of ``docbundle serve``: JSON-RPC lines on stdin and stdout, and a clean exit.

It replaces the MCP SDK's ``stdio_server`` for three reasons:

- **Every line gets an answer.** A line that is not valid UTF-8, or not valid JSON (truncated, or with
  a lone surrogate escape such as ``"\\ud800"``), is answered with a JSON-RPC parse error (-32700,
  ``id`` null); valid JSON that is not one JSON-RPC message as MCP allows it (a batch, no
  ``"jsonrpc": "2.0"``, an ``id`` that is null or a fraction: an error, not a notification; see
  ``jsonrpc.envelope_problem``), and a line longer than ``MAX_LINE_BYTES``, with an invalid-request
  error (-32600, one short line, with the request's ``id`` when it has one). The server then reads
  the next line. (The SDK's transport answered none of these.)
- **The server exits when its client does, after answering what it read.** When stdin reaches end of
  file, the parent process dies (``process.watch_parent``) or SIGTERM arrives, the
  requests already read get ``DRAIN_SECONDS`` to be answered (so ``printf '<init>\\n<initialized>\\n
  <call>\\n' | docbundle serve`` answers the call: the SDK's loop cancels running requests when its
  input ends, so that input is closed only once nothing runs); the rest are then cancelled (which
  cancels their worker threads' tokens, see ``mcp.tools``) and ``serve_stdio`` returns. ``exit_when_threads_linger`` then gives worker threads the same drain
  time and ends the process even if one is still running, so nothing keeps an orphaned server alive.
- **No reply quotes a long client string.** An error's ``data``, which the SDK fills with what was
  sent (a whole unknown method name, a whole resource URI), goes through ``jsonrpc.bound_reply``, as
  every HTTP reply does; an ``id`` longer than 80 characters is refused (``envelope_problem``).
- **stdout belongs to the protocol.** File descriptor 1 is pointed at stderr while serving (so a stray
  ``print`` cannot corrupt the stream) and replies go through a private duplicate; logs go to stderr.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from docbundle.common.process import exit_now, watch_parent
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from .jsonrpc import INVALID_REQUEST, PARSE_ERROR, answer_id, bound_reply, envelope_problem
from .mcp.sdk import lowlevel

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 4 * 1024 * 1024  # longest request line; longer ones are refused (-32600)
DRAIN_SECONDS = 3.0  # after the client leaves, how long running requests (then threads) may finish
PARENT_POLL_SECONDS = 1.0  # how often the server checks that the process that started it is alive (no pidfd)
_READ_CHUNK = 64 * 1024


def error_line(code: int, message: str, request_id: Any = None) -> bytes:
    """A JSON-RPC error response as one line of UTF-8."""
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return (json.dumps(body, ensure_ascii=True) + "\n").encode("ascii")


def _request_id(text: str) -> Any:
    """The ``id`` of a JSON object line when it is a valid JSON-RPC id, else None."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return answer_id(data.get("id")) if isinstance(data, dict) else None


def parse_line(line: bytes) -> SessionMessage | bytes | None:
    """A line of stdin as a message to serve, an error line to answer, or None (blank line)."""
    if not line.strip():
        return None
    try:
        text = line.rstrip(b"\r\n").decode("utf-8")
    except UnicodeDecodeError as exc:
        return error_line(PARSE_ERROR, f"Parse error: the line is not valid UTF-8 (byte {exc.start})")
    try:
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        errors = exc.errors(include_input=False, include_url=False)
        if any(e["type"] == "json_invalid" for e in errors):
            detail = next(e["msg"] for e in errors if e["type"] == "json_invalid")
            return error_line(PARSE_ERROR, f"Parse error: the line is not valid JSON ({detail[:120]})")
        problem = envelope_problem(text, unit="line")
        if problem is not None:
            return error_line(*problem)
        return error_line(
            INVALID_REQUEST,
            "Invalid Request: the line is JSON but not a JSON-RPC 2.0 request, notification or response",
            _request_id(text),
        )
    # Valid for the SDK, but maybe not for MCP: a null or fractional id would be read as a notification.
    problem = envelope_problem(text, unit="line")
    if problem is not None:
        return error_line(*problem)
    return SessionMessage(message)


class _Lines:
    """stdin read line by line in a daemon thread (it never keeps the process alive)."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "rb", buffering=_READ_CHUNK, closefd=False)

    def read(self) -> tuple[bytes, bool] | None:
        """The next line (without its end) and whether it was too long; None at end of file."""
        line = self._file.readline(MAX_LINE_BYTES + 1)
        if not line:
            return None
        if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
            return line, False
        while True:  # too long: skip the rest of it without holding it
            more = self._file.readline(_READ_CHUNK)
            if not more or more.endswith(b"\n"):
                return b"", True


def _claim_stdout() -> int:
    """A private descriptor for the protocol; fd 1 then points at stderr (stray output misses the wire)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    private = os.dup(1)
    os.set_inheritable(private, False)
    os.dup2(2, 1)
    return private


def _claim_stdin() -> int:
    """A private descriptor for requests; fd 0 then reads /dev/null (children cannot eat requests)."""
    private = os.dup(0)
    os.set_inheritable(private, False)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return private


Background = Callable[[Callable[[str], Awaitable[None]]], Coroutine[Any, Any, None]]


async def serve_stdio(
    server: MCPServer[Any],
    *,
    stdin_fd: int | None = None,
    stdout_fd: int | None = None,
    background: Background | None = None,
) -> None:
    """Serve ``server`` over stdin/stdout until the client leaves, then drain and return.

    ``background(notify)`` runs beside the session (cancelled when it ends); ``notify(method)`` sends
    the client a notification without params once it has initialised (live reload uses it).
    """
    in_fd = stdin_fd if stdin_fd is not None else _claim_stdin()
    out_fd = stdout_fd if stdout_fd is not None else _claim_stdout()
    await _Session(server, in_fd, out_fd, background).run()


class _Session:
    """One client on stdio: a reader thread feeds the server, replies go out in order, then a drain."""

    def __init__(
        self, server: MCPServer[Any], in_fd: int, out_fd: int, background: Background | None = None
    ) -> None:
        self.lowlevel = lowlevel(server)
        self.notification_options = getattr(server, "notification_options", None)
        self.background = background
        self.initialized = False  # the client sent notifications/initialized
        self.in_fd = in_fd
        self.to_server: MemoryObjectSendStream[SessionMessage | Exception]
        self.from_client: MemoryObjectReceiveStream[SessionMessage | Exception]
        self.to_server, self.from_client = anyio.create_memory_object_stream(0)
        self.to_client: MemoryObjectSendStream[SessionMessage]
        self.from_server: MemoryObjectReceiveStream[SessionMessage]
        self.to_client, self.from_server = anyio.create_memory_object_stream(0)
        self.client_gone = anyio.Event()
        self.served = anyio.Event()
        # Requests handed to the server and not answered yet (by id), and an event set when none are.
        self.running: set[str | int] = set()
        self.idle = anyio.Event()
        self.idle.set()
        self.out_broken = False
        self.write_lock = anyio.Lock()
        self.out = os.fdopen(out_fd, "wb", buffering=0, closefd=False)

    async def run(self) -> None:
        """Serve until the client leaves; then give running requests ``DRAIN_SECONDS`` and cancel them."""
        token = anyio.lowlevel.current_token()

        def send_from_thread(item: SessionMessage | bytes | None) -> None:
            with contextlib.suppress(RuntimeError):  # the event loop has ended: nothing to deliver to
                anyio.from_thread.run(self.deliver, item, token=token)

        reader = threading.Thread(
            target=self.read_stdin, args=(send_from_thread,), name="docbundle stdin", daemon=True
        )
        parent = os.getppid()

        def parent_gone() -> None:
            log.warning("the process that started the server (pid %d) is gone: shutting down", parent)
            with contextlib.suppress(RuntimeError):  # the event loop has ended: nothing to tell
                anyio.from_thread.run_sync(self.client_gone.set, token=token)

        # The client is gone when the process that started the server is.
        stop_watching = watch_parent(parent_gone, poll_seconds=PARENT_POLL_SECONDS)
        try:
            await self.serve_until_gone(reader)
        finally:
            stop_watching()

    async def serve_until_gone(self, reader: threading.Thread) -> None:
        """``run``'s task group: serve, then drain once the client is gone."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.serve)
            tg.start_soon(self.pump_out)
            if threading.current_thread() is threading.main_thread():
                tg.start_soon(self.watch_sigterm)
            if self.background is not None:
                tg.start_soon(self.background, self.notify)
            reader.start()
            with anyio.CancelScope() as waiting:
                tg.start_soon(_cancel_when, self.served, waiting)
                await self.client_gone.wait()
            # The drain: the SDK cancels every running request when its input ends, so the input stays
            # open until the requests already read are answered (or the time is up). A client that
            # pipes its requests and closes stdin gets its answers; one whose stdout is closed cannot.
            with anyio.move_on_after(DRAIN_SECONDS) as draining:
                if not self.out_broken:
                    await self.idle.wait()
                self.to_server.close()  # end of input: the server loop ends
                await self.served.wait()
            if draining.cancelled_caught:
                log.warning(
                    "requests still running %.1f s after the client left: cancelling them", DRAIN_SECONDS
                )
                self.to_server.close()
                with anyio.move_on_after(DRAIN_SECONDS):  # cancelled requests end at their next check
                    await self.served.wait()
            tg.cancel_scope.cancel()

    async def serve(self) -> None:
        """The MCP server's own loop over the two streams."""
        try:
            await self.lowlevel.run(
                self.from_client,
                self.to_client,
                self.lowlevel.create_initialization_options(self.notification_options),
            )
        finally:
            self.served.set()

    # -- out: replies and error lines, one writer at a time ------------------------------------------

    def write_all(self, data: bytes) -> None:
        """Write ``data`` whole to the protocol descriptor (in a worker thread)."""
        view = memoryview(data)
        while view:
            n = self.out.write(view)
            view = view[n or 0 :]

    async def emit(self, data: bytes) -> None:
        """Write one line; a closed stdout means the client is gone."""
        if self.out_broken or (self.client_gone.is_set() and self.served.is_set()):
            return
        async with self.write_lock:
            try:
                await anyio.to_thread.run_sync(self.write_all, data, abandon_on_cancel=True)
            except (BrokenPipeError, ConnectionResetError, OSError) as exc:
                log.info("stdout closed (%s): the client is gone", type(exc).__name__)
                self.out_broken = True  # nothing more can be answered: no drain either
                self.idle.set()
                self.client_gone.set()

    async def notify(self, method: str) -> None:
        """Send the client a notification (no params), once it has initialised and while it is here."""
        if self.initialized and not self.client_gone.is_set():
            await self.emit(json.dumps({"jsonrpc": "2.0", "method": method}).encode("ascii") + b"\n")

    async def pump_out(self) -> None:
        """The server's messages, one JSON line each (an error's ``data`` cut to size: ``bound_reply``)."""
        async with self.from_server:
            async for message in self.from_server:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                data = text.encode("utf-8", "backslashreplace")
                if isinstance(message.message, types.JSONRPCError):
                    data = bound_reply(data)
                await self.emit(data + b"\n")
                if isinstance(message.message, types.JSONRPCResponse | types.JSONRPCError):
                    self.finished(message.message.id)

    def started(self, request_id: str | int) -> None:
        """A request went to the server: it is running until answered."""
        self.running.add(request_id)
        self.idle = anyio.Event()

    def finished(self, request_id: Any) -> None:
        """A request was answered (or cancelled by its client, which then expects no answer)."""
        self.running.discard(request_id)
        if not self.running:
            self.idle.set()

    # -- in: lines from the reader thread, and the parent watch -------------------------------------

    def read_stdin(self, send: Callable[[SessionMessage | bytes | None], None]) -> None:
        """The reader thread: each line parsed and sent on (None at end of input)."""
        lines = _Lines(self.in_fd)
        while True:
            try:
                got = lines.read()
            except (OSError, ValueError):
                got = None
            if got is None:
                send(None)
                return
            line, too_long = got
            if too_long:
                send(
                    error_line(
                        INVALID_REQUEST, f"Invalid Request: the line is longer than {MAX_LINE_BYTES} bytes"
                    )
                )
                continue
            parsed = parse_line(line)
            if parsed is not None:
                send(parsed)

    async def deliver(self, item: SessionMessage | bytes | None) -> None:
        """On the event loop: a message to the server, an error line to the client, or the end."""
        if item is None:
            self.client_gone.set()
        elif isinstance(item, bytes):
            await self.emit(item)
        elif not self.client_gone.is_set():
            message = item.message
            if isinstance(message, types.JSONRPCRequest):
                self.started(message.id)
            elif (
                isinstance(message, types.JSONRPCNotification)
                and message.method == "notifications/initialized"
            ):
                self.initialized = True
            elif (
                isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled"
            ):
                params = message.params or {}
                self.finished(params.get("requestId"))
            try:
                await self.to_server.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self.client_gone.set()

    async def watch_sigterm(self) -> None:
        """SIGTERM ends serving as the end of stdin does: running requests drain, then the process exits.

        A second SIGTERM during the drain ends the process at once (the default handler is back).
        """
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                log.warning("SIGTERM: answering the requests already read, then exiting")
                self.client_gone.set()
                return


async def _cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def exit_when_threads_linger(code: int) -> None:
    """After serving: give other non-daemon threads ``DRAIN_SECONDS`` to end, else end the process now.

    Worker threads of cancelled requests stop at their next cancellation check; one busy elsewhere
    (say, verifying a large bundle) must not keep a server whose client is gone alive.
    """
    end = time.monotonic() + DRAIN_SECONDS
    for t in threading.enumerate():
        if t is threading.current_thread() or t.daemon:
            continue
        t.join(max(0.0, end - time.monotonic()))
        if t.is_alive():
            log.warning(
                "a worker thread is still busy %.1f s after the client left: exiting now", DRAIN_SECONDS
            )
            exit_now(code)
