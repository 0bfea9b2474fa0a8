"""The index writer: fed pre-analysed fields, it must write exactly what whoosh itself would."""

from __future__ import annotations

import io
import itertools
import os
import pickle
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from buildkit import record_worker_starts
from docbundle.bundle import whooshio
from docbundle.bundle.reader import verify_bundle
from docbundle.bundle.routing import read_record, record_of_directory
from docbundle.bundle.schema import INDEX_DIR, INDEX_NAME, make_schema
from docbundle.bundle.whooshio import encoding
from docbundle.indexer.pipeline import prepare, write
from docbundle.indexer.pipeline.chunk import chunk_markdown, parse_page
from docbundle.indexer.pipeline.prepare import PageJob, prepare_all, prepare_page
from docbundle.indexer.pipeline.prepare import job as prepare_job
from docbundle.indexer.pipeline.prepare import pool as prepare_pool
from hypothesis import given, settings
from hypothesis import strategies as st
from treekit import build
from whoosh import formats
from whoosh.codec.whoosh3 import W3Codec, W3TermInfo
from whoosh.filedb.filestore import FileStorage
from whoosh.filedb.structfile import StructFile
from whoosh.system import pack_int, pack_long

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


def _many_jobs() -> list[PageJob]:
    """Pages enough for terms of several 128-posting blocks and for the forked encoder to have work."""
    rng = random.Random(7)
    words = [f"w{i}" for i in range(300)]
    jobs = []
    for i in range(300):
        paras = [
            " ".join(rng.choices(words, weights=[1 / (k + 1) for k in range(300)], k=40)) for _ in range(3)
        ]
        text = f"# Page {i}\n\n{paras[0]}\n\n## Part\n\n{paras[1]}\n\n```py\n{paras[2]}\n```\n"
        jobs.append(PageJob(text, False, f"Page {i}", f"p{i}.md", f"S{i % 3}", False, 3, 5, 500))
    return jobs


def _add_all(w: write.IndexWriter, prepared: list[prepare.Prepared]) -> None:
    for docnum, p in enumerate(p for p in prepared if p.chunks):
        for ci, analysed in enumerate(p.analysed):
            w.add(analysed, docnum, ci)


def _whoosh_reference(slow: Path, jobs: list[PageJob], prepared: list[prepare.Prepared]) -> dict[str, bytes]:
    """The index whoosh's own ``add_document`` writes for these pages, file by file."""
    (slow / INDEX_DIR).mkdir(parents=True)
    state = random.getstate()
    random.seed("s")
    try:
        ix = _StableStorage(str(slow / INDEX_DIR)).create_index(make_schema(), indexname=INDEX_NAME)
        writer = ix.writer(limitmb=256)
        indexed = [(job, p) for job, p in zip(jobs, prepared, strict=True) if p.chunks]
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
    return _files(slow)


@pytest.mark.parametrize("jobs", [_jobs, _many_jobs], ids=["small", "multi-block"])
def test_analysed_writer_is_byte_identical_to_whoosh_add_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: Callable[[], list[PageJob]]
) -> None:
    monkeypatch.setattr(encoding, "PARALLEL_MIN_POSTINGS", 10**12)  # this process alone
    prepared = [prepare_page(j) for j in jobs()]
    fast = tmp_path / "fast"
    fast.mkdir()
    w = write.IndexWriter(fast, seed="s")
    _add_all(w, prepared)
    w.commit()
    assert _files(fast) == _whoosh_reference(tmp_path / "slow", jobs(), prepared)
    assert w.count == sum(len(p.chunks) for p in prepared)


# Run in a fresh interpreter, which has one thread (the forked encoder needs one): build the index of
# the pickled pages with the forked encoder on, print how many children it forked.
_FORKED_BUILD = """
import os, pickle, sys
from pathlib import Path
from docbundle.bundle.whooshio import encoding
from docbundle.indexer.pipeline import write

encoding.PARALLEL_MIN_POSTINGS = 1
parent = os.getpid()
forks = []
real_fork = os.fork


def fork():
    pid = real_fork()
    if pid:
        forks.append(pid)
    return pid


os.fork = fork
if sys.argv[3] == "child-fails":
    real_encode = encoding._encode_terms

    def encode(*args):
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        return real_encode(*args)

    encoding._encode_terms = encode
prepared = pickle.loads(Path(sys.argv[1]).read_bytes())
w = write.IndexWriter(Path(sys.argv[2]), seed="s")
for docnum, p in enumerate(p for p in prepared if p.chunks):
    for ci, analysed in enumerate(p.analysed):
        w.add(analysed, docnum, ci)
w.commit()
print(len(forks))
"""


@pytest.mark.parametrize("mode", ["child-works", "child-fails"])
def test_forked_block_encoding_is_byte_identical_to_whoosh(tmp_path: Path, mode: str) -> None:
    # Half the terms are encoded in a forked child; a child that fails is replaced by this process.
    # Either way the bytes are whoosh's own.
    jobs = _many_jobs()
    prepared = [prepare_page(j) for j in jobs]
    pages = tmp_path / "prepared.pickle"
    pages.write_bytes(pickle.dumps(prepared))
    fast = tmp_path / "fast"
    fast.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _FORKED_BUILD, str(pages), str(fast), mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    assert ("forked block encoder failed" in done.stderr) == (mode == "child-fails")
    assert _files(fast) == _whoosh_reference(tmp_path / "slow", jobs, prepared)


_FORMATS = [formats.Positions(), formats.Frequency(), formats.Existence()]


@st.composite
def _term_postings(draw: st.DrawFn) -> tuple[formats.Format, list[tuple[int, float, bytes, int]]]:
    fmt = draw(st.sampled_from(_FORMATS))
    n = draw(st.integers(1, 400))
    gaps = draw(st.lists(st.integers(1, 5000), min_size=n, max_size=n))
    docnums = list(itertools.accumulate(gaps, initial=draw(st.integers(0, 1000))))[1:]
    weight = st.one_of(st.integers(1, 20).map(float), st.floats(0.0, 1e6, allow_nan=False))
    weights = draw(st.lists(weight, min_size=n, max_size=n))
    value = st.binary(max_size=12) if fmt.fixed_value_size() is None else st.binary(min_size=4, max_size=4)
    values = draw(st.lists(value, min_size=n, max_size=n))
    # whoosh's term info cannot mix blocks with and without field lengths; a field has them or not
    length = st.integers(1, 200_000) if draw(st.booleans()) else st.just(0)
    lengths = draw(st.lists(length, min_size=n, max_size=n))
    return fmt, list(zip(docnums, weights, values, lengths, strict=True))


@settings(max_examples=150, deadline=None)
@given(_term_postings())
def test_block_encoding_equals_whoosh_postings_writer(term: tuple[Any, list[Any]]) -> None:
    fmt, postings = term
    stream = io.BytesIO()
    writer = W3Codec().postings_writer(StructFile(stream))
    writer.start_postings(fmt, W3TermInfo())
    for docnum, weight, value, length in postings:
        writer.add_posting(docnum, weight, value, length)
    terminfo = writer.finish_postings()
    block, [(start, length, info)] = encoding._encode_terms([(fmt.fixed_value_size(), postings)], 128, 3)
    assert block == stream.getvalue()
    assert (start, length) == terminfo.extent() == (0, len(block))
    assert info + pack_long(start) + pack_int(length) == terminfo.to_bytes()


T = TypeVar("T")


def _not_in_this_process(values: dict[str, str]) -> prepare.Analysed:
    raise AssertionError("a page was prepared in the test process, not in a worker")


def test_workers_give_the_same_result_as_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = _jobs() * 6
    monkeypatch.setattr(prepare_pool, "PARALLEL_MIN_BYTES", 0)
    serial = list(prepare_all(jobs, workers=0))
    pids = record_worker_starts(monkeypatch)
    # Workers import the module afresh (forkserver/spawn), so this patch binds only here: a page
    # prepared in this process fails, one prepared in a worker does not.
    monkeypatch.setattr(prepare_job, "_analyse", _not_in_this_process)
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
    assert prepare_job._analyse({field: text})[field] == (items, length)


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
    bundle = build(
        tmp_path / "libraries.toml", tmp_path / "out", '[[library]]\nid = "r"\nllms_txt = "site/llms.txt"\n'
    ).bundle
    manifest = verify_bundle(bundle)
    written = read_record(bundle, manifest)
    assert written is not None and written.terms
    assert written == record_of_directory(bundle, manifest.counts.chunks)


def test_a_document_that_fails_halfway_leaves_an_index_that_can_only_be_cancelled(tmp_path: Path) -> None:
    # The writer keeps every posting, field length and column value in memory until the commit, and
    # whoosh's cancel_doc undoes none of them: after a document failed halfway the index is wrong, so
    # it must refuse more documents and its commit, and a cancel must leave nothing behind.
    docs = [a for p in prepare_all(_jobs(), 0) for a in p.analysed]
    assert len(docs) >= 2
    (tmp_path / INDEX_DIR).mkdir()
    builder = whooshio.SegmentBuilder(tmp_path / INDEX_DIR, make_schema(), INDEX_NAME, "seed")
    builder.add(docs[0], {"doc": 0, "chunk": 0})
    with pytest.raises(KeyError):
        # its analysed fields go in first, then a stored field the schema does not have
        builder.add(docs[1], {"doc": 1, "chunk": 0, "zz-not-a-field": 1})
    with pytest.raises(RuntimeError, match="cancel it"):
        builder.add(docs[1], {"doc": 1, "chunk": 0})
    with pytest.raises(RuntimeError, match="cancel it"):
        builder.commit()
    builder.cancel()
    left = sorted(p.name for p in (tmp_path / INDEX_DIR).iterdir())
    assert not any(name.endswith(".seg") for name in left), left  # no segment was written
    assert f"_{INDEX_NAME}_1.toc" not in left, left  # only the empty index of create_index


def test_only_the_last_builds_index_writer_is_kept(tmp_path: Path) -> None:
    # The last index writer is kept past its build (its postings are not freed when the build ends:
    # a process that exits next never pays for it). Any later build frees it first, so a run of many
    # libraries holds at most one finished writer, never one per library.
    import gc
    import weakref

    from docbundle.indexer.pipeline import build as pipeline

    site = tmp_path / "site"
    site.mkdir()
    for i, text in enumerate(PAGES[:3]):
        (site / f"p{i}.md").write_text(text, encoding="utf-8")
    listing = "".join(f"- [Page {i}](p{i}.md)\n" for i in range(3))
    (site / "llms.txt").write_text(f"# Site\n\n## Docs\n\n{listing}", encoding="utf-8")
    config = '[[library]]\nid = "{}"\nllms_txt = "site/llms.txt"\n'
    build(tmp_path / "one.toml", tmp_path / "out", config.format("one"))
    assert len(pipeline._retired) == 1
    first = weakref.ref(pipeline._retired[0])
    build(tmp_path / "two.toml", tmp_path / "out", config.format("two"))
    gc.collect()
    assert first() is None  # freed when the second build began
    assert len(pipeline._retired) == 1 and pipeline._retired[0] is not None
