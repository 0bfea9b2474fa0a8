"""A real threaded HTTP/1.1 server on 127.0.0.1 for tests and benchmarks.

``Site`` holds the content (pages added with ``add``, directories mounted with ``serve_dir``) and
the faults to inject; ``run_site`` serves it from a background thread::

    site = Site()
    site.add("/llms.txt", "# Lib\\n- [A](/a.md)\\n")
    site.fault("/a.md", "status", code=500)
    with run_site(site) as base_url:
        ...                       # site.base_url == base_url; site.url("/a.md") builds full URLs
    assert site.hits("/a.md") == 1

Content negotiation: ``site.negotiate("/page", "/page.md")`` answers a request for ``/page`` whose
``Accept`` header names ``text/markdown`` with the content of ``/page.md`` (as a docs host serving
markdown to agents does); other requests get ``/page`` itself.

Paths are matched percent-decoded, with dot segments removed and without the query string. Every request is recorded in
``site.requests`` with monotonic timestamps (``started``/``finished``), the status answered, the
body bytes actually written and the client's address, so tests can assert on timing, conditional
headers, concurrency (``max_concurrency``), connection reuse and how much of a body a client read.

Speed matters (the crawl benchmark serves ~1,700 pages): responses are pre-encoded into a single
buffer, connections are kept alive, Nagle is off and nothing is logged per request.
"""

from __future__ import annotations

import contextlib
import hashlib
import mimetypes
import socket
import socketserver
import stat
import struct
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import Message
from email.utils import formatdate, parsedate_to_datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

__all__ = ["FAULT_KINDS", "RecordedRequest", "Site", "run_site"]

FAULT_KINDS = frozenset(
    {
        "status",
        "timeout",
        "delay",
        "slow",
        "oversized",
        "bad-encoding",
        "redirect-loop",
        "redirect",
        "retry-after",
        "reset",
    }
)

_TEXT_TYPES = {
    ".md": "text/markdown; charset=utf-8",
    ".mdx": "text/markdown; charset=utf-8",
    ".markdown": "text/markdown; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}
_JOIN_BUDGET = 5.0  # seconds run_site waits for handler threads when shutting down
_WRITE_CHUNK = 64 * 1024


@dataclass
class RecordedRequest:
    """One request as the server saw it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    started: float  # time.monotonic() when the request head had been parsed
    finished: float | None = None  # time.monotonic() once the handler was done with it
    status: int | None = None  # None when the server never answered (timeout, reset)
    sent: int = 0  # body bytes written to the socket
    peer: str = ""  # the client's "ip:port": equal for requests sent over one kept-alive connection

    @property
    def at(self) -> float:
        """Alias of ``started``."""
        return self.started


@dataclass(frozen=True)
class _Page:
    body: bytes
    etag: str | None
    last_modified: str | None
    modified: int  # unix seconds behind last_modified, for If-Modified-Since comparisons
    head: bytes  # complete "200 OK" status line and headers, pre-encoded
    not_modified: bytes  # complete "304" response, pre-encoded


@dataclass
class _Fault:
    kind: str
    params: dict[str, Any]
    triggered: int = 0


@dataclass
class _Mount:
    prefix: str
    root: Path
    cache: dict[str, tuple[tuple[int, int], _Page]] = field(default_factory=dict)


def _norm(path: str) -> str:
    """Percent-decode, drop the query and remove dot segments, as a real server does: lookups do not
    depend on how a client escapes, and ``/docs/%2e%2e/private/x`` is ``/private/x``."""
    decoded = unquote(path.partition("?")[0].partition("#")[0])
    if "/." not in decoded:
        return decoded
    segments = decoded.split("/")
    out: list[str] = []
    for i, seg in enumerate(segments):
        if seg in (".", ".."):
            if seg == ".." and len(out) > 1:
                out.pop()
            if i == len(segments) - 1:
                out.append("")
            continue
        out.append(seg)
    return "/".join(out) if len(out) > 1 else "/"


def _make_page(body: bytes, content_type: str | None, etag: bool, modified: int | None) -> _Page:
    tag = f'"{hashlib.sha256(body).hexdigest()[:24]}"' if etag else None
    last_modified = formatdate(modified, usegmt=True) if modified is not None else None
    validators = ""
    if tag:
        validators += f"ETag: {tag}\r\n"
    if last_modified:
        validators += f"Last-Modified: {last_modified}\r\n"
    ctype = f"Content-Type: {content_type}\r\n" if content_type else ""
    head = f"HTTP/1.1 200 OK\r\n{ctype}Content-Length: {len(body)}\r\n{validators}\r\n".encode("latin-1")
    not_modified = f"HTTP/1.1 304 Not Modified\r\n{validators}\r\n".encode("latin-1")
    return _Page(body, tag, last_modified, modified or 0, head, not_modified)


def _etag_matches(header: str, etag: str) -> bool:
    """Weak comparison as RFC 9110 prescribes for If-None-Match."""
    if header.strip() == "*":
        return True
    want = etag.removeprefix("W/")
    return any(part.strip().removeprefix("W/") == want for part in header.split(","))


class Site:
    """The content and faults served by ``run_site``; safe to mutate while the server runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pages: dict[str, _Page] = {}
        self._faults: dict[str, _Fault] = {}
        self._mounts: list[_Mount] = []
        self._negotiated: dict[str, str] = {}  # path -> path served instead to Accept: text/markdown
        self._hits: Counter[str] = Counter()
        self._stop = threading.Event()
        self.requests: list[RecordedRequest] = []
        self.errors: list[BaseException] = []  # unexpected handler exceptions (server bugs)
        self.base_url: str | None = None  # set by run_site while serving

    # -- content -------------------------------------------------------------------------------

    def add(
        self,
        path: str,
        body: str | bytes,
        *,
        content_type: str | None = "text/markdown; charset=utf-8",
        etag: bool = True,
        last_modified: bool = True,
    ) -> None:
        """Serve ``body`` at ``path`` (replacing any previous content; None content_type omits it)."""
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        key = _norm(path)
        with self._lock:
            previous = self._pages.get(key)
            modified: int | None = None
            if last_modified:
                modified = int(time.time())
                if previous is not None and previous.body != data:
                    # Last-Modified has one-second resolution: force it forward so a change made
                    # within the same second still defeats If-Modified-Since.
                    modified = max(modified, previous.modified + 1)
                elif previous is not None:
                    modified = previous.modified or modified
            self._pages[key] = _make_page(data, content_type, etag, modified)

    def negotiate(self, path: str, markdown_path: str) -> None:
        """Answer ``path`` with ``markdown_path``'s content when the request's Accept names text/markdown."""
        with self._lock:
            self._negotiated[_norm(path)] = _norm(markdown_path)

    def remove(self, path: str) -> None:
        """Stop serving ``path`` (it answers 404 afterwards)."""
        with self._lock:
            self._pages.pop(_norm(path), None)

    def serve_dir(self, root: Path, prefix: str = "/") -> None:
        """Serve every file under ``root`` at ``prefix``; files are read lazily on request."""
        prefix = "/" + _norm(prefix).strip("/")
        with self._lock:
            self._mounts.append(_Mount(prefix.rstrip("/") + "/", Path(root).resolve()))

    def fault(self, path: str, kind: str, **params: Any) -> None:
        """Make ``path`` misbehave; see ``_Handler._fault`` for the kinds and their parameters."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {sorted(FAULT_KINDS)}")
        with self._lock:
            self._faults[_norm(path)] = _Fault(kind, dict(params))

    def clear_fault(self, path: str) -> None:
        """Serve ``path`` normally again."""
        with self._lock:
            self._faults.pop(_norm(path), None)

    # -- inspection ----------------------------------------------------------------------------

    def url(self, path: str) -> str:
        """Return the absolute URL of ``path`` on the running server."""
        if self.base_url is None:
            raise RuntimeError("the site is not being served; use run_site()")
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def hits(self, path: str) -> int:
        """Number of requests received for ``path``."""
        with self._lock:
            return self._hits[_norm(path)]

    def requests_for(self, path: str) -> list[RecordedRequest]:
        """The recorded requests for ``path``, oldest first."""
        key = _norm(path)
        with self._lock:
            return [r for r in self.requests if _norm(r.path) == key]

    def max_concurrency(self, prefix: str = "/") -> int:
        """Largest number of requests under ``prefix`` that the server was handling at once."""
        events: list[tuple[float, int]] = []
        with self._lock:
            for r in self.requests:
                if _norm(r.path).startswith(prefix):
                    events.append((r.started, 1))
                    events.append((r.finished if r.finished is not None else float("inf"), -1))
        # Ends sort before starts at equal times: a request that began exactly when another ended
        # did not overlap it.
        events.sort()
        current = peak = 0
        for _, delta in events:
            current += delta
            peak = max(peak, current)
        return peak

    def reset_log(self) -> None:
        """Forget recorded requests and hit counts (content and faults stay)."""
        with self._lock:
            self.requests.clear()
            self._hits.clear()

    # -- used by the handler -------------------------------------------------------------------

    def _record(self, method: str, path: str, headers: Message[str, str], peer: str) -> RecordedRequest:
        lowered = {k.lower(): v for k, v in headers.items()}
        rec = RecordedRequest(method, path, lowered, time.monotonic(), peer=peer)
        with self._lock:
            self.requests.append(rec)
            self._hits[_norm(path)] += 1
        return rec

    def _fault_for(self, key: str) -> tuple[_Fault, int] | None:
        """Return the fault for ``key`` and how many times it had triggered before this request."""
        with self._lock:
            fault = self._faults.get(key)
            if fault is None:
                return None
            fault.triggered += 1
            return fault, fault.triggered - 1

    def _page(self, key: str) -> _Page | None:
        with self._lock:
            page = self._pages.get(key)
            mounts = list(self._mounts)
        if page is not None:
            return page
        for mount in mounts:
            if key.startswith(mount.prefix):
                page = self._mounted(mount, key[len(mount.prefix) :])
                if page is not None:
                    return page
        return None

    def _mounted(self, mount: _Mount, rel: str) -> _Page | None:
        target = (mount.root / rel).resolve()
        if not target.is_relative_to(mount.root):
            return None
        try:
            st = target.stat()
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        with self._lock:
            cached = mount.cache.get(rel)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            body = target.read_bytes()
        except OSError:
            return None
        ctype = _TEXT_TYPES.get(target.suffix.lower()) or (
            mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        )
        page = _make_page(body, ctype, True, int(st.st_mtime))
        with self._lock:
            mount.cache[rel] = (stamp, page)
        return page


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True  # headers and body go out in one write, but never wait on ACKs
    timeout = 30  # an idle keep-alive connection (or a stalled client) frees its thread eventually
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging: it would dominate the cost of a loopback benchmark."""

    def do_GET(self) -> None:
        """Answer a GET from the site's pages, mounts and faults."""
        site = self.server.site
        host, port = self.client_address[:2]
        rec = site._record(self.command, self.path, self.headers, f"{host}:{port}")
        try:
            self._dispatch(site, rec)
        except OSError:
            # The client went away mid-response (e.g. it stopped reading an oversized body).
            self.close_connection = True
        finally:
            rec.finished = time.monotonic()

    def _dispatch(self, site: Site, rec: RecordedRequest) -> None:
        key = _norm(self.path)
        found = site._fault_for(key)
        if found is not None and not self._fault(site, rec, key, *found):
            return
        with site._lock:
            alternative = site._negotiated.get(key)
        if alternative is not None and "text/markdown" in self.headers.get("Accept", "").lower():
            key = alternative
        page = site._page(key)
        if page is None:
            self._simple(rec, 404, b"not found\n")
            return
        if self._is_fresh(page):
            rec.status = 304
            self.wfile.write(page.not_modified)
            return
        rec.status = 200
        self.wfile.write(page.head + page.body)
        rec.sent = len(page.body)

    def _is_fresh(self, page: _Page) -> bool:
        inm = self.headers.get("If-None-Match")
        if inm is not None:
            # RFC 9110 §13.1.3: If-Modified-Since is ignored when If-None-Match is present.
            return page.etag is not None and _etag_matches(inm, page.etag)
        ims = self.headers.get("If-Modified-Since")
        if ims is None or page.last_modified is None:
            return False
        try:
            since = parsedate_to_datetime(ims).timestamp()
        except (TypeError, ValueError):
            return False
        return since >= page.modified

    def _simple(
        self,
        rec: RecordedRequest,
        code: int,
        body: bytes,
        *,
        content_type: str = "text/plain; charset=utf-8",
        headers: dict[str, str] | None = None,
    ) -> None:
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "Unknown"
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"HTTP/1.1 {code} {phrase}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n"
        )
        rec.status = code
        self.wfile.write(head.encode("latin-1") + body)
        rec.sent = len(body)

    def _fault(self, site: Site, rec: RecordedRequest, key: str, fault: _Fault, before: int) -> bool:
        """Apply ``fault``; return True when the request should then be served normally.

        Kinds and parameters:

        - ``status``: ``code`` (int), optional ``body`` (str), ``headers`` (dict).
        - ``timeout``: hang without answering for ``seconds`` (default 10), then drop the connection.
        - ``delay``: wait ``seconds`` (default 0.05), then serve normally.
        - ``slow``: send the headers, then the body ``chunk`` bytes (default 16) at a time with
          ``delay`` seconds (default 0.05) between chunks; the body is the page's, else ``size``
          (default 4096) bytes of markdown.
        - ``oversized``: a ``size``-byte body; ``framing`` is "length" (Content-Length, which
          ``declared`` may falsify), "chunked" or "close" (no length, ends with the connection).
        - ``bad-encoding``: 200 with invalid UTF-8 bytes declared as charset=utf-8 (``body`` bytes).
        - ``redirect-loop``: 302 to the request's own path.
        - ``redirect``: ``status`` (default 302) to ``to`` (a path or an absolute URL).
        - ``retry-after``: the first ``times`` (default 1) requests get ``status`` (default 429) with
          ``Retry-After: after`` (default 1; seconds or an HTTP-date string), then serve normally.
        - ``reset``: close the connection abruptly (TCP RST) without answering.
        """
        p = fault.params
        kind = fault.kind
        if kind == "status":
            body = str(p.get("body", f"status {p['code']}\n")).encode()
            self._simple(rec, int(p["code"]), body, headers=p.get("headers"))
        elif kind == "timeout":
            site._stop.wait(float(p.get("seconds", 10.0)))
            self.close_connection = True
        elif kind == "delay":
            site._stop.wait(float(p.get("seconds", 0.05)))
            return True
        elif kind == "slow":
            self._slow(site, rec, key, p)
        elif kind == "oversized":
            self._oversized(rec, p)
        elif kind == "bad-encoding":
            body = bytes(p.get("body", b"# Caf\xe9\n\nLatin-1 bytes \xff\xfe declared as UTF-8 \xc3\x28\n"))
            self._simple(rec, 200, body, content_type="text/markdown; charset=utf-8")
        elif kind == "redirect-loop":
            self._simple(rec, 302, b"", headers={"Location": self.path})
        elif kind == "redirect":
            self._simple(rec, int(p.get("status", 302)), b"", headers={"Location": str(p["to"])})
        elif kind == "retry-after":
            if before >= int(p.get("times", 1)):
                return True
            self._simple(
                rec,
                int(p.get("status", 429)),
                b"slow down\n",
                headers={"Retry-After": str(p.get("after", 1))},
            )
        elif kind == "reset":
            # SO_LINGER with a zero timeout turns close() into an RST instead of an orderly FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
        return False

    def _slow(self, site: Site, rec: RecordedRequest, key: str, p: dict[str, Any]) -> None:
        page = site._page(key)
        body = page.body if page is not None else b"# slow\n" + b"x" * (int(p.get("size", 4096)) - 7)
        chunk = max(1, int(p.get("chunk", 16)))
        delay = float(p.get("delay", 0.05))
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: text/markdown; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        rec.status = 200
        self.wfile.write(head.encode("latin-1"))
        for start in range(0, len(body), chunk):
            if site._stop.wait(delay):
                self.close_connection = True
                return
            self.wfile.write(body[start : start + chunk])
            rec.sent += len(body[start : start + chunk])

    def _oversized(self, rec: RecordedRequest, p: dict[str, Any]) -> None:
        size = int(p["size"])
        framing = str(p.get("framing", "length"))
        ctype = "Content-Type: text/markdown; charset=utf-8\r\n"
        if framing == "length":
            head = f"HTTP/1.1 200 OK\r\n{ctype}Content-Length: {int(p.get('declared', size))}\r\n\r\n"
        elif framing == "chunked":
            head = f"HTTP/1.1 200 OK\r\n{ctype}Transfer-Encoding: chunked\r\n\r\n"
        elif framing == "close":
            head = f"HTTP/1.1 200 OK\r\n{ctype}Connection: close\r\n\r\n"
            self.close_connection = True
        else:
            raise ValueError(f"unknown framing {framing!r}")
        rec.status = 200
        self.wfile.write(head.encode("latin-1"))
        block = b"a" * _WRITE_CHUNK
        remaining = size
        while remaining > 0 and not self.server.site._stop.is_set():
            piece = block[: min(remaining, _WRITE_CHUNK)]
            if framing == "chunked":
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            else:
                self.wfile.write(piece)
            rec.sent += len(piece)
            remaining -= len(piece)
        if framing == "chunked":
            self.wfile.write(b"0\r\n\r\n")
        if framing == "length":
            # A falsified Content-Length leaves the connection out of sync; never reuse it.
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # we join our own threads with a bounded budget instead
    request_queue_size = 128  # a burst of parallel connects must not overflow the backlog
    allow_reuse_address = True

    def __init__(self, site: Site) -> None:
        self.site = site
        self._conn_lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._workers: set[threading.Thread] = set()
        super().__init__(("127.0.0.1", 0), _Handler)

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse DNS lookup of the address (slow or hanging offline)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name = "127.0.0.1"
        self.server_port = self.server_address[1]

    def process_request(self, request: Any, client_address: Any) -> None:
        """Handle each connection on its own daemon thread, tracked so shutdown can close it."""
        thread = threading.Thread(
            target=self._serve_connection, args=(request, client_address), daemon=True, name="sitesrv"
        )
        with self._conn_lock:
            self._conns.add(request)
            self._workers.add(thread)
        thread.start()

    def _serve_connection(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._conn_lock:
                self._conns.discard(request)
                self._workers.discard(threading.current_thread())

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Keep disconnects quiet; record (and print) anything else, which would be a server bug."""
        exc = sys.exc_info()[1]
        if exc is None or isinstance(exc, OSError):
            return
        self.site.errors.append(exc)
        traceback.print_exc()

    def close_connections(self) -> None:
        """Abort every open connection and wait (bounded) for their threads to finish."""
        with self._conn_lock:
            conns = list(self._conns)
            workers = list(self._workers)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + _JOIN_BUDGET
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))


@contextlib.contextmanager
def run_site(site: Site) -> Iterator[str]:
    """Serve ``site`` on 127.0.0.1 (random port) from a thread; yield the base URL, then shut down."""
    site._stop.clear()
    server = _Server(site)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{server.server_port}"
    site.base_url = base_url
    try:
        yield base_url
    finally:
        site._stop.set()  # wakes handlers parked in timeout/slow/delay faults
        server.shutdown()
        server.server_close()
        server.close_connections()
        thread.join(_JOIN_BUDGET)
        site.base_url = None
