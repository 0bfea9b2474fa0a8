"""Export a bundle for use outside docbundle: one JSON file, one SQLite file, or a folder of markdown.

The bundle is verified first (every file against its sha256 in the manifest) and only its manifest and
document store are read; the whoosh index is never opened, so nothing is unpickled. Every format holds
the indexed documents with their chunks; pages that failed are in the bundle's manifest only.

Nothing half-written is left at ``out``: each export is written beside it under a temporary name and
renamed into place. An existing ``out`` is replaced only with ``force`` — and for the markdown format
only when it is an earlier markdown export (its ``index.md`` says so) or an empty folder, so a mistyped
``--out`` cannot delete an unrelated folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

import msgspec
from docbundle.bundle.layout import bundle_at
from docbundle.bundle.manifest import LibraryInfo, Manifest, VersionInfo
from docbundle.bundle.reader import verify_bundle
from docbundle.bundle.release import bundle_label
from docbundle.bundle.store import DocMeta, DocRecord, DocStore

from ..errors import ExportError, ExportUsageError, OutputExistsError

EXPORT_FORMAT = "docbundle-export"
EXPORT_VERSION = 1
ExportFormat = Literal["json", "sqlite", "markdown"]
FORMATS: tuple[ExportFormat, ...] = ("json", "sqlite", "markdown")
HEADING_SEPARATOR = " › "
MARKDOWN_INDEX = "index.md"


@dataclass(frozen=True)
class ExportResult:
    """What one export wrote."""

    bundle: str
    format: ExportFormat
    out: Path
    documents: int
    chunks: int


# -- the JSON export --------------------------------------------------------------------------------


class _Out(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Base of the JSON export's objects: camelCase keys, like the MCP server's answers."""


class ExportChunk(_Out, frozen=True, kw_only=True, rename="camel"):
    """One chunk; ``id`` is its number within the document (the server's ``chunkId``)."""

    id: int
    heading_path: list[str]
    text: str
    start_line: int
    end_line: int


class ExportDocument(DocMeta, frozen=True, kw_only=True, rename="camel"):
    """One indexed document (``DocMeta``) with its whole markdown text and its chunks in page order."""

    text: str
    chunks: list[ExportChunk]


class ExportSource(_Out, frozen=True, kw_only=True, rename="camel"):
    """Where the bundle's documents came from."""

    llms_txt: str
    kind: str
    fetched_at: str
    title: str | None
    summary: str | None


class ExportBuild(_Out, frozen=True, kw_only=True, rename="camel"):
    """The bundle the export was made from."""

    bundle: str
    build_id: str
    content_hash: str
    built_at: str
    analyzer: str
    format_version: int
    documents: int
    chunks: int


class ExportHeader(_Out, frozen=True, kw_only=True, rename="camel"):
    """Everything of the JSON export but its documents, in key order."""

    format: str
    export_version: int
    library: LibraryInfo
    version: VersionInfo
    source: ExportSource
    build: ExportBuild


def _export_document(doc: DocRecord) -> ExportDocument:
    return ExportDocument(
        **msgspec.structs.asdict(doc.meta()),
        text=doc.text,
        chunks=[
            ExportChunk(
                id=i,
                heading_path=list(c.heading_path),
                text=c.text,
                start_line=c.start_line,
                end_line=c.end_line,
            )
            for i, c in enumerate(doc.chunks)
        ],
    )


def _header(manifest: Manifest) -> ExportHeader:
    m = manifest
    return ExportHeader(
        format=EXPORT_FORMAT,
        export_version=EXPORT_VERSION,
        library=m.library,
        version=m.version,
        source=ExportSource(
            llms_txt=m.source.llms_txt,
            kind=m.source.kind,
            fetched_at=m.source.fetched_at,
            title=m.source.title,
            summary=m.source.summary,
        ),
        build=ExportBuild(
            bundle=bundle_label(m),
            build_id=m.build.build_id,
            content_hash=m.build.content_hash,
            built_at=m.build.built_at,
            analyzer=m.build.analyzer,
            format_version=m.format_version,
            documents=m.counts.documents,
            chunks=m.counts.chunks,
        ),
    )


def _write_json(manifest: Manifest, store: DocStore, tmp: Path) -> int:
    enc = msgspec.json.Encoder()
    head = enc.encode(_header(manifest))
    chunks = 0
    with open(tmp, "wb") as fh:
        # Documents are encoded one at a time and spliced into the header object, so a large bundle
        # never sits in memory as one JSON value; one document per line keeps exports diffable.
        fh.write(head[:-1] + b',"documents":[')
        for i, doc in enumerate(store):
            fh.write((b",\n" if i else b"\n") + enc.encode(_export_document(doc)))
            chunks += len(doc.chunks)
        fh.write(b"\n]}\n")
        fh.flush()
        os.fsync(fh.fileno())
    return chunks


# -- the SQLite export ------------------------------------------------------------------------------

SQLITE_SCHEMA = """\
CREATE TABLE libraries (
    id              INTEGER PRIMARY KEY,
    library_id      TEXT NOT NULL,
    name            TEXT NOT NULL,
    description     TEXT NOT NULL,
    category        TEXT NOT NULL,
    version         TEXT NOT NULL,
    version_status  TEXT NOT NULL,
    is_latest       INTEGER NOT NULL,
    is_lts          INTEGER NOT NULL,
    bundle          TEXT NOT NULL,
    build_id        TEXT NOT NULL,
    content_hash    TEXT NOT NULL,
    built_at        TEXT NOT NULL,
    analyzer        TEXT NOT NULL,
    format_version  INTEGER NOT NULL,
    source          TEXT NOT NULL,
    source_kind     TEXT NOT NULL,
    source_title    TEXT,
    source_summary  TEXT,
    UNIQUE (library_id, version)
);
CREATE TABLE documents (
    id              INTEGER PRIMARY KEY,
    library         INTEGER NOT NULL REFERENCES libraries (id),
    position        INTEGER NOT NULL,
    doc_id          TEXT NOT NULL,
    url             TEXT NOT NULL,
    title           TEXT NOT NULL,
    description     TEXT NOT NULL,
    section         TEXT NOT NULL,
    optional        INTEGER NOT NULL,
    text            TEXT NOT NULL,
    UNIQUE (library, doc_id)
);
CREATE TABLE chunks (
    id              INTEGER PRIMARY KEY,
    document        INTEGER NOT NULL REFERENCES documents (id),
    chunk_no        INTEGER NOT NULL,
    heading_path    TEXT NOT NULL,
    headings        TEXT NOT NULL,
    text            TEXT NOT NULL,
    start_line      INTEGER NOT NULL,
    end_line        INTEGER NOT NULL,
    UNIQUE (document, chunk_no)
);
CREATE VIEW chunk_search (id, title, headings, text) AS
    SELECT c.id, d.title, c.headings, c.text FROM chunks AS c JOIN documents AS d ON d.id = c.document;
CREATE VIRTUAL TABLE chunks_fts USING fts5 (
    title, headings, text,
    content = 'chunk_search', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
"""


def fts5_available() -> bool:
    """Whether this Python's SQLite library was compiled with the FTS5 extension."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE probe USING fts5 (text)")
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()
    return True


def _require_fts5() -> None:
    if not fts5_available():
        raise ExportError(
            f"the SQLite library of this Python (SQLite {sqlite3.sqlite_version}) was built without FTS5, "
            "which the sqlite export needs for its full-text table; use a Python whose SQLite has FTS5 "
            "(the python.org and most Linux distribution builds do), or export --format json"
        )


def _write_sqlite(manifest: Manifest, store: DocStore, tmp: Path) -> int:
    m = manifest
    chunks = 0
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        # The file is a temporary one, renamed into place only once complete: a crash loses nothing,
        # so skip the rollback journal while filling it.
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.executescript(SQLITE_SCHEMA)
        conn.execute("BEGIN")
        lib_row = conn.execute(
            "INSERT INTO libraries (library_id, name, description, category, version, version_status, "
            "is_latest, is_lts, bundle, build_id, content_hash, built_at, analyzer, format_version, source, "
            "source_kind, source_title, source_summary) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                m.library.id,
                m.library.name,
                m.library.description,
                m.library.category,
                m.version.name,
                m.version.status,
                int(m.version.latest),
                int(m.version.lts),
                bundle_label(m),
                m.build.build_id,
                m.build.content_hash,
                m.build.built_at,
                m.build.analyzer,
                m.format_version,
                m.source.llms_txt,
                m.source.kind,
                m.source.title,
                m.source.summary,
            ),
        ).lastrowid
        for position, doc in enumerate(store):
            doc_row = conn.execute(
                "INSERT INTO documents (library, position, doc_id, url, title, description, section, "
                "optional, text) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    lib_row,
                    position,
                    doc.id,
                    doc.url,
                    doc.title,
                    doc.description,
                    doc.section,
                    int(doc.optional),
                    doc.text,
                ),
            ).lastrowid
            conn.executemany(
                "INSERT INTO chunks (document, chunk_no, heading_path, headings, text, start_line, end_line) "
                "VALUES (?,?,?,?,?,?,?)",
                (
                    (
                        doc_row,
                        i,
                        json.dumps(list(c.heading_path), ensure_ascii=False),
                        HEADING_SEPARATOR.join(c.heading_path),
                        c.text,
                        c.start_line,
                        c.end_line,
                    )
                    for i, c in enumerate(doc.chunks)
                ),
            )
            chunks += len(doc.chunks)
        # An external-content FTS5 table indexes what its content view holds; 'rebuild' reads it all.
        conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild')")
        conn.execute(f"PRAGMA user_version = {EXPORT_VERSION:d}")
        conn.execute("COMMIT")
    finally:
        conn.close()
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    return chunks


# -- the markdown export ----------------------------------------------------------------------------

_UNSAFE_CHARS = re.compile(r'[\x00-\x1f\x7f<>:"\\|?*]')
_TRAILING_DOTS = re.compile(r"[. ]+$")
_MAX_SEGMENT_BYTES = 200
# Characters YAML refuses in a document even inside a quoted scalar, which json.dumps leaves raw.
_YAML_UNPRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def _yaml_str(value: str) -> str:
    """A YAML double-quoted scalar (JSON string syntax is a subset of it)."""
    return _YAML_UNPRINTABLE.sub(
        lambda mo: f"\\u{ord(mo.group()):04x}", json.dumps(value, ensure_ascii=False)
    )


def _front_matter(fields: dict[str, str | bool | int]) -> str:
    lines = ["---"]
    for key, value in fields.items():
        shown = _yaml_str(value) if isinstance(value, str) else json.dumps(value)
        lines.append(f"{key}: {shown}")
    return "\n".join([*lines, "---", ""])


def _segment(seg: str, *, last: bool) -> str:
    seg = _UNSAFE_CHARS.sub("_", seg)
    if len(seg.encode()) > _MAX_SEGMENT_BYTES:
        digest = hashlib.sha256(seg.encode()).hexdigest()[:10]
        seg = seg.encode()[: _MAX_SEGMENT_BYTES - 20].decode(errors="ignore") + "~" + digest
    if last:
        return seg if seg.lower().endswith(".md") else seg + ".md"
    # A folder named "x.md" could collide with a page's file "x.md"; "." and ".." must not navigate.
    seg = _TRAILING_DOTS.sub(lambda mo: "_" * len(mo.group()), seg)
    return seg + "_" if seg.lower().endswith(".md") else seg


def markdown_paths(doc_ids: list[str]) -> list[str]:
    """The file of each document in a markdown export: its id as a relative path, ending in ``.md``.

    Ids become paths segment by segment; characters that are not portable in file names become ``_``,
    folders never end in ``.md`` (so they cannot collide with a page), ``index.md`` at the top is kept
    for the table of contents, and a clash (case-insensitive, for macOS and Windows) gets ``~2``, ``~3``.
    """
    used = {MARKDOWN_INDEX}
    out = []
    for doc_id in doc_ids:
        parts = [p for p in doc_id.split("/") if p] or ["index"]
        segs = [_segment(p, last=False) for p in parts[:-1]] + [_segment(parts[-1], last=True)]
        base = "/".join(segs)
        path, n = base, 2
        while path.casefold() in used:
            path, n = f"{base[:-3]}~{n}.md", n + 1
        used.add(path.casefold())
        out.append(path)
    return out


def _escape_link_text(text: str) -> str:
    return re.sub(r"([\\\[\]])", r"\\\1", " ".join(text.split()))


def _write_markdown(manifest: Manifest, store: DocStore, tmp: Path) -> int:
    m = manifest
    label = bundle_label(m)
    docs = [(d.id, d.title, d.description, d.section, len(d.chunks)) for d in store]
    paths = markdown_paths([d[0] for d in docs])
    tmp.mkdir()
    for i, rel in enumerate(paths):
        doc = store.get(i)
        fields: dict[str, str | bool | int] = {"title": doc.title, "url": doc.url, "section": doc.section}
        if doc.description:
            fields["description"] = doc.description
        fields |= {"optional": doc.optional, "document": doc.id, "bundle": label}
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_front_matter(fields) + doc.text, encoding="utf-8")

    # index.md is an llms.txt of the export: title, summary, then each section's pages in bundle order.
    header = _front_matter(
        {
            "format": EXPORT_FORMAT,
            "exportVersion": EXPORT_VERSION,
            "library": m.library.id,
            "version": m.version.name,
            "bundle": label,
            "contentHash": m.build.content_hash,
            "builtAt": m.build.built_at,
            "source": m.source.llms_txt,
        }
    )
    lines = [header, f"# {m.source.title or m.library.name}", ""]
    summary = m.source.summary or m.library.description
    if summary:
        lines += [f"> {' '.join(summary.split())}", ""]
    sections: dict[str, list[str]] = {}
    for (_doc_id, title, description, section, _n), rel in zip(docs, paths, strict=True):
        entry = f"- [{_escape_link_text(title)}]({quote(rel)})"
        if description:
            entry += f": {' '.join(description.split())}"
        sections.setdefault(section, []).append(entry)
    # Pages outside any section go first, under no heading, as an llms.txt lists them.
    for section, entries in sorted(sections.items(), key=lambda item: item[0] != ""):
        if section:
            lines += [f"## {section}", ""]
        lines += [*entries, ""]
    (tmp / MARKDOWN_INDEX).write_text("\n".join(lines), encoding="utf-8")
    return sum(d[4] for d in docs)


def _is_markdown_export(path: Path) -> bool:
    """Whether ``path`` is a folder an earlier markdown export wrote (or an empty folder)."""
    if not any(path.iterdir()):
        return True
    try:
        with open(path / MARKDOWN_INDEX, encoding="utf-8", errors="replace") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return head.startswith("---\n") and f"\nformat: {_yaml_str(EXPORT_FORMAT)}\n" in head


# -- writing one export -----------------------------------------------------------------------------

_Writer = Callable[[Manifest, DocStore, Path], int]
_WRITERS: dict[ExportFormat, _Writer] = {
    "json": _write_json,
    "sqlite": _write_sqlite,
    "markdown": _write_markdown,
}


def check_output(out: Path, fmt: ExportFormat, *, force: bool) -> None:
    """Refuse an ``out`` that exists (without ``force``) or that ``force`` must not replace."""
    if not os.path.lexists(out):
        return
    if not force:
        raise OutputExistsError(f"{out} already exists; pass --force to replace it")
    is_dir = out.is_dir() and not out.is_symlink()
    if fmt != "markdown" and is_dir:
        raise OutputExistsError(f"{out} is a directory; the {fmt} export writes one file")
    if fmt == "markdown" and is_dir and not _is_markdown_export(out):
        raise OutputExistsError(
            f"refusing to replace {out}: it is not empty and not an earlier markdown export "
            f"(no {MARKDOWN_INDEX} written by docbundle-index export)"
        )


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        path.unlink()


def _publish(tmp: Path, out: Path, *, force: bool) -> None:
    if os.path.lexists(out):
        if not force:
            # Something appeared at ``out`` while we were exporting: still never overwrite it.
            raise OutputExistsError(f"{out} already exists; pass --force to replace it")
        if out.is_dir() and not out.is_symlink():
            # A folder cannot be swapped in one rename: move the old one aside, rename, then delete it.
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            out.rename(old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
            return
        if tmp.is_dir():
            out.unlink()  # a file (or link) where the markdown folder goes; rename cannot replace it
    os.replace(tmp, out)


def export_bundle(bundle: Path, fmt: ExportFormat, out: Path, *, force: bool = False) -> ExportResult:
    """Verify ``bundle`` (a bundle or version directory) and export it to ``out`` in format ``fmt``."""
    if fmt not in _WRITERS:
        raise ExportError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    out = Path(os.path.abspath(out))
    if not out.name:
        raise ExportUsageError(f"--out {out} names no file or folder")
    # The cheap refusals come before hashing a possibly large bundle.
    check_output(out, fmt, force=force)
    if fmt == "sqlite":
        _require_fts5()
    path = bundle_at(bundle)
    if out.resolve().is_relative_to(path.resolve()):
        raise ExportUsageError(f"--out {out} is inside the bundle {path}, whose files may not change")
    manifest = verify_bundle(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    _remove(tmp)
    try:
        with DocStore(path) as store:
            chunks = _WRITERS[fmt](manifest, store, tmp)
            documents = len(store)
        _publish(tmp, out, force=force)
    except BaseException:
        _remove(tmp)
        raise
    return ExportResult(bundle_label(manifest), fmt, out, documents, chunks)
