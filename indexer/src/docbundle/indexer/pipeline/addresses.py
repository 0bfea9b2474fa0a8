"""Where a document is: the keys, ids and addresses a build gives the pages it crawls.

- ``page_key``: the page a link names, whatever its URL style, so one page is fetched and indexed once;
- ``doc_path``: a page's stable, readable document id (its path relative to the llms.txt folder);
- ``display_url``: the URL a manifest records, never a path of the machine that built it (a local page
  is shown relative to the config, or under the library's ``site_url``); ``scrub`` does the same to an
  error message;
- ``selected``: the library's include/exclude patterns applied to a URL.

Pure functions of their arguments: no fetching, no file is read.
"""

from __future__ import annotations

import fnmatch
import posixpath
from pathlib import Path, PurePosixPath
from urllib.parse import quote, unquote, urljoin, urlsplit, urlunsplit
from urllib.request import url2pathname

from ..config import Target
from .fetched import FetchResult

__all__ = [
    "PAGE_SUFFIXES",
    "display_url",
    "doc_path",
    "is_url",
    "page_key",
    "scrub",
    "selected",
    "source_base_url",
    "strip_fragment",
]

PAGE_SUFFIXES = (".md", ".mdx", ".markdown", ".txt")


def is_url(source: str) -> bool:
    """Whether ``source`` is a URL (http, https or file) rather than a path."""
    return urlsplit(source).scheme.lower() in ("http", "https", "file")


def source_base_url(source: str, result: FetchResult | None) -> str:
    """The address the llms.txt's relative links resolve against: where it was fetched from (after
    redirects), or a local source's ``file:`` URL."""
    if is_url(source):
        return result.final_url if result is not None and result.final_url else source
    return Path(source).resolve().as_uri()


def display_url(url: str, target: Target, base_url: str) -> str:
    """The URL recorded for a document: for local sources, a path relative to the config as written.

    Bundles travel; a ``file:`` URL would carry the build machine's absolute paths into them. With the
    library's ``site_url``, the URL is absolute instead: ``site_url`` plus the path below ``local_root``
    (else below the source's folder), so a model can cite it.
    """
    if urlsplit(target.source).scheme.lower() in ("http", "https") or not url.startswith("file:"):
        return url
    site = target.library.site_url
    if site:
        source = Path(target.source)
        root = Path(target.local_root) if target.local_root else source if source.is_dir() else source.parent
        path = Path(url2pathname(urlsplit(url).path))
        if path.is_relative_to(root):
            return urljoin(site.rstrip("/") + "/", quote(path.relative_to(root).as_posix()))
    label = (target.label or Path(target.source).name).rstrip("/")
    folder = label if Path(target.source).is_dir() else posixpath.dirname(label)
    rel = doc_path(url, base_url)
    return f"{folder}/{rel}" if folder else rel


def scrub(message: str, target: Target) -> str:
    """A page error message with the local source's absolute folder replaced by the path as configured."""
    if urlsplit(target.source).scheme.lower() in ("http", "https"):
        return message
    source = Path(target.source)
    folder = source if source.is_dir() else source.parent
    label = (target.label or source.name).rstrip("/")
    shown = label if source.is_dir() else (posixpath.dirname(label) or ".")
    return message.replace(folder.as_uri(), shown).replace(str(folder), shown)


def strip_fragment(url: str) -> str:
    """``url`` without its ``#fragment``."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, parts.query, ""))


def page_key(url: str) -> str:
    """The page a link names, whatever its URL style: ``x``, ``x.html``, ``x/`` and ``x/index.html``
    (each with any ``#fragment``) give one key; markdown and text URLs keep their own."""
    parts = urlsplit(url)
    path = parts.path
    lower = path.lower()
    if not lower.endswith(PAGE_SUFFIXES):
        for suffix in ("/index.html", "/index.htm", ".html", ".htm"):
            if lower.endswith(suffix):
                path = path[: len(path) - len(suffix)]
                break
        path = path.rstrip("/") or "/"
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def doc_path(url: str, base_url: str) -> str:
    """A stable, readable document id: the URL's path relative to the llms.txt folder when below it
    (``index`` for the folder itself); a page of another host is ``host/path``."""
    u, b = urlsplit(url), urlsplit(base_url)
    path = unquote(u.path)
    base_dir = unquote(b.path).rsplit("/", 1)[0] + "/"
    if (u.scheme, u.netloc) == (b.scheme, b.netloc):
        # Same site: relative to the llms.txt folder, with any leading "../" dropped, so ids never
        # carry an absolute path of the machine that built the bundle.
        rel = posixpath.relpath(path, base_dir) if path != base_dir else ""
        while rel.startswith("../"):
            rel = rel[3:]
        rel = "" if rel in (".", "..") else rel
    else:
        rel = (u.netloc + path).lstrip("/")
    rel = rel.strip("/") or "index"  # the llms.txt folder itself (a link to `./`): the home page
    if u.query:
        rel += "?" + u.query
    return str(PurePosixPath(rel))


def selected(url: str, include: list[str], exclude: list[str]) -> bool:
    """Whether ``url`` matches an ``include`` pattern (or there are none) and no ``exclude`` pattern."""
    if include and not any(fnmatch.fnmatchcase(url, pat) for pat in include):
        return False
    return not any(fnmatch.fnmatchcase(url, pat) for pat in exclude)
