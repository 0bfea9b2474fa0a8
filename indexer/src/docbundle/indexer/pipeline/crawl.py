"""The async crawler: fetch a library's llms.txt pages politely, robustly and within hard bounds.

``crawl`` fetches many URLs over one ``httpx.AsyncClient`` (HTTP/1.1, keep-alive) and returns one
``FetchResult`` per URL, in input order; a page failure is recorded in its result, never raised.
``fetch_one`` is the synchronous single-URL helper (used for llms.txt itself) and raises
``FetchError`` instead.

Bounds, so a nightly job can never hang or balloon:

- at most ``concurrency`` requests in flight overall and ``per_host`` per (scheme, host, port);
- every attempt (all redirect hops plus the body) finishes within ``timeout`` seconds, on top of
  httpx's connect/read/write/pool timeouts of the same value;
- at most ``retries`` retries, with exponential backoff and jitter; ``Retry-After`` is honoured
  (and pauses the whole host) unless it exceeds ``max_retry_after``, which fails the page at once;
- bodies are read as a stream and abandoned once they exceed ``max_bytes``;
- at most ``max_redirects`` redirects per attempt, and a revisited URL is reported as a loop.

Markdown, plain text and HTML are fetched; other types are recorded as ``error_kind="content-type"``
without downloading the body. Every result says how its text was obtained (``FetchResult.obtained``):

- ``markdown``: a markdown or text URL (``.md``, ``.txt``...) answered with markdown or text;
- ``negotiated``: any other URL answered with markdown or text to the ``Accept: text/markdown`` header;
- ``md-url``: the page came back as HTML and its llms.txt ``.md`` twin (``md_twin``) gave markdown;
- ``html``: the page's HTML, decoded (``html.decode_html``), to be converted later in the worker
  processes (``prepare.py``), never on this event loop.

The ``.md`` twin rule, per (scheme, host, port): the first page of a host that comes back as HTML probes
its twin with one request while the host's other HTML pages wait for the answer. If the twin gives
markdown the host is marked as having twins and every later HTML page of it probes its own twin (one
request each, falling back to its HTML); if not, the host is marked as having none and no other twin is
requested from it during this crawl. So a host without twins costs exactly one extra request.
A page whose HTML is a meta-refresh redirect is replaced by the page it points to (followed once, with
the same bounds and scope as any request); the tag is looked for in the page's first 16 KiB only, in a
worker thread, so no parse of a page's whole HTML runs on this event loop. With a ``CrawlCache``, known pages
are revalidated (``If-None-Match`` / ``If-Modified-Since``) and a 304 reuses the cached body
(``not_modified=True``). Local sources (``file:`` URLs and plain paths) go through the same size,
type and encoding rules without the network or the cache.

Every fetch happens within a ``CrawlScope`` (see ``scope.py``): local files only inside a local
llms.txt's folder and only regular files, network connections only to public addresses, the llms.txt's
own origin and the configured ``allow_hosts``, checked on every redirect hop. What the scope refuses
is recorded as ``error_kind="refused"`` with the reason. A crawl may also be given a ``guard``: it is
asked about every URL the crawl requests beyond the ones it was given (each redirect hop, a meta-refresh
target, a ``.md`` twin), and a URL it refuses fails the page the same way (followed pages use it to
stay on their origin, under the ``follow`` prefix and within robots.txt; ``follow.py``).
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import hashlib
import importlib.util
import logging
import os
import random
import re
import ssl
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from pathlib import Path
from types import TracebackType
from typing import cast
from urllib.parse import urlsplit, urlunsplit
from urllib.request import url2pathname

import httpx
import msgspec
from docbundle.indexer.errors import AddressRefused, AttemptFailed, FetchError, LocalRefused
from docbundle.indexer.pipeline import html
from docbundle.indexer.pipeline.cache import CacheEntry, CrawlCache
from docbundle.indexer.pipeline.scope import CrawlScope, GuardedTransport, LocalRoot

__all__ = [
    "ERROR_KINDS",
    "OBTAINED",
    "CrawlOptions",
    "CrawlScope",
    "FetchResult",
    "Guard",
    "crawl",
    "fetch_one",
    "md_twin",
]

log = logging.getLogger(__name__)

# httpcore runs `import sniffio` on every request to detect the async library. Recent anyio no
# longer installs sniffio, and then every one of those imports fails only after rescanning sys.path,
# which measured ~25% of the client CPU per page. A None entry caches the miss: the import still
# raises ModuleNotFoundError, now from a dict lookup. (A dependency on sniffio makes this a no-op.)
if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
    sys.modules["sniffio"] = None  # type: ignore[assignment]

ERROR_KINDS = frozenset(
    {
        "http",
        "timeout",
        "too-large",
        "encoding",
        "redirects",
        "network",
        "content-type",
        "rate-limited",
        "not-found",
        "refused",
    }
)

_INDEXED_TYPES = frozenset({"text/markdown", "text/x-markdown", "text/plain", "text/mdx"})
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
#: Asked about each URL a crawl requests beyond those it was given: a reason refuses it, None allows it.
Guard = Callable[[str], str | None]
#: How a page's text was obtained (see the module docstring), in the order reports list them.
OBTAINED = ("markdown", "negotiated", "md-url", "html")
_REFRESH_HINT = re.compile(rb"http-equiv\s*=\s*[\"']?refresh", re.IGNORECASE)
_REFRESH_HINT_CHARS = 8192  # a refresh tag is looked for only this near the start of a page
_REFRESH_SCAN_CHARS = 16384  # and parsed from this much of it (the hint window plus the tag's own length)
# Object stores and bare static hosts often label markdown as one of these; trust them only when
# the path says the file is text.
_GENERIC_TYPES = frozenset({"", "application/octet-stream"})
_TEXT_SUFFIXES = (".md", ".mdx", ".markdown", ".txt")
_LOCAL_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".mdx": "text/mdx",
    ".txt": "text/plain",
    ".html": "text/html",
    ".htm": "text/html",
}
_TIMEOUT_PHASES = {
    httpx.ConnectTimeout: "connect",
    httpx.ReadTimeout: "read",
    httpx.WriteTimeout: "write",
    httpx.PoolTimeout: "waiting for a connection",
}
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# 500 is retried too: behind CDNs it is as often a transient origin hiccup as a real bug.
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_RETRY_AFTER_STATUSES = frozenset({429, 503})
_GONE_STATUSES = frozenset({404, 410})
_DRAIN_LIMIT = 64 * 1024  # read at most this much of a redirect/error body to keep the connection
_ACCEPT = "text/markdown, text/x-markdown;q=0.9, text/plain;q=0.8, */*;q=0.1"


class CrawlOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Limits and politeness settings of a crawl (all times in seconds)."""

    concurrency: int = 16
    per_host: int = 8
    timeout: float = 20.0
    retries: int = 3
    backoff: float = 0.5
    max_retry_after: float = 60.0
    max_bytes: int = 5 * 1024 * 1024
    max_redirects: int = 5
    user_agent: str = "docbundle-indexer/0.1 (+https://github.com/docbundle/docbundle)"

    def __post_init__(self) -> None:
        """Reject settings that would make the crawl unbounded or unable to make progress."""
        if self.concurrency < 1 or self.per_host < 1:
            raise ValueError("concurrency and per_host must be at least 1")
        if not self.timeout > 0:
            raise ValueError("timeout must be positive")
        if self.retries < 0 or self.backoff < 0 or self.max_retry_after < 0:
            raise ValueError("retries, backoff and max_retry_after must not be negative")
        if self.max_bytes < 0 or self.max_redirects < 0:
            raise ValueError("max_bytes and max_redirects must not be negative")


class FetchResult(msgspec.Struct):
    """The outcome of fetching one URL; ``ok`` results carry ``text``, failed ones ``error``.

    ``status`` is the last HTTP status seen (304 for a revalidated page, 200 for local files).
    ``bytes`` counts body bytes received in this fetch: 0 for a 304 (the text came from the cache)
    and, for a too-large body, how much was read before giving up. ``attempts`` counts tries of
    the page (retries included, redirect hops not); ``elapsed`` is seconds from the first attempt.
    """

    url: str
    final_url: str
    ok: bool
    status: int | None = None
    text: str | None = None
    content_type: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    not_modified: bool = False
    error: str | None = None
    error_kind: str | None = None
    attempts: int = 0
    bytes: int = 0
    elapsed: float = 0.0
    sha256: str | None = None
    obtained: str = ""
    truncated: bool = False  # fetch_one(truncate=True): the body was cut to max_bytes at a line end


@dataclass
class _Trace:
    """What one attempt got to before it ended, for the result of a failed attempt."""

    url: str
    status: int | None = None
    received: int = 0


@dataclass
class _Page:
    status: int
    final_url: str
    body: bytes
    content_type: str | None
    etag: str | None
    last_modified: str | None
    received: int
    not_modified: bool = False
    truncated: bool = False


@dataclass
class _Host:
    slots: asyncio.Semaphore
    not_before: float = 0.0  # loop time before which no request may start (Retry-After)
    twins: bool | None = None  # whether the host serves llms.txt .md twins (None: not probed yet)
    probing: asyncio.Event | None = None  # set once the host's first twin probe has answered


@dataclass
class _Crawler:
    options: CrawlOptions
    cache: CrawlCache | None
    scope: CrawlScope
    guard: Guard | None = None
    truncate: bool = False  # keep the first max_bytes of a longer body (cut at a line end) instead of failing
    client: httpx.AsyncClient = field(init=False)
    slots: asyncio.Semaphore = field(init=False)
    hosts: dict[tuple[str, str, int | None], _Host] = field(init=False, default_factory=dict)

    async def __aenter__(self) -> _Crawler:
        opts = self.options
        self.slots = asyncio.Semaphore(opts.concurrency)
        limits = httpx.Limits(
            max_connections=opts.concurrency,
            max_keepalive_connections=opts.concurrency,
            keepalive_expiry=30.0,
        )
        self.client = httpx.AsyncClient(
            follow_redirects=False,  # followed by hand: per-hop bookkeeping, loop detection
            timeout=httpx.Timeout(opts.timeout),
            headers={"User-Agent": opts.user_agent, "Accept": _ACCEPT},
            # HTTP/1.1 with keep-alive; every connection is checked by the scope's address policy.
            transport=GuardedTransport(self.scope.policy, ssl_context=_ssl_context(), limits=limits),
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.client.aclose()

    async def fetch(self, url: str) -> tuple[FetchResult, BaseException | None]:
        """Fetch one URL (remote or local); return its result and the low-level cause of a failure."""
        scheme = urlsplit(url).scheme.lower()
        # A one-letter "scheme" is a Windows drive letter.
        if scheme in ("", "file") or len(scheme) == 1:
            local = self.scope.local
            if local is None:
                reason = (
                    "local files are read only from a local llms.txt; a remote llms.txt may link only "
                    "http(s) pages"
                )
                return _failed(url, url, reason, "refused"), None
            async with self.slots:
                return await asyncio.to_thread(_read_local, url, self.options, local)
        if scheme not in ("http", "https"):
            return _failed(
                url, url, f"unsupported URL scheme {scheme!r}: only http(s) is fetched", "refused"
            ), None
        return await self._fetch_http(url)

    async def fetch_page(self, url: str) -> tuple[FetchResult, BaseException | None]:
        """Fetch a documentation page: ``fetch``, then a meta-refresh target and the ``.md`` twin rule."""
        result, cause = await self.fetch(url)
        if (
            not result.ok
            or result.obtained != "html"
            or urlsplit(url).scheme.lower() not in ("http", "https")
        ):
            return result, cause
        # Off the event loop (lexbor parses without the GIL), and bounded: see _refresh_target.
        target = await asyncio.to_thread(_refresh_target, result)
        if target is not None:
            refused = await self._refused(target)
            if refused is not None:
                return _failed(url, target, f"meta refresh to {target} refused: {refused}", "refused"), None
            # Followed once: a refresh page pointing at another refresh page is taken as it is.
            followed, cause = await self.fetch(target)
            result = msgspec.structs.replace(followed, url=url)
            if not result.ok or result.obtained != "html":
                return result, cause
        twin = await self._twin(result)
        if twin is not None:
            return twin, None
        return result, cause

    async def _twin(self, page: FetchResult) -> FetchResult | None:
        """The page's ``.md`` twin as a result (``obtained="md-url"``), or None; see the module docstring."""
        twin_url = md_twin(page.final_url)
        if twin_url is None or await self._refused(twin_url) is not None:
            return None
        try:
            host = self._host(httpx.URL(twin_url))
        except httpx.InvalidURL:
            return None
        if host.twins is None:
            if host.probing is not None:
                await host.probing.wait()
            else:
                host.probing = asyncio.Event()
                try:
                    found = await self._fetch_twin(page, twin_url)
                    host.twins = found is not None
                finally:
                    if host.twins is None:
                        host.twins = False
                    host.probing.set()
                return found
        if not host.twins:
            return None
        return await self._fetch_twin(page, twin_url)

    async def _fetch_twin(self, page: FetchResult, twin_url: str) -> FetchResult | None:
        result, _cause = await self._fetch_http(twin_url)
        # A host answering every URL with its HTML shell (200 text/html) has no twins either.
        if (
            not result.ok
            or result.obtained not in ("markdown", "negotiated")
            or not (result.text or "").strip()
        ):
            return None
        return msgspec.structs.replace(result, url=page.url, obtained="md-url")

    async def _refused(self, url: str) -> str | None:
        """The guard's reason to refuse ``url``, or None; asked in a worker thread (it may read a long
        robots.txt), so the event loop and its timeouts keep running meanwhile."""
        if self.guard is None:
            return None
        return await asyncio.to_thread(self.guard, url)

    def _host(self, url: httpx.URL) -> _Host:
        key = (url.scheme, url.host, url.port)
        host = self.hosts.get(key)
        if host is None:
            host = self.hosts[key] = _Host(asyncio.Semaphore(self.options.per_host))
        return host

    async def _fetch_http(self, url: str) -> tuple[FetchResult, BaseException | None]:
        opts = self.options
        loop = asyncio.get_running_loop()
        try:
            target = httpx.URL(url)
        except httpx.InvalidURL as exc:
            return _failed(url, url, f"invalid URL: {exc}", "network"), exc
        host = self._host(target)
        entry = self.cache.lookup(url) if self.cache is not None else None
        started = time.perf_counter()
        attempts = 0
        delay = 0.0
        while True:
            attempts += 1
            wait = max(delay, host.not_before - loop.time())
            if wait > 0:
                # Sleep outside the slots so other hosts (and other pages) keep the concurrency.
                await asyncio.sleep(wait)
            trace = _Trace(url)
            try:
                async with host.slots, self.slots:
                    page = await self._attempt(target, entry, trace)
            except AttemptFailed as failure:
                retries = attempts - 1
                prefix = (
                    f"gave up after {retries} {'retry' if retries == 1 else 'retries'}: " if retries else ""
                )
                ra = failure.retry_after
                if ra is not None and ra > opts.max_retry_after:
                    reason = (
                        f"{prefix}{failure.reason}, Retry-After {ra:g} s exceeds "
                        f"max_retry_after {opts.max_retry_after:g} s"
                    )
                    kind = "rate-limited"
                elif not failure.retryable or retries >= opts.retries:
                    reason = prefix + failure.reason
                    kind = "rate-limited" if failure.status == 429 else failure.kind
                else:
                    delay = _backoff(opts.backoff, attempts)
                    if ra is not None:
                        delay = max(delay, ra)
                        host.not_before = max(host.not_before, loop.time() + ra)
                    continue
                if failure.status in _GONE_STATUSES and self.cache is not None:
                    self.cache.discard(url)
                result = _failed(
                    url,
                    trace.url,
                    reason,
                    kind,
                    status=failure.status or trace.status,
                    attempts=attempts,
                    received=trace.received,
                    elapsed=time.perf_counter() - started,
                )
                return result, failure.__cause__
            return await self._success(url, page, entry, attempts, time.perf_counter() - started)

    async def _success(
        self, url: str, page: _Page, entry: CacheEntry | None, attempts: int, elapsed: float
    ) -> tuple[FetchResult, BaseException | None]:
        obtained = _obtained(page.content_type, urlsplit(page.final_url).path)
        try:
            if obtained == "html":
                text = html.decode_html(page.body, page.content_type)
            else:
                text = _decode(page.body, page.content_type)
        except AttemptFailed as failure:
            result = _failed(
                url,
                page.final_url,
                failure.reason,
                failure.kind,
                status=page.status,
                attempts=attempts,
                received=page.received,
                elapsed=elapsed,
            )
            return result, failure.__cause__
        if page.not_modified and entry is not None:
            digest = entry.sha256
        else:
            digest = hashlib.sha256(page.body).hexdigest()
            unchanged = entry is not None and (entry.sha256, entry.etag, entry.last_modified) == (
                digest,
                page.etag,
                page.last_modified,
            )
            # Without a validator the entry could never be revalidated, so it would be dead weight.
            if (
                self.cache is not None
                and (page.etag or page.last_modified)
                and not unchanged
                and not page.truncated
            ):
                try:
                    # In a worker thread: on a slow disk the write syscalls would stall every
                    # other download on the loop (measured at ~0.5 ms a page here).
                    await asyncio.to_thread(
                        self.cache.store,
                        url,
                        page.body,
                        etag=page.etag,
                        last_modified=page.last_modified,
                        content_type=page.content_type,
                    )
                except OSError as exc:
                    # The cache only saves bandwidth next time; a full disk must not fail the page.
                    log.warning("could not cache %s: %s", url, exc)
        result = FetchResult(
            url=url,
            final_url=page.final_url,
            ok=True,
            status=page.status,
            text=text,
            content_type=page.content_type,
            etag=page.etag,
            last_modified=page.last_modified,
            not_modified=page.not_modified,
            attempts=attempts,
            bytes=page.received,
            elapsed=elapsed,
            sha256=digest,
            obtained=obtained,
            truncated=page.truncated,
        )
        return result, None

    async def _attempt(self, target: httpx.URL, entry: CacheEntry | None, trace: _Trace) -> _Page:
        """One try: follow redirects and read the body, all within the whole-request timeout."""
        opts = self.options
        headers: dict[str, str] = {}
        if entry is not None:
            if entry.etag:
                headers["If-None-Match"] = entry.etag
            if entry.last_modified:
                headers["If-Modified-Since"] = entry.last_modified
        current = target
        seen = {str(current)}
        hop = 0
        try:
            async with asyncio.timeout(opts.timeout):
                for hop in range(opts.max_redirects + 1):  # noqa: B007 - read after the loop
                    trace.url = str(current)
                    async with self.client.stream("GET", current, headers=headers) as response:
                        trace.status = response.status_code
                        location = response.headers.get("location")
                        if response.status_code not in _REDIRECTS or location is None:
                            return await self._read(response, current, entry, trace)
                        await _drain(response)
                    current = current.join(location)
                    if current.scheme not in ("http", "https"):
                        trace.url = str(current)
                        raise AttemptFailed(
                            f"redirect to {current} refused: only http(s) is fetched", kind="refused"
                        )
                    if str(current) in seen:
                        trace.url = str(current)
                        raise AttemptFailed(f"redirect loop at {current}", kind="redirects")
                    seen.add(str(current))
                    refused = await self._refused(str(current))
                    if refused is not None:
                        trace.url = str(current)
                        raise AttemptFailed(f"redirect to {current} refused: {refused}", kind="refused")
                trace.url = str(current)
                raise AttemptFailed(f"too many redirects ({opts.max_redirects})", kind="redirects")
        except AddressRefused as exc:
            reason = f"redirect to {current} refused: {exc}" if hop else str(exc)
            raise AttemptFailed(reason, kind="refused") from exc
        except TimeoutError as exc:
            raise AttemptFailed(
                f"timed out after {float(opts.timeout)} s (whole request)", kind="timeout", retryable=True
            ) from exc
        except httpx.TimeoutException as exc:
            phase = _TIMEOUT_PHASES.get(type(exc), "request")
            raise AttemptFailed(
                f"timed out after {float(opts.timeout)} s ({phase})", kind="timeout", retryable=True
            ) from exc
        except httpx.UnsupportedProtocol as exc:
            raise AttemptFailed(f"unsupported URL: {exc}", kind="network") from exc
        except httpx.DecodingError as exc:
            raise AttemptFailed(f"body could not be decoded: {exc}", kind="encoding") from exc
        except httpx.TransportError as exc:
            # Resets, refused connections, servers closing mid-response: usually transient.
            raise AttemptFailed(f"network error: {_describe(exc)}", kind="network", retryable=True) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise AttemptFailed(f"request failed: {_describe(exc)}", kind="network") from exc

    async def _read(
        self, response: httpx.Response, url: httpx.URL, entry: CacheEntry | None, trace: _Trace
    ) -> _Page:
        """Turn a non-redirect response into a page, or raise the failure it represents."""
        opts = self.options
        status = response.status_code
        etag = response.headers.get("etag")
        last_modified = response.headers.get("last-modified")
        if status == 304:
            # Consume the (empty) body: an unfinished response makes httpcore drop the connection,
            # which turned every revalidation into a fresh TCP connect.
            await _drain(response)
            if entry is None:
                raise AttemptFailed(
                    "HTTP 304 Not Modified to an unconditional request", kind="http", status=304
                )
            return _Page(
                status=304,
                final_url=str(url),
                body=entry.body,
                content_type=entry.content_type,
                etag=etag or entry.etag,
                last_modified=last_modified or entry.last_modified,
                received=0,
                not_modified=True,
            )
        if not 200 <= status < 300:
            await _drain(response)
            retry_after = None
            if status in _RETRY_AFTER_STATUSES:
                retry_after = _parse_retry_after(response.headers.get("retry-after"))
            raise AttemptFailed(
                f"HTTP {status} {_phrase(response)}",
                kind="http",
                status=status,
                retryable=status in _RETRY_STATUSES,
                retry_after=retry_after,
            )
        content_type = response.headers.get("content-type")
        mime = _mime(content_type)
        if (
            mime not in _INDEXED_TYPES
            and mime not in _HTML_TYPES
            and not (mime in _GENERIC_TYPES and _looks_textual(url.path))
        ):
            shown = mime or "(none)"
            raise AttemptFailed(f"content type {shown} is not indexed", kind="content-type", status=status)
        declared = response.headers.get("content-length")
        if (
            not self.truncate
            and declared is not None
            and declared.strip().isdigit()
            and int(declared) > opts.max_bytes
        ):
            raise AttemptFailed(
                f"body exceeds {opts.max_bytes} bytes (Content-Length {int(declared)})",
                kind="too-large",
                status=status,
            )
        chunks: list[bytes] = []
        async for chunk in response.aiter_bytes():
            trace.received += len(chunk)
            if trace.received > opts.max_bytes:
                if not self.truncate:
                    raise AttemptFailed(
                        f"body exceeds {opts.max_bytes} bytes", kind="too-large", status=status
                    )
                # Read no further; a line cut in two (or a character) is not kept.
                chunks.append(chunk)
                head = b"".join(chunks)[: opts.max_bytes]
                return _Page(
                    status=status,
                    final_url=str(url),
                    body=head[: head.rfind(b"\n") + 1],
                    content_type=content_type,
                    etag=etag,
                    last_modified=last_modified,
                    received=trace.received,
                    truncated=True,
                )
            chunks.append(chunk)
        return _Page(
            status=status,
            final_url=str(url),
            body=b"".join(chunks),
            content_type=content_type,
            etag=etag,
            last_modified=last_modified,
            received=trace.received,
        )


async def crawl(
    urls: Sequence[str],
    *,
    scope: CrawlScope,
    options: CrawlOptions = CrawlOptions(),  # noqa: B008 - frozen, so a shared default is safe
    cache: CrawlCache | None = None,
    on_result: Callable[[FetchResult], None] | None = None,
    guard: Guard | None = None,
) -> list[FetchResult]:
    """Fetch ``urls`` concurrently; return one result per URL in input order, never raising for a page.

    A URL listed twice is fetched once (each position gets its own copy of the result).
    ``on_result`` is called on the event loop once per listed URL, as results complete.
    ``scope`` says which local files and network addresses may be touched (``CrawlScope.for_source``);
    ``guard`` is asked about every other URL requested on their behalf (redirect hops, meta-refresh
    targets, ``.md`` twins) and refuses the page when it gives a reason.
    """
    results: list[FetchResult | None] = [None] * len(urls)
    positions: dict[str, list[int]] = {}
    for index, url in enumerate(urls):
        positions.setdefault(url, []).append(index)

    async with _Crawler(options, cache, scope, guard) as crawler:

        async def run(url: str, indexes: list[int]) -> None:
            result, _cause = await crawler.fetch_page(url)
            for n, index in enumerate(indexes):
                copy = result if n == 0 else msgspec.structs.replace(result)
                results[index] = copy
                if on_result is not None:
                    on_result(copy)

        try:
            async with asyncio.TaskGroup() as group:
                for url, indexes in positions.items():
                    group.create_task(run(url, indexes))
        except BaseExceptionGroup as errors:
            # Only a caller's on_result (or a bug) can raise here; surface it as itself.
            if len(errors.exceptions) == 1:
                raise errors.exceptions[0] from None
            raise
    # The task group only exits normally once every position has been filled.
    return cast("list[FetchResult]", results)


def fetch_one(
    url: str,
    *,
    scope: CrawlScope,
    options: CrawlOptions = CrawlOptions(),  # noqa: B008 - frozen, so a shared default is safe
    cache: CrawlCache | None = None,
    truncate: bool = False,
) -> FetchResult:
    """Fetch one URL synchronously; raise ``FetchError`` (cause kept) when it cannot be fetched.

    With ``truncate``, a body longer than ``options.max_bytes`` is not an error: its first
    ``max_bytes`` are kept, cut at their last line end, and the result says ``truncated``.
    Runs its own event loop, so it must not be called from async code.
    """

    async def run() -> tuple[FetchResult, BaseException | None]:
        async with _Crawler(options, cache, scope, truncate=truncate) as crawler:
            return await crawler.fetch(url)

    result, cause = asyncio.run(run())
    if result.ok and result.obtained == "html":
        result = msgspec.structs.replace(
            result,
            ok=False,
            text=None,
            error="an llms.txt served as HTML is not read",
            error_kind="content-type",
        )
    if not result.ok:
        raise FetchError(
            url, result.error or "fetch failed", kind=result.error_kind or "error", status=result.status
        ) from cause
    return result


# -- helpers -----------------------------------------------------------------------------------


def _failed(
    url: str,
    final_url: str,
    reason: str,
    kind: str,
    *,
    status: int | None = None,
    attempts: int = 0,
    received: int = 0,
    elapsed: float = 0.0,
) -> FetchResult:
    return FetchResult(
        url=url,
        final_url=final_url,
        ok=False,
        status=status,
        error=reason,
        error_kind=kind,
        attempts=attempts,
        bytes=received,
        elapsed=elapsed,
    )


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's default verifying context, built once: loading the CA bundle costs ~50 ms a client."""
    return httpx.create_ssl_context()


def _backoff(base: float, attempt: int) -> float:
    """Exponential backoff with "equal jitter": half fixed, half random, so retries spread out."""
    ceiling = base * 2.0 ** (attempt - 1)
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date); None if unusable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if 0 <= seconds < float("inf") else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, float(when.timestamp()) - time.time())


def _phrase(response: httpx.Response) -> str:
    if response.reason_phrase:
        return response.reason_phrase
    try:
        return HTTPStatus(response.status_code).phrase
    except ValueError:
        return "Unknown"


def _describe(exc: BaseException) -> str:
    """Name the error with the first non-empty message in its chain (httpx often wraps a bare one)."""
    cause: BaseException | None = exc
    for _ in range(5):
        if cause is None:
            break
        if str(cause):
            return f"{type(exc).__name__}: {cause}"
        cause = cause.__cause__ or cause.__context__
    return type(exc).__name__


def _mime(content_type: str | None) -> str:
    return (content_type or "").partition(";")[0].strip().lower()


def _charset(content_type: str | None) -> str | None:
    for param in (content_type or "").split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


def _looks_textual(path: str) -> bool:
    return path.lower().endswith(_TEXT_SUFFIXES)


def _obtained(content_type: str | None, path: str) -> str:
    """How a successful response's text was obtained (``md-url`` is decided by the caller)."""
    if _mime(content_type) in _HTML_TYPES:
        return "html"
    return "markdown" if _looks_textual(path) else "negotiated"


def md_twin(url: str) -> str | None:
    """The llms.txt convention's markdown URL of an HTML page, or None when it has none.

    ``dir/`` -> ``dir/index.html.md``; ``page.html`` -> ``page.html.md``; ``page`` -> ``page.md``.
    URLs with a query, and URLs that already name a text file, have none.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or parts.query or _looks_textual(parts.path):
        return None
    path = parts.path or "/"
    path = path + "index.html.md" if path.endswith("/") else path + ".md"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _refresh_target(result: FetchResult) -> str | None:
    """Where a meta-refresh page sends its reader (None when it is an ordinary page or points at itself).

    Bounded work whatever the page: a byte-level test of its first ``_REFRESH_HINT_CHARS``, then a parse
    of its first ``_REFRESH_SCAN_CHARS`` only (a tag cut there is dropped by the parser, so the page is
    then taken as it is). The HTML parser is quadratic in nesting depth, so a whole hostile page could
    hold this for minutes; 16 KiB holds about 3,000 levels, parsed in milliseconds.
    """
    text = result.text or ""
    head = text[:_REFRESH_HINT_CHARS].encode("utf-8", "replace")
    if not _REFRESH_HINT.search(head):
        return None
    target = html.meta_refresh_target(text[:_REFRESH_SCAN_CHARS], result.final_url)
    if target is None or urlsplit(target)._replace(fragment="") == urlsplit(result.final_url)._replace(
        fragment=""
    ):
        return None
    return target


def _decode(body: bytes, content_type: str | None) -> str:
    """Decode with the declared charset, else UTF-8; a leading BOM is dropped."""
    declared = _charset(content_type)
    charset = declared or "utf-8"
    try:
        codec = codecs.lookup(charset)
    except LookupError:
        raise AttemptFailed(f"unknown charset {charset!r}", kind="encoding") from None
    try:
        text = body.decode(codec.name)
    except UnicodeDecodeError as exc:
        name = "UTF-8" if codec.name == "utf-8" else codec.name
        how = f"declared {declared}" if declared else "no charset declared"
        raise AttemptFailed(f"body is not valid {name} ({how})", kind="encoding") from exc
    return text.removeprefix("\ufeff")


async def _drain(response: httpx.Response) -> None:
    """Read a small unwanted body so the connection can be reused; give up on big ones."""
    received = 0
    async for chunk in response.aiter_raw():
        received += len(chunk)
        if received > _DRAIN_LIMIT:
            break


def _local_path(url: str) -> Path | None:
    parts = urlsplit(url)
    if parts.scheme.lower() != "file":
        return Path(url)
    if parts.netloc not in ("", "localhost"):
        return None
    return Path(url2pathname(parts.path))


def _read_local(url: str, options: CrawlOptions, root: LocalRoot) -> tuple[FetchResult, BaseException | None]:
    """Read a local source inside ``root`` with the same size, type and encoding rules as a download."""
    started = time.perf_counter()
    path = _local_path(url)
    if path is None:
        return _failed(url, url, "file: URLs naming another host are not supported", "not-found"), None
    # abspath, not resolve(): no symlink-loop errors, and the URL keeps the name the user gave.
    final_url = Path(os.path.abspath(path)).as_uri()
    mime = _LOCAL_TYPES.get(path.suffix.lower(), "")

    def fail(reason: str, kind: str, received: int = 0) -> FetchResult:
        elapsed = time.perf_counter() - started
        return _failed(url, final_url, reason, kind, attempts=1, received=received, elapsed=elapsed)

    try:
        fd = root.open(path)
        with os.fdopen(fd, "rb") as fh:
            # One byte past the cap is enough to know it is too large without reading it all.
            body = fh.read(options.max_bytes + 1)
    except LocalRefused as exc:
        return fail(str(exc), "refused"), None
    except (FileNotFoundError, NotADirectoryError) as exc:
        return fail(f"no such file: {path}", "not-found"), exc
    except IsADirectoryError as exc:
        return fail(f"is a directory: {path}", "not-found"), exc
    except OSError as exc:
        return fail(f"cannot read {path}: {exc.strerror or exc}", "not-found"), exc
    if mime not in _INDEXED_TYPES and mime not in _HTML_TYPES:
        return fail(f"content type {mime or '(unknown)'} is not indexed", "content-type"), None
    if len(body) > options.max_bytes:
        return fail(f"body exceeds {options.max_bytes} bytes", "too-large", len(body)), None
    if mime in _HTML_TYPES:
        # The charset of an HTML file is in the file (BOM, <meta>, <?xml?>), not in a header.
        content_type = mime
        obtained = "html"
    else:
        content_type = f"{mime}; charset=utf-8"
        obtained = "markdown"
    try:
        text = html.decode_html(body, content_type) if obtained == "html" else _decode(body, content_type)
    except AttemptFailed as failure:
        return fail(failure.reason, failure.kind, len(body)), failure.__cause__
    result = FetchResult(
        url=url,
        final_url=final_url,
        ok=True,
        status=200,
        text=text,
        content_type=content_type,
        attempts=1,
        bytes=len(body),
        elapsed=time.perf_counter() - started,
        sha256=hashlib.sha256(body).hexdigest(),
        obtained=obtained,
    )
    return result, None
