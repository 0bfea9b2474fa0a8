"""The async crawler: fetch a library's llms.txt pages politely, robustly and within hard bounds.

``crawl`` fetches many URLs over one ``httpx.AsyncClient`` (HTTP/1.1, keep-alive) and returns one
``FetchResult`` per URL, in input order; a page failure is recorded in its result, never raised.
``fetch_one`` is the synchronous single-URL helper and raises ``FetchError`` instead. Both open a
``CrawlSession`` (``session.py``) for the one call; a build opens one session for its whole crawl
(``build.BuildRun``), so what it learns about a host (a ``Retry-After`` pause, whether the host has
``.md`` twins) holds from the llms.txt to the last follow level. The records and the rules that turn a
body into text are in ``fetched.py``.

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
requested from it during this session. So a host without twins costs exactly one extra request.
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
from collections.abc import Callable, Sequence

from docbundle.indexer.pipeline.cache import CrawlCache
from docbundle.indexer.pipeline.fetched import (
    ERROR_KINDS,
    OBTAINED,
    CrawlOptions,
    FetchResult,
    Guard,
    md_twin,
)
from docbundle.indexer.pipeline.scope import CrawlScope
from docbundle.indexer.pipeline.session import CrawlSession

__all__ = [
    "ERROR_KINDS",
    "OBTAINED",
    "CrawlOptions",
    "CrawlScope",
    "CrawlSession",
    "FetchResult",
    "Guard",
    "crawl",
    "fetch_one",
    "md_twin",
]


async def crawl(
    urls: Sequence[str],
    *,
    scope: CrawlScope,
    options: CrawlOptions = CrawlOptions(),  # noqa: B008 - frozen, so a shared default is safe
    cache: CrawlCache | None = None,
    on_result: Callable[[FetchResult], None] | None = None,
    guard: Guard | None = None,
) -> list[FetchResult]:
    """Fetch ``urls`` concurrently in a session of their own (``CrawlSession.crawl``): one result per
    URL in input order, never raising for a page.

    ``scope`` says which local files and network addresses may be touched (``CrawlScope.for_source``);
    ``guard`` is asked about every other URL requested on their behalf (redirect hops, meta-refresh
    targets, ``.md`` twins) and refuses the page when it gives a reason.
    """
    async with CrawlSession(scope, options, cache) as session:
        return await session.crawl(urls, on_result=on_result, guard=guard)


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

    async def run() -> FetchResult:
        async with CrawlSession(scope, options, cache) as session:
            return await session.fetch_one(url, truncate=truncate)

    return asyncio.run(run())
