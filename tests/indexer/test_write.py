"""The index writer: fed pre-analysed fields, it must write exactly what whoosh itself would."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import TypeVar

import pytest
from buildkit import build_bundle, record_worker_starts
from docbundle.bundle.reader import verify_bundle
from docbundle.bundle.routing import read_record, record_of_directory
from docbundle.bundle.schema import INDEX_DIR, INDEX_NAME, make_schema
from docbundle.indexer.pipeline import prepare, write
from docbundle.indexer.pipeline.chunk import chunk_markdown, parse_page
from docbundle.indexer.pipeline.prepare import PageJob, prepare_all, prepare_page
from hypothesis import given, settings
from hypothesis import strategies as st
from whoosh.filedb.filestore import FileStorage

PAGES = [
    "# Hooks\n\nRunning effects with `useEffect`.\n\n## Cleanup\n\n```js\nreturn () => off();\n```\n",
    "---\ntitle: Tables\n---\n\nRows of sap.m.Table, bound to a JSONModel.\n\n## Columns\n\nHeaders.\n",
    "# 결제위젯\n\n결제위젯을 연동하는 방법.\n\n## 결제 요청\n\n승인 과정.\n",
    "",
]


def _jobs() -> list[PageJob]:
    return [
        PageJob(t, False, f"Page {i}", f"p{i}.md", "Guides", False, 3, 5, 500) for i, t in enumerate(PAGES)
    ]


class _StableStorage(FileStorage):  # type: ignore[misc]
    """whoosh's own storage with mtime 0 in compound segments, as the writer records it."""

    def file_modified(self, name: str) -> float:
        return 0.0


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((d / INDEX_DIR).iterdir())}


def test_analysed_writer_is_byte_identical_to_whoosh_add_document(tmp_path: Path) -> None:
    prepared = [prepare_page(j) for j in _jobs()]
    fast = tmp_path / "fast"
    fast.mkdir()
    w = write.IndexWriter(fast, seed="s")
    for docnum, p in enumerate(p for p in prepared if p.chunks):
        for ci, analysed in enumerate(p.analysed):
            w.add(analysed, docnum, ci)
    w.commit()

    slow = tmp_path / "slow"
    (slow / INDEX_DIR).mkdir(parents=True)
    state = random.getstate()
    random.seed("s")
    try:
        ix = _StableStorage(str(slow / INDEX_DIR)).create_index(make_schema(), indexname=INDEX_NAME)
        writer = ix.writer(limitmb=256)
        indexed = [(job, p) for job, p in zip(_jobs(), prepared, strict=True) if p.chunks]
        for docnum, (job, p) in enumerate(indexed):
            chunks = chunk_markdown(parse_page(job.text).body, min_words=job.min_words)
            assert [c.text for c in chunks] == [c.text for c in p.chunks]
            for ci, chunk in enumerate(chunks):
                writer.add_document(
                    title=p.title,
                    headings=" \u203a ".join(chunk.heading_path),
                    body=chunk.plain,
                    code=chunk.code,
                    section=job.section,
                    doc=docnum,
                    chunk=ci,
                )
        writer.commit(optimize=True)
        ix.close()
    finally:
        random.setstate(state)
    for lock in (slow / INDEX_DIR).glob("*LOCK"):
        lock.unlink()
    assert _files(fast) == _files(slow)
    assert w.count == sum(len(p.chunks) for p in prepared)


T = TypeVar("T")


def _not_in_this_process(values: dict[str, str]) -> prepare.Analysed:
    raise AssertionError("a page was prepared in the test process, not in a worker")


def test_workers_give_the_same_result_as_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = _jobs() * 6
    monkeypatch.setattr(prepare, "PARALLEL_MIN_BYTES", 0)
    serial = list(prepare_all(jobs, workers=0))
    pids = record_worker_starts(monkeypatch)
    # Workers import the module afresh (forkserver/spawn), so this patch binds only here: a page
    # prepared in this process fails, one prepared in a worker does not.
    monkeypatch.setattr(prepare, "_analyse", _not_in_this_process)
    parallel = list(prepare_all(jobs, workers=2))
    assert 1 <= len(pids) <= 2 and os.getpid() not in pids
    assert parallel == serial
    assert [bool(p.chunks) for p in serial] == [True, True, True, False] * 6


def test_a_page_title_comes_from_the_link_then_the_page() -> None:
    job = PageJob(
        "---\ntitle: From page\n---\n\nText here.\n", False, "From link", "x.md", "", False, 3, 5, 500
    )
    assert prepare_page(job).title == "From link"
    assert prepare_page(PageJob(job.text, False, "", "x.md", "", False, 3, 5, 500)).title == "From page"
    folder = PageJob(job.text, False, "x", "x.md", "", True, 3, 5, 500)
    assert prepare_page(folder).title == "From page"
    bare = PageJob("Just text.\n", False, "", "x.md", "", False, 3, 5, 500)
    assert prepare_page(bare).title == "x.md"


@settings(max_examples=200, deadline=None)
@given(st.text(), st.sampled_from(["title", "headings", "body", "code", "section"]))
def test_fast_analysis_equals_whoosh_field_index(text: str, field: str) -> None:
    schema = make_schema()
    items = list(schema[field].index(text))
    length = sum(f for _, f, _, _ in items) if schema[field].scorable else 0
    assert prepare._analyse({field: text})[field] == (items, length)


def test_routing_record_from_memory_equals_the_one_read_from_the_index(tmp_path: Path) -> None:
    # The build takes the routing record's document frequencies from the postings still in memory;
    # it must be exactly what the committed index yields when read back (as derive_record reads it).
    site = tmp_path / "site"
    site.mkdir()
    pages = [
        *PAGES[:3],
        "# Both\n\nuseEffect in body, `useEffect` in code; 결제 again.\n\n## Tables\n\nRows.\n",
    ]
    for i, text in enumerate(pages):
        (site / f"p{i}.md").write_text(text, encoding="utf-8")
    listing = "".join(f"- [Page {i}](p{i}.md)\n" for i in range(len(pages)))
    (site / "llms.txt").write_text(f"# Site\n\n## Docs\n\n{listing}", encoding="utf-8")
    bundle = build_bundle(
        tmp_path / "libraries.toml", tmp_path / "out", '[[library]]\nid = "r"\nllms_txt = "site/llms.txt"\n'
    )
    manifest = verify_bundle(bundle)
    written = read_record(bundle, manifest)
    assert written is not None and written.terms
    assert written == record_of_directory(bundle, manifest.counts.chunks)
