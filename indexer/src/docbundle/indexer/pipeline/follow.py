"""Optional link following: the links a crawled page offers, and the site's robots.txt rules.

A library's ``follow = { depth, prefix, max_pages }`` (``config.FollowConfig``) makes the build crawl,
breadth-first, the pages the llms.txt's pages link on the llms.txt's own origin under ``prefix``
(``build._follow``). This module holds what that needs and nothing of the crawl itself:

- ``page_links``: the absolute links of a fetched page, in document order and without fragments.
  HTML pages give the ``<a href>`` of their main content (``html.py``'s main-content selection, with
  its chrome removed, so navigation bars and sidebars do not drag the whole site in); markdown pages
  give their ``[text](url)`` links outside code blocks (images excluded).
- ``fetch_robots``: the origin's robots.txt rules (``urllib.robotparser``), fetched once through the
  same crawler, bounds and address policy as any page. As RFC 9309 says, a robots.txt that is
  unavailable (a 4xx other than 429: missing) allows everything, and one that is unreachable (5xx,
  429, timeouts, network errors, refused, too large) allows nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urljoin, urlsplit, urlunsplit
from urllib.robotparser import RobotFileParser

from selectolax.lexbor import LexborHTMLParser

from ..errors import FetchError
from . import html
from .crawl import CrawlOptions, FetchResult, fetch_one
from .scope import CrawlScope

__all__ = [
    "FOLLOWED_SECTION",
    "Origin",
    "RobotsRules",
    "fetch_robots",
    "html_links",
    "markdown_links",
    "origin",
    "page_links",
]

#: The manifest section of every followed page.
FOLLOWED_SECTION = "Followed"

Origin = tuple[str, str, int]
_DEFAULT_PORTS = {"http": 80, "https": 443}
_MD_LINK_RE = re.compile(
    r"(?<!!)\[(?:[^\[\]\n]|\[[^\[\]\n]*\])*\]\(\s*<?([^()\s<>]+)>?(?:\s+[\"'][^\n]*?[\"'])?\s*\)"
)
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def origin(url: str) -> Origin | None:
    """(scheme, host, port) of an http(s) URL, the port made explicit; None for anything else."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else _DEFAULT_PORTS[scheme]


def _absolute(href: str, base: str) -> str | None:
    """``href`` resolved against ``base``, without its fragment; None when it is not a usable URL."""
    href = href.strip()
    if not href or href.startswith("#"):
        return None
    try:
        parts = urlsplit(urljoin(base, href))
    except ValueError:
        return None
    if parts.scheme.lower() not in _DEFAULT_PORTS:
        return None
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", parts.query, ""))


def html_links(text: str, url: str) -> list[str]:
    """The absolute links of an HTML page's main content, in document order (repeats kept)."""
    tree = LexborHTMLParser(text)
    generator = html.detect_generator(tree)
    base = html._base_url(tree, url)
    main = html._select_main(tree, generator)
    if main is None:
        return []
    html._remove_chrome(main, generator)
    out = []
    for anchor in main.css("a[href]"):
        found = _absolute(anchor.attributes.get("href") or "", base)
        if found is not None:
            out.append(found)
    return out


def markdown_links(text: str, url: str) -> list[str]:
    """The absolute ``[text](url)`` links of a markdown page outside fenced code, in order (no images)."""
    out = []
    fence = ""
    for line in text.splitlines():
        m = _FENCE_RE.match(line)
        if m is not None:
            mark = m.group(1)
            if not fence:
                fence = mark
                continue
            if mark[0] == fence[0] and len(mark) >= len(fence):
                fence = ""
                continue
        if fence:
            continue
        for link in _MD_LINK_RE.finditer(line):
            found = _absolute(link.group(1), url)
            if found is not None:
                out.append(found)
    return out


def page_links(result: FetchResult) -> list[str]:
    """The links a fetched page offers (none for a failed page)."""
    if not result.ok or result.text is None:
        return []
    url = result.final_url or result.url
    if result.obtained == "html":
        return html_links(result.text, url)
    return markdown_links(result.text, url)


class RobotsRules:
    """What an origin's robots.txt allows this crawler (``allowed(url)``), and why (``reason``)."""

    def __init__(self, parser: RobotFileParser | None, allow_all: bool, user_agent: str, reason: str) -> None:
        self._parser = parser
        self._allow_all = allow_all
        self._agent = user_agent
        self.reason = reason

    def allowed(self, url: str) -> bool:
        """Whether robots.txt lets this crawler fetch ``url``."""
        if self._parser is None:
            return self._allow_all
        return self._parser.can_fetch(self._agent, url)


def fetch_robots(
    site: Origin,
    *,
    scope: CrawlScope,
    options: CrawlOptions,
    fetch: Callable[..., FetchResult] = fetch_one,
) -> RobotsRules:
    """The robots.txt rules of ``site``, fetched once with the crawl's bounds and address policy."""
    scheme, host, port = site
    netloc = f"[{host}]" if ":" in host else host
    if port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    robots_url = f"{scheme}://{netloc}/robots.txt"
    agent = options.user_agent
    try:
        result = fetch(robots_url, scope=scope, options=options, cache=None)
    except FetchError as exc:
        status = exc.status
        if status is not None and 400 <= status < 500 and status != 429:
            return RobotsRules(None, True, agent, f"{robots_url}: HTTP {status}: no rules, all allowed")
        if exc.kind == "content-type" and status is not None and 200 <= status < 300:
            return RobotsRules(None, True, agent, f"{robots_url}: not a text file: no rules, all allowed")
        return RobotsRules(None, False, agent, f"{robots_url} unreachable ({exc.reason}): nothing followed")
    parser = RobotFileParser(robots_url)
    parser.parse((result.text or "").splitlines())
    return RobotsRules(parser, True, agent, f"{robots_url}: rules read")
