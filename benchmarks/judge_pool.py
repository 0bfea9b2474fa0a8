"""Pooled judging worksheets (issue 36, item 1): the pages keyword, dense and hybrid search find that a set
has not graded yet, question by question, for a judge to read and grade.

Usage::

    python benchmarks/judge_pool.py --corpora DIR --bundles DIR --cache DIR
                                    [--sets large-en-more ko-more] [--corpus large-en ko] [--out DIR]

For each query set (``--sets``, or every set under ``benchmarks/queries`` whose corpus is one of
``--corpus``), its corpus bundle is built or reused under ``--bundles`` and every section of it is
embedded through the vector cache under ``--cache`` (``benchmarks/semantic_quality.py``'s ``corpora_of``,
``load_corpus``, ``embed_missing`` and ``VectorCache``: a cached corpus embeds nothing; an uncached one
takes as long as ``semantic_quality.py embed``). Each question then runs through the three systems of
``semantic_quality.prepare_set``: ``keyword`` (today's balanced ranking, ``quality.py``'s ``ours``),
``vector`` (the query vector against EVERY section of the corpus, the int8 vector file a build would
write, pages by their best section) and ``hybrid`` (the server's own ranking over that file, with the α,
K and depth of ``docbundle.bundle.hybrid``). The pool of a question is the union of the top 10 distinct
pages of each.

The worksheet ``<out>/<set>.toml`` (default ``benchmarks/judging``) lists, per question in the set's
order, the pooled pages the set does NOT grade yet (a page graded 0 counts as judged), best rank first:
each with its title, the heading path and a short excerpt of its section closest to the question (by the
dense similarity; the dense side scores every section), and ``found``: the rank at which each system
found it. Its ``summary`` (also printed) gives the pooled pages per question and how many are unjudged.
The judge adds each page to the question's ``relevant`` table in the set file, on the set's scale
(0 = looked at, not relevant). The same inputs give the same file. It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from quality import QUERIES_DIR, K, Query, default_corpora, load_queries, set_corpus  # noqa: E402
from semantic_quality import (  # noqa: E402  (benchmarks/ is not a package)
    _CACHE_ROOT,
    Corpus,
    SetRun,
    VectorCache,
    cache_folder,
    corpora_of,
    embed_missing,
    load_corpus,
    prepare_set,
    query_vector,
)

SYSTEMS = ("keyword", "vector", "hybrid")
EXCERPT = 240  # characters of a section shown


@dataclass
class Pooled:
    """One pooled page of one question: the rank (1-based) at which each system found it."""

    doc: str
    found: dict[str, int] = field(default_factory=dict)

    def order(self) -> tuple[int, int, str]:
        """Best rank first, then the first system that found it there, then the page id."""
        best = min(self.found.values())
        first = min(SYSTEMS.index(s) for s, r in self.found.items() if r == best)
        return (best, first, self.doc)


def system_lists(run: SetRun, qid: str) -> dict[str, list[str]]:
    """The top 10 distinct pages of each system for one question."""
    return {
        "keyword": run.keyword[qid][:K],
        "vector": run.vector["int8"][qid][:K],
        "hybrid": run.served[qid][:K],
    }


def pool(lists: dict[str, list[str]]) -> list[Pooled]:
    """The union of the systems' lists, each page with the ranks it was found at, best first."""
    pages: dict[str, Pooled] = {}
    for system in SYSTEMS:
        for rank, doc in enumerate(lists.get(system, []), start=1):
            pages.setdefault(doc, Pooled(doc)).found.setdefault(system, rank)
    return sorted(pages.values(), key=Pooled.order)


class Sections:
    """Title, heading path and text of the section of a page closest to a question (dense similarity)."""

    def __init__(self, corpus: Corpus, cache: VectorCache, embedder: Any) -> None:
        import numpy as np
        from docbundle.bundle.reader import open_bundle

        self.np = np
        self.corpus, self.cache, self.embedder = corpus, cache, embedder
        self.record = {d: i for i, d in enumerate(corpus.doc_ids)}
        self.bundle = open_bundle(corpus.bundle, use_mmap=False)

    def close(self) -> None:
        """Close the bundle."""
        self.bundle.close()

    def best(self, text: str, doc: str) -> tuple[str, str, str]:
        """(title, heading path, excerpt) of ``doc``'s section closest to ``text``."""
        n = self.record[doc]
        rec = self.bundle.store.get(n)
        if not rec.chunks:
            return rec.title, "", ""
        start = self.corpus.starts[n]
        qv = query_vector(self.embedder, self.cache, text)
        sims = [
            float(self.np.dot(self.cache.vec[self.corpus.keys[start + i]], qv))
            for i in range(len(rec.chunks))
        ]
        chunk = rec.chunks[max(range(len(sims)), key=lambda i: (sims[i], -i))]
        path = " > ".join(h for h in chunk.heading_path if h)
        return rec.title, path, excerpt(chunk.text)


def excerpt(text: str, size: int = EXCERPT) -> str:
    """The first ``size`` characters of ``text`` on one line, its leading heading lines left out (the
    heading path is shown beside it), cut at a word with … when cut."""
    lines = text.splitlines()
    while lines and (not lines[0].strip() or re.match(r"\s*#{1,6}\s", lines[0])):
        lines.pop(0)
    flat = re.sub(r"\s+", " ", "\n".join(lines) or text).strip()
    if len(flat) <= size:
        return flat
    cut = flat[:size]
    space = cut.rfind(" ")
    return (cut[:space] if space > size // 2 else cut).rstrip() + " …"


def _s(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; non-ASCII kept as is)."""
    return json.dumps(value, ensure_ascii=False)


def worksheet(
    name: str, corpus: str, queries: list[Query], run: SetRun, sections: Sections
) -> tuple[str, str]:
    """The worksheet text of one set, and its summary line."""
    from docbundle.bundle import hybrid

    body: list[str] = []
    pooled_counts, unjudged_counts = [], []
    for q in queries:
        pages = pool(system_lists(run, q.id))
        todo = [p for p in pages if p.doc not in q.relevant]
        pooled_counts.append(len(pages))
        unjudged_counts.append(len(todo))
        body += ["", "[[query]]", f"id = {_s(q.id)}", f"text = {_s(q.text)}"]
        body += [f"{key} = {_s(getattr(q, key))}" for key in ("need", "split") if getattr(q, key)]
        body.append(f"pooled = {len(pages)}")
        body.append(f"unjudged = {len(todo)}")
        for p in todo:
            title, path, text = sections.best(q.text, p.doc)
            found = ", ".join(f"{s} = {p.found[s]}" for s in SYSTEMS if s in p.found)
            body += [
                "",
                "[[query.page]]",
                f"id = {_s(p.doc)}",
                f"title = {_s(title)}",
                f"section = {_s(path)}",
                f"excerpt = {_s(text)}",
                f"found = {{ {found} }}",
            ]
    n = len(queries)
    total, unjudged = sum(pooled_counts), sum(unjudged_counts)
    summary = (
        f"{name}: {n} questions, {total} pooled pages ({total / n if n else 0:.1f} per question, "
        f"min {min(pooled_counts, default=0)}, max {max(pooled_counts, default=0)}), {unjudged} not graded yet "
        f"({unjudged / n if n else 0:.1f} per question, median {statistics.median(unjudged_counts or [0]):g}), "
        f"{total - unjudged} already graded"
    )
    head = [
        f"# Judging worksheet for {name}: written by benchmarks/judge_pool.py, read it, do not edit it.",
        f"# The pool of a question: the top {K} distinct pages of keyword (balanced), vector (dense over every",
        "# section of the corpus, int8) and hybrid (the server's ranking: alpha "
        f"{hybrid.ALPHA}, {hybrid.KOREAN_ALPHA} for a Korean question,",
        f"# K {hybrid.K}, {hybrid.DEPTH} pages a side). Listed: the pooled pages the set does not grade yet,"
        " best rank first; `found`",
        "# is each system's rank; `section` and `excerpt` are the page's section closest to the question"
        " (dense).",
        "# Grade each page in the set file's `relevant` table on its scale (0 = looked at, not relevant).",
        "",
        f"set = {_s(name)}",
        f"corpus = {_s(corpus)}",
        f"scale = {_s(queries[0].scale if queries else '1-2')}",
        f"summary = {_s(summary)}",
    ]
    return "\n".join(head + body) + "\n", summary


def main(argv: list[str] | None = None) -> int:
    """Build or reuse the bundles and vectors, pool every question and write the worksheets."""
    from docbundle.bundle.embed import load_embedder

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", type=Path, default=default_corpora(), help="folder holding the corpora")
    ap.add_argument("--bundles", type=Path, required=True, help="bundles folder to build into / reuse")
    ap.add_argument("--cache", type=Path, required=True, help="the vector cache (semantic_quality.py's)")
    ap.add_argument("--sets", nargs="+", default=[], help="query sets (file names under --queries)")
    ap.add_argument("--corpus", nargs="+", default=[], help="every set of these corpora")
    ap.add_argument("--queries", type=Path, default=QUERIES_DIR, help=argparse.SUPPRESS)  # tests
    ap.add_argument("--out", type=Path, default=HERE / "judging", help="worksheet folder")
    ap.add_argument("--threads", type=int, default=None, help="engine threads (default: all cores)")
    args = ap.parse_args(argv)
    if args.corpora is None:
        ap.error("give --corpora or set DOCBUNDLE_SHARED")
    every = sorted(p.stem for p in args.queries.glob("*.toml"))
    sets = list(dict.fromkeys(args.sets + [s for s in every if set_corpus(s, args.queries) in args.corpus]))
    if not sets:
        ap.error("name --sets or --corpus")
    args.sets = sets
    _CACHE_ROOT[:] = [args.cache]
    embedder = load_embedder(threads=args.threads)
    cache = VectorCache(cache_folder(args.cache, embedder))
    corpus_of = {s: set_corpus(s, args.queries) for s in sets}
    paths = corpora_of(args, list(corpus_of.values()))
    corpora: dict[str, Corpus] = {}
    args.out.mkdir(parents=True, exist_ok=True)
    summaries = []
    for name in sets:
        cname = corpus_of[name]
        if cname not in paths:
            print(f"{name}: no bundle of {cname}; skipped", file=sys.stderr)
            continue
        if cname not in corpora:
            corpora[cname] = load_corpus(cname, paths[cname], embedder)
            embed_missing(corpora[cname], embedder, cache)
        queries = load_queries(args.queries / f"{name}.toml")
        run = prepare_set(
            name, "all", corpora[cname], embedder, cache, args.cache / "vectors", K, queries=queries
        )
        sections = Sections(corpora[cname], cache, embedder)
        try:
            text, summary = worksheet(name, cname, queries, run, sections)
        finally:
            sections.close()
        path = args.out / f"{name}.toml"
        path.write_text(text, encoding="utf-8")
        print(f"{summary}  -> {path}", flush=True)
        summaries.append(summary)
    print("\n=== summary ===")
    print("\n".join(summaries) or "no set pooled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
