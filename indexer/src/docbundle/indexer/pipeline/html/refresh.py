"""Meta refresh: the page a ``<meta http-equiv="refresh">`` redirects to (the crawler follows it).

``refresh_url`` reads a ``content`` value in one pass (the WHATWG steps); ``meta_refresh_target`` finds
the tag and makes its URL absolute. Both are linear in their input, whatever it holds.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

from .tree import base_url, parse_html

__all__ = ["meta_refresh_target", "refresh_url"]


# Each of these matches one run of one kind of character from a given position: linear, with no
# backtracking, whatever the content attribute holds (issue 19: a lazy ``(.*?)\1\s*$`` took seconds on
# 20,000 spaces).
_WS = " \t\n\f\r"
_WS_RUN = re.compile(r"[ \t\n\f\r]*")
_TIME_RUN = re.compile(r"[0-9.]*")


def _skip(run: re.Pattern[str], text: str, pos: int) -> int:
    """Where the run of ``run``'s characters starting at ``pos`` ends (``pos`` when there is none)."""
    match = run.match(text, pos)
    return match.end() if match else pos


def refresh_url(content: str) -> str | None:
    """The URL in a refresh ``content`` value: ``""`` for a plain reload, ``None`` when it is not one.

    The WHATWG "shared declarative refresh steps", one pass over ``content`` (linear in its length): a
    time (digits and dots), a ``;`` or ``,`` or spaces, then an optional
    ``url =`` (any case), then the URL, whose surrounding quotes go; a quoted URL ends at its closing
    quote. Leading and trailing spaces of the URL go too.
    """
    n = len(content)
    start = _skip(_WS_RUN, content, 0)
    if start >= n or not (content[start].isascii() and (content[start].isdigit() or content[start] == ".")):
        return None  # no time: not a refresh (as browsers read it)
    pos = _skip(_TIME_RUN, content, start)
    if pos >= n:
        return ""
    if content[pos] not in ";," + _WS:
        return None
    pos = _skip(_WS_RUN, content, pos)
    if pos < n and content[pos] in ";,":
        pos = _skip(_WS_RUN, content, pos + 1)
    if pos >= n:
        return ""
    if content[pos : pos + 3].lower() == "url":
        after = _skip(_WS_RUN, content, pos + 3)
        if after < n and content[after] == "=":
            pos = _skip(_WS_RUN, content, after + 1)
    url = content[pos:]
    if url[:1] in ("'", '"'):
        end = url.find(url[0], 1)
        url = url[1:] if end < 0 else url[1:end]
    return url.strip(_WS)


def meta_refresh_target(html: str, url: str) -> str | None:
    """The absolute URL a ``<meta http-equiv="refresh" content="0; url=...">`` page redirects to.

    ``None`` when the page has no such tag, or the tag names no URL (a plain reload). Linear in the
    page's size (one parse, one pass over the attribute); the crawler runs it off its event loop.
    """
    if "refresh" not in html.lower():
        return None
    tree = parse_html(html)
    for meta in tree.css("meta[http-equiv]"):
        if (meta.attributes.get("http-equiv") or "").strip().lower() != "refresh":
            continue
        target = refresh_url(meta.attributes.get("content") or "")
        if not target:
            continue
        absolute = urljoin(base_url(tree, url), target)
        if urlsplit(absolute).scheme not in ("http", "https"):
            return None
        return absolute
    return None
