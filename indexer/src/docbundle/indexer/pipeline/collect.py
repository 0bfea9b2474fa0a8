"""The pages a build gathers: the links its llms.txt lists, the pages an llms-full file carries inline,
and the links found on crawled pages that ``follow`` may add, level by level.

Pure bookkeeping over what the crawl returned (``build.BuildRun`` does the crawling): which links to
crawl (selected, deduplicated by ``page_key``, capped), which new links a level of pages offers on the
llms.txt's origin under the follow prefix, and the document id of each page.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import msgspec

from ..config import Target
from .addresses import doc_path, page_key, selected, strip_fragment
from .fetched import FetchResult
from .follow import Origin, origin, page_links, within_prefix
from .llmstxt import LlmsLink, LlmsTxt
from .source import Source

__all__ = ["CrawledPage", "candidates", "inline_pages", "listed_links", "obtained", "page_ids"]


class CrawledPage(msgspec.Struct):
    """A page of the build: the link that named it, what fetching it gave (None for an inline page),
    and its text (None when it failed)."""

    link: LlmsLink
    result: FetchResult | None
    text: str | None


def obtained(page: CrawledPage) -> str:
    """How the page's text was obtained (``FetchResult.obtained``; empty for an inline page)."""
    return page.result.obtained if page.result is not None else ""


def inline_pages(src: Source) -> list[CrawledPage]:
    """The pages an llms-full file carries inline (nothing to crawl)."""
    pages = []
    for i, d in enumerate(src.llms.inline_docs):
        url = d.url or f"{strip_fragment(src.base_url)}#doc-{i + 1}"
        pages.append(CrawledPage(LlmsLink(title=d.title, url=url, section=d.section), None, d.text))
    return pages


def listed_links(target: Target, llms: LlmsTxt) -> tuple[list[LlmsLink], set[str]]:
    """The links the llms.txt lists that the library selects, without fragments, one per page
    (``page_key``), in order; with the keys seen."""
    lib = target.library
    seen: set[str] = set()
    links = []
    for link in llms.links:
        url = strip_fragment(link.url)
        key = page_key(url)
        if key in seen or not selected(url, lib.include, lib.exclude):
            continue
        seen.add(key)
        links.append(msgspec.structs.replace(link, url=url))
    return links, seen


def candidates(target: Target, level: list[CrawledPage], home: Origin, seen: set[str]) -> list[str]:
    """The new links the pages of one level offer on the llms.txt's origin under the prefix, sorted.

    The prefix is tested on every reading of the path (``follow.within_prefix``), not on its spelling."""
    lib = target.library
    assert lib.follow is not None
    found: dict[str, str] = {}
    for page in level:
        res = page.result
        if res is None or origin(res.final_url or res.url) != home:
            continue
        for url in page_links(res):
            parts = urlsplit(url)
            if origin(url) != home or parts.query or not within_prefix(parts.path, lib.follow.prefix):
                continue
            key = page_key(url)
            if key in seen or not selected(url, lib.include, lib.exclude):
                continue
            # One page under several URL styles: named by its first link (pages in order, links in
            # document order), so the choice is the same on every build of the same site.
            found.setdefault(key, url)
    seen.update(found)
    return sorted(found.values())


def page_ids(pages: list[CrawledPage], base_url: str) -> list[str]:
    """Each page's document id (``doc_path``), made unique by a ``~2``, ``~3``... suffix."""
    used: set[str] = set()
    ids = []
    for page in pages:
        path = base_path = doc_path(page.link.url, base_url)
        n = 2
        while path in used:
            path, n = f"{base_path}~{n}", n + 1
        used.add(path)
        ids.append(path)
    return ids
