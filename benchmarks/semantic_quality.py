"""Hybrid search quality over the WHOLE corpus (issue 21): keyword, vector and fused nDCG@10 per set and split.

Usage::

    python benchmarks/semantic_quality.py embed --corpora DIR --bundles DIR --cache DIR
                                                [--sets zh ja large-en ko-real medium-en-real]
    python benchmarks/semantic_quality.py tune  --corpora DIR --bundles DIR --cache DIR [--save-runs DIR]
    python benchmarks/semantic_quality.py test  --corpora DIR --bundles DIR --cache DIR [--save-runs DIR]
    python benchmarks/semantic_quality.py speed --bundles DIR [--count 64] [--queries 100]

``embed`` builds (or reuses) each set's corpus bundle with ``benchmarks/quality.py``'s ``ensure_bundles``
and embeds EVERY chunk of it with the project's embedder (``docbundle.bundle.embed``): the passage is
``passage_text`` (title, heading path, text cut to 256 tokens; a Korean section without its markup). Vectors are cached under ``--cache``,
keyed by sha256(embedder identity + passage text), so a rerun embeds nothing and an interrupted run
goes on where it stopped. It prints passages/s (wall, both cores) and CPU seconds per passage.

``DOCBUNDLE_PLAIN_SCRIPTS`` (read by the benchmarks only, never by a build or the server) measures
another passage recipe: the scripts whose sections are embedded without markup, of ``embed.SCRIPTS``,
comma-separated (``hangul,han,kana``: recipe 3, Chinese and Japanese sections too; ``none``: recipe 1),
for every command here and ``judge_pool.py``. Its passage memo files are named by it, so no variant
reads another's texts; the vector cache is shared (equal texts, equal vectors). ``DOCBUNDLE_PASSAGE_TOKENS``
(16-512, default ``embed.PASSAGE_TOKENS``) measures another passage length the same way (``-tN`` in the
file names); ``fusion.py`` follows both.

``tune`` scores the DEV halves only. Per query: ``keyword`` is today's ``balanced`` ranking exactly as
``quality.py`` runs it (``ours``: limit 10, per_doc 1); ``vector`` scores the query vector against every
chunk of the corpus (``docbundle.bundle.vectors``: the int8 vector file the build would write, and
float32 beside it) and ranks pages by their best chunk; ``hybrid`` is the server's own ranking
(``docbundle.server.semantic.rank`` in mode ``hybrid`` over that vector file, with the α, K and depth of
``docbundle.bundle.hybrid``), checked against ``fuse`` of the two page lists. It prints each set's
nDCG@10 gain over keyword for the grid depth (pages per side) × α × K and the cell ``choose`` picks: no
set loses there nor at any α/K neighbour, then the best mean gain. ``test`` scores the TEST halves
once, with what the server runs. Both save runs in ``quality.py``'s ``--save-run`` format (one file per
ranker) under ``--save-runs``. Bundles missing under ``--bundles`` are built without vectors.

``speed`` times the query encoder (p50/p95 over dev questions, one thread and two) and passage
throughput on real chunks of large-en.

It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from quality import (  # noqa: E402  (benchmarks/ is not a package)
    QUERIES_DIR,
    K,
    Query,
    default_corpora,
    ensure_bundles,
    library_of,
    load_queries,
    ours,
    page_namer,
    score,
    set_corpus,
)

SETS = ("zh", "ja", "large-en", "ko-real", "medium-en-real")
ALPHAS = (0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85)
KS = (5, 10, 20, 30, 60)
DEPTHS = (10, 20, 50)  # pages each side brings to the fusion (a page beyond them: rank depth + 1)


# --------------------------------------------------------------------------------------------------
# the vector cache: sha256(identity + passage) -> float32 row


class VectorCache:
    """Passage vectors on disk: shard files of (keys, float32 rows), appended as embedding goes on."""

    def __init__(self, folder: Path) -> None:
        import numpy as np

        self.np = np
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.vec: dict[str, Any] = {}
        for shard in sorted(folder.glob("shard-*.npz")):
            data = np.load(shard)
            self.vec.update(zip([str(k) for k in data["keys"]], data["vecs"], strict=True))

    def add(self, keys: Sequence[str], rows: Any) -> None:
        """Keep ``rows`` under ``keys`` and write them as one new shard."""
        for k, v in zip(keys, rows, strict=True):
            self.vec[k] = v
        name = hashlib.sha256("".join(keys).encode("ascii")).hexdigest()[:16]
        tmp = self.folder / f"tmp-{name}.npz"
        self.np.savez(tmp, keys=self.np.array(list(keys)), vecs=self.np.asarray(rows, dtype=self.np.float32))
        os.replace(tmp, self.folder / f"shard-{name}.npz")


@dataclass
class Corpus:
    """Every chunk of one bundle: its passage text, cache key and page (row i = whoosh doc number i)."""

    name: str
    bundle: Path
    passages: list[str]
    keys: list[str]
    starts: list[int]  # first row of each store record (records with no chunk start where the next does)
    doc_ids: list[str]  # store record number -> document id
    recipe: str = ""  # the passage recipe's tag in file names (``passage_recipe``)


#: The benchmarks' switch for the passage recipe they measure (``passage_recipe``; not read by the server).
ENV_PLAIN_SCRIPTS = "DOCBUNDLE_PLAIN_SCRIPTS"
#: The benchmarks' switch for the passage length they measure, in model tokens (``passage_tokens``;
#: default ``embed.PASSAGE_TOKENS``; not read by a build or the server).
ENV_PASSAGE_TOKENS = "DOCBUNDLE_PASSAGE_TOKENS"


def passage_tokens() -> int:
    """The model tokens a passage is cut to in this run (``DOCBUNDLE_PASSAGE_TOKENS``, default
    ``embed.PASSAGE_TOKENS``)."""
    from docbundle.bundle.embed import PASSAGE_TOKENS

    value = os.environ.get(ENV_PASSAGE_TOKENS, "").strip()
    if not value:
        return PASSAGE_TOKENS
    if not value.isdigit() or not 16 <= int(value) <= 512:
        raise SystemExit(f"{ENV_PASSAGE_TOKENS}: want a whole number of tokens from 16 to 512, got {value!r}")
    return int(value)


def passage_recipe() -> tuple[frozenset[str], str]:
    """The scripts whose sections this run embeds without markup (``DOCBUNDLE_PLAIN_SCRIPTS``, default
    ``embed.PLAIN_SCRIPTS``) and the tag that names its files: ``-rN`` for recipe N of ``embed.RECIPES``
    (empty for recipe 1, whose memo files had no recipe in their name), else ``-plain-`` and the scripts."""
    from docbundle.bundle.embed import PLAIN_SCRIPTS, RECIPES, SCRIPTS

    value = os.environ.get(ENV_PLAIN_SCRIPTS, "").strip().lower()
    if not value:
        scripts = PLAIN_SCRIPTS
    elif value == "none":
        scripts = frozenset()
    else:
        scripts = frozenset(part.strip() for part in value.split(",") if part.strip())
        unknown = sorted(scripts - SCRIPTS.keys())
        if unknown:
            raise SystemExit(
                f"{ENV_PLAIN_SCRIPTS}: no script {', '.join(unknown)}; known: {', '.join(SCRIPTS)} (or none)"
            )
    from docbundle.bundle.embed import PASSAGE_TOKENS

    number = next((n for n, plain in RECIPES.items() if plain == scripts), None)
    # a passage length other than the build's names its files too
    tokens = "" if passage_tokens() == PASSAGE_TOKENS else f"-t{passage_tokens()}"
    if number is not None:
        return scripts, ("" if number == 1 else f"-r{number}") + tokens
    return scripts, "-plain-" + "+".join(sorted(scripts)) + tokens


def recipe_line() -> str:
    """What this run embeds, for its report: the scripts without markup and the recipe's tag."""
    plain, recipe = passage_recipe()
    return (
        f"passages: sections in {', '.join(sorted(plain)) or 'no script'} without markup, cut to "
        f"{passage_tokens()} tokens ({recipe or '-r1'})"
    )


def load_corpus(name: str, bundle_dir: Path, embedder: Any) -> Corpus:
    """Read every chunk of a bundle's docs store, in store order, and build its passage texts (of the
    recipe ``passage_recipe`` says)."""
    from docbundle.bundle.embed import passage_text, text_key
    from docbundle.bundle.reader import open_bundle

    identity = embedder.identity
    plain, recipe = passage_recipe()
    # the cut to 256 tokens tokenizes each chunk a few times: keep the texts beside the vectors, in a memo
    # file of this recipe
    memo = cache_dir_of(embedder) / f"passages-{identity.key()[:12]}{recipe}-{bundle_dir.name}.json"
    if memo.is_file():
        data = json.loads(memo.read_text(encoding="utf-8"))
        passages, starts, doc_ids = data["passages"], data["starts"], data["doc_ids"]
    else:
        passages, starts, doc_ids = [], [], []
        page = page_namer(name)
        bundle = open_bundle(bundle_dir, use_mmap=False)
        try:
            for rec in bundle.store:
                starts.append(len(passages))
                doc_ids.append(page(rec.id, rec.url))
                for c in rec.chunks:
                    passages.append(
                        passage_text(
                            rec.title,
                            c.heading_path,
                            c.text,
                            embedder.token_count,
                            passage_tokens(),
                            plain=plain,
                        )
                    )
        finally:
            bundle.close()
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(
            json.dumps({"passages": passages, "starts": starts, "doc_ids": doc_ids}), encoding="utf-8"
        )
    keys = [text_key(identity, p) for p in passages]
    return Corpus(name, bundle_dir, passages, keys, starts, doc_ids, recipe)


def cache_folder(cache: Path, embedder: Any) -> Path:
    """The cache folder of one embedder identity."""
    return cache / embedder.identity.key()[:16]


_CACHE_ROOT: list[Path] = []


def cache_dir_of(embedder: Any) -> Path:
    """The cache folder of this run's embedder (set from ``--cache`` by ``main``)."""
    return cache_folder(_CACHE_ROOT[0], embedder)


def corpora_of(args: argparse.Namespace, names: Sequence[str] | None = None) -> dict[str, Path]:
    """corpus name -> bundle dir (of ``names``, default the corpora of ``args.sets``), built or reused
    under ``--bundles``.

    A bundle missing there is built without vectors (``DOCBUNDLE_EMBED=0``): this script embeds the
    sections itself, through its cache, and a build would embed them all a second time."""
    names = list(dict.fromkeys(names if names is not None else [set_corpus(s) for s in args.sets]))
    os.environ["DOCBUNDLE_EMBED"] = "0"
    return ensure_bundles(args.corpora, args.bundles, names)


# --------------------------------------------------------------------------------------------------
# embed


def cmd_embed(args: argparse.Namespace) -> None:
    """Embed every chunk of every corpus not yet in the cache; print throughput."""
    from docbundle.bundle.embed import load_embedder

    embedder = load_embedder(threads=args.threads)
    print(f"embedder {embedder.identity} key {embedder.identity.key()[:16]}", flush=True)
    print(recipe_line(), flush=True)
    cache = VectorCache(cache_folder(args.cache, embedder))
    paths = corpora_of(args)
    # smallest corpora first, so the tuning can start on partial data if need be
    corpora = {n: load_corpus(n, p, embedder) for n, p in paths.items()}
    total_n, total_wall, total_cpu = 0, 0.0, 0.0
    for name in sorted(corpora, key=lambda n: len(corpora[n].keys)):
        n, wall, cpu = embed_missing(corpora[name], embedder, cache)
        total_n, total_wall, total_cpu = total_n + n, total_wall + wall, total_cpu + cpu
    if total_n:
        print(
            f"all: {total_n} passages, {total_wall:.0f} s wall ({total_n / total_wall:.2f}/s), "
            f"{total_cpu:.0f} s CPU",
            flush=True,
        )


def embed_missing(corpus: Corpus, embedder: Any, cache: VectorCache) -> tuple[int, float, float]:
    """Embed the chunks of ``corpus`` not yet in ``cache``; returns (passages embedded, wall s, CPU s)."""
    name = corpus.name
    todo = sorted(
        {k: p for k, p in zip(corpus.keys, corpus.passages, strict=True) if k not in cache.vec}.items(),
        key=lambda kp: (len(kp[1]), kp[0]),  # similar lengths in a batch keep both threads busy
    )
    print(f"{name}: {len(corpus.keys)} chunks, {len(todo)} to embed", flush=True)
    t0, c0 = time.perf_counter(), time.process_time()
    step = 128
    for start in range(0, len(todo), step):
        part = todo[start : start + step]
        rows = embedder.passages([p for _, p in part])
        cache.add([k for k, _ in part], rows)
        done = start + len(part)
        wall = time.perf_counter() - t0
        eta = wall / done * (len(todo) - done)
        print(f"  {name}: {done}/{len(todo)}  {done / wall:.2f}/s  eta {eta / 60:.1f} min", flush=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if todo:
        print(
            f"{name}: {len(todo)} passages in {wall:.1f} s wall ({len(todo) / wall:.2f}/s), "
            f"{cpu:.1f} s CPU ({cpu / len(todo) * 1000:.0f} ms CPU/passage)",
            flush=True,
        )
    return len(todo), wall, cpu


# --------------------------------------------------------------------------------------------------
# scoring: keyword, vector (int8 vector file and float32), hybrid


@dataclass
class SetRun:
    """Everything one query set needs to be scored under any (α, K, depth): the ranked page lists."""

    name: str
    queries: list[Query]
    keyword: dict[str, list[str]]  # query id -> today's balanced ranking, top 10 (quality.py's ``ours``)
    keyword_deep: dict[str, list[str]]  # the same ranking, ``depth`` pages: the fusion's keyword side
    vector: dict[str, dict[str, list[str]]]  # "int8" | "float32" -> query id -> pages by best chunk
    served: dict[str, list[str]]  # query id -> the server's own hybrid ranking (its α, K and depth)


def keyword_lists(bundle_dir: Path, queries: list[Query], depth: int) -> dict[str, list[str]]:
    """Today's ``balanced`` ranking of each query, ``depth`` distinct pages deep."""
    from docbundle.bundle.reader import open_bundle
    from docbundle.bundle.search import BundleSearcher

    bundle = open_bundle(bundle_dir, use_mmap=False)
    try:
        searcher = BundleSearcher(bundle)
        page = page_namer(library_of(bundle_dir))
        out = {}
        for q in queries:
            hits = searcher.search(q.text, limit=depth, per_doc=1, mode="balanced").hits
            recs = (bundle.store.get(h.doc) for h in hits)
            out[q.id] = list(dict.fromkeys(page(r.id, r.url) for r in recs))[:depth]
        return out
    finally:
        bundle.close()


def served_lists(
    bundle_dir: Path, vector_path: Path, queries: list[Query], vectors: dict[str, Any]
) -> dict[str, list[str]]:
    """Each query's top 10 pages from the server's hybrid ranking (``docbundle.server.semantic.rank``,
    with the α, K and depth of ``docbundle.bundle.hybrid``), over the vector file the build would write."""
    from types import SimpleNamespace

    from docbundle.bundle.query import Deadline
    from docbundle.bundle.reader import open_bundle
    from docbundle.bundle.search import BundleSearcher
    from docbundle.bundle.vectors import VectorFile
    from docbundle.server.semantic import rank

    bundle = open_bundle(bundle_dir, use_mmap=False)
    vf = VectorFile(vector_path)
    try:
        # The two parts of an opened library that ``rank`` reads: its searcher and its vector file.
        lib: Any = SimpleNamespace(
            searcher=BundleSearcher(bundle), bundle=SimpleNamespace(vector_file=lambda: vf)
        )
        page = page_namer(library_of(bundle_dir))
        out = {}
        for q in queries:
            ranking = rank(lib, "hybrid", q.text, [], K, 1, Deadline(), lambda _d, v=vectors[q.id]: v)
            recs = (bundle.store.get(doc) for _, doc, _ in ranking.hits)
            out[q.id] = list(dict.fromkeys(page(r.id, r.url) for r in recs))[:K]
        return out
    finally:
        vf.close()
        bundle.close()


def query_vector(embedder: Any, cache: VectorCache, text: str) -> Any:
    """A query's vector, cached like the passages (under the key of ``query: `` + text)."""
    from docbundle.bundle.embed import QUERY_PREFIX, text_key

    key = text_key(embedder.identity, QUERY_PREFIX + text)
    if key not in cache.vec:
        cache.add([key], embedder.query(text)[None, :])
    return cache.vec[key]


def prepare_set(
    set_name: str,
    split: str,
    corpus: Corpus,
    embedder: Any,
    cache: VectorCache,
    vec_dir: Path,
    depth: int,
    queries: list[Query] | None = None,
) -> SetRun:
    """Rank every query of one split both ways, over every chunk of the corpus (``queries``: the set's,
    read from ``benchmarks/queries`` when not given)."""
    import numpy as np
    from docbundle.bundle.vectors import VectorFile, rank_documents, write_vectors

    if queries is None:
        queries = load_queries(QUERIES_DIR / f"{set_name}.toml", split)
    rank, close = ours(corpus.bundle, per_doc=1)
    try:
        keyword = {q.id: rank(q.text) for q in queries}
    finally:
        close()
    keyword_deep = keyword_lists(corpus.bundle, queries, depth)
    missing = [k for k in corpus.keys if k not in cache.vec]
    if missing:
        raise SystemExit(f"{corpus.name}: {len(missing)} chunks not embedded yet; run `embed` first")
    f32 = np.stack([cache.vec[k] for k in corpus.keys]).astype(np.float32)
    vec_dir.mkdir(parents=True, exist_ok=True)
    path = vec_dir / f"{corpus.name}{corpus.recipe}.int8.bin"
    write_vectors(path, f32, embedder.identity.key(), "int8")
    vector: dict[str, dict[str, list[str]]] = {"int8": {}, "float32": {}}
    vectors = {q.id: query_vector(embedder, cache, q.text) for q in queries}
    with VectorFile(path) as vf:
        vf.check(len(corpus.keys), embedder.identity.key())
        for q in queries:
            qv = vectors[q.id]
            for kind, sims in (("int8", vf.scores(qv)), ("float32", f32 @ qv)):
                ranked = rank_documents(sims, corpus.starts, depth)
                vector[kind][q.id] = [corpus.doc_ids[d] for d, _ in ranked]
    served = served_lists(corpus.bundle, path, queries, vectors)
    return SetRun(set_name, queries, keyword, keyword_deep, vector, served)


def fused(run: SetRun, alpha: float | None, k: int, depth: int, kind: str = "int8") -> dict[str, list[str]]:
    """The hybrid ranking of every query of a set (``docbundle.bundle.hybrid.fuse``): top 10 pages.

    ``alpha`` None: each query's own, as served (``hybrid.alpha_for``)."""
    from docbundle.bundle.hybrid import alpha_for, fuse

    return {
        q.id: [
            d
            for d, _ in fuse(
                run.keyword_deep[q.id],
                run.vector[kind][q.id],
                alpha_for(q.text) if alpha is None else alpha,
                k,
                depth,
            )
        ][:K]
        for q in run.queries
    }


def mean_ndcg(run: SetRun, ranked: dict[str, list[str]]) -> float:
    """Mean nDCG@10 of a set's queries under one ranking."""
    return statistics.mean(score(q, ranked[q.id], 0.0).ndcg for q in run.queries)


def save_run(
    path: Path, split: str, mode: str, runs: list[SetRun], ranked: dict[str, dict[str, list[str]]]
) -> None:
    """Write per-query scores in quality.py's ``--save-run`` format."""
    sets: dict[str, dict[str, dict[str, object]]] = {}
    for run in runs:
        sets[run.name] = {}
        for q in run.queries:
            s = score(q, ranked[run.name][q.id], 0.0)
            sets[run.name][q.id] = {
                "ndcg": round(s.ndcg, 6),
                "mrr": round(s.mrr, 6),
                "recall": round(s.recall, 6),
                "kind": q.kind,
                "need": q.need,
                "split": q.split,
            }
    data = {"mode": mode, "per_doc": 1, "split": split, "sets": sets}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"run written to {path}", file=sys.stderr)


def prepare_all(args: argparse.Namespace, split: str) -> tuple[list[SetRun], Any]:
    """Load the embedder, the corpora and every set's rankings for one split."""
    from docbundle.bundle.embed import load_embedder

    embedder = load_embedder(threads=args.threads)
    cache = VectorCache(cache_folder(args.cache, embedder))
    paths = corpora_of(args)
    corpora: dict[str, Corpus] = {}
    runs = []
    for set_name in args.sets:
        name = set_corpus(set_name)
        if name not in corpora:
            corpora[name] = load_corpus(name, paths[name], embedder)
        runs.append(
            prepare_set(set_name, split, corpora[name], embedder, cache, args.cache / "vectors", max(DEPTHS))
        )
    return runs, embedder


def report(split: str, runs: list[SetRun], save: Path | None) -> None:
    """Print the keyword / vector / hybrid table of one split (hybrid: the server's ranking) and save the runs."""
    from docbundle.bundle import hybrid
    from docbundle.indexer.release.metrics import paired_test

    k, depth = hybrid.K, hybrid.DEPTH
    print(f"\n{recipe_line()}")
    print(
        f"\n=== {split} halves: nDCG@10 (hybrid as served: alpha {hybrid.ALPHA}, {hybrid.KOREAN_ALPHA} for a "
        f"Korean question, K {k}, {depth} pages per side) ==="
    )
    print(
        f"{'set':<16} {'n':>4} {'keyword':>8} {'vector f32':>10} {'vector int8':>10} {'hybrid f32':>10} {'hybrid':>8} {'delta':>7}  paired test hybrid vs keyword"
    )
    rows = []
    ranked_all: dict[str, dict[str, dict[str, list[str]]]] = {"keyword": {}, "vector": {}, "hybrid": {}}
    for run in runs:
        hyb = run.served
        # The served ranking and fuse() over the page lists must agree: else the grid measured another thing.
        direct = fused(run, None, k, depth)
        differ = sum(hyb[q.id] != direct[q.id] for q in run.queries)
        if differ:
            print(f"  {run.name}: the server's hybrid ranking differs from fuse() on {differ} queries")
        hyb32 = fused(run, None, k, depth, "float32")
        kw = mean_ndcg(run, run.keyword)
        d32 = mean_ndcg(run, {i: v[:K] for i, v in run.vector["float32"].items()})
        d8 = mean_ndcg(run, {i: v[:K] for i, v in run.vector["int8"].items()})
        h32, h8 = mean_ndcg(run, hyb32), mean_ndcg(run, hyb)
        test = paired_test(
            [score(q, run.keyword[q.id], 0.0).ndcg for q in run.queries],
            [score(q, hyb[q.id], 0.0).ndcg for q in run.queries],
        )
        print(
            f"{run.name:<16} {len(run.queries):>4} {kw:8.3f} {d32:10.3f} {d8:10.3f} {h32:10.3f} {h8:8.3f} {h8 - kw:+7.3f}  p = {test.p:.3f}, {test.better} better, {test.worse} worse"
        )
        rows.append((kw, d32, d8, h32, h8))
        ranked_all["keyword"][run.name] = run.keyword
        ranked_all["vector"][run.name] = {i: v[:K] for i, v in run.vector["int8"].items()}
        ranked_all["hybrid"][run.name] = hyb
    means = [statistics.mean(c) for c in zip(*rows, strict=True)]
    print(
        f"{'mean of sets':<16} {'':>4} {means[0]:8.3f} {means[1]:10.3f} {means[2]:10.3f} {means[3]:10.3f} {means[4]:8.3f} {means[4] - means[0]:+7.3f}"
    )
    if save is not None:
        for mode, ranked in ranked_all.items():
            save_run(save / f"semantic-{split}-{mode}.json", split, mode, runs, ranked)


def choose(gains: dict[tuple[int, float, int], list[float]]) -> tuple[int, float, int]:
    """The (depth, α, K) to serve, from each cell's nDCG@10 gains over keyword per set.

    A cell qualifies when no set loses there NOR at any α/K neighbour of the grid (same depth): a
    setting whose neighbours lose is a spike of a few dev questions, not a gain. Among those, the best
    mean gain (ties: higher α, then smaller K); when none qualifies, the best worst-set gain.
    """

    def neighbours(cell: tuple[int, float, int]) -> list[tuple[int, float, int]]:
        depth, alpha, k = cell
        ai, ki = ALPHAS.index(alpha), KS.index(k)
        return [
            (depth, ALPHAS[i], KS[j])
            for i in range(max(0, ai - 1), min(len(ALPHAS), ai + 2))
            for j in range(max(0, ki - 1), min(len(KS), ki + 2))
        ]

    steady = [c for c in gains if all(min(gains[n]) >= 0 for n in neighbours(c))]
    if steady:
        return max(steady, key=lambda c: (round(statistics.mean(gains[c]), 9), c[1], -c[2]))
    return max(gains, key=lambda c: (round(min(gains[c]), 9), c[1], -c[2]))


def cmd_tune(args: argparse.Namespace) -> None:
    """Grid over depth, α and K on the dev halves; print it, the setting it picks, and the served table."""
    from docbundle.bundle import hybrid

    runs, _ = prepare_all(args, "dev")
    base = [mean_ndcg(r, r.keyword) for r in runs]
    print("\n=== dev halves: hybrid (int8) nDCG@10 gain over keyword (x 1000) per (depth, alpha, K) ===")
    print(
        f"{'depth':>5} {'alpha':>5} {'K':>3} "
        + " ".join(f"{r.name:>14}" for r in runs)
        + f" {'mean':>6} {'min':>6}"
    )
    gains: dict[tuple[int, float, int], list[float]] = {}
    for depth in DEPTHS:
        for alpha in ALPHAS:
            for k in KS:
                per = [mean_ndcg(r, fused(r, alpha, k, depth)) - b for r, b in zip(runs, base, strict=True)]
                gains[(depth, alpha, k)] = per
                print(
                    f"{depth:>5} {alpha:>5} {k:>3} "
                    + " ".join(f"{v * 1000:+14.0f}" for v in per)
                    + f" {statistics.mean(per) * 1000:+6.0f} {min(per) * 1000:+6.0f}"
                )
    depth, alpha, k = choose(gains)
    print(
        f"\nchosen on dev: depth {depth}, alpha {alpha}, K {k} (gains {', '.join(f'{g:+.3f}' for g in gains[(depth, alpha, k)])}); "
        f"served (docbundle.bundle.hybrid): depth {hybrid.DEPTH}, alpha {hybrid.ALPHA}, K {hybrid.K}"
    )
    report("dev", runs, args.save_runs)


def cmd_test(args: argparse.Namespace) -> None:
    """Score the test halves once, with the server's hybrid ranking (the α, K and depth chosen on dev)."""
    runs, _ = prepare_all(args, "test")
    report("test", runs, args.save_runs)


# --------------------------------------------------------------------------------------------------
# speed


def _speed_child(args: argparse.Namespace) -> None:
    """In a fresh process (the engine reads its thread count once): time queries and passages."""
    import numpy as np
    from docbundle.bundle.embed import load_embedder
    from docbundle.bundle.vectors import VectorFile, rank_documents, write_vectors

    t0 = time.perf_counter()
    embedder = load_embedder(threads=args.threads)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    key = embedder.identity.key()
    ident_s = time.perf_counter() - t0
    texts = [q.text for s in args.sets for q in load_queries(QUERIES_DIR / f"{s}.toml", "dev")][
        : args.queries
    ]
    first = time.perf_counter()
    embedder.query(texts[0])
    first_ms = 1000 * (time.perf_counter() - first)
    ms = []
    for t in texts:
        t0 = time.perf_counter()
        embedder.query(t)
        ms.append(1000 * (time.perf_counter() - t0))
    ms.sort()
    print(
        f"threads {args.threads}: load {load_s * 1000:.0f} ms, identity (weights sha256) {ident_s * 1000:.0f} ms, "
        f"first query {first_ms:.1f} ms, query p50 {ms[len(ms) // 2]:.1f} ms, p95 {ms[int(len(ms) * 0.95)]:.1f} ms "
        f"over {len(ms)} dev questions"
    )
    paths = ensure_bundles(args.corpora, args.bundles, ["large-en"], quiet=True)
    corpus = load_corpus("large-en", paths["large-en"], embedder)
    sample = corpus.passages[: args.count]
    t0, c0 = time.perf_counter(), time.process_time()
    embedder.passages(sample)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    tokens = sum(embedder.token_count(p) for p in sample)
    print(
        f"threads {args.threads}: {len(sample)} large-en passages ({tokens / len(sample):.0f} tokens mean) in "
        f"{wall:.1f} s: {len(sample) / wall:.2f} passages/s wall, {cpu / len(sample) * 1000:.0f} ms CPU/passage"
    )
    if args.cache is not None:
        cache = VectorCache(cache_folder(args.cache, embedder))
        if all(k in cache.vec for k in corpus.keys):
            f32 = np.stack([cache.vec[k] for k in corpus.keys])
            path = args.cache / "vectors" / "large-en.int8.bin"
            path.parent.mkdir(parents=True, exist_ok=True)
            write_vectors(path, f32, key)
            with VectorFile(path) as vf:
                qv = embedder.query(texts[0])
                times = []
                for _ in range(200):
                    t0 = time.perf_counter()
                    rank_documents(vf.scores(qv), corpus.starts, 50)
                    times.append(1000 * (time.perf_counter() - t0))
                times.sort()
                print(
                    f"threads {args.threads}: score {vf.rows} int8 rows + rank pages: p50 {times[100]:.2f} ms, "
                    f"p99 {times[198]:.2f} ms"
                )


def cmd_speed(args: argparse.Namespace) -> None:
    """Query encode latency and passage throughput, one fresh process per thread count (1, 2)."""
    import subprocess

    if os.environ.get("SEMANTIC_SPEED_CHILD"):
        _speed_child(args)
        return
    for threads in (1, 2):
        argv = [sys.executable, __file__, "speed", "--bundles", str(args.bundles), "--threads", str(threads)]
        argv += ["--count", str(args.count), "--queries", str(args.queries), "--sets", *args.sets]
        if args.corpora is not None:
            argv += ["--corpora", str(args.corpora)]
        if args.cache is not None:
            argv += ["--cache", str(args.cache)]
        subprocess.run(argv, check=True, env={**os.environ, "SEMANTIC_SPEED_CHILD": "1"})


def main() -> int:
    """Parse the command line and run one step."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for cmd in ("embed", "tune", "test", "speed"):
        p = sub.add_parser(cmd)
        p.add_argument("--corpora", type=Path, default=default_corpora())
        p.add_argument("--bundles", type=Path, required=True)
        p.add_argument("--cache", type=Path, required=cmd != "speed")
        p.add_argument("--sets", nargs="+", default=list(SETS))
        p.add_argument("--threads", type=int, default=None, help="engine threads (default: all cores)")
        p.add_argument("--save-runs", type=Path, help="folder for quality.py-format run files")
        if cmd == "speed":
            p.add_argument("--count", type=int, default=64)
            p.add_argument("--queries", type=int, default=100)
    args = ap.parse_args()
    _CACHE_ROOT.append(args.cache or Path(tempfile.mkdtemp(prefix="semantic-quality-")))
    if args.cmd != "speed" and args.corpora is None:
        ap.error("give --corpora or set DOCBUNDLE_SHARED")
    {"embed": cmd_embed, "tune": cmd_tune, "test": cmd_test, "speed": cmd_speed}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
