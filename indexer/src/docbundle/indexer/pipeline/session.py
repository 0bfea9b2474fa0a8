"""The crawler itself: one HTTP client and the state it keeps per host, for the whole crawl of a library.

A ``CrawlSession`` is opened once per build (``build.BuildRun``) and every fetch of that build goes
through it: the llms.txt, the listed pages, robots.txt and each follow level. ``crawl.py`` describes the
bounds it keeps and the ``.md`` twin rule; this module is how. Per request it follows redirects by hand
(each hop asked of the scope's address policy and of the call's ``guard``), retries with backoff and
honours ``Retry-After`` for the whole host, revalidates against the crawl cache, and reads bodies as a
stream within ``max_bytes``. Per host (scheme, host, port) it keeps a concurrency slot count, the time
before which no request may start (``Retry-After``), and whether the host serves ``.md`` twins.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import hashlib
import logging
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from types import TracebackType
from typing import cast
from urllib.parse import urlsplit

import httpx
import msgspec
from docbundle.common.process import remember_missing_module
from docbundle.indexer.errors import AddressRefused, AttemptFailed, FetchError
from docbundle.indexer.pipeline import html
from docbundle.indexer.pipeline.cache import CacheEntry, CrawlCache
from docbundle.indexer.pipeline.fetched import (
    GENERIC_TYPES,
    HTML_TYPES,
    INDEXED_TYPES,
    CrawlOptions,
    FetchResult,
    Guard,
    decode_text,
    failed,
    looks_textual,
    md_twin,
    mime,
    obtained_by,
    read_local,
    refresh_target,
)
from docbundle.indexer.pipeline.scope import CrawlScope, GuardedTransport

__all__ = ["CrawlSession", "Slots", "parse_retry_after"]

log = logging.getLogger(__name__)

# httpcore runs `import sniffio` on every request; without sniffio installed (recent anyio no longer
# brings it) each of those failed imports rescanned sys.path, ~25% of the client CPU per page: the miss
# is remembered (``remember_missing_module`` says how; a dependency on sniffio makes this a no-op).
remember_missing_module("sniffio")

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


@dataclass
class _Trace:
    """What one attempt got to before it ended, for the result of a failed attempt."""

    url: str
    status: int | None = None
    received: int = 0


@dataclass
class _Body:
    status: int
    final_url: str
    body: bytes
    content_type: str | None
    etag: str | None
    last_modified: str | None
    received: int
    not_modified: bool = False
    truncated: bool = False


@dataclass(frozen=True)
class _Terms:
    """What one call through a session fetches by: its bounds, cache and guard (see ``CrawlSession``)."""

    options: CrawlOptions
    cache: CrawlCache | None
    guard: Guard | None = None
    truncate: bool = False  # keep the first max_bytes of a longer body (cut at a line end) instead of failing


class Slots:
    """At most ``n`` holders at once, like ``asyncio.Semaphore``; a waiter asking ``first`` gets the next
    free slot before every ordinary waiter (which are served in arrival order).

    A host's ``.md`` twin probe asks first: every HTML page of the host waits for its answer, and behind
    a crawl's whole queue of pages it would come last, so no page could be handed on (to the page
    workers, ``build.Ahead``) before the crawl's end.
    """

    def __init__(self, n: int) -> None:
        self._free = n
        # A slot released while someone waits goes straight to a waiter: ``_free`` stays 0 while
        # anyone waits, so a newcomer never takes a slot ahead of them.
        self._waiting: tuple[collections.deque[asyncio.Future[None]], ...] = (
            collections.deque(),  # first
            collections.deque(),  # ordinary
        )

    async def acquire(self, *, first: bool = False) -> None:
        """Wait for a slot (ahead of the ordinary waiters when ``first``)."""
        if self._free > 0:
            self._free -= 1
            return
        queue = self._waiting[0 if first else 1]
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(granted)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release()  # handed a slot, then cancelled: it goes to the next waiter
            else:
                with contextlib.suppress(ValueError):
                    queue.remove(granted)
            raise

    def release(self) -> None:
        """Give the slot back: to the longest-waiting ``first`` waiter, else to the longest-waiting other."""
        for queue in self._waiting:
            while queue:
                granted = queue.popleft()
                if not granted.done():
                    granted.set_result(None)
                    return
        self._free += 1

    @contextlib.asynccontextmanager
    async def held(self, *, first: bool = False) -> AsyncIterator[None]:
        """A slot for the block."""
        await self.acquire(first=first)
        try:
            yield
        finally:
            self.release()


@dataclass
class _Host:
    slots: Slots
    not_before: float = 0.0  # clock time (``Clock.now``) before which no request may start (Retry-After)
    twins: bool | None = None  # whether the host serves llms.txt .md twins (None: not probed yet)
    probing: asyncio.Event | None = None  # set once the host's first twin probe has answered


class Clock:
    """The time a session waits by (Retry-After pauses, backoff): the event loop's clock and sleep.

    A test passes its own to see what the crawler waited for, without waiting.
    """

    def now(self) -> float:
        """Seconds on the running loop's monotonic clock."""
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        await asyncio.sleep(seconds)


class CrawlSession:
    """One crawler: one HTTP client, its bounds, and what it learns about each host, for as long as it is
    open (``async with``). Every ``crawl`` and ``fetch_one`` through it shares them, so a Retry-After
    pause and what a host's ``.md`` twin probe answered hold for every later request to that host."""

    def __init__(
        self,
        scope: CrawlScope,
        options: CrawlOptions = CrawlOptions(),  # noqa: B008 - frozen, so a shared default is safe
        cache: CrawlCache | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.scope = scope
        self.options = options
        self.cache = cache
        self.clock = clock or Clock()
        self.hosts: dict[tuple[str, str, int | None], _Host] = {}

    async def __aenter__(self) -> CrawlSession:
        opts = self.options
        self.slots = Slots(opts.concurrency)
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

    async def crawl(
        self,
        urls: Sequence[str],
        *,
        on_result: Callable[[FetchResult], None] | None = None,
        guard: Guard | None = None,
    ) -> list[FetchResult]:
        """Fetch ``urls`` concurrently; return one result per URL in input order, never raising for a page.

        A URL listed twice is fetched once (each position gets its own copy of the result).
        ``on_result`` is called on the event loop once per listed URL, as results complete.
        ``guard`` is asked about every other URL requested on their behalf (redirect hops, meta-refresh
        targets, ``.md`` twins) and refuses the page when it gives a reason.
        """
        terms = _Terms(self.options, self.cache, guard)
        results: list[FetchResult | None] = [None] * len(urls)
        positions: dict[str, list[int]] = {}
        for index, url in enumerate(urls):
            positions.setdefault(url, []).append(index)

        async def run(url: str, indexes: list[int]) -> None:
            result, _cause = await self._fetch_page(url, terms)
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

    async def fetch_one(
        self, url: str, *, max_bytes: int | None = None, cached: bool = True, truncate: bool = False
    ) -> FetchResult:
        """Fetch one URL (no meta refresh, no ``.md`` twin); raise ``FetchError`` (cause kept) when it
        cannot be fetched or is HTML (an llms.txt or a robots.txt served as HTML is not read).

        ``max_bytes`` replaces the session's cap for this fetch; ``cached=False`` leaves the crawl cache
        out of it. With ``truncate``, a longer body is not an error: its first ``max_bytes`` are kept,
        cut at their last line end, and the result says ``truncated``.
        """
        options = self.options
        if max_bytes is not None:
            options = msgspec.structs.replace(options, max_bytes=max_bytes)
        terms = _Terms(options, self.cache if cached else None, truncate=truncate)
        result, cause = await self._fetch(url, terms)
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

    async def _fetch(self, url: str, t: _Terms) -> tuple[FetchResult, BaseException | None]:
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
                return failed(url, url, reason, "refused"), None
            async with self.slots.held():
                return await asyncio.to_thread(read_local, url, t.options, local)
        if scheme not in ("http", "https"):
            return failed(
                url, url, f"unsupported URL scheme {scheme!r}: only http(s) is fetched", "refused"
            ), None
        return await self._fetch_http(url, t)

    async def _fetch_page(self, url: str, t: _Terms) -> tuple[FetchResult, BaseException | None]:
        """Fetch a documentation page: ``fetch``, then a meta-refresh target and the ``.md`` twin rule."""
        result, cause = await self._fetch(url, t)
        if (
            not result.ok
            or result.obtained != "html"
            or urlsplit(url).scheme.lower() not in ("http", "https")
        ):
            return result, cause
        # Off the event loop (lexbor parses without the GIL), and bounded: see refresh_target.
        target = await asyncio.to_thread(refresh_target, result)
        if target is not None:
            refused = await self._refused(target, t)
            if refused is not None:
                return failed(url, target, f"meta refresh to {target} refused: {refused}", "refused"), None
            # Followed once: a refresh page pointing at another refresh page is taken as it is.
            followed, cause = await self._fetch(target, t)
            result = msgspec.structs.replace(followed, url=url)
            if not result.ok or result.obtained != "html":
                return result, cause
        twin = await self._twin(result, t)
        if twin is not None:
            return twin, None
        return result, cause

    async def _twin(self, page: FetchResult, t: _Terms) -> FetchResult | None:
        """The page's ``.md`` twin as a result (``obtained="md-url"``), or None; see the module docstring."""
        twin_url = md_twin(page.final_url)
        if twin_url is None or await self._refused(twin_url, t) is not None:
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
                    found = await self._fetch_twin(page, twin_url, t, probe=True)
                    host.twins = found is not None
                finally:
                    if host.twins is None:
                        host.twins = False
                    host.probing.set()
                return found
        if not host.twins:
            return None
        return await self._fetch_twin(page, twin_url, t)

    async def _fetch_twin(
        self, page: FetchResult, twin_url: str, t: _Terms, *, probe: bool = False
    ) -> FetchResult | None:
        # The probe goes first: every HTML page of the host waits for its answer (``Slots``).
        result, _cause = await self._fetch_http(twin_url, t, first=probe)
        # A host answering every URL with its HTML shell (200 text/html) has no twins either.
        if (
            not result.ok
            or result.obtained not in ("markdown", "negotiated")
            or not (result.text or "").strip()
        ):
            return None
        return msgspec.structs.replace(result, url=page.url, obtained="md-url")

    async def _refused(self, url: str, t: _Terms) -> str | None:
        """The guard's reason to refuse ``url``, or None; asked in a worker thread (it may read a long
        robots.txt), so the event loop and its timeouts keep running meanwhile."""
        if t.guard is None:
            return None
        return await asyncio.to_thread(t.guard, url)

    def _host(self, url: httpx.URL) -> _Host:
        key = (url.scheme, url.host, url.port)
        host = self.hosts.get(key)
        if host is None:
            host = self.hosts[key] = _Host(Slots(self.options.per_host))
        return host

    async def _fetch_http(
        self, url: str, t: _Terms, *, first: bool = False
    ) -> tuple[FetchResult, BaseException | None]:
        """Fetch one http(s) URL within the host's and the session's slots (ahead of the pages waiting for
        one when ``first``), with retries, backoff, Retry-After and the cache's revalidation."""
        opts, clock = t.options, self.clock
        try:
            target = httpx.URL(url)
        except httpx.InvalidURL as exc:
            return failed(url, url, f"invalid URL: {exc}", "network"), exc
        host = self._host(target)
        entry = t.cache.lookup(url) if t.cache is not None else None
        started = time.perf_counter()
        attempts = 0
        delay = 0.0
        while True:
            attempts += 1
            wait = max(delay, host.not_before - clock.now())
            if wait > 0:
                # Sleep outside the slots so other hosts (and other pages) keep the concurrency.
                await clock.sleep(wait)
            trace = _Trace(url)
            try:
                async with host.slots.held(first=first), self.slots.held(first=first):
                    page = await self._attempt(target, entry, trace, t)
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
                        host.not_before = max(host.not_before, clock.now() + ra)
                    continue
                if failure.status in _GONE_STATUSES and t.cache is not None:
                    t.cache.discard(url)
                result = failed(
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
            return await self._success(url, page, entry, attempts, time.perf_counter() - started, t)

    async def _success(
        self, url: str, page: _Body, entry: CacheEntry | None, attempts: int, elapsed: float, t: _Terms
    ) -> tuple[FetchResult, BaseException | None]:
        obtained = obtained_by(page.content_type, urlsplit(page.final_url).path)
        try:
            if obtained == "html":
                text = html.decode_html(page.body, page.content_type)
            else:
                text = decode_text(page.body, page.content_type)
        except AttemptFailed as failure:
            result = failed(
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
                t.cache is not None
                and (page.etag or page.last_modified)
                and not unchanged
                and not page.truncated
            ):
                try:
                    # In a worker thread: on a slow disk the write syscalls would stall every
                    # other download on the loop (measured at ~0.5 ms a page here).
                    await asyncio.to_thread(
                        t.cache.store,
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

    async def _attempt(self, target: httpx.URL, entry: CacheEntry | None, trace: _Trace, t: _Terms) -> _Body:
        """One try: follow redirects and read the body, all within the whole-request timeout."""
        opts = t.options
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
                            return await self._read(response, current, entry, trace, t)
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
                    refused = await self._refused(str(current), t)
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
        self, response: httpx.Response, url: httpx.URL, entry: CacheEntry | None, trace: _Trace, t: _Terms
    ) -> _Body:
        """Turn a non-redirect response into a page, or raise the failure it represents."""
        opts = t.options
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
            return _Body(
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
                retry_after = parse_retry_after(response.headers.get("retry-after"))
            raise AttemptFailed(
                f"HTTP {status} {_phrase(response)}",
                kind="http",
                status=status,
                retryable=status in _RETRY_STATUSES,
                retry_after=retry_after,
            )
        content_type = response.headers.get("content-type")
        media = mime(content_type)
        if (
            media not in INDEXED_TYPES
            and media not in HTML_TYPES
            and not (media in GENERIC_TYPES and looks_textual(url.path))
        ):
            shown = media or "(none)"
            raise AttemptFailed(f"content type {shown} is not indexed", kind="content-type", status=status)
        declared = response.headers.get("content-length")
        if (
            not t.truncate
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
                if not t.truncate:
                    raise AttemptFailed(
                        f"body exceeds {opts.max_bytes} bytes", kind="too-large", status=status
                    )
                # Read no further; a line cut in two (or a character) is not kept.
                chunks.append(chunk)
                head = b"".join(chunks)[: opts.max_bytes]
                return _Body(
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
        return _Body(
            status=status,
            final_url=str(url),
            body=b"".join(chunks),
            content_type=content_type,
            etag=etag,
            last_modified=last_modified,
            received=trace.received,
        )


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's default verifying context, built once: loading the CA bundle costs ~50 ms a client."""
    return httpx.create_ssl_context()


def _backoff(base: float, attempt: int) -> float:
    """Exponential backoff with "equal jitter": half fixed, half random, so retries spread out."""
    ceiling = base * 2.0 ** (attempt - 1)
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def parse_retry_after(value: str | None) -> float | None:
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


async def _drain(response: httpx.Response) -> None:
    """Read a small unwanted body so the connection can be reused; give up on big ones."""
    received = 0
    async for chunk in response.aiter_raw():
        received += len(chunk)
        if received > _DRAIN_LIMIT:
            break
