"""Audit a bundle: freshness, completeness, coverage, and content that may try to steer an AI assistant.

Content safety is checked at build time (``scan_document``) and recorded in the manifest (``safety``),
so the server can show it without reading documents; ``audit_bundle`` reports it again with the rest.

What counts as a finding:

- ``hidden-unicode``: Unicode tag characters (U+E0000-U+E007F, invisible text that models still read),
  bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069, the "Trojan Source" trick), and
  runs of three or more zero-width characters.
- ``instructions``: text addressed to an AI assistant rather than to a reader - "ignore previous
  instructions", "you are now ...", "do not tell the user", chat-template tokens such as ``<|im_start|>``.

Findings are reports, not verdicts: documentation about prompt injection quotes such text on purpose.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import msgspec
from docbundle.bundle.manifest import Manifest, SafetyFinding
from docbundle.bundle.reader import verify_bundle
from docbundle.bundle.store import DocRecord, DocStore

MAX_FINDINGS_PER_DOC = 20
TINY_CHUNK_CHARS = 40
GIANT_CHUNK_CHARS = 20_000

_HIDDEN = re.compile(
    "(?P<tag>[\U000e0000-\U000e007f]+)"
    "|(?P<bidi>[\u202a-\u202e\u2066-\u2069]+)"
    "|(?P<zw>[\u200b\u200c\u200d\u2060\ufeff]{3,})"
)
_INSTRUCTIONS = re.compile(
    r"(?i)\b(?:"
    r"ignore\s+(?:all\s+|any\s+|the\s+)?(?:previous|prior|above|earlier)\s+(?:instructions|prompts?|rules)"
    r"|disregard\s+(?:all\s+|any\s+|the\s+)?(?:previous|prior|above|earlier|system)\s+\w+"
    r"|forget\s+(?:all\s+|everything\s+)?(?:you\s+were\s+told|previous\s+instructions)"
    r"|you\s+are\s+now\s+(?:an?\s+|in\s+)?\w+"
    r"|(?:do\s+not|don't|never)\s+(?:tell|reveal\s+(?:this\s+)?to|mention\s+(?:this\s+)?to|inform)\s+the\s+user"
    r"|(?:if\s+you\s+are|as)\s+an?\s+(?:ai|llm|language\s+model|ai\s+assistant)\b[^.\n]{0,60}?\b(?:must|should|always|never)"
    r"|new\s+system\s+prompt"
    r")"
    r"|<\|im_start\|>|<\|im_end\|>|\[/?INST\]|<<SYS>>"
)
_NAMES = {
    "tag": "Unicode tag characters",
    "bidi": "bidirectional override characters",
    "zw": "zero-width run",
}


def scan_text(text: str) -> list[tuple[str, str, int]]:
    """``(kind, detail, offset)`` for each suspicious span of ``text``."""
    out: list[tuple[str, str, int]] = []
    for m in _HIDDEN.finditer(text):
        kind = m.lastgroup or "hidden"
        codes = " ".join(f"U+{ord(c):04X}" for c in m.group()[:6])
        out.append(("hidden-unicode", f"{_NAMES[kind]} ({len(m.group())}: {codes})", m.start()))
    for m in _INSTRUCTIONS.finditer(text):
        snippet = " ".join(text[max(0, m.start() - 30) : m.end() + 30].split())
        out.append(("instructions", f"text addressed to an AI assistant: ...{snippet}...", m.start()))
    return out


def scan_document(doc: DocRecord) -> list[SafetyFinding]:
    """Content-safety findings of one document, chunk by chunk (at most MAX_FINDINGS_PER_DOC)."""
    findings: list[SafetyFinding] = []
    for ci, chunk in enumerate(doc.chunks):
        for kind, detail, _ in scan_text(chunk.text):
            findings.append(SafetyFinding(path=doc.id, kind=kind, detail=detail, chunk=ci))
            if len(findings) >= MAX_FINDINGS_PER_DOC:
                return findings
    return findings


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
    try:
        built = datetime.strptime(built_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return -1.0
    return round((now - built).total_seconds() / 86400, 2)


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
        library=manifest.library.id,
        version=manifest.version.name,
        build_id=manifest.build.build_id,
        content_hash=manifest.build.content_hash,
        built_at=manifest.build.built_at,
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
    """The readable form of an audit report."""
    lines = [
        f"{report.library}@{report.version} build {report.build_id} (content {report.content_hash[:12]})",
        f"  freshness     built {report.built_at}, {report.age_days:g} day(s) ago; last crawl: "
        f"{report.upstream_changed} page(s) downloaded (new or changed upstream), {report.upstream_unchanged} unchanged",
        f"  completeness  {report.documents} document(s) indexed, {len(report.failed)} page(s) failed",
    ]
    lines += [f"                ! {f['path']}: {f['error']}" for f in report.failed[:20]]
    lines.append(
        f"  coverage      {len(report.empty_documents)} page(s) with no text, {report.tiny_chunks} tiny chunk(s) "
        f"(< {TINY_CHUNK_CHARS} chars), {len(report.giant_chunks)} giant chunk(s) (> {GIANT_CHUNK_CHARS} chars)"
    )
    lines += [f"                - {g}" for g in report.giant_chunks[:10]]
    lines.append(f"  safety        {len(report.safety)} finding(s)")
    lines += [f"                ! {s.path}#{s.chunk} {s.kind}: {s.detail}" for s in report.safety[:30]]
    lines.append(f"  llms.txt      {report.conformance} conformance finding(s)")
    return "\n".join(lines)
