"""The crawler against a real loopback HTTP server (tests/sitesrv.py) and local files."""

from __future__ import annotations

import asyncio
import hashlib
import io
import random
import socket
import time
from collections.abc import Callable, Sequence
from email.utils import formatdate
from pathlib import Path

import anyio
import httpx
import msgspec
import pytest
from docbundle.indexer.errors import FetchError
from docbundle.indexer.pipeline.cache import CrawlCache
from docbundle.indexer.pipeline.crawl import ERROR_KINDS, CrawlOptions, FetchResult, crawl, fetch_one, md_twin
from docbundle.indexer.pipeline.progress import (
    LinesProgress,
    QuietProgress,
    TqdmProgress,
    duration,
    make_progress,
)
from docbundle.indexer.pipeline.scope import AddressGate, CrawlScope, HostRule
from docbundle.indexer.pipeline.session import Clock, CrawlSession
from hypothesis import given
from hypothesis import strategies as st
from sitesrv import Site

# Small bounds keep every fault test well under a second or two.
FAST = CrawlOptions(timeout=0.5, retries=1, backoff=0.01, max_retry_after=5.0)
# These tests exercise the crawler's robustness against servers on 127.0.0.1 (any port); the crawl
# boundaries themselves are tested in test_crawl_scope.py and tests/e2e/test_build_boundaries.py.
LOOPBACK = CrawlScope(AddressGate(allow=(HostRule.parse("127.0.0.1"),)))


def _ok(result: FetchResult) -> FetchResult:
    assert result.ok, f"{result.url}: {result.error_kind}: {result.error}"
    assert result.error is None and result.error_kind is None
    return result


def _failed(result: FetchResult, kind: str) -> FetchResult:
    assert not result.ok and result.text is None
    assert result.error_kind == kind, result.error
    assert result.error_kind in ERROR_KINDS and result.error
    return result


async def _crawl(
    urls: Sequence[str],
    options: CrawlOptions = FAST,
    *,
    cache: CrawlCache | None = None,
    on_result: Callable[[FetchResult], None] | None = None,
    scope: CrawlScope = LOOPBACK,
) -> list[FetchResult]:
    return await crawl(urls, scope=scope, options=options, cache=cache, on_result=on_result)


# -- the happy path ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_full_crawl_of_a_small_site_returns_every_page_in_input_order(site: Site) -> None:
    pages = {f"/docs/page-{i:02d}.md": f"# Page {i}\n\nBody of page {i}. é ✓\n" for i in range(30)}
    for path, body in pages.items():
        site.add(path, body)
    paths = list(pages)
    random.Random(7).shuffle(paths)
    seen: list[str] = []

    results = await _crawl([site.url(p) for p in paths], on_result=lambda r: seen.append(r.url))

    assert [r.url for r in results] == [site.url(p) for p in paths]
    for path, result in zip(paths, results, strict=True):
        _ok(result)
        assert result.text == pages[path]
        assert result.status == 200 and result.final_url == site.url(path)
        assert result.sha256 == hashlib.sha256(pages[path].encode()).hexdigest()
        assert result.bytes == len(pages[path].encode()) and result.attempts == 1
        assert result.etag and result.last_modified and not result.not_modified
    assert sorted(seen) == sorted(site.url(p) for p in paths)
    assert {r.headers["user-agent"] for r in site.requests} == {FAST.user_agent}
    assert all(site.hits(p) == 1 for p in paths)


@pytest.mark.anyio
async def test_a_url_listed_twice_is_fetched_once_but_reported_at_each_position(site: Site) -> None:
    site.add("/a.md", "# A\n")
    site.add("/b.md", "# B\n")
    calls: list[FetchResult] = []
    urls = [site.url("/a.md"), site.url("/b.md"), site.url("/a.md")]

    results = await _crawl(urls, on_result=calls.append)

    assert [r.text for r in results] == ["# A\n", "# B\n", "# A\n"]
    assert results[0] is not results[2]
    assert len(calls) == 3 and site.hits("/a.md") == 1


@pytest.mark.anyio
async def test_an_error_raised_by_on_result_propagates(site: Site) -> None:
    site.add("/a.md", "# A\n")

    def boom(result: FetchResult) -> None:
        raise ValueError("progress display broke")

    with pytest.raises(ValueError, match="progress display broke"):
        await _crawl([site.url("/a.md")], on_result=boom)


# -- HTTP errors and retries -------------------------------------------------------------------


@pytest.mark.anyio
async def test_404_is_recorded_without_retrying(site: Site) -> None:
    (result,) = await _crawl([site.url("/missing.md")], CrawlOptions(retries=3, backoff=0.01))
    _failed(result, "http")
    assert result.status == 404 and result.error == "HTTP 404 Not Found"
    assert result.attempts == 1 and site.hits("/missing.md") == 1


@pytest.mark.anyio
async def test_500_is_retried_then_recorded(site: Site) -> None:
    site.fault("/broken.md", "status", code=500)
    (result,) = await _crawl([site.url("/broken.md")], CrawlOptions(retries=2, backoff=0.01))
    _failed(result, "http")
    assert result.status == 500
    assert result.error == "gave up after 2 retries: HTTP 500 Internal Server Error"
    assert result.attempts == 3 and site.hits("/broken.md") == 3


@pytest.mark.anyio
async def test_a_transient_503_is_retried_until_the_page_is_served(site: Site) -> None:
    site.add("/flaky.md", "# Flaky\n")
    site.fault("/flaky.md", "retry-after", status=503, times=2, after=0)
    (result,) = await _crawl([site.url("/flaky.md")], CrawlOptions(retries=3, backoff=0.01))
    assert _ok(result).text == "# Flaky\n"
    assert result.attempts == 3 and site.hits("/flaky.md") == 3


class _Waits(Clock):
    """A crawler's clock that records each wait and returns at once; its time moves only by ``advance``."""

    def __init__(self) -> None:
        self.time = 0.0
        self.waits: list[float] = []

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        await anyio.sleep(0)

    def advance(self, seconds: float) -> None:
        self.time += seconds


@pytest.mark.anyio
async def test_429_with_retry_after_waits_that_long_then_succeeds(site: Site) -> None:
    site.add("/busy.md", "# Busy\n")
    site.fault("/busy.md", "retry-after", times=1, after=1)
    clock = _Waits()
    async with CrawlSession(LOOPBACK, CrawlOptions(retries=2, backoff=0.01), clock=clock) as session:
        (result,) = await session.crawl([site.url("/busy.md")])
    assert _ok(result).text == "# Busy\n" and result.attempts == 2
    first, second = site.requests_for("/busy.md")
    assert first.status == 429 and second.status == 200
    # The jittered backoff alone would be at most 10 ms: the one wait is the Retry-After's second.
    assert clock.waits == [1.0]


@pytest.mark.anyio
async def test_a_retry_after_pauses_every_later_request_to_that_host(site: Site) -> None:
    site.add("/busy.md", "# Busy\n")
    site.add("/next.md", "# Next\n")
    site.fault("/busy.md", "retry-after", times=1, after=30)
    clock = _Waits()
    async with CrawlSession(LOOPBACK, CrawlOptions(retries=2, backoff=0.01), clock=clock) as session:
        (busy,) = await session.crawl([site.url("/busy.md")])
        assert _ok(busy).attempts == 2 and clock.waits == [30.0]
        clock.advance(10)  # a later crawl through the same session, 10 s into the pause
        (later,) = await session.crawl([site.url("/next.md")])
        assert _ok(later).attempts == 1 and clock.waits == [30.0, 20.0]
        clock.advance(20)  # the pause is over: no wait
        assert _ok(await session.fetch_one(site.url("/next.md"))).attempts == 1
    assert clock.waits == [30.0, 20.0]
    assert [r.status for r in site.requests_for("/next.md")] == [200, 200]


@pytest.mark.anyio
async def test_retry_after_beyond_max_retry_after_gives_up_without_waiting(site: Site) -> None:
    site.add("/busy.md", "# Busy\n")
    site.fault("/busy.md", "retry-after", times=1, after=120)
    with anyio.fail_after(30):  # did not hang: waiting even max_retry_after (60 s) would trip this
        (result,) = await _crawl([site.url("/busy.md")], CrawlOptions(retries=3, max_retry_after=60))
    _failed(result, "rate-limited")
    # One attempt: the crawler sleeps only before a retry, so it gave up without waiting.
    assert result.attempts == 1
    assert result.status == 429 and site.hits("/busy.md") == 1
    assert result.error == "HTTP 429 Too Many Requests, Retry-After 120 s exceeds max_retry_after 60 s"


@pytest.mark.anyio
async def test_429_on_every_try_is_rate_limited_after_the_retries(site: Site) -> None:
    site.add("/busy.md", "# Busy\n")
    site.fault("/busy.md", "retry-after", times=10, after=0)
    (result,) = await _crawl([site.url("/busy.md")], CrawlOptions(retries=2, backoff=0.01))
    _failed(result, "rate-limited")
    assert result.attempts == 3 and (result.error or "").startswith("gave up after 2 retries: HTTP 429")


@pytest.mark.anyio
async def test_connection_reset_is_a_network_error_after_retries(site: Site) -> None:
    site.fault("/reset.md", "reset")
    (result,) = await _crawl([site.url("/reset.md")], CrawlOptions(retries=2, backoff=0.01))
    _failed(result, "network")
    assert result.status is None and result.attempts == 3 and site.hits("/reset.md") == 3
    assert (result.error or "").startswith("gave up after 2 retries: network error")


@pytest.mark.anyio
async def test_a_refused_connection_is_a_network_error() -> None:
    # A port that was just free: nothing listens there.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (result,) = await _crawl([f"http://127.0.0.1:{port}/x.md"], CrawlOptions(retries=0))
    _failed(result, "network")


# -- time and size bounds ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_server_that_never_answers_times_out(site: Site) -> None:
    site.fault("/hang.md", "timeout", seconds=10)
    (result,) = await _crawl([site.url("/hang.md")], CrawlOptions(timeout=0.5, retries=0))
    _failed(result, "timeout")
    assert (result.error or "").startswith("timed out after 0.5 s") and result.attempts == 1
    # The crawler gave up while the server was still hanging (it holds the request for 10 s and
    # then drops the connection, which a crawler without a timeout would report as a network error).
    (request,) = site.requests_for("/hang.md")
    assert request.finished is None and request.status is None


@pytest.mark.anyio
async def test_a_body_trickling_past_the_timeout_is_cut_off(site: Site) -> None:
    # Each chunk arrives well within the read timeout; only the whole-request bound can stop it.
    site.fault("/trickle.md", "slow", size=4000, chunk=8, delay=0.02)  # 10 s for the whole body
    (result,) = await _crawl([site.url("/trickle.md")], CrawlOptions(timeout=0.5, retries=0))
    _failed(result, "timeout")
    assert result.status == 200 and 0 < result.bytes < 4000 and result.attempts == 1
    assert (result.error or "").startswith("timed out after 0.5 s (whole request)")
    # The client hung up mid-body: the server's handler stopped writing short of the whole body.
    assert _server_sent(site, "/trickle.md") < 4000


@pytest.mark.anyio
async def test_an_oversized_body_announced_by_content_length_is_rejected_unread(site: Site) -> None:
    size = 20 * 1024 * 1024
    site.fault("/huge.md", "oversized", size=size)
    (result,) = await _crawl([site.url("/huge.md")], CrawlOptions(max_bytes=64 * 1024, retries=0))
    _failed(result, "too-large")
    assert result.bytes == 0
    assert result.error == f"body exceeds {64 * 1024} bytes (Content-Length {size})"
    assert _server_sent(site, "/huge.md") < size


@pytest.mark.anyio
@pytest.mark.parametrize("framing", ["chunked", "close"])
async def test_an_oversized_body_without_content_length_stops_being_read_at_the_cap(
    site: Site, framing: str
) -> None:
    size, cap = 50 * 1024 * 1024, 256 * 1024
    site.fault("/huge.md", "oversized", size=size, framing=framing)
    (result,) = await _crawl([site.url("/huge.md")], CrawlOptions(max_bytes=cap, retries=0))
    _failed(result, "too-large")
    assert result.error == f"body exceeds {cap} bytes"
    # At most one network read beyond the cap...
    assert cap < result.bytes <= cap + 128 * 1024
    # ...and the server could not push the rest: the client hung up instead of draining it.
    assert _server_sent(site, "/huge.md") < size


def _server_sent(site: Site, path: str) -> int:
    """Body bytes the server wrote, once its handler has given up on the closed connection."""
    (request,) = site.requests_for(path)
    deadline = time.monotonic() + 5.0
    while request.finished is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert request.finished is not None, "server still writing: the client kept reading"
    return request.sent


# -- content types and encodings ---------------------------------------------------------------


@pytest.mark.anyio
async def test_invalid_utf8_is_an_encoding_error(site: Site) -> None:
    site.fault("/latin1.md", "bad-encoding")
    (result,) = await _crawl([site.url("/latin1.md")])
    _failed(result, "encoding")
    assert result.error == "body is not valid UTF-8 (declared utf-8)"


@pytest.mark.anyio
async def test_the_declared_charset_is_used_and_a_bom_is_dropped(site: Site) -> None:
    site.add("/latin1.md", "# Café\n".encode("latin-1"), content_type="text/markdown; charset=ISO-8859-1")
    site.add("/bom.md", b"\xef\xbb\xbf# Bom\n", content_type="text/markdown")
    site.add("/utf16.txt", "# Wide ✓\n".encode("utf-16"), content_type="text/plain; charset=utf-16")
    site.add("/odd.md", b"# Odd\n", content_type="text/markdown; charset=klingon")
    latin1, bom, utf16, odd = await _crawl(
        [site.url(p) for p in ("/latin1.md", "/bom.md", "/utf16.txt", "/odd.md")]
    )
    assert _ok(latin1).text == "# Café\n"
    assert _ok(bom).text == "# Bom\n"
    assert _ok(utf16).text == "# Wide ✓\n"
    assert _failed(odd, "encoding").error == "unknown charset 'klingon'"


@pytest.mark.anyio
async def test_html_is_downloaded_decoded_and_marked_for_conversion(site: Site) -> None:
    page = "<html><body><p>caf\u00e9 " + "x" * 10_000 + "</p></body></html>"
    site.add("/page.html", page.encode("latin-1"), content_type="text/html; charset=iso-8859-1")
    (result,) = await _crawl([site.url("/page.html")])
    _ok(result)
    assert result.obtained == "html" and result.text == page
    assert result.status == 200 and result.bytes == len(page)


@pytest.mark.anyio
async def test_generic_or_missing_types_are_accepted_only_for_text_paths(site: Site) -> None:
    site.add("/raw.md", "# Raw\n", content_type="application/octet-stream")
    site.add("/bare.mdx", "# Bare\n", content_type=None)
    site.add("/notes.txt", "notes\n", content_type="text/plain")
    site.add("/x-md", "# X\n", content_type="text/x-markdown; charset=utf-8")
    site.add("/blob", "# Blob\n", content_type="application/octet-stream")
    site.add("/data.json", "{}", content_type="application/json")
    results = await _crawl(
        [site.url(p) for p in ("/raw.md", "/bare.mdx", "/notes.txt", "/x-md", "/blob", "/data.json")]
    )
    assert [r.ok for r in results] == [True, True, True, True, False, False]
    assert [r.error_kind for r in results[4:]] == ["content-type", "content-type"]


# -- redirects ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_redirect_is_followed_and_final_url_records_where_it_landed(site: Site) -> None:
    site.add("/new/page.md", "# Moved\n")
    site.fault("/old/page.md", "redirect", to="/new/page.md", status=301)
    site.fault("/older/page.md", "redirect", to=site.url("/old/page.md"))
    (result,) = await _crawl([site.url("/older/page.md")])
    assert _ok(result).text == "# Moved\n"
    assert result.url == site.url("/older/page.md") and result.final_url == site.url("/new/page.md")
    assert result.attempts == 1


@pytest.mark.anyio
async def test_a_redirect_loop_is_a_redirects_error(site: Site) -> None:
    site.fault("/loop.md", "redirect-loop")
    site.fault("/ping.md", "redirect", to="/pong.md")
    site.fault("/pong.md", "redirect", to="/ping.md")
    loop, ping = await _crawl([site.url("/loop.md"), site.url("/ping.md")])
    _failed(loop, "redirects")
    _failed(ping, "redirects")
    assert "redirect loop" in (ping.error or "") and site.hits("/ping.md") == 1


@pytest.mark.anyio
async def test_a_redirect_chain_longer_than_max_redirects_is_abandoned(site: Site) -> None:
    for i in range(4):
        site.fault(f"/hop{i}.md", "redirect", to=f"/hop{i + 1}.md")
    site.add("/hop4.md", "# End\n")
    options = msgspec.structs.replace(FAST, max_redirects=2)
    short, long = await _crawl([site.url("/hop2.md"), site.url("/hop0.md")], options)
    assert _ok(short).final_url == site.url("/hop4.md")
    assert _failed(long, "redirects").error == "too many redirects (2)"
    assert site.hits("/hop3.md") == 1  # only from the short chain: the long one stopped at hop2


# -- the cache and conditional requests --------------------------------------------------------


@pytest.mark.anyio
async def test_a_second_crawl_revalidates_and_reuses_the_cached_body(site: Site, tmp_path: Path) -> None:
    site.add("/a.md", "# A\n\nStable.\n")
    cache = CrawlCache(tmp_path / "cache")
    (first,) = await _crawl([site.url("/a.md")], cache=cache)
    site.reset_log()

    (second,) = await _crawl([site.url("/a.md")], cache=cache)

    (request,) = site.requests
    assert request.headers["if-none-match"] == first.etag
    assert request.status == 304
    assert _ok(second).not_modified and second.status == 304
    assert second.text == first.text and second.sha256 == first.sha256
    assert second.bytes == 0


@pytest.mark.anyio
async def test_a_changed_page_is_downloaded_again_and_the_cache_updated(site: Site, tmp_path: Path) -> None:
    site.add("/a.md", "# A\n\nVersion 1.\n")
    cache = CrawlCache(tmp_path / "cache")
    (first,) = await _crawl([site.url("/a.md")], cache=cache)
    site.add("/a.md", "# A\n\nVersion 2.\n")

    (second,) = await _crawl([site.url("/a.md")], cache=cache)

    assert _ok(second).text == "# A\n\nVersion 2.\n" and not second.not_modified
    assert second.status == 200 and second.etag != first.etag
    entry = cache.lookup(site.url("/a.md"))
    assert entry is not None and entry.body == b"# A\n\nVersion 2.\n" and entry.etag == second.etag


@pytest.mark.anyio
async def test_downloads_and_revalidations_reuse_kept_alive_connections(site: Site, tmp_path: Path) -> None:
    paths = [f"/k/{i}.md" for i in range(10)]
    for path in paths:
        site.add(path, f"# {path}\n")
    cache = CrawlCache(tmp_path / "cache")
    options = msgspec.structs.replace(FAST, per_host=1)
    for expect in (200, 304):
        site.reset_log()
        results = await _crawl([site.url(p) for p in paths], options, cache=cache)
        assert all(r.ok for r in results)
        assert {r.status for r in site.requests} == {expect}
        # One slot, one connection: a response left unfinished would force a new connect per page.
        assert len({r.peer for r in site.requests}) == 1


@pytest.mark.anyio
async def test_last_modified_alone_is_enough_to_revalidate(site: Site, tmp_path: Path) -> None:
    site.add("/a.md", "# A\n", etag=False)
    cache = CrawlCache(tmp_path / "cache")
    (first,) = await _crawl([site.url("/a.md")], cache=cache)
    site.reset_log()

    (second,) = await _crawl([site.url("/a.md")], cache=cache)

    (request,) = site.requests
    assert "if-none-match" not in request.headers
    assert request.headers["if-modified-since"] == first.last_modified
    assert _ok(second).not_modified and second.text == "# A\n"


@pytest.mark.anyio
async def test_pages_without_validators_are_not_cached(site: Site, tmp_path: Path) -> None:
    site.add("/a.md", "# A\n", etag=False, last_modified=False)
    cache = CrawlCache(tmp_path / "cache")
    (result,) = await _crawl([site.url("/a.md")], cache=cache)
    assert _ok(result).text == "# A\n"
    assert cache.lookup(site.url("/a.md")) is None


@pytest.mark.anyio
async def test_a_page_that_disappears_is_dropped_from_the_cache(site: Site, tmp_path: Path) -> None:
    site.add("/a.md", "# A\n")
    cache = CrawlCache(tmp_path / "cache")
    await _crawl([site.url("/a.md")], cache=cache)
    site.remove("/a.md")
    (result,) = await _crawl([site.url("/a.md")], cache=cache)
    _failed(result, "http")
    assert cache.lookup(site.url("/a.md")) is None


@pytest.mark.anyio
async def test_an_unwritable_cache_does_not_fail_the_crawl(site: Site, tmp_path: Path) -> None:
    site.add("/a.md", "# A\n")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    (result,) = await _crawl([site.url("/a.md")], cache=CrawlCache(blocker))
    assert _ok(result).text == "# A\n"


# -- concurrency -------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(("concurrency", "per_host"), [(16, 3), (2, 8)])
async def test_concurrency_bounds_are_respected(site: Site, concurrency: int, per_host: int) -> None:
    paths = [f"/c/{i}.md" for i in range(16)]
    for path in paths:
        site.add(path, f"# {path}\n")
        # Holding each request open makes overlapping requests observable on the server.
        site.fault(path, "delay", seconds=0.03)
    options = msgspec.structs.replace(FAST, concurrency=concurrency, per_host=per_host)

    results = await _crawl([site.url(p) for p in paths], options)

    assert all(r.ok for r in results)
    bound = min(concurrency, per_host)
    # Reaching the bound shows the crawl really is parallel, not just serial and trivially bounded.
    assert site.max_concurrency("/c/") == bound


@pytest.mark.anyio
async def test_pages_queued_behind_the_concurrency_limit_do_not_time_out(site: Site) -> None:
    # 12 pages x 0.1 s through 2 slots take ~0.6 s, twice the timeout: the clock of a page must only
    # start once it has a slot, not while it waits in line (e.g. in httpx's connection pool).
    paths = [f"/q/{i}.md" for i in range(12)]
    for path in paths:
        site.add(path, f"# {path}\n")
        site.fault(path, "delay", seconds=0.1)
    options = CrawlOptions(concurrency=2, per_host=8, timeout=0.3, retries=0)

    results = await _crawl([site.url(p) for p in paths], options)

    assert [r.error for r in results] == [None] * len(paths)
    assert site.max_concurrency("/q/") == 2


# -- local sources -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_file_urls_and_plain_paths_are_read_from_disk(tmp_path: Path) -> None:
    (tmp_path / "llms.txt").write_text("# Lib\n\n- [A](a.md)\n", encoding="utf-8")
    (tmp_path / "a.md").write_bytes(b"\xef\xbb\xbf# A \xe2\x9c\x93\n")
    (tmp_path / "big.md").write_bytes(b"x" * 2048)
    (tmp_path / "bad.md").write_bytes(b"# \xff\n")
    (tmp_path / "page.html").write_text("<p>hi</p>")
    sources = [
        str(tmp_path / "llms.txt"),
        (tmp_path / "a.md").as_uri(),
        str(tmp_path / "missing.md"),
        (tmp_path / "big.md").as_uri(),
        str(tmp_path / "bad.md"),
        str(tmp_path / "page.html"),
        str(tmp_path),
    ]
    options = msgspec.structs.replace(FAST, max_bytes=1024)

    scope = CrawlScope.for_source(str(tmp_path / "llms.txt"))
    llms, a, missing, big, bad, html, folder = await _crawl(sources, options, scope=scope)

    assert _ok(llms).text == "# Lib\n\n- [A](a.md)\n" and llms.status == 200
    assert llms.final_url == (tmp_path / "llms.txt").as_uri()
    assert (
        _ok(a).text == "# A ✓\n" and a.sha256 == hashlib.sha256((tmp_path / "a.md").read_bytes()).hexdigest()
    )
    _failed(missing, "not-found")
    assert _failed(big, "too-large").error == "body exceeds 1024 bytes"
    _failed(bad, "encoding")
    assert _ok(html).text == "<p>hi</p>" and html.obtained == "html"
    assert a.obtained == "markdown"
    _failed(folder, "not-found")


def test_local_files_do_not_touch_the_cache(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n")
    cache = CrawlCache(tmp_path / "cache")
    result = fetch_one(str(tmp_path / "a.md"), scope=CrawlScope.for_source(str(tmp_path)), cache=cache)
    assert _ok(result).text == "# A\n"
    assert not (tmp_path / "cache").exists()


# -- fetch_one ---------------------------------------------------------------------------------


def test_fetch_one_returns_the_result_of_a_good_url(site: Site) -> None:
    site.add("/llms.txt", "# Lib\n", content_type="text/plain; charset=utf-8")
    result = fetch_one(site.url("/llms.txt"), scope=LOOPBACK, options=FAST)
    assert _ok(result).text == "# Lib\n" and result.content_type == "text/plain; charset=utf-8"


def test_fetch_one_raises_fetch_error_and_keeps_the_httpx_cause(site: Site) -> None:
    site.fault("/llms.txt", "reset")
    with pytest.raises(FetchError) as caught:
        fetch_one(site.url("/llms.txt"), scope=LOOPBACK, options=FAST)
    error = caught.value
    assert error.kind == "network" and error.url == site.url("/llms.txt")
    assert isinstance(error.__cause__, httpx.TransportError)


def test_fetch_one_reports_the_http_status(site: Site, tmp_path: Path) -> None:
    with pytest.raises(FetchError) as caught:
        fetch_one(site.url("/nope/llms.txt"), scope=LOOPBACK, options=FAST)
    assert caught.value.kind == "http" and caught.value.status == 404
    with pytest.raises(FetchError) as missing:
        fetch_one(str(tmp_path / "llms.txt"), scope=CrawlScope.for_source(str(tmp_path / "llms.txt")))
    assert missing.value.kind == "not-found" and isinstance(missing.value.__cause__, FileNotFoundError)


def test_unsupported_schemes_fail_cleanly() -> None:
    with pytest.raises(FetchError, match="unsupported URL scheme 'ftp'"):
        fetch_one("ftp://127.0.0.1/llms.txt", scope=LOOPBACK)


# -- options -----------------------------------------------------------------------------------


def test_options_reject_unknown_fields_and_unbounded_values() -> None:
    assert msgspec.convert({"timeout": 2, "per_host": 2}, CrawlOptions).timeout == 2.0
    with pytest.raises(msgspec.ValidationError, match="concurency"):
        msgspec.convert({"concurency": 4}, CrawlOptions)
    for bad in ({"concurrency": 0}, {"timeout": 0}, {"retries": -1}, {"max_bytes": -1}):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(bad, CrawlOptions)


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    from docbundle.indexer.pipeline.session import parse_retry_after as _parse_retry_after

    assert _parse_retry_after("120") == 120.0
    assert _parse_retry_after(" 1.5 ") == 1.5
    future = _parse_retry_after(formatdate(time.time() + 30, usegmt=True))
    assert future is not None and 28 <= future <= 31
    assert _parse_retry_after(formatdate(time.time() - 30, usegmt=True)) == 0.0
    assert _parse_retry_after("soon") is None
    assert _parse_retry_after("-5") is None
    assert _parse_retry_after(None) is None


# -- progress ----------------------------------------------------------------------------------


def _result(ok: bool) -> FetchResult:
    return FetchResult(url="u", final_url="u", ok=ok)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_plain_progress_prints_each_tenth_and_a_final_line() -> None:
    out, clock = io.StringIO(), _Clock()
    progress = LinesProgress(250, "demo@latest", out, clock=clock)
    for i in range(250):
        clock.now += 0.125
        progress.update(_result(ok=i % 50 != 0))
    progress.close()
    progress.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 10
    assert lines[0] == "docbundle: demo@latest: crawled 25/250 pages (1 failed), 8.0/s, ETA 28 s"
    assert lines[-1] == "docbundle: demo@latest: crawled 250/250 pages (5 failed), 8.0/s, 31 s"


def test_plain_progress_of_a_short_phase_is_its_final_line() -> None:
    out = io.StringIO()
    progress = LinesProgress(15, "demo@latest", out, clock=_Clock())  # a clock that never moves
    for _ in range(15):
        progress.update(_result(ok=True))
    progress.close()
    assert out.getvalue() == "docbundle: demo@latest: crawled 15/15 pages (0 failed)\n"


def test_plain_progress_prints_on_time_between_tenths_and_closes_with_the_final_count() -> None:
    out, clock = io.StringIO(), _Clock()
    progress = LinesProgress(1000, "demo", out, clock=clock)
    for _ in range(5):
        clock.now += 1.0
        progress.update(_result(ok=True))
    assert out.getvalue() == "docbundle: demo: crawled 5/1000 pages (0 failed), 1.0/s, ETA 16 min 35 s\n"
    progress.update(_result(ok=False))
    progress.close()
    assert (
        out.getvalue().splitlines()[-1]
        == "docbundle: demo: crawled 6/1000 pages (1 failed), 1.2/s, ETA 13 min 48 s"
    )


def test_plain_progress_of_a_phase_shows_rate_eta_and_what_was_done() -> None:
    out, clock = io.StringIO(), _Clock()
    progress = LinesProgress(3, "demo@latest", out, verb="wrote", unit="parts", min_gap=0.0, clock=clock)
    clock.now += 2.0
    progress.advance(note="search index")
    clock.now += 1.0
    progress.advance(note="document store")
    progress.advance(note="manifest")
    progress.close()
    assert out.getvalue().splitlines() == [
        "docbundle: demo@latest: wrote 1/3 parts (search index), 0.5/s, ETA 4 s",
        "docbundle: demo@latest: wrote 2/3 parts (document store), 0.7/s, ETA 2 s",
        "docbundle: demo@latest: wrote 3/3 parts (manifest), 1.0/s, 3 s",
    ]
    assert duration(3725) == "1 h 02 min" and duration(65) == "1 min 05 s"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_make_progress_picks_tqdm_on_a_terminal_lines_otherwise_and_nothing_when_quiet() -> None:
    tty, log, quiet = _Tty(), io.StringIO(), io.StringIO()
    bar = make_progress(3, "demo", stream=tty)
    assert isinstance(bar, TqdmProgress)
    for ok in (True, False, True):
        bar.update(_result(ok))
    bar.close()
    assert "3/3" in tty.getvalue() and "failed=1" in tty.getvalue()
    assert isinstance(make_progress(3, "demo", stream=log), LinesProgress)
    phase = make_progress(2, "demo", verb="wrote", unit="parts", stream=(tty := _Tty()))
    assert isinstance(phase, TqdmProgress)
    phase.advance(note="search index")
    phase.advance(note="manifest")
    phase.close()
    assert "demo wrote" in tty.getvalue() and "2/2" in tty.getvalue() and "manifest" in tty.getvalue()
    silent = make_progress(3, "demo", stream=quiet, quiet=True)
    assert isinstance(silent, QuietProgress)
    silent.update(_result(ok=False))
    silent.close()
    assert quiet.getvalue() == ""


# -- HTML pages: negotiation, .md twins, meta refresh ----------------------------------------------


def _html(title: str, body: str = "") -> str:
    return f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1><p>{body}</p></main></body></html>"


HTML = "text/html; charset=utf-8"


@pytest.mark.anyio
async def test_markdown_urls_and_negotiated_markdown_are_told_apart(site: Site) -> None:
    site.add("/notes.md", "# Notes\n")
    site.add("/guide", _html("Guide"), content_type=HTML)
    site.add("/guide.src.md", "# Guide\n\nServed to agents.\n")
    site.negotiate("/guide", "/guide.src.md")
    notes, guide = await _crawl([site.url("/notes.md"), site.url("/guide")])
    assert _ok(notes).obtained == "markdown"
    assert _ok(guide).obtained == "negotiated" and guide.text == "# Guide\n\nServed to agents.\n"
    assert "text/markdown" in site.requests_for("/guide")[0].headers["accept"]
    assert site.hits("/guide.md") == 0  # markdown came back: no twin is probed


@pytest.mark.anyio
async def test_a_host_with_md_twins_gives_every_page_its_twin(site: Site) -> None:
    for path, twin in (("/a.html", "/a.html.md"), ("/b", "/b.md"), ("/dir/", "/dir/index.html.md")):
        site.add(path, _html(path), content_type=HTML)
        site.add(twin, f"# Twin of {path}\n")
    site.add("/c.html", _html("No twin here"), content_type=HTML)
    urls = [site.url(p) for p in ("/a.html", "/b", "/dir/", "/c.html")]
    a, b, d, c = await _crawl(urls, msgspec.structs.replace(FAST, per_host=1, concurrency=1))
    for result, path, twin in (
        (a, "/a.html", "/a.html.md"),
        (b, "/b", "/b.md"),
        (d, "/dir/", "/dir/index.html.md"),
    ):
        assert _ok(result).obtained == "md-url" and result.text == f"# Twin of {path}\n"
        assert result.url == site.url(path) and result.final_url == site.url(twin)
        assert site.hits(path) == site.hits(twin) == 1
    # The host has twins, so the page without one is probed too, and falls back to its HTML.
    assert _ok(c).obtained == "html" and "No twin here" in (c.text or "")
    assert site.hits("/c.html.md") == 1


@pytest.mark.anyio
async def test_a_host_without_md_twins_costs_one_probe_in_all(site: Site) -> None:
    paths = [f"/p{i}.html" for i in range(12)] + [f"/q{i}" for i in range(4)] + ["/r/"]
    for path in paths:
        site.add(path, _html(path), content_type=HTML)
    results = await _crawl([site.url(p) for p in paths])
    assert all(_ok(r).obtained == "html" for r in results)
    probes = [r.path for r in site.requests if r.path.endswith(".md")]
    assert len(probes) == 1, probes
    assert len(site.requests) == len(paths) + 1


@pytest.mark.anyio
async def test_the_twin_probe_does_not_wait_behind_the_pages_queued_for_the_host(site: Site) -> None:
    # Every HTML page of a host waits for its twin probe. Queued behind the crawl's other pages, the
    # probe came last, so no page was handed on (to the page workers) before the whole crawl's end.
    paths = [f"/w{i}.html" for i in range(12)]
    for path in paths:
        site.add(path, _html(path), content_type=HTML)
    seen_when_handed: list[int] = []
    results = await _crawl(
        [site.url(p) for p in paths],
        msgspec.structs.replace(FAST, concurrency=1, per_host=1),
        on_result=lambda _: seen_when_handed.append(len(site.requests)),
    )
    assert all(_ok(r).obtained == "html" for r in results)
    # The first page, the second (given the slot the first freed before it asked for its twin), then
    # the probe, ahead of the 10 pages still waiting: the first page is handed on then, not at the end.
    assert seen_when_handed[0] <= 3, seen_when_handed
    assert seen_when_handed == sorted(seen_when_handed) and seen_when_handed[-1] == len(paths) + 1
    assert site.max_concurrency("/") == 1  # going first does not go past the host's bound


@pytest.mark.anyio
async def test_a_twin_answered_with_html_is_no_twin(site: Site) -> None:
    site.add("/x.html", _html("X"), content_type=HTML)
    site.add("/x.html.md", _html("SPA shell"), content_type=HTML)
    site.add("/y.html", _html("Y"), content_type=HTML)
    x, y = await _crawl(
        [site.url("/x.html"), site.url("/y.html")], msgspec.structs.replace(FAST, concurrency=1)
    )
    assert _ok(x).obtained == _ok(y).obtained == "html" and "SPA shell" not in (x.text or "")
    assert site.hits("/y.html.md") == 0


@pytest.mark.anyio
async def test_a_meta_refresh_page_is_replaced_by_its_target_once(site: Site) -> None:
    refresh = '<html><head><meta http-equiv="refresh" content="0; url={to}"></head><body>Moved</body></html>'
    site.add("/old.html", refresh.format(to="new.html"), content_type=HTML)
    site.add("/new.html", _html("New home", "the real text"), content_type=HTML)
    site.add("/loop1.html", refresh.format(to="loop2.html"), content_type=HTML)
    site.add("/loop2.html", refresh.format(to="loop1.html"), content_type=HTML)
    old, loop = await _crawl([site.url("/old.html"), site.url("/loop1.html")])
    assert _ok(old).url == site.url("/old.html") and old.final_url == site.url("/new.html")
    assert old.obtained == "html" and "the real text" in (old.text or "")
    assert _ok(loop).final_url == site.url("/loop2.html")  # followed once, not round and round
    assert site.hits("/loop1.html") == 1 and site.hits("/loop2.html") == 1


@pytest.mark.anyio
async def test_a_meta_refresh_target_stays_inside_the_scope(site: Site) -> None:
    # Only the page's own origin is allowed; the refresh points at another address, which is refused.
    scope = CrawlScope.for_source(site.url("/llms.txt"))
    target = "http://127.0.0.2:9/elsewhere.html"
    site.add("/go.html", f'<meta http-equiv="refresh" content="0;url={target}">', content_type=HTML)
    (go,) = await _crawl([site.url("/go.html")], scope=scope)
    assert _failed(go, "refused").url == site.url("/go.html")


def test_an_llms_txt_served_as_html_is_refused(site: Site) -> None:
    site.add("/llms.txt", _html("Not an index"), content_type=HTML)
    with pytest.raises(FetchError) as err:
        fetch_one(site.url("/llms.txt"), scope=LOOPBACK, options=FAST)
    assert err.value.kind == "content-type"


@given(
    st.sampled_from(["http", "https"]),
    st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z]{2,5})?(:[1-9][0-9]{1,4})?", fullmatch=True),
    st.lists(st.from_regex(r"[A-Za-z0-9_~-]{1,8}", fullmatch=True), max_size=4),
    st.sampled_from(["", "/", ".html", ".htm", ".md", ".txt", "/index.html", ".php"]),
)
def test_md_twin_follows_the_llms_txt_convention(
    scheme: str, host: str, segments: list[str], end: str
) -> None:
    path = "/" + "/".join(segments) + end if segments else "/" + end.lstrip("/")
    url = f"{scheme}://{host}{path}"
    twin = md_twin(url)
    if path.endswith((".md", ".txt")):
        assert twin is None
        return
    assert twin is not None
    assert twin.startswith(f"{scheme}://{host}/") and twin.endswith(".md")
    if path.endswith("/"):
        assert twin == url + "index.html.md"
    else:
        assert twin == url + ".md"
    assert md_twin(url + "?q=1") is None
    assert md_twin(url + "#part") == twin


# -- acknowledging at once (Nagle + delayed ACK) ------------------------------------------------------


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux only")
def test_every_read_of_a_crawler_connection_asks_for_an_immediate_ack(site: Site) -> None:
    # A server writing headers and body in two sends with Nagle on (http.server does) waits for the
    # headers' ACK, which Linux delays ~40 ms on a kept-alive connection: 44 ms a page instead of 0.4.
    from docbundle.indexer.pipeline.scope import _CrawlStream, _GuardedBackend

    calls: list[object] = []

    class SpySocket:
        def __init__(self, real: object) -> None:
            self.real = real

        def setsockopt(self, level: int, option: int, value: int) -> None:
            calls.append((level, option, value))

    async def main() -> bytes:
        port = int(site.url("/").split(":")[2].split("/")[0])
        stream = await _GuardedBackend(LOOPBACK.policy, "http").connect_tcp("127.0.0.1", port, timeout=5)
        assert isinstance(stream, _CrawlStream)  # the crawler's connections are all wrapped
        stream._sock = SpySocket(stream._sock)
        await stream.write(b"GET /ack.md HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        received = b""
        while chunk := await stream.read(65536, timeout=5):
            calls.append("read")
            received += chunk
        calls.append("read")  # the last, empty one
        await stream.aclose()
        return received

    site.add("/ack.md", "# Acknowledged\n")
    received = asyncio.run(main())
    assert b"200" in received.split(b"\r\n", 1)[0] and b"# Acknowledged" in received
    quick = (socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
    # Before every read, not once per connection: the kernel leaves quick-ack mode by itself.
    assert calls[0] == quick
    assert calls == [quick, "read"] * (len(calls) // 2), calls


def test_an_idle_connection_the_server_closed_is_not_reused(tmp_path: Path) -> None:
    # httpcore asks each idle connection whether it is readable before it reuses it: readable means the
    # server closed it (or sent what it should not have). The crawler's connections answer that
    # themselves (_CrawlStream), so it must stay right: a closed one is replaced, an open one is reused.
    import threading

    connections = []
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port = listener.getsockname()[1]

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            connections.append(conn)
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                body = b"# Page\n"
                head = b"HTTP/1.1 200 OK\r\nContent-Type: text/markdown\r\nContent-Length: %d\r\n\r\n" % len(
                    body
                )
                conn.sendall(head + body)  # keep-alive by HTTP/1.1's default, then closed while idle

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        urls = [f"http://127.0.0.1:{port}/p{i}.md" for i in range(3)]
        options = CrawlOptions(concurrency=1, per_host=1, retries=0, timeout=5)

        async def one_by_one() -> list[FetchResult]:
            # One session, one page at a time: each finds the previous connection idle, and closed.
            async with CrawlSession(LOOPBACK, options) as session:
                return [await session.fetch_one(url) for url in urls]

        results = asyncio.run(one_by_one())
    finally:
        stop.set()
        thread.join(5)
        listener.close()
    assert [_ok(r).text for r in results] == ["# Page\n"] * 3
    assert len(connections) == 3

    from docbundle.indexer.pipeline.scope import _GuardedBackend

    async def readable_before_and_after_close() -> tuple[bool, bool]:
        server = socket.create_server(("127.0.0.1", 0))
        stream = await _GuardedBackend(LOOPBACK.policy, "http").connect_tcp(
            "127.0.0.1", server.getsockname()[1], timeout=5
        )
        peer, _ = server.accept()
        before = stream.get_extra_info("is_readable")
        peer.close()
        for _ in range(100):  # the FIN arrives at once on loopback; bounded anyway
            if stream.get_extra_info("is_readable"):
                break
            await asyncio.sleep(0.01)
        after = stream.get_extra_info("is_readable")
        await stream.aclose()
        server.close()
        return before, after

    assert asyncio.run(readable_before_and_after_close()) == (False, True)
