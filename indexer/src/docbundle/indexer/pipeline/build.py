"""Build one library version: fetch llms.txt, crawl its pages, chunk, hash, and write a bundle if changed.

A library whose llms.txt cannot be fetched (or lists nothing) fails as a whole and its previous bundle is
left untouched. A page that fails is recorded in the manifest with its reason and the build goes on; a
build in which no page could be indexed fails (with the failures counted by kind in its message).

HTML pages are converted to markdown in the worker processes (``prepare.py``); each document records how
its text was obtained (``SourceDocument.obtained``) and the outcome counts the mix. Links to one page under
several URL styles (``x``, ``x.html``, ``x/``, ``x/index.html``, with or without ``#fragment``) are fetched
and indexed once (``page_key``), and so are two links that land on one page (a redirect or a meta
refresh to a page also listed).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import hashlib
import os
import posixpath
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as pkg_version
from pathlib import Path, PurePosixPath
from typing import Literal, NamedTuple
from urllib.parse import quote, unquote, urljoin, urlsplit, urlunsplit
from urllib.request import url2pathname

import msgspec
from docbundle.bundle import layout
from docbundle.bundle.analysis import ANALYZER_ID
from docbundle.bundle.contenthash import content_hash
from docbundle.bundle.errors import VersionLockedError
from docbundle.bundle.layout import make_build_id, version_dir
from docbundle.bundle.manifest import (
    FORMAT_VERSION,
    BuildInfo,
    ChunkingInfo,
    Conformance,
    Counts,
    Manifest,
    SourceDocument,
    SourceInfo,
    obtained_mix,
)
from docbundle.bundle.schema import SCHEMA_ID
from docbundle.bundle.store import DocRecord, write_store

from ..config import Target
from ..errors import BuildError, FetchError, IndexerError
from . import write
from .cache import CrawlCache
from .crawl import FetchResult, Guard, crawl, fetch_one
from .follow import FOLLOWED_SECTION, FollowScope, Origin, fetch_robots, origin, page_links, within_prefix
from .html import CONVERTER_ID
from .llmstxt import LlmsLink, LlmsTxt, parse_llms_txt, render_llms_txt
from .prepare import CHUNKER_ID, FAILURE_KIND, PageJob, Prepared, prepare_all
from .progress import Progress, ProgressFactory
from .safety import scan_document
from .scope import CrawlScope

Status = Literal["built", "unchanged", "failed"]
PAGE_SUFFIXES = (".md", ".mdx", ".markdown", ".txt")


class PageFailure(msgspec.Struct, frozen=True):
    """A page that was not indexed, and why."""

    url: str
    error: str
    kind: str | None = None


class Outcome(msgspec.Struct, kw_only=True):
    """What building one library version did (the crawl report's unit)."""

    library: str
    version: str
    status: Status
    message: str = ""
    build_id: str | None = None
    content_hash: str | None = None
    bundle: str | None = None
    source: str = ""
    documents: int = 0
    chunks: int = 0
    pages_listed: int = 0
    pages_fetched: int = 0
    pages_not_modified: int = 0
    pages_failed: int = 0
    pages_followed: int = 0  # pages crawled by following links (library ``follow``), in pages_fetched/failed
    failures: list[PageFailure] = []
    obtained: dict[str, int] = {}  # indexed documents by how their text was obtained (markdown, html...)
    conformance: list[str] = []
    pruned: list[str] = []
    crawl_seconds: float = 0.0
    build_seconds: float = 0.0


def _now() -> datetime:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.strip().isdigit():
        return datetime.fromtimestamp(int(epoch), tz=UTC)
    return datetime.now(tz=UTC).replace(microsecond=0)


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def _tool_versions() -> dict[str, str]:
    out = {}
    for dist in ("docbundle-indexer", "docbundle-server", "whoosh-reloaded"):
        try:
            out[dist] = pkg_version(dist)
        except PackageNotFoundError:
            out[dist] = "unknown"
    return out


def _is_url(source: str) -> bool:
    return urlsplit(source).scheme.lower() in ("http", "https", "file")


def _base_url(source: str, result: FetchResult | None) -> str:
    if _is_url(source):
        return result.final_url if result is not None and result.final_url else source
    return Path(source).resolve().as_uri()


def _display_url(url: str, target: Target, base_url: str) -> str:
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


def _scrub(message: str, target: Target) -> str:
    """A page error message with the local source's absolute folder replaced by the path as configured."""
    if urlsplit(target.source).scheme.lower() in ("http", "https"):
        return message
    source = Path(target.source)
    folder = source if source.is_dir() else source.parent
    label = (target.label or source.name).rstrip("/")
    shown = label if source.is_dir() else (posixpath.dirname(label) or ".")
    return message.replace(folder.as_uri(), shown).replace(str(folder), shown)


def _strip_fragment(url: str) -> str:
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
    """A stable, readable document id: the URL's path relative to the llms.txt folder when below it."""
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
    rel = rel.strip("/") or (u.netloc or "index")
    if u.query:
        rel += "?" + u.query
    return str(PurePosixPath(rel))


def _selected(url: str, include: list[str], exclude: list[str]) -> bool:
    if include and not any(fnmatch.fnmatchcase(url, pat) for pat in include):
        return False
    return not any(fnmatch.fnmatchcase(url, pat) for pat in exclude)


def _directory_listing(root: Path) -> LlmsTxt:
    """An llms.txt equivalent for a folder of markdown: one link per page, sectioned by top folder."""
    lines = [f"# {root.name}", ""]
    current = None
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in PAGE_SUFFIXES):
        rel = path.relative_to(root)
        if rel.name.lower() in ("llms.txt", "llms-full.txt"):
            continue
        section = rel.parts[0] if len(rel.parts) > 1 else "Pages"
        if section != current:
            lines += ["", f"## {section}", ""]
            current = section
        lines.append(f"- [{rel.stem}]({rel.as_posix()})")
    listing = parse_llms_txt("\n".join(lines) + "\n", base_url=root.resolve().as_uri() + "/")
    # The listing is docbundle's own, not the library's: its deviations from the spec (relative links, no
    # summary) say nothing about the source, and would be reported on every build of the folder.
    return msgspec.structs.replace(listing, issues=[])


class _Page(msgspec.Struct):
    link: LlmsLink
    result: FetchResult | None
    text: str | None


class _Assembled(msgspec.Struct):
    docs: list[DocRecord]
    sources: list[SourceDocument]
    chunks: int


def _page_ids(pages: list[_Page], base_url: str) -> list[str]:
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


def _page_url(page: _Page, target: Target, base_url: str) -> str:
    """The address an HTML page's relative links resolve against: where it was fetched from, shown as
    the manifest shows it (a local page's path relative to the config, never the machine's path)."""
    res = page.result
    url = res.final_url if res is not None and res.final_url else page.link.url
    return _display_url(url, target, base_url)


def _obtained(page: _Page) -> str:
    return page.result.obtained if page.result is not None else ""


def _jobs(
    pages: list[_Page], ids: list[str], target: Target, prefer_page_title: bool, base_url: str
) -> list[PageJob]:
    c = target.library.chunking
    return [
        PageJob(
            page.text,
            urlsplit(page.link.url).path.lower().endswith(".mdx"),
            page.link.title,
            path,
            page.link.section,
            prefer_page_title,
            c.max_depth,
            c.min_words,
            c.max_words,
            _obtained(page) == "html",
            _page_url(page, target, base_url) if _obtained(page) == "html" else "",
        )
        for page, path in zip(pages, ids, strict=True)
        if page.text is not None
    ]


def _assemble(
    pages: list[_Page],
    ids: list[str],
    prepared: Iterator[Prepared],
    target: Target,
    base_url: str,
    index: write.IndexWriter,
) -> _Assembled:
    """Pair prepared pages with their links, feeding each chunk to the index as it arrives."""
    out = _Assembled([], [], 0)
    for page, path in zip(pages, ids, strict=True):
        link, res = page.link, page.result
        url = _display_url(link.url, target, base_url)
        src = SourceDocument(
            url=url,
            path=path,
            title=link.title,
            section=link.section,
            optional=link.optional,
            status=res.status if res else None,
            etag=res.etag if res else None,
            last_modified=res.last_modified if res else None,
            not_modified=res.not_modified if res else False,
        )
        if page.text is None:
            assert res is not None
            reason = _scrub(res.error or "not fetched", target)
            err = msgspec.structs.replace(src, error=reason, error_kind=res.error_kind)
            out.sources.append(err)
            continue
        prep = next(prepared)
        if prep.failure is not None:  # over its budget (issue 19): recorded, and the build goes on
            out.sources.append(msgspec.structs.replace(src, error=prep.failure, error_kind=FAILURE_KIND))
            continue
        if not prep.chunks:
            empty = msgspec.structs.replace(
                src, title=prep.title, error="page has no text", error_kind="empty"
            )
            out.sources.append(empty)
            continue
        record = DocRecord(
            id=path,
            url=url,
            title=prep.title,
            description=link.notes or prep.description or "",
            section=link.section,
            optional=link.optional,
            chunks=prep.chunks,
        )
        docnum = len(out.docs)
        for ci, analysed in enumerate(prep.analysed):
            index.add(analysed, docnum, ci)
        out.chunks += len(prep.chunks)
        out.sources.append(
            msgspec.structs.replace(
                src,
                title=prep.title,
                sha256=hashlib.sha256(record.text.encode()).hexdigest(),
                chunks=len(prep.chunks),
                words=prep.words,
                obtained=_obtained(page),
            )
        )
        out.docs.append(record)
    return out


def input_hash(target: Target, kind: str, pages: list[_Page]) -> str:
    """sha256 of everything a build's output depends on, computed before any parsing.

    Equal to the current bundle's ``build.input_hash`` ⇒ nothing can have changed, and the build
    stops without parsing a page (a warm nightly run of an unchanged site is then only the crawl).
    """
    lib = target.library
    h = hashlib.sha256()
    h.update(
        msgspec.msgpack.encode(
            [
                "docbundle-input/1",
                FORMAT_VERSION,
                ANALYZER_ID,
                SCHEMA_ID,
                _chunking(target),
                lib.info(),
                target.version,
                lib.search(),
                kind,
                target.label,
                CONVERTER_ID,
                # Only when set, so the input hash of every library without one stays as it was.
                *([["site_url", lib.site_url]] if lib.site_url else []),
            ]
        )
    )
    for page in pages:
        link = page.link
        h.update(msgspec.msgpack.encode([link.url, link.title, link.notes, link.section, link.optional]))
        if _obtained(page) == "html":
            # Converted HTML also depends on the address its links are resolved against.
            h.update(msgspec.msgpack.encode(["html", page.result.final_url if page.result else ""]))
        else:
            h.update(msgspec.msgpack.encode([_obtained(page)]))
        h.update(hashlib.sha256(page.text.encode()).digest() if page.text is not None else b"\0failed")
    return h.hexdigest()


def _chunking(target: Target) -> ChunkingInfo:
    return msgspec.structs.replace(target.library.chunking.info(), chunker=CHUNKER_ID)


class _Source(NamedTuple):
    """The library's llms.txt (or its folder's listing), as parsed and as fetched."""

    llms: LlmsTxt
    text: str  # the llms.txt exactly as fetched (or rendered from the folder listing)
    result: FetchResult | None  # None for a folder of markdown
    base_url: str


def _fetch_source(target: Target, cache: CrawlCache | None, scope: CrawlScope) -> _Source:
    """Fetch and parse the library's llms.txt (or list its folder); raises FetchError when unusable."""
    source = target.source
    if not _is_url(source) and Path(source).is_dir():
        listing = _directory_listing(Path(source))
        return _Source(listing, render_llms_txt(listing), None, _base_url(source, None))
    result = fetch_one(source, scope=scope, options=target.crawl, cache=cache)
    if not result.ok or result.text is None:
        raise FetchError(source, result.error or "could not be fetched", kind=result.error_kind or "error")
    base = _base_url(source, result)
    return _Source(parse_llms_txt(result.text, base_url=base), result.text, result, base)


def build_target(
    target: Target,
    out_dir: Path,
    *,
    cache: CrawlCache | None = None,
    progress: ProgressFactory | None = None,
) -> Outcome:
    """Build one library version into ``out_dir``; never raises for a library-level failure."""
    lib, version = target.library, target.version
    outcome = Outcome(library=lib.id, version=version.name, status="failed", source=target.source)
    vdir = version_dir(out_dir, lib.id, version.name)
    try:
        with layout.version_lock(vdir):
            layout.remove_stale_temps(vdir)
            try:
                _build_locked(target, vdir, outcome, cache, progress)
            except BaseException:
                _unlock_skeleton(vdir)
                raise
    except (IndexerError, VersionLockedError) as exc:
        outcome.status = "failed"
        outcome.message = str(exc)
    except OSError as exc:
        outcome.status = "failed"
        outcome.message = f"cannot write under {vdir}: {exc}"
    if outcome.status == "failed":
        # A failed first build leaves no empty version folder behind: readers would list a library
        # with "no bundle built yet" and `docbundle verify` would fail for the whole folder.
        with contextlib.suppress(OSError):
            vdir.rmdir()
            vdir.parent.rmdir()
    return outcome


def _unlock_skeleton(vdir: Path) -> None:
    """After a failed build, with the version lock still held: when the version folder holds nothing but
    its lock file (no bundle was ever published), remove the lock file so the folder can go."""
    with contextlib.suppress(OSError):
        if [p.name for p in vdir.iterdir()] == [layout.LOCK_NAME]:
            (vdir / layout.LOCK_NAME).unlink()


def _build_locked(
    target: Target,
    vdir: Path,
    outcome: Outcome,
    cache: CrawlCache | None,
    progress: ProgressFactory | None,
) -> None:
    """Under the version lock: fetch, crawl, and publish a bundle unless nothing changed."""
    t0 = time.perf_counter()
    started = _now()
    # What this build may touch: a remote llms.txt's own origin (plus allow_hosts) and no local files;
    # a local llms.txt's (or folder's) own folder, or the library's local_root.
    scope = CrawlScope.for_source(target.source, target.library.allow_hosts, target.local_root)
    src = _fetch_source(target, cache, scope)
    outcome.conformance = [f"line {i.line}: {i.code}: {i.message}" for i in src.llms.issues]
    if src.llms.kind == "full" and src.llms.inline_docs:
        pages = _inline_pages(src, outcome)
    else:
        pages = _crawl_pages(target, src.llms, scope, cache, progress, outcome)
    outcome.crawl_seconds = round(time.perf_counter() - t0, 3)

    t1 = time.perf_counter()
    kind = "directory" if src.result is None and not _is_url(target.source) else src.llms.kind
    ihash = input_hash(target, kind, pages)
    current = write.current_manifest(vdir)
    if current is not None and current.build.input_hash == ihash:
        _unchanged(outcome, vdir, current, t1)
        return
    built = _write_bundle(target, vdir, src, pages, kind, ihash, current, started, outcome, progress)
    if built is None:
        assert current is not None
        _unchanged(outcome, vdir, current, t1)
        return
    build_id, final, asm = built
    outcome.status = "built"
    outcome.build_id = build_id
    outcome.bundle = str(final)
    outcome.pruned = write.prune(vdir, target.keep)
    outcome.build_seconds = round(time.perf_counter() - t1, 3)
    outcome.message = (
        f"built {build_id}: {len(asm.docs)} documents ({describe_mix(outcome.obtained)}), {asm.chunks} chunks"
    )
    if outcome.pages_followed:
        outcome.message += f", {outcome.pages_followed} page(s) followed"
    if outcome.pages_failed:
        outcome.message += f", {outcome.pages_failed} page(s) failed"


def _inline_pages(src: _Source, outcome: Outcome) -> list[_Page]:
    """The pages an llms-full file carries inline (nothing to crawl)."""
    pages = []
    for i, d in enumerate(src.llms.inline_docs):
        url = d.url or f"{_strip_fragment(src.base_url)}#doc-{i + 1}"
        pages.append(_Page(LlmsLink(title=d.title, url=url, section=d.section), None, d.text))
    outcome.pages_listed = len(pages)
    return pages


def _crawl_with_progress(
    urls: list[str],
    target: Target,
    scope: CrawlScope,
    cache: CrawlCache | None,
    progress: ProgressFactory | None,
    label: str,
    guard: Guard | None = None,
) -> list[FetchResult]:
    """Crawl ``urls`` (results in input order) with a progress bar when one is wanted."""
    bar = progress(len(urls), label) if progress else None
    try:
        return asyncio.run(
            crawl(
                urls,
                scope=scope,
                options=target.crawl,
                cache=cache,
                on_result=bar.update if bar else None,
                guard=guard,
            )
        )
    finally:
        if bar:
            bar.close()


def _crawl_pages(
    target: Target,
    llms: LlmsTxt,
    scope: CrawlScope,
    cache: CrawlCache | None,
    progress: ProgressFactory | None,
    outcome: Outcome,
) -> list[_Page]:
    """Crawl the pages the llms.txt links (selected, deduplicated, capped), recording what failed."""
    lib = target.library
    seen: set[str] = set()
    links = []
    for link in llms.links:
        url = _strip_fragment(link.url)
        key = page_key(url)
        if key in seen or not _selected(url, lib.include, lib.exclude):
            continue
        seen.add(key)
        links.append(msgspec.structs.replace(link, url=url))
    outcome.pages_listed = len(links)
    if len(links) > lib.max_pages:
        links = links[: lib.max_pages]
    if not links:
        raise FetchError(
            target.source, "the llms.txt lists no documents (no links and no inline docs)", kind="empty"
        )
    results = _crawl_with_progress(
        [link.url for link in links], target, scope, cache, progress, f"{lib.id}@{target.version.name}"
    )
    landed: set[str] = set()
    pages = _record(links, results, landed, outcome)
    if lib.follow is not None:
        pages += _follow(target, pages, seen, landed, scope, cache, progress, outcome)
    return pages


def _record(
    links: list[LlmsLink], results: list[FetchResult], landed: set[str], outcome: Outcome
) -> list[_Page]:
    """The crawled links as pages, counted in ``outcome``; a page already landed on is dropped."""
    pages = []
    for link, res in zip(links, results, strict=True):
        if res.ok:
            # Two links that landed on one page (a redirect or a meta refresh to a page also listed)
            # give one document, under the first link.
            where = page_key(res.final_url)
            if where in landed:
                continue
            landed.add(where)
        pages.append(_Page(link, res, res.text if res.ok else None))
        if res.ok:
            outcome.pages_fetched += 1
            outcome.pages_not_modified += int(res.not_modified)
        else:
            outcome.pages_failed += 1
            outcome.failures.append(PageFailure(link.url, res.error or "failed", res.error_kind))
    return pages


def _candidates(target: Target, level: list[_Page], home: Origin, seen: set[str]) -> list[str]:
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
            if key in seen or not _selected(url, lib.include, lib.exclude):
                continue
            # One page under several URL styles: named by its first link (pages in order, links in
            # document order), so the choice is the same on every build of the same site.
            found.setdefault(key, url)
    seen.update(found)
    return sorted(found.values())


def _follow(
    target: Target,
    listed: list[_Page],
    seen: set[str],
    landed: set[str],
    scope: CrawlScope,
    cache: CrawlCache | None,
    progress: ProgressFactory | None,
    outcome: Outcome,
) -> list[_Page]:
    """Breadth-first: crawl the links of the listed pages, then theirs, to ``follow.depth`` levels,
    on the llms.txt's origin under ``follow.prefix``, robots.txt permitting, at most
    ``follow.max_pages`` pages in all (sorted within a level, so two builds crawl the same pages).
    robots.txt is asked only about the URLs that are kept (``FollowScope.pick``), and every redirect
    hop of a followed page is held to the same origin, prefix and robots.txt (``FollowScope.refusal``)."""
    lib = target.library
    follow = lib.follow
    home = origin(target.source)
    if follow is None or home is None:
        return []
    reach: FollowScope | None = None
    budget = follow.max_pages
    level = [p for p in listed if p.text is not None]
    out: list[_Page] = []
    for _ in range(follow.depth):
        if budget <= 0 or not level:
            break
        urls = _candidates(target, level, home, seen)
        if urls and reach is None:
            reach = FollowScope(home, follow.prefix, fetch_robots(home, scope=scope, options=target.crawl))
        if reach is not None:
            urls = reach.pick(urls, budget)
        if not urls:
            break
        budget -= len(urls)
        outcome.pages_followed += len(urls)
        results = _crawl_with_progress(
            urls,
            target,
            scope,
            cache,
            progress,
            f"{lib.id}@{target.version.name} followed",
            guard=reach.refusal if reach is not None else None,
        )
        links = [LlmsLink(title="", url=u, section=FOLLOWED_SECTION) for u in urls]
        recorded = _record(links, results, landed, outcome)
        out += recorded
        level = [p for p in recorded if p.text is not None]
    return out


def _write_bundle(
    target: Target,
    vdir: Path,
    src: _Source,
    pages: list[_Page],
    kind: str,
    ihash: str,
    current: Manifest | None,
    started: datetime,
    outcome: Outcome,
    progress: ProgressFactory | None = None,
) -> tuple[str, Path, _Assembled] | None:
    """Index, store and publish the pages as a new bundle: its buildId, folder and contents, or None
    (nothing written) when its content hash equals the current bundle's."""
    ids = _page_ids(pages, src.base_url)
    jobs = _jobs(pages, ids, target, src.result is None, src.base_url)
    build_id_date = _iso(started)
    tmp = layout.new_temp_dir(vdir, f"{build_id_date[:10].replace('-', '')}-pending")
    bar: Progress | None = None
    try:
        indexed = _index_pages(tmp, pages, ids, jobs, target, src.base_url, ihash, current, outcome, progress)
        if indexed is None:
            shutil.rmtree(tmp)
            return None
        asm, bar = indexed  # the search index is written: the first of the bundle's three parts
        chash = outcome.content_hash
        assert chash is not None
        build_id = make_build_id(build_id_date, chash)
        (tmp / "llms.txt").write_text(src.text, encoding="utf-8")
        write_store(tmp, asm.docs)
        if bar:
            bar.advance(note="document store")
        manifest = _manifest(target, src, kind, started, build_id, chash, ihash, asm)
        write.finish_manifest(tmp, manifest)
        if bar:
            bar.advance(note="manifest, files hashed")
        final, _ = layout.publish(vdir, tmp, build_id)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if bar:
            bar.close()
    return build_id, final, asm


def _counted(prepared: Iterator[Prepared], bar: Progress | None) -> Iterator[Prepared]:
    """``prepared``, advancing ``bar`` by one page as each arrives (parsed and analysed)."""
    for item in prepared:
        if bar:
            bar.advance()
        yield item


def _index_pages(
    tmp: Path,
    pages: list[_Page],
    ids: list[str],
    jobs: list[PageJob],
    target: Target,
    base_url: str,
    ihash: str,
    current: Manifest | None,
    outcome: Outcome,
    progress: ProgressFactory | None = None,
) -> tuple[_Assembled, Progress | None] | None:
    """Prepare every page into the index under ``tmp``, hash the content (into ``outcome``) and write the
    index; None, with the index cancelled, when the content equals the current bundle's. With the
    assembled pages comes the display of the writing phase, its first part (the index) done."""
    lib = target.library
    index = write.IndexWriter(tmp, seed=ihash)
    bar = progress(len(jobs), f"{lib.id}@{target.version.name}", verb="indexed") if progress else None
    try:
        try:
            asm = _assemble(pages, ids, _counted(prepare_all(jobs), bar), target, base_url, index)
        finally:
            if bar:
                bar.close()
        outcome.obtained = obtained_mix(asm.sources)
        for s in asm.sources:
            if s.error_kind == FAILURE_KIND:
                outcome.pages_failed += 1
                outcome.failures.append(PageFailure(s.url, s.error or "failed", s.error_kind))
        if not asm.docs:
            raise FetchError(target.source, _nothing_indexed(asm.sources), kind="empty")
        chash = content_hash(lib.info(), target.version, _chunking(target), lib.search(), asm.docs)
        outcome.content_hash = chash
        outcome.documents = len(asm.docs)
        outcome.chunks = asm.chunks
        if current is not None and current.build.content_hash == chash:
            index.cancel()
            return None
        writing = (
            progress(3, f"{lib.id}@{target.version.name}", verb="wrote", unit="parts") if progress else None
        )
        index.commit()
        if writing:
            writing.advance(note="search index")
    except BaseException:
        index.cancel()
        raise
    return asm, writing


def _manifest(
    target: Target,
    src: _Source,
    kind: str,
    started: datetime,
    build_id: str,
    chash: str,
    ihash: str,
    asm: _Assembled,
) -> Manifest:
    """The new bundle's manifest (its file list is filled in by ``write.finish_manifest``)."""
    lib, res = target.library, src.result
    return Manifest(
        format_version=FORMAT_VERSION,
        library=lib.info(),
        version=target.version,
        source=SourceInfo(
            llms_txt=target.label or target.source,
            kind=kind,  # type: ignore[arg-type]
            fetched_at=_iso(started),
            title=src.llms.title,
            summary=src.llms.summary,
            sha256=(res.sha256 or "") if res else "",
            etag=res.etag if res else None,
            last_modified=res.last_modified if res else None,
            conformance=[Conformance(code=i.code, line=i.line, message=i.message) for i in src.llms.issues],
        ),
        build=BuildInfo(
            build_id=build_id,
            content_hash=chash,
            input_hash=ihash,
            built_at=_iso(_now()),
            analyzer=ANALYZER_ID,
            chunking=_chunking(target),
            search=lib.search(),
            tools=_tool_versions(),
            converter=CONVERTER_ID if any(s.obtained == "html" for s in asm.sources if s.chunks) else "",
        ),
        safety=[f for doc in asm.docs for f in scan_document(doc)],
        counts=Counts(
            documents=len(asm.docs),
            chunks=asm.chunks,
            failed=sum(1 for s in asm.sources if s.error),
            words=sum(s.words for s in asm.sources),
        ),
        documents=asm.sources,
        files=[],
    )


def describe_mix(mix: dict[str, int]) -> str:
    """``3 html, 1 markdown``: the mix as the summary line and the crawl report show it."""
    return ", ".join(f"{n} {kind}" for kind, n in mix.items()) or "none"


def _nothing_indexed(sources: list[SourceDocument]) -> str:
    """Why a build indexed nothing: its pages' failures counted by kind, and the first one."""
    kinds: dict[str, int] = {}
    for s in sources:
        kind = s.error_kind or "error"
        kinds[kind] = kinds.get(kind, 0) + 1
    counted = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    first = next((s for s in sources if s.error), None)
    example = f"; first: {first.url}: {first.error}" if first is not None else ""
    return (
        f"no page could be fetched and indexed: {len(sources)} of {len(sources)} failed ({counted}){example}"
    )


def _unchanged(outcome: Outcome, vdir: Path, current: Manifest, t1: float) -> None:
    outcome.obtained = obtained_mix(current.documents)
    outcome.status = "unchanged"
    outcome.build_id = current.build.build_id
    outcome.content_hash = current.build.content_hash
    outcome.bundle = str(vdir / current.build.build_id)
    outcome.documents = current.counts.documents
    outcome.chunks = current.counts.chunks
    outcome.message = "content unchanged; kept the current bundle"
    outcome.build_seconds = round(time.perf_counter() - t1, 3)


__all__ = ["BuildError", "Outcome", "build_target", "describe_mix", "doc_path", "obtained_mix", "page_key"]
