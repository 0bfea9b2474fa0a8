"""Compare two bundles: what a rebuild added, removed, changed or moved, and how its crawl went.

Both bundles are verified first; only their manifests and document stores are read (the whoosh
indexes are never opened). Documents are matched by id. The report covers:

- documents **added** / **removed** from the index (a page that failed in one build and was indexed in
  the other counts here too, and also under page errors), **changed** (text, title, URL, description or
  optional flag differ; the text is compared whole), **moved** to another llms.txt section, and the
  number **unchanged** (identical in all of these);
- sections added and removed, in llms.txt order (a section counts when it lists a page, even one that
  failed);
- the manifest counts (documents, chunks, words, failed pages), old → new;
- llms.txt conformance findings that appeared or went away (matched by code and message, since line
  numbers shift with every edit of the file);
- pages whose fetch error changed: newly failing, recovered, or failing differently;
- the tools whose version changed (the manifests' ``tools``: Python, docbundle and each library that
  shapes the bytes, issue 34), which is why a bundle of unchanged content was rebuilt.

The effect of a rebuild on search results needs the indexes opened and a set of queries; it would be a
further field of ``BundleDiff`` computed from opened bundles, not something this module guesses at.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec
from docbundle.bundle.layout import bundle_at
from docbundle.bundle.manifest import Conformance, Manifest, SourceDocument
from docbundle.bundle.reader import verify_bundle
from docbundle.bundle.release import bundle_label, manifest_header
from docbundle.bundle.store import DocMeta, DocStore

PageStateName = Literal["absent", "indexed", "failed"]
SHOWN = 10  # items listed per category in the readable report (--json has them all)


class _Out(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Base of the report's objects: camelCase keys, like the export and the MCP server."""


class BundleRef(_Out, frozen=True, kw_only=True, rename="camel"):
    """One side of the comparison."""

    bundle: str
    library: str
    version: str
    build_id: str
    content_hash: str
    built_at: str


class IntChange(_Out, frozen=True, kw_only=True, rename="camel"):
    """A number before and after."""

    old: int
    new: int


class CountsDiff(_Out, frozen=True, kw_only=True, rename="camel"):
    """The manifest counts of both bundles."""

    documents: IntChange
    chunks: IntChange
    words: IntChange
    failed: IntChange


class DocRef(_Out, frozen=True, kw_only=True, rename="camel"):
    """A document added to or removed from the index."""

    id: str
    title: str
    url: str
    section: str


class DocChange(_Out, frozen=True, kw_only=True, rename="camel"):
    """A document indexed in both bundles whose content or metadata differ."""

    id: str
    title: str
    url: str
    changes: list[str]
    chunks: IntChange
    words: IntChange


class SectionMove(_Out, frozen=True, kw_only=True, rename="camel"):
    """A document listed under another llms.txt section than before."""

    id: str
    title: str
    old: str
    new: str


class SectionsDiff(_Out, frozen=True, kw_only=True, rename="camel"):
    """Sections that appeared or went away, and documents that changed section."""

    added: list[str]
    removed: list[str]
    moved: list[SectionMove]


class ConformanceDiff(_Out, frozen=True, kw_only=True, rename="camel"):
    """llms.txt spec deviations that appeared (with their new line) or went away (with the old one)."""

    added: list[Conformance]
    removed: list[Conformance]
    by_code: dict[str, IntChange]


class PageState(_Out, frozen=True, kw_only=True, rename="camel"):
    """A page in one bundle's manifest: not listed, indexed, or failed with a reason."""

    state: PageStateName
    kind: str | None = None
    error: str | None = None


class ErrorChange(_Out, frozen=True, kw_only=True, rename="camel"):
    """A page whose fetch error differs between the bundles."""

    id: str
    url: str
    old: PageState
    new: PageState


class ToolChange(_Out, frozen=True, kw_only=True, rename="camel"):
    """A tool of the manifests' ``tools`` at another version (``""``: not named by that bundle)."""

    name: str
    old: str
    new: str


class BundleDiff(_Out, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """Everything ``docbundle-index diff`` reports (``tools`` only when a tool changed: the JSON of two
    bundles built with the same toolchain stays as it was)."""

    old: BundleRef
    new: BundleRef
    same_content: bool
    counts: CountsDiff
    added: list[DocRef]
    removed: list[DocRef]
    changed: list[DocChange]
    unchanged: int
    sections: SectionsDiff
    conformance: ConformanceDiff
    errors: list[ErrorChange]
    tools: list[ToolChange] = []


class _Doc(DocMeta, frozen=True, kw_only=True):
    """What the comparison needs of one stored document: its metadata, its text only as a digest."""

    digest: str
    chunks: int


@dataclass(frozen=True)
class _Side:
    manifest: Manifest
    docs: dict[str, _Doc]  # in store (llms.txt) order
    sources: dict[str, SourceDocument]


def _load(path: Path) -> _Side:
    bundle = bundle_at(path)
    manifest = verify_bundle(bundle)
    docs: dict[str, _Doc] = {}
    with DocStore(bundle) as store:
        for d in store:
            digest = hashlib.sha256(d.text.encode()).hexdigest()
            docs[d.id] = _Doc(**msgspec.structs.asdict(d.meta()), digest=digest, chunks=len(d.chunks))
    return _Side(manifest, docs, {s.path: s for s in manifest.documents})


def _ref(m: Manifest) -> BundleRef:
    return BundleRef(bundle=bundle_label(m), **manifest_header(m))


def _words(side: _Side, doc_id: str) -> int:
    source = side.sources.get(doc_id)
    return source.words if source is not None else 0


def _state(side: _Side, doc_id: str) -> PageState:
    source = side.sources.get(doc_id)
    if source is None:
        return PageState(state="absent")
    if source.error is not None:
        return PageState(state="failed", kind=source.error_kind, error=source.error)
    return PageState(state="indexed")


def _sections(side: _Side) -> list[str]:
    # Every listed page counts, failed ones too: a section whose only page failed this time is still
    # in the llms.txt, and the failure is reported under page errors rather than as a lost section.
    return list(dict.fromkeys(s.section for s in side.manifest.documents))


def _conformance(old: list[Conformance], new: list[Conformance]) -> ConformanceDiff:
    def key(c: Conformance) -> tuple[str, str]:
        return c.code, c.message

    old_keys, new_keys = Counter(map(key, old)), Counter(map(key, new))
    gone, came = old_keys - new_keys, new_keys - old_keys
    added, removed = [], []
    for c in new:  # the first occurrences of a repeated finding are the ones reported
        if came[key(c)] > 0:
            came[key(c)] -= 1
            added.append(c)
    for c in old:
        if gone[key(c)] > 0:
            gone[key(c)] -= 1
            removed.append(c)
    old_codes, new_codes = Counter(c.code for c in old), Counter(c.code for c in new)
    by_code = {
        code: IntChange(old=old_codes[code], new=new_codes[code])
        for code in sorted(old_codes.keys() | new_codes.keys())
        if old_codes[code] != new_codes[code]
    }
    return ConformanceDiff(added=added, removed=removed, by_code=by_code)


def _compare(a: _Side, b: _Side) -> BundleDiff:
    ma, mb = a.manifest, b.manifest
    added = [
        DocRef(id=d.id, title=d.title, url=d.url, section=d.section)
        for d in b.docs.values()
        if d.id not in a.docs
    ]
    removed = [
        DocRef(id=d.id, title=d.title, url=d.url, section=d.section)
        for d in a.docs.values()
        if d.id not in b.docs
    ]
    changed: list[DocChange] = []
    moved: list[SectionMove] = []
    unchanged = 0
    for new in b.docs.values():
        old = a.docs.get(new.id)
        if old is None:
            continue
        fields = [
            name
            for name, differs in (
                ("text", old.digest != new.digest),
                ("title", old.title != new.title),
                ("url", old.url != new.url),
                ("description", old.description != new.description),
                ("optional", old.optional != new.optional),
            )
            if differs
        ]
        if fields:
            changed.append(
                DocChange(
                    id=new.id,
                    title=new.title,
                    url=new.url,
                    changes=fields,
                    chunks=IntChange(old=old.chunks, new=new.chunks),
                    words=IntChange(old=_words(a, old.id), new=_words(b, new.id)),
                )
            )
        if old.section != new.section:
            moved.append(SectionMove(id=new.id, title=new.title, old=old.section, new=new.section))
        if not fields and old.section == new.section:
            unchanged += 1
    sections_a, sections_b = _sections(a), _sections(b)
    errors = []
    for doc_id in dict.fromkeys([*a.sources, *b.sources]):
        before, after = _state(a, doc_id), _state(b, doc_id)
        if "failed" in (before.state, after.state) and before != after:
            source = b.sources.get(doc_id) or a.sources[doc_id]
            errors.append(ErrorChange(id=doc_id, url=source.url, old=before, new=after))
    return BundleDiff(
        old=_ref(ma),
        new=_ref(mb),
        same_content=ma.build.content_hash == mb.build.content_hash,
        counts=CountsDiff(
            documents=IntChange(old=ma.counts.documents, new=mb.counts.documents),
            chunks=IntChange(old=ma.counts.chunks, new=mb.counts.chunks),
            words=IntChange(old=ma.counts.words, new=mb.counts.words),
            failed=IntChange(old=ma.counts.failed, new=mb.counts.failed),
        ),
        added=added,
        removed=removed,
        changed=changed,
        unchanged=unchanged,
        sections=SectionsDiff(
            added=[s for s in sections_b if s not in sections_a],
            removed=[s for s in sections_a if s not in sections_b],
            moved=moved,
        ),
        conformance=_conformance(ma.source.conformance, mb.source.conformance),
        errors=errors,
        tools=_tools(ma.build.tools, mb.build.tools),
    )


def _tools(old: dict[str, str], new: dict[str, str]) -> list[ToolChange]:
    """The tools named at another version, or by one bundle only, by name."""
    return [
        ToolChange(name=name, old=old.get(name, ""), new=new.get(name, ""))
        for name in sorted(old.keys() | new.keys())
        if old.get(name) != new.get(name)
    ]


def diff_bundles(old: Path, new: Path) -> BundleDiff:
    """Verify and compare two bundles (each a bundle directory or a version directory)."""
    return _compare(_load(old), _load(new))


def encode_diff(diff: BundleDiff) -> str:
    """The diff as one indented JSON object."""
    return msgspec.json.format(msgspec.json.encode(diff), indent=2).decode() + "\n"


# -- the readable report ----------------------------------------------------------------------------


def _more(lines: list[str], total: int) -> None:
    if total > SHOWN:
        lines.append(f"    ... and {total - SHOWN} more (see --json)")


def _section(name: str) -> str:
    return name or "(no section)"


def _page_state(s: PageState) -> str:
    if s.state == "failed":
        return f"failed ({s.kind or 'error'}): {s.error}"
    return "not listed" if s.state == "absent" else "indexed"


def render_diff(d: BundleDiff) -> str:
    """The diff as the readable report ``docbundle-index diff`` prints."""
    lines = [f"docbundle-index diff: {d.old.bundle} → {d.new.bundle}"]
    if d.same_content:
        lines.append(f"  same content hash {d.new.content_hash[:12]}: the indexed documents are identical")
    else:
        lines.append(f"  content hash {d.old.content_hash[:12]} → {d.new.content_hash[:12]}")
    lines += ["", "counts"]
    counts = (
        ("documents", d.counts.documents),
        ("chunks", d.counts.chunks),
        ("words", d.counts.words),
        ("failed pages", d.counts.failed),
    )
    width = max(len(str(n)) for _, change in counts for n in (change.old, change.new))
    for name, change in counts:
        delta = change.new - change.old
        shown = f"  ({delta:+d})" if delta else ""
        lines.append(f"  {name:<13} {change.old:>{width}} → {change.new:>{width}}{shown}")

    lines += [
        "",
        f"documents: {len(d.added)} added, {len(d.removed)} removed, {len(d.changed)} changed, "
        f"{len(d.sections.moved)} moved, {d.unchanged} unchanged",
    ]
    for ref in d.added[:SHOWN]:
        lines.append(f"  + {ref.id}  {ref.title!r}  [{_section(ref.section)}]")
    _more(lines, len(d.added))
    for ref in d.removed[:SHOWN]:
        lines.append(f"  - {ref.id}  {ref.title!r}  [{_section(ref.section)}]")
    _more(lines, len(d.removed))
    for ch in d.changed[:SHOWN]:
        lines.append(
            f"  ~ {ch.id}  {ch.title!r}  ({', '.join(ch.changes)}; chunks {ch.chunks.old} → {ch.chunks.new}, "
            f"words {ch.words.old} → {ch.words.new})"
        )
    _more(lines, len(d.changed))
    for mv in d.sections.moved[:SHOWN]:
        lines.append(f"  > {mv.id}  {mv.title!r}  section {_section(mv.old)} → {_section(mv.new)}")
    _more(lines, len(d.sections.moved))

    if d.sections.added or d.sections.removed:
        lines += ["", "sections"]
        lines += [f"  + {_section(s)}" for s in d.sections.added]
        lines += [f"  - {_section(s)}" for s in d.sections.removed]

    c = d.conformance
    if c.added or c.removed:
        lines += ["", f"llms.txt conformance: {len(c.added)} new finding(s), {len(c.removed)} gone"]
        lines += [f"  {code:<24} {n.old} → {n.new}" for code, n in c.by_code.items()]
        lines += [f"  + line {f.line}: {f.code}: {f.message}" for f in c.added[:SHOWN]]
        _more(lines, len(c.added))
        lines += [f"  - line {f.line}: {f.code}: {f.message}" for f in c.removed[:SHOWN]]
        _more(lines, len(c.removed))

    if d.tools:
        lines += ["", f"toolchain: {len(d.tools)} changed"]
        lines += [f"  {t.name} {t.old or '(not named)'} → {t.new or '(not named)'}" for t in d.tools]

    if d.errors:
        lines += ["", f"page errors: {len(d.errors)} changed"]
        for e in d.errors[:SHOWN]:
            lines.append(f"  ! {e.id}: {_page_state(e.old)} → {_page_state(e.new)}")
        _more(lines, len(d.errors))
    return "\n".join(lines) + "\n"
