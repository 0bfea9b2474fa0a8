"""Links in the main content, rewritten so that their targets cost the model few tokens.

A hit's own URL (with its anchor) is the citation; a link inside the text is worth its target only when
the target is another page of the same site, which the model may want to open next. So, before
conversion, in the tree:

- a link to another page of the same site (same scheme and host as the page, or as its ``<base href>``)
  keeps, the first time that target (page and anchor) appears on the page, a short href relative to the
  page (``functions.html#sorted``, ``../glossary.html#term-iterable``; absolute when only the
  ``<base href>`` is on that host); later links to the same target become their text;
- every other link becomes its text: links within the page, to other sites, ``mailto:`` and the like;
- an image becomes its alt text (nothing when it has none);
- ``title`` attributes go (Sphinx repeats the link's target or text there).

Relative hrefs resolve against the document's URL, which every hit carries. Pure: it changes the tree
in place and reads nothing else.
"""

from __future__ import annotations

import functools
import posixpath
import re
from urllib.parse import SplitResult, urljoin, urlsplit, urlunsplit

from selectolax.lexbor import LexborNode

__all__ = ["compact_links"]


# The common shape, resolved here without urllib (whose urljoin parses both addresses and joins them
# again, 10 to 20 microseconds a link, most of a cold page's link time): an http(s) base with a plain
# host and path, and a relative path of plain characters (no scheme, query or parameters: no ":", "?",
# ";"), with an optional fragment. A hypothesis test holds the result equal to urljoin's and urlsplit's.
_PLAIN_BASE = re.compile(r"(https?)://([A-Za-z0-9.-]+(?::[0-9]*)?)(/[A-Za-z0-9._~%!$&'()*+,=@/-]*)?")
_PLAIN_HREF = re.compile(
    r"([A-Za-z0-9._~%!$&'()*+,=@-][A-Za-z0-9._~%!$&'()*+,=@/-]*)(?:#([^#\x00-\x20\x7f]*))?"
)


def _plain_join(base: str, href: str) -> tuple[str, SplitResult] | None:
    """``urljoin(base, href)`` and its ``urlsplit`` for the common shape above (None for any other), by
    urljoin's own steps: the base's folder, the href's segments, then ``.`` and ``..`` resolved."""
    b = _PLAIN_BASE.fullmatch(base)
    h = _PLAIN_HREF.fullmatch(href) if b is not None else None
    if b is None or h is None:
        return None
    scheme, netloc, bpath = b.group(1), b.group(2), b.group(3) or ""
    path, fragment = h.group(1), h.group(2) or ""
    base_parts = bpath.split("/")
    if base_parts[-1] != "":
        del base_parts[-1]
    segments = base_parts + path.split("/")
    segments[1:-1] = filter(None, segments[1:-1])
    resolved: list[str] = []
    for seg in segments:
        if seg == "..":
            if resolved:
                resolved.pop()
        elif seg != ".":
            resolved.append(seg)
    if segments[-1] in (".", ".."):
        resolved.append("")
    joined = "/".join(resolved) or "/"
    if joined[:1] != "/":
        joined = "/" + joined
    target = f"{scheme}://{netloc}{joined}"
    if fragment:
        target += "#" + fragment
    return target, SplitResult(scheme, netloc, joined, "", fragment)


@functools.lru_cache(maxsize=4096)
def _resolved(base: str, href: str) -> tuple[str, SplitResult]:
    """``href`` resolved against ``base``, and split (``urljoin`` is a third of this module's time; the
    same link recurs on a page and across a site's pages). Raises ``ValueError`` as ``urljoin`` does."""
    plain = _plain_join(base, href)
    if plain is not None:
        return plain
    target = urljoin(base, href)
    return target, urlsplit(target)


def _without_fragment(parts: SplitResult) -> str:
    return urlunsplit((parts.scheme, parts.netloc, parts.path, parts.query, ""))


@functools.lru_cache(maxsize=4096)
def _relpath(path: str, page_dir: str) -> str:
    """``posixpath.relpath`` of two absolute paths, which depends on nothing else (a site's pages share
    their folders and link to the same pages: about half of this module's time before it was cached)."""
    return posixpath.relpath(path, page_dir)


def _relative(target: SplitResult, page_dir: str) -> str:
    """``target`` (same scheme and host as the page) written relative to the page's folder ``page_dir``."""
    path = target.path or "/"
    if path.startswith("/") and page_dir.startswith("/"):
        rel = _relpath(path, page_dir)
    else:  # a relative path is taken from the working directory: not cached
        rel = posixpath.relpath(path, page_dir)
    if rel == ".":
        rel = "./" if path.endswith("/") else "../" + posixpath.basename(path)
    elif path.endswith("/"):
        rel += "/"
    if target.query:
        rel += "?" + target.query
    if target.fragment:
        rel += "#" + target.fragment
    return rel


def compact_links(main: LexborNode, page_url: str, base: str) -> None:
    """Rewrite the links and images under ``main`` as the module says."""
    page, at = urlsplit(page_url), urlsplit(base)
    # The site is the page's, and the one its <base href> names.
    sites = [(page.scheme.lower(), page.netloc.lower()), (at.scheme.lower(), at.netloc.lower())]
    page_key = _without_fragment(page)
    page_dir = page.path.rsplit("/", 1)[0] + "/" if "/" in page.path else "/"
    seen: set[str] = set()
    for image in main.css("img"):
        alt = " ".join((image.attributes.get("alt") or "").split())
        if alt:
            image.replace_with(alt)
        else:
            image.decompose()
    for anchor in main.css("a"):
        href = (anchor.attributes.get("href") or "").strip()
        keep = ""
        if href and not href.startswith("#"):
            try:
                target, parts = _resolved(base, href)
            except ValueError:  # not a URL (an unclosed IPv6 host...): its text is what is left
                target = ""
                parts = urlsplit("")
            origin = (parts.scheme.lower(), parts.netloc.lower())
            if (
                target
                and origin in sites
                and parts.scheme.lower() in ("http", "https", "file")
                and target not in seen
                and _without_fragment(parts) != page_key
            ):
                seen.add(target)
                # Relative to the page when on its site; absolute when only the <base href> is there.
                keep = _relative(parts, page_dir) if origin == sites[0] else target
        if keep and anchor.text(deep=True, strip=True):
            for name in list(anchor.attributes):
                if name != "href":
                    del anchor.attrs[name]
            anchor.attrs["href"] = keep
        else:
            anchor.unwrap()
