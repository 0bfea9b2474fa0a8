"""Build one library version: fetch llms.txt, crawl its pages, chunk, hash, and write a bundle if changed.

A library whose llms.txt cannot be fetched (or lists nothing) fails as a whole and its previous bundle is
left untouched. A page that fails is recorded in the manifest with its reason and the build goes on.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import os
import posixpath
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as pkg_version
from pathlib import Path, PurePosixPath
from typing import Literal
from urllib.parse import unquote, urlsplit, urlunsplit

import msgspec

from docbundle.bundle.analysis import ANALYZER_ID
from docbundle.bundle.contenthash import content_hash
from docbundle.bundle.layout import make_build_id, read_current, version_dir
from docbundle.bundle.manifest import (
    FORMAT_VERSION,
    BuildInfo,
    Conformance,
    Counts,
    Manifest,
    SourceDocument,
    SourceInfo,
)
from docbundle.bundle.store import ChunkRecord, DocRecord, write_store

from . import write
from .cache import CrawlCache
from .chunk import Chunk, chunk_markdown, parse_page
from .config import Target
from .crawl import FetchResult, crawl, fetch_one
from .errors import BuildError, FetchError, IndexerError
from .llmstxt import LlmsLink, LlmsTxt, parse_llms_txt, render_llms_txt
from .progress import Progress, make_progress

Status = Literal["built", "unchanged", "failed"]
PAGE_SUFFIXES = (".md", ".mdx", ".markdown", ".txt")
ProgressFactory = Callable[[int, str], Progress]


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
    failures: list[PageFailure] = []
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

    Bundles travel; a ``file:`` URL would carry the build machine's absolute paths into them.
    """
    if urlsplit(target.source).scheme.lower() in ("http", "https") or not url.startswith("file:"):
        return url
    label = (target.label or Path(target.source).name).rstrip("/")
    folder = label if Path(target.source).is_dir() else posixpath.dirname(label)
    rel = doc_path(url, base_url)
    return f"{folder}/{rel}" if folder else rel


def _strip_fragment(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, parts.query, ""))


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
    return parse_llms_txt("\n".join(lines) + "\n", base_url=root.resolve().as_uri() + "/")


class _Page(msgspec.Struct):
    link: LlmsLink
    result: FetchResult | None
    text: str | None


def _make_docs(
    pages: list[_Page], target: Target, base_url: str, *, prefer_page_title: bool = False
) -> tuple[list[DocRecord], list[list[Chunk]], list[SourceDocument]]:
    chunking = target.library.chunking
    docs: list[DocRecord] = []
    doc_chunks: list[list[Chunk]] = []
    sources: list[SourceDocument] = []
    used: set[str] = set()
    for page in pages:
        link, res = page.link, page.result
        path = doc_path(link.url, base_url)
        base_path, n = path, 2
        while path in used:
            path, n = f"{base_path}~{n}", n + 1
        used.add(path)
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
            sources.append(
                msgspec.structs.replace(src, error=res.error or "not fetched", error_kind=res.error_kind)
            )
            continue
        mdx = urlsplit(link.url).path.lower().endswith(".mdx")
        parsed = parse_page(page.text, mdx=mdx)
        chunks = chunk_markdown(
            parsed.body,
            max_depth=chunking.max_depth,
            min_words=chunking.min_words,
            max_words=chunking.max_words,
            mdx=parsed.mdx,
        )
        # A folder listing only knows file names; a page's own title is better there.
        title = (parsed.title or link.title if prefer_page_title else link.title or parsed.title) or path
        if not chunks:
            sources.append(
                msgspec.structs.replace(src, title=title, error="page has no text", error_kind="empty")
            )
            continue
        record = DocRecord(
            id=path,
            url=url,
            title=title,
            description=link.notes or parsed.description or "",
            section=link.section,
            optional=link.optional,
            chunks=[ChunkRecord(c.text, list(c.heading_path), c.start_line, c.end_line) for c in chunks],
        )
        words = sum(c.words for c in chunks)
        sources.append(
            msgspec.structs.replace(
                src,
                title=title,
                sha256=hashlib.sha256(record.text.encode()).hexdigest(),
                chunks=len(chunks),
                words=words,
            )
        )
        docs.append(record)
        doc_chunks.append(chunks)
    return docs, doc_chunks, sources


def _fetch_source(target: Target, cache: CrawlCache | None) -> tuple[LlmsTxt, str, FetchResult | None, str]:
    """Fetch and parse the library's llms.txt (or list its folder); raises FetchError when unusable."""
    source = target.source
    if not _is_url(source) and Path(source).is_dir():
        listing = _directory_listing(Path(source))
        return listing, render_llms_txt(listing), None, _base_url(source, None)
    result = fetch_one(source, options=target.crawl, cache=cache)
    if not result.ok or result.text is None:
        raise FetchError(source, result.error or "could not be fetched", kind=result.error_kind or "error")
    base = _base_url(source, result)
    return parse_llms_txt(result.text, base_url=base), result.text, result, base


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
        with write.version_lock(vdir):
            write.remove_stale_temps(vdir)
            _build_locked(target, vdir, outcome, cache, progress)
    except IndexerError as exc:
        outcome.status = "failed"
        outcome.message = str(exc)
    except OSError as exc:
        outcome.status = "failed"
        outcome.message = f"cannot write under {vdir}: {exc}"
    return outcome


def _build_locked(
    target: Target,
    vdir: Path,
    outcome: Outcome,
    cache: CrawlCache | None,
    progress: ProgressFactory | None,
) -> None:
    lib = target.library
    t0 = time.perf_counter()
    started = _now()
    llms, llms_text, llms_result, base_url = _fetch_source(target, cache)
    outcome.conformance = [f"line {i.line}: {i.code}: {i.message}" for i in llms.issues]

    pages: list[_Page] = []
    if llms.kind == "full" and llms.inline_docs:
        for i, d in enumerate(llms.inline_docs):
            url = d.url or f"{_strip_fragment(base_url)}#doc-{i + 1}"
            pages.append(_Page(LlmsLink(title=d.title, url=url, section=d.section), None, d.text))
        outcome.pages_listed = len(pages)
    else:
        seen: set[str] = set()
        links = []
        for link in llms.links:
            url = _strip_fragment(link.url)
            if url in seen or not _selected(url, lib.include, lib.exclude):
                continue
            seen.add(url)
            links.append(msgspec.structs.replace(link, url=url))
        outcome.pages_listed = len(links)
        if len(links) > lib.max_pages:
            links = links[: lib.max_pages]
        if not links:
            raise FetchError(
                target.source, "the llms.txt lists no documents (no links and no inline docs)", kind="empty"
            )
        bar = progress(len(links), f"{lib.id}@{target.version.name}") if progress else None
        try:
            results = asyncio.run(
                crawl(
                    [link.url for link in links],
                    options=target.crawl,
                    cache=cache,
                    on_result=bar.update if bar else None,
                )
            )
        finally:
            if bar:
                bar.close()
        for link, res in zip(links, results, strict=True):
            pages.append(_Page(link, res, res.text if res.ok else None))
            if res.ok:
                outcome.pages_fetched += 1
                outcome.pages_not_modified += int(res.not_modified)
            else:
                outcome.pages_failed += 1
                outcome.failures.append(PageFailure(link.url, res.error or "failed", res.error_kind))
    outcome.crawl_seconds = round(time.perf_counter() - t0, 3)

    t1 = time.perf_counter()
    docs, doc_chunks, sources = _make_docs(pages, target, base_url, prefer_page_title=llms_result is None)
    if not docs:
        raise FetchError(
            target.source, "no page could be fetched and indexed; see the failures", kind="empty"
        )
    chash = content_hash(lib.info(), target.version, lib.chunking.info(), lib.search(), docs)
    outcome.content_hash = chash
    outcome.documents = len(docs)
    outcome.chunks = sum(len(c) for c in doc_chunks)
    if chash == write.current_content_hash(vdir):
        outcome.status = "unchanged"
        outcome.build_id = read_current(vdir)
        outcome.bundle = str(vdir / outcome.build_id) if outcome.build_id else None
        outcome.message = "content unchanged; kept the current bundle"
        outcome.build_seconds = round(time.perf_counter() - t1, 3)
        return

    build_id = make_build_id(_iso(started), chash)
    tmp = write.new_temp_dir(vdir, build_id)
    try:
        (tmp / "llms.txt").write_text(llms_text, encoding="utf-8")
        write_store(tmp, docs)
        write.write_index(tmp, docs, doc_chunks, seed=chash)
        manifest = Manifest(
            format_version=FORMAT_VERSION,
            library=lib.info(),
            version=target.version,
            source=SourceInfo(
                llms_txt=target.label or target.source,
                kind="directory" if llms_result is None and not _is_url(target.source) else llms.kind,  # type: ignore[arg-type]
                fetched_at=_iso(started),
                title=llms.title,
                summary=llms.summary,
                sha256=llms_result.sha256 or "" if llms_result else "",
                etag=llms_result.etag if llms_result else None,
                last_modified=llms_result.last_modified if llms_result else None,
                conformance=[Conformance(code=i.code, line=i.line, message=i.message) for i in llms.issues],
            ),
            build=BuildInfo(
                build_id=build_id,
                content_hash=chash,
                built_at=_iso(_now()),
                analyzer=ANALYZER_ID,
                chunking=lib.chunking.info(),
                search=lib.search(),
                tools=_tool_versions(),
            ),
            counts=Counts(
                documents=len(docs),
                chunks=outcome.chunks,
                failed=sum(1 for s in sources if s.error),
                words=sum(s.words for s in sources),
            ),
            documents=sources,
            files=[],
        )
        write.finish_manifest(tmp, manifest)
        final = write.publish(vdir, tmp, build_id)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    outcome.status = "built"
    outcome.build_id = build_id
    outcome.bundle = str(final)
    outcome.pruned = write.prune(vdir, target.keep)
    outcome.build_seconds = round(time.perf_counter() - t1, 3)
    outcome.message = f"built {build_id}: {len(docs)} documents, {outcome.chunks} chunks"
    if outcome.pages_failed:
        outcome.message += f", {outcome.pages_failed} page(s) failed"


__all__ = ["BuildError", "Outcome", "build_target", "doc_path"]
