"""What a fetch gives: the crawl's options and result records, and the rules that turn a body into text.

The crawler (``session.py``) and its entry points (``crawl.py``) build on this module; it opens no
connection. It holds what a response or a local file is judged by, the same for both:

- ``CrawlOptions``, the bounds and politeness of a crawl, and ``FetchResult``, one URL's outcome;
- the types that are indexed (markdown, text, HTML) and how a page's text was obtained (``OBTAINED``,
  ``obtained_by``); a body is decoded with its declared charset, else UTF-8 (``decode_text``; HTML by
  ``html.decode_html``);
- ``md_twin``, the llms.txt convention's markdown URL of an HTML page, and ``refresh_target``, where a
  meta-refresh page points (looked for in the page's first 16 KiB only);
- ``read_local``: a local source read inside its root with the same size, type and encoding rules as a
  download.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit
from urllib.request import url2pathname

import msgspec
from docbundle.bundle import manifest
from docbundle.indexer.errors import AttemptFailed, LocalRefused
from docbundle.indexer.pipeline import html
from docbundle.indexer.pipeline.scope import LocalRoot

__all__ = [
    "ERROR_KINDS",
    "GENERIC_TYPES",
    "HTML_TYPES",
    "INDEXED_TYPES",
    "OBTAINED",
    "CrawlOptions",
    "FetchResult",
    "Guard",
    "decode_text",
    "failed",
    "looks_textual",
    "md_twin",
    "mime",
    "obtained_by",
    "read_local",
    "refresh_target",
]

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

INDEXED_TYPES = frozenset({"text/markdown", "text/x-markdown", "text/plain", "text/mdx"})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
#: Asked about each URL a crawl requests beyond those it was given: a reason refuses it, None allows it.
Guard = Callable[[str], str | None]
#: How a page's text was obtained (see the module docstring), in the order reports list them.
OBTAINED = manifest.OBTAINED  # one order for the build summary, the crawl report and list_libraries
_REFRESH_HINT = re.compile(rb"http-equiv\s*=\s*[\"']?refresh", re.IGNORECASE)
_REFRESH_HINT_CHARS = 8192  # a refresh tag is looked for only this near the start of a page
_REFRESH_SCAN_CHARS = 16384  # and parsed from this much of it (the hint window plus the tag's own length)
# Object stores and bare static hosts often label markdown as one of these; trust them only when
# the path says the file is text.
GENERIC_TYPES = frozenset({"", "application/octet-stream"})
_TEXT_SUFFIXES = (".md", ".mdx", ".markdown", ".txt")
_LOCAL_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".mdx": "text/mdx",
    ".txt": "text/plain",
    ".html": "text/html",
    ".htm": "text/html",
}


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
    truncated: bool = False  # fetched with truncate=True: the body was cut to max_bytes at a line end


def failed(
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
    """A failed result: ``reason`` and its ``kind`` (one of ``ERROR_KINDS``)."""
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


def mime(content_type: str | None) -> str:
    """The media type of a Content-Type header, lower-cased, without its parameters."""
    return (content_type or "").partition(";")[0].strip().lower()


def _charset(content_type: str | None) -> str | None:
    for param in (content_type or "").split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


def looks_textual(path: str) -> bool:
    """Whether a URL path names a text file (``.md``, ``.mdx``, ``.markdown``, ``.txt``)."""
    return path.lower().endswith(_TEXT_SUFFIXES)


def obtained_by(content_type: str | None, path: str) -> str:
    """How a successful response's text was obtained (``md-url`` is decided by the caller)."""
    if mime(content_type) in HTML_TYPES:
        return "html"
    return "markdown" if looks_textual(path) else "negotiated"


def md_twin(url: str) -> str | None:
    """The llms.txt convention's markdown URL of an HTML page, or None when it has none.

    ``dir/`` -> ``dir/index.html.md``; ``page.html`` -> ``page.html.md``; ``page`` -> ``page.md``.
    URLs with a query, and URLs that already name a text file, have none.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or parts.query or looks_textual(parts.path):
        return None
    path = parts.path or "/"
    path = path + "index.html.md" if path.endswith("/") else path + ".md"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def refresh_target(result: FetchResult) -> str | None:
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


def decode_text(body: bytes, content_type: str | None) -> str:
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


def _local_path(url: str) -> Path | None:
    parts = urlsplit(url)
    if parts.scheme.lower() != "file":
        return Path(url)
    if parts.netloc not in ("", "localhost"):
        return None
    return Path(url2pathname(parts.path))


def read_local(url: str, options: CrawlOptions, root: LocalRoot) -> tuple[FetchResult, BaseException | None]:
    """Read a local source inside ``root`` with the same size, type and encoding rules as a download."""
    started = time.perf_counter()
    path = _local_path(url)
    if path is None:
        return failed(url, url, "file: URLs naming another host are not supported", "not-found"), None
    # abspath, not resolve(): no symlink-loop errors, and the URL keeps the name the user gave.
    final_url = Path(os.path.abspath(path)).as_uri()
    mime = _LOCAL_TYPES.get(path.suffix.lower(), "")

    def fail(reason: str, kind: str, received: int = 0) -> FetchResult:
        elapsed = time.perf_counter() - started
        return failed(url, final_url, reason, kind, attempts=1, received=received, elapsed=elapsed)

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
    if mime not in INDEXED_TYPES and mime not in HTML_TYPES:
        return fail(f"content type {mime or '(unknown)'} is not indexed", "content-type"), None
    if len(body) > options.max_bytes:
        return fail(f"body exceeds {options.max_bytes} bytes", "too-large", len(body)), None
    if mime in HTML_TYPES:
        # The charset of an HTML file is in the file (BOM, <meta>, <?xml?>), not in a header.
        content_type = mime
        obtained = "html"
    else:
        content_type = f"{mime}; charset=utf-8"
        obtained = "markdown"
    try:
        text = html.decode_html(body, content_type) if obtained == "html" else decode_text(body, content_type)
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
