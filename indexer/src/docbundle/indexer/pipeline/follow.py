"""Optional link following: the links a crawled page offers, and the site's robots.txt rules.

A library's ``follow = { depth, prefix, max_pages }`` (``config.FollowConfig``) makes the build crawl,
breadth-first, the pages the llms.txt's pages link on the llms.txt's own origin under ``prefix``
(``collect.follow_links``). This module holds what that needs and nothing of the crawl itself:

- ``page_links``: the absolute links of a fetched page, in document order and without fragments.
  HTML pages give the ``<a href>`` of their main content (``html.content``'s main-content selection, with
  its chrome removed, so navigation bars and sidebars do not drag the whole site in); markdown pages
  give their ``[text](url)`` links outside code blocks (images excluded).
- ``within_prefix``: whether a link's path stays under ``follow.prefix`` however a server reads it
  (percent-decoded or not, ``\\`` as ``/`` or not, ``;params`` kept or dropped, ``//`` merged or not,
  dot segments removed), so ``/docs/%2e%2e/private/x`` is not "under /docs/".
- ``fetch_robots``: the origin's robots.txt rules, read by ``protego`` (RFC 9309: the longest
  matching rule wins, ``*`` and ``$`` are patterns), fetched once through the build's crawl session,
  with the bounds and address policy of any page (not its cache). At most ``ROBOTS_MAX_BYTES`` (500
  KiB, the least RFC 9309 lets a parser handle) are read: the rules in them apply, cut at their last
  complete line, and the rest is not downloaded. As RFC 9309 says, a robots.txt that is unavailable (a 4xx other than 429:
  missing) allows everything, and one that is unreachable (5xx, 429, timeouts, network errors,
  refused) allows nothing.
- ``FollowScope``: what a followed page may reach. ``pick`` asks robots.txt about the sorted
  candidates one by one, only until the level's share of ``max_pages`` is filled (a refused one
  leaves its place to the next), and stops for good after ``ROBOTS_MAX_REFUSED`` refusals, so a page
  of 20,000 links costs ``max_pages`` robots checks, not 20,000. ``refusal`` is the crawl's guard:
  every redirect hop, meta-refresh target and ``.md`` twin of a followed page must stay on the
  origin, under the prefix and within robots.txt, or the page fails with the reason.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from urllib.parse import quote, unquote, urljoin, urlsplit, urlunsplit

from protego import Protego

from ..errors import FetchError
from . import html
from .fetched import FetchResult
from .session import CrawlSession

__all__ = [
    "FOLLOWED_SECTION",
    "ROBOTS_MAX_BYTES",
    "ROBOTS_MAX_REFUSED",
    "FollowScope",
    "Origin",
    "RobotsRules",
    "fetch_robots",
    "html_links",
    "markdown_links",
    "origin",
    "page_links",
    "within_prefix",
]

log = logging.getLogger(__name__)

#: The manifest section of every followed page.
FOLLOWED_SECTION = "Followed"
#: The most of a robots.txt that is read (RFC 9309 section 2.5: a parser handles at least 500 KiB).
ROBOTS_MAX_BYTES = 500 * 1024
#: After this many links refused by robots.txt, a build follows no more (robots checks stay bounded).
ROBOTS_MAX_REFUSED = 1000

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
    tree = html.parse_html(text)
    generator = html.detect_generator(tree)
    base = html.base_url(tree, url)
    main = html.select_main(tree, generator)
    if main is None:
        return []
    html.remove_chrome(main, generator)
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


_MAX_DECODES = 3  # a path still changing after this many percent-decodings is refused
_PLAIN_PATH = re.compile(r"[^%\\;]*")  # no escape, backslash or parameter: read one way only


def _readings(path: str) -> Iterator[str] | None:
    """``path`` as sent, then percent-decoded once, twice...; None when it never settles."""
    out = [path]  # at most _MAX_DECODES + 1 readings
    for _ in range(_MAX_DECODES + 1):
        decoded = unquote(out[-1], errors="replace")
        if decoded == out[-1]:
            return iter(out)
        out.append(decoded)
    return None


def _normalise(path: str, backslash: bool, params: bool, merge: bool) -> str:
    """``path`` read one way: ``\\`` as ``/``, ``;params`` dropped, ``//`` merged (each if asked),
    then its dot segments removed (RFC 3986 section 5.2.4)."""
    if backslash:
        path = path.replace("\\", "/")
    segments = path.split("/")
    if params:
        segments = [s.partition(";")[0] for s in segments]
    last = len(segments) - 1
    out: list[str] = []
    for i, seg in enumerate(segments):
        if merge and not seg and 0 < i < last:
            continue
        if seg in ("..", "."):
            if seg == ".." and len(out) > 1:
                out.pop()
            if i == last:
                out.append("")
            continue
        out.append(seg)
    if not out or out[0]:
        out.insert(0, "")
    return "/".join(out) if len(out) > 1 else "/"


def within_prefix(path: str, prefix: str) -> bool:
    """Whether the URL path ``path`` stays under ``prefix`` however a server may read it.

    Every reading must: as sent and percent-decoded (up to three times, as some servers decode
    again), with ``\\`` kept or read as ``/``, ``;params`` kept or dropped, ``//`` kept or merged,
    and dot segments removed. ``/docs/%2e%2e/private/x`` and ``/docs/..%2fprivate`` are not under
    ``/docs/``; ``/docs/a%20b`` is.
    """
    if _PLAIN_PATH.fullmatch(path) and "/." not in path and "//" not in path:
        return path.startswith(prefix)
    readings = _readings(path)
    if readings is None:
        return False
    prefixes = _readings(prefix)
    level_prefix = prefix
    for reading in readings:
        if prefixes is not None:
            level_prefix = next(prefixes, level_prefix)
        for backslash in (False, True):
            for params in (False, True):
                for merge in (False, True):
                    want = _normalise(level_prefix, backslash, params, merge)
                    if not _normalise(reading, backslash, params, merge).startswith(want):
                        return False
    return True


def _canonical(url: str) -> str | None:
    """``url`` as a server most likely reads it (decoded once, ``\\`` as ``/``, ``//`` merged, dot
    segments removed, re-escaped), or None when that is the URL as written."""
    parts = urlsplit(url)
    path = parts.path
    if _PLAIN_PATH.fullmatch(path) and "/." not in path and "//" not in path:
        return None
    read = quote(_normalise(unquote(path, errors="replace"), True, False, True), safe="/;=@:!$&'()*+,~")
    return None if read == path else urlunsplit(parts._replace(path=read))


class RobotsRules:
    """What an origin's robots.txt allows this crawler (``allowed(url)``), and why (``reason``).

    ``parser`` is None when there are no rules to read: then ``allow_all`` answers for every URL.
    ``checks`` counts the URLs asked about (a build's robots work is bounded by it).
    """

    def __init__(
        self, url: str, parser: Protego | None, allow_all: bool, user_agent: str, reason: str
    ) -> None:
        self.url = url
        self._parser = parser
        self.allow_all = allow_all
        # RFC 9309 section 2.2.1: groups are matched on the product token ("docbundle-indexer").
        self._agent = user_agent.split("/", 1)[0].split(None, 1)[0] if user_agent.strip() else "*"
        self.reason = reason
        self.checks = 0

    @property
    def nothing_allowed(self) -> bool:
        """Whether every URL is refused (an unreachable robots.txt), so none need be asked about."""
        return self._parser is None and not self.allow_all

    def allowed(self, url: str) -> bool:
        """Whether robots.txt lets this crawler fetch ``url`` (the longest matching rule decides)."""
        self.checks += 1
        if self._parser is None:
            return self.allow_all
        return bool(self._parser.can_fetch(url, self._agent))


class FollowScope:
    """What a followed page may reach: the llms.txt's origin, under the prefix, as robots.txt allows."""

    def __init__(self, home: Origin, prefix: str, robots: RobotsRules) -> None:
        self.home = home
        self.prefix = prefix
        self.robots = robots
        self.refused = 0  # links refused by robots.txt in all levels so far

    def _robots_allow(self, url: str) -> bool:
        # A path a server reads differently from how it is written (encoded dots, backslashes...) is
        # asked about both ways, so robots.txt cannot be sidestepped by spelling.
        if not self.robots.allowed(url):
            return False
        read = _canonical(url)
        return read is None or self.robots.allowed(read)

    def pick(self, urls: list[str], budget: int) -> list[str]:
        """The first ``budget`` of the sorted candidate ``urls`` that robots.txt allows.

        robots.txt is asked about each in turn only until the budget is filled; a refused URL leaves
        its place to the next. After ``ROBOTS_MAX_REFUSED`` refusals in all, no more are asked about.
        """
        if self.robots.nothing_allowed:
            return []
        kept: list[str] = []
        for url in urls:
            if len(kept) >= budget:
                break
            if self.refused >= ROBOTS_MAX_REFUSED:
                break
            if self._robots_allow(url):
                kept.append(url)
                continue
            self.refused += 1
            if self.refused == ROBOTS_MAX_REFUSED:
                log.warning("%s refused %d links: no more are followed", self.robots.url, self.refused)
        return kept

    def refusal(self, url: str) -> str | None:
        """Why a followed page may not request ``url`` (a redirect hop, a refresh target, a twin), or None."""
        if origin(url) != self.home:
            return "not on the llms.txt's origin, where followed pages stay"
        if not within_prefix(urlsplit(url).path, self.prefix):
            return f"outside the follow prefix {self.prefix!r}"
        if not self._robots_allow(url):
            return "disallowed by robots.txt"
        return None


async def fetch_robots(site: Origin, session: CrawlSession) -> RobotsRules:
    """The robots.txt rules of ``site``, fetched once through the build's crawl session (its bounds and
    address policy, not its cache), and at most ``ROBOTS_MAX_BYTES`` of it read."""
    scheme, host, port = site
    netloc = f"[{host}]" if ":" in host else host
    if port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    robots_url = f"{scheme}://{netloc}/robots.txt"
    agent = session.options.user_agent
    try:
        result = await session.fetch_one(robots_url, max_bytes=ROBOTS_MAX_BYTES, cached=False, truncate=True)
    except FetchError as exc:
        status = exc.status
        if status is not None and 400 <= status < 500 and status != 429:
            return RobotsRules(
                robots_url, None, True, agent, f"{robots_url}: HTTP {status}: no rules, all allowed"
            )
        if exc.kind == "content-type" and status is not None and 200 <= status < 300:
            return RobotsRules(
                robots_url, None, True, agent, f"{robots_url}: not a text file: no rules, all allowed"
            )
        return RobotsRules(
            robots_url, None, False, agent, f"{robots_url} unreachable ({exc.reason}): nothing followed"
        )
    parser = Protego.parse(result.text or "")
    if result.truncated:
        kib = ROBOTS_MAX_BYTES // 1024
        reason = f"{robots_url}: over {kib} KiB: only the rules in its first {kib} KiB apply"
        log.warning("%s", reason)
        return RobotsRules(robots_url, parser, True, agent, reason)
    return RobotsRules(robots_url, parser, True, agent, f"{robots_url}: rules read")
