"""Audit a bundle: freshness, completeness, coverage, and the content-safety findings its build recorded.

Content safety is scanned at build time (``pipeline/safety.py``) and recorded in the manifest
(``safety``); ``audit_bundle`` reports it again with the rest.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import msgspec
from docbundle.bundle.manifest import Manifest, SafetyFinding
from docbundle.bundle.reader import verify_bundle
from docbundle.bundle.release import manifest_header
from docbundle.bundle.store import DocStore
from docbundle.bundle.times import parse_time
from docbundle.common.terminal import printable

TINY_CHUNK_CHARS = 40
GIANT_CHUNK_CHARS = 20_000


class AuditReport(msgspec.Struct, kw_only=True):
    """What ``docbundle-index audit`` reports about one bundle."""

    bundle: str
    library: str
    version: str
    build_id: str
    content_hash: str
    built_at: str
    age_days: float
    upstream_changed: int
    upstream_unchanged: int
    documents: int
    failed: list[dict[str, str]]
    empty_documents: list[str]
    tiny_chunks: int
    giant_chunks: list[str]
    safety: list[SafetyFinding]
    conformance: int


def _age_days(built_at: str, now: datetime) -> float:
    """Days since the build (the one reading of a build time, ``bundle.times``); -1 when unreadable."""
    built = parse_time(built_at)
    try:
        return -1.0 if built is None else round((now - built).total_seconds() / 86400, 2)
    except OverflowError:  # a zone that moves the time out of datetime's range
        return -1.0


def audit_bundle(bundle: Path, *, now: datetime | None = None) -> AuditReport:
    """Verify a bundle and report freshness, completeness, coverage and content safety."""
    manifest: Manifest = verify_bundle(bundle)
    tiny = 0
    giant: list[str] = []
    with DocStore(bundle) as store:
        for doc in store:
            for ci, chunk in enumerate(doc.chunks):
                size = len(chunk.text.strip())
                if size < TINY_CHUNK_CHARS:
                    tiny += 1
                elif size > GIANT_CHUNK_CHARS:
                    giant.append(f"{doc.id}#{ci} ({size} chars)")
    docs = manifest.documents
    return AuditReport(
        bundle=str(bundle),
        **manifest_header(manifest),
        age_days=_age_days(manifest.build.built_at, now or datetime.now(tz=UTC)),
        upstream_changed=sum(1 for d in docs if not d.error and not d.not_modified),
        upstream_unchanged=sum(1 for d in docs if d.not_modified),
        documents=manifest.counts.documents,
        failed=[
            {"path": d.path, "url": d.url, "error": d.error or "", "kind": d.error_kind or ""}
            for d in docs
            if d.error and d.error_kind != "empty"
        ],
        empty_documents=[d.path for d in docs if d.error_kind == "empty"],
        tiny_chunks=tiny,
        giant_chunks=giant,
        safety=list(manifest.safety),
        conformance=len(manifest.source.conformance),
    )


def render_audit(report: AuditReport) -> str:
    """The readable form of an audit report (what the bundle says goes through ``printable``)."""
    lines = [
        f"{report.library}@{report.version} build {report.build_id} (content {report.content_hash[:12]})",
        f"  freshness     built {report.built_at}, {report.age_days:g} day(s) ago; last crawl: "
        f"{report.upstream_changed} page(s) downloaded (new or changed upstream), {report.upstream_unchanged} unchanged",
        f"  completeness  {report.documents} document(s) indexed, {len(report.failed)} page(s) failed",
    ]
    lines += [
        f"                ! {printable(f['path'])}: {printable(f['error'], 400)}" for f in report.failed[:20]
    ]
    lines.append(
        f"  coverage      {len(report.empty_documents)} page(s) with no text, {report.tiny_chunks} tiny chunk(s) "
        f"(< {TINY_CHUNK_CHARS} chars), {len(report.giant_chunks)} giant chunk(s) (> {GIANT_CHUNK_CHARS} chars)"
    )
    lines += [f"                - {printable(g)}" for g in report.giant_chunks[:10]]
    lines.append(f"  safety        {len(report.safety)} finding(s)")
    lines += [
        f"                ! {printable(s.path)}#{s.chunk} {printable(s.kind, 40)}: {printable(s.detail)}"
        for s in report.safety[:30]
    ]
    lines.append(f"  llms.txt      {report.conformance} conformance finding(s)")
    return "\n".join(lines)
