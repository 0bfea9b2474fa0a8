"""What semantic search costs (issue 21): hybrid latency, server memory, an incremental rebuild, bundle size.

Usage::

    python benchmarks/semantic_cost.py --corpora DIR --bundles DIR [--cache DIR]
                                       [--skip latency,rss,rebuild,size] [--searches 1000]

``--bundles`` is a folder of bundles WITH vectors: medium-en, large-en, ko, zh and ja are built there
once (library id = corpus folder name) by ``benchmarks/quality.py``'s ``ensure_bundles``, that is by
the project's build over a loopback crawl, with the semantic extra installed, so each build embeds.
``--cache`` (``semantic_quality.py``'s vector cache) lets that first build take the vectors of passages
already embedded there instead of embedding them again: the cache holds the model's own output for the
same embedder identity and passage text, so the bundle is the same as without it. Then it prints, each
beside its target:

1. **latency**: warm searches on large-en through the server's own search (``Docs.search``, as the
   ``search_documents`` tool runs it: every call encodes its query), ``fulltext`` and ``hybrid`` on
   the same questions (generated from the bundle as ``serve_bench.py`` does, plus large-en's dev
   questions), p50/p99 of each, and the hybrid parts timed alone: encoding one query, scoring every
   section's vector and ranking pages, the keyword side at the fusion's depth;
2. **rss**: VmRSS of the stdio server (``python -m docbundle.server serve``) after ``--searches``
   ``search_documents`` calls in its default mode over the five libraries (``serve_bench.py``'s
   reading; the mode that ran is checked to be hybrid first);
3. **rebuild**: large-en with 1% of its pages changed (every 100th page of its llms.txt gets one
   more paragraph, after its title), served on 127.0.0.1, built by ``docbundle-index build`` into a copy of the
   bundles folder, so the previous bundle's vectors are reused: chunks embedded and reused, the
   embedding's and the build's wall time;
4. **size**: each bundle's files with and without ``vectors.bin``.

It prints figures and asserts nothing.
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import serve_bench as sb  # noqa: E402  (benchmarks/ is not a package)
from quality import QUERIES_DIR, bundles_parser, ensure_bundles, load_queries  # noqa: E402

TARGETS = {"p50": 30.0, "p99": 60.0, "rss": 260.0}  # ms, ms, MB (issue 21)
CHANGED_EVERY = 100  # one page in a hundred is changed for the rebuild


# --------------------------------------------------------------------------------------------------
# the bundles, built with vectors


class CachedEmbedder:
    """The project's embedder, answering passages already in ``semantic_quality.py``'s vector cache from
    it (the model's own float32 rows, keyed by identity + passage text) and embedding the others."""

    def __init__(self, inner: Any, cache: Any) -> None:
        self.inner = inner
        self.cache = cache
        self.embedded = 0

    @property
    def identity(self) -> Any:
        return self.inner.identity

    def token_count(self, text: str, query: bool = False) -> int:
        return int(self.inner.token_count(text, query))

    def passages(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> Any:
        import numpy as np
        from docbundle.bundle.embed import text_key

        keys = [text_key(self.identity, t) for t in texts]
        todo = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self.cache.vec}.items())
        if todo:
            self.cache.add([k for k, _ in todo], self.inner.passages([t for _, t in todo]))
            self.embedded += len(todo)
        if progress is not None:
            progress(len(texts))
        return np.stack([self.cache.vec[k] for k in keys]).astype(np.float32)

    def query(self, text: str) -> Any:
        return self.inner.query(text)


def build_with_vectors(
    corpora: Path, bundles: Path, cache: Path | None, libraries: list[str]
) -> dict[str, Path]:
    """The libraries' bundles with vectors, built into ``bundles`` unless there already."""
    if cache is not None:
        from docbundle.bundle.embed import load_embedder
        from docbundle.indexer.pipeline import semantic
        from semantic_quality import VectorCache, cache_folder

        inner = load_embedder()
        cached = CachedEmbedder(inner, VectorCache(cache_folder(cache, inner)))
        semantic._embedder = lambda: (cached, None)  # type: ignore[assignment]
    paths = ensure_bundles(corpora, bundles, libraries)
    from docbundle.bundle.reader import read_manifest

    for lib, path in paths.items():
        if read_manifest(path).vectors is None:
            raise SystemExit(f"{lib}: the bundle at {path} has no vectors (is the semantic extra installed?)")
    return paths


# --------------------------------------------------------------------------------------------------
# (1) latency


def bench_latency(bundles: Path, main: str, queries: list[str], passes: int) -> None:
    """Warm fulltext and hybrid searches on large-en through ``Docs.search``, then hybrid's parts."""
    from docbundle.bundle.vectors import rank_documents
    from docbundle.server import semantic
    from docbundle.server.catalog import Catalog
    from docbundle.server.docs import Docs
    from docbundle.server.hits import PER_DOC

    catalog = Catalog.load(bundles)
    docs = Docs(catalog)
    embedder = catalog.encoder.get()
    if embedder is None:
        raise SystemExit(f"the query encoder did not load: {catalog.encoder.problem()}")
    times: dict[str, list[float]] = {"fulltext": [], "hybrid": []}
    for mode in times:  # warm-up pass: the searcher's caches, the vector file's pages
        for q in queries:
            ran = docs.search(q, library_id=main, mode=mode).result.mode  # type: ignore[arg-type]
            if ran != ("balanced" if mode == "fulltext" else mode):
                raise SystemExit(f"{mode} asked for, {ran} ran")
    for _ in range(passes):
        for q in queries:
            for mode, out in times.items():
                t0 = time.perf_counter()
                docs.search(q, library_id=main, mode=mode)  # type: ignore[arg-type]
                out.append(1000 * (time.perf_counter() - t0))
    lib = catalog.open(main)
    vf = lib.bundle.vector_file()
    parts: dict[str, list[float]] = {"encode": [], "score": [], "rank": [], "keyword": []}
    for q in queries:
        t0 = time.perf_counter()
        v = catalog.encoder.encode(embedder, q).vector
        t1 = time.perf_counter()
        s = vf.scores(v)
        t2 = time.perf_counter()
        rank_documents(s, lib.searcher.starts, semantic.hybrid.DEPTH)
        t3 = time.perf_counter()
        lib.searcher.search(q, mode="balanced", limit=semantic.hybrid.DEPTH * PER_DOC, per_doc=PER_DOC)
        t4 = time.perf_counter()
        for key, a, b in (("encode", t0, t1), ("score", t1, t2), ("rank", t2, t3), ("keyword", t3, t4)):
            parts[key].append(1000 * (b - a))
    catalog.close()
    print(
        f"(1) warm search on {main} ({vf.rows} sections with vectors) through Docs.search, "
        f"{len(queries)} questions × {passes} passes after a warm-up pass, limit 5 (the tool's default)"
    )
    for mode, ms in times.items():
        p50, p99 = sb._pct(ms, 50), sb._pct(ms, 99)
        extra = ""
        if mode == "hybrid":
            extra = (
                f"  (target p50 ≤ {TARGETS['p50']:g} ms: {sb._verdict(p50, TARGETS['p50'])}; "
                f"p99 ≤ {TARGETS['p99']:g} ms: {sb._verdict(p99, TARGETS['p99'])})"
            )
        print(f"  {mode:<8} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  mean {statistics.fmean(ms):6.2f} ms{extra}")
    print("  hybrid's parts, one call each per question (p50 / p99 ms):")
    for key, ms in parts.items():
        print(f"    {key:<8} {sb._pct(ms, 50):6.2f} / {sb._pct(ms, 99):6.2f}")


# --------------------------------------------------------------------------------------------------
# (2) memory of the stdio server


def bench_rss(bundles: Path, main: str, per_lib: dict[str, list[str]], searches: int) -> None:
    """serve_bench's stdio RSS reading, after checking that the server's default mode is hybrid."""
    cmd = sb.server_command(bundles, None)
    server = sb.StdioServer(cmd)
    try:
        server.handshake()
        server.wait_for(server._init_id)
        answer = server.call("search_documents", {"query": per_lib[main][0], "libraryId": main})
    finally:
        server.close()
    text = json.dumps(answer)
    if '"mode": "hybrid"' not in text and '\\"mode\\": \\"hybrid\\"' not in text:
        print(f"(2) the stdio server's default mode is not hybrid here: {text[:400]}")
        return
    print(
        f"(2) the stdio server's default mode checked: hybrid; issue 21's target: VmRSS ≤ {TARGETS['rss']:g} MB"
    )
    sb.bench_server_rss(cmd, per_lib, searches)


# --------------------------------------------------------------------------------------------------
# (3) a rebuild of large-en with 1% of its pages changed


def _pages(corpus: Path) -> list[str]:
    """The relative links of a corpus's llms.txt (its pages), in order."""
    text = (corpus / "llms.txt").read_text(encoding="utf-8")
    return [m for m in re.findall(r"\]\(([^)\s]+)\)", text) if (corpus / m).is_file()]


def _revised(page: str, n: int) -> str:
    """A page with one paragraph added at the start of its body (after its front matter and a leading
    title line), so its first section changes within the 256 tokens its vector is made from."""
    head = ""
    if page.startswith("---\n") and (end := page.find("\n---\n", 4)) > 0:
        head, page = page[: end + 5], page[end + 5 :]
    if page.startswith("#"):
        first, _, page = page.partition("\n")
        head += first + "\n"
    return (
        f"{head}\nRevised for the rebuild benchmark ({n}): this page changed since the last build.\n\n{page}"
    )


def bench_rebuild(corpora: Path, bundles: Path, main: str) -> None:
    """Change every CHANGED_EVERY-th page of large-en, rebuild with the CLI over a copy of the bundles."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from docbundle.bundle.reader import read_manifest
    from sitesrv import Site, run_site

    corpus = corpora / main
    pages = _pages(corpus)
    changed = pages[::CHANGED_EVERY]
    site = Site()
    site.serve_dir(corpus)
    for n, rel in enumerate(changed):
        site.add("/" + rel, _revised((corpus / rel).read_text(encoding="utf-8"), n))
    cli = Path(sys.executable).with_name("docbundle-index")
    with tempfile.TemporaryDirectory(prefix="docbundle-rebuild-") as tmp, run_site(site) as base:
        out = Path(tmp) / "bundles"
        shutil.copytree(bundles / main, out / main, symlinks=True)
        config = Path(tmp) / "libraries.toml"
        config.write_text(
            f'[[library]]\nid = "{main}"\nname = "{main}"\nllms_txt = "{base}/llms.txt"\n', encoding="utf-8"
        )
        t0 = time.perf_counter()
        argv = [
            str(cli),
            "build",
            "--config",
            str(config),
            "--out",
            str(out),
            "--json",
            "--quiet",
            "--no-cache",
        ]
        run = subprocess.run(argv, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if run.returncode != 0:
            print(f"(3) rebuild failed ({run.returncode}): {run.stderr[-1500:]}")
            return
        report = json.loads(run.stdout)
        current = (out / main / "latest" / "CURRENT").read_text(encoding="utf-8").strip()
        info = read_manifest(out / main / "latest" / current).vectors
    outcome = _find_outcome(report)
    print(
        f"(3) rebuild of {main} with {len(changed)} of {len(pages)} pages changed "
        f"(every {CHANGED_EVERY}th), `docbundle-index build` over the previous bundle"
    )
    if info is None:
        print("  the new bundle has no vectors")
        return
    print(
        f"  chunks embedded {info.embedded}, reused {info.reused} (of {info.rows}); "
        f"embedding (reuse included) {outcome.get('embed_seconds', float('nan')):.1f} s, "
        f"whole build {outcome.get('build_seconds', float('nan')):.1f} s, command wall {wall:.1f} s"
    )


def _find_outcome(report: Any) -> dict[str, Any]:
    """The (only) library outcome of a build report, wherever the report nests it."""
    if isinstance(report, dict):
        if "embed_seconds" in report:
            return report
        items = list(report.values())
    elif isinstance(report, list):
        items = report
    else:
        return {}
    for item in items:
        found = _find_outcome(item)
        if found:
            return found
    return {}


# --------------------------------------------------------------------------------------------------
# (4) size


def bench_size(paths: dict[str, Path]) -> None:
    """Each bundle's bytes (the files its manifest lists) with and without vectors.bin."""
    from docbundle.bundle.reader import read_manifest
    from docbundle.bundle.vectors import VECTORS_FILE

    print("(4) bundle size (files the manifest lists)")
    print(
        f"  {'library':<10} {'sections':>8} {'without vectors':>16} {'vectors.bin':>12} {'with':>10} {'growth':>7}"
    )
    for lib, path in paths.items():
        m = read_manifest(path)
        total = sum(f.size for f in m.files)
        vec = sum(f.size for f in m.files if f.path == VECTORS_FILE)
        print(
            f"  {lib:<10} {m.counts.chunks:>8} {(total - vec) / 1e6:>13.2f} MB {vec / 1e6:>9.2f} MB "
            f"{total / 1e6:>7.2f} MB {vec / max(total - vec, 1) * 100:>6.1f}%"
        )


# --------------------------------------------------------------------------------------------------


def main() -> int:
    """Build or reuse the bundles with vectors and print every figure beside its target."""
    ap = bundles_parser(__doc__.splitlines()[0], "bundles with vectors: built once, reused when present")
    ap.add_argument("--cache", type=Path, help="semantic_quality.py's vector cache, for the first build")
    ap.add_argument("--searches", type=int, default=1000, help="tools/call before the RSS reading")
    ap.add_argument("--passes", type=int, default=3, help="timed passes over the latency questions")
    ap.add_argument("--per-kind", type=int, default=20, help="generated latency questions per kind")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: latency,rss,rebuild,size")
    ap.add_argument(
        "--main", default=sb.MAIN, help=f"library of the latency and rebuild figures (default {sb.MAIN})"
    )
    ap.add_argument(
        "--libraries",
        nargs="+",
        default=list(sb.LIBRARIES),
        help=f"libraries to build and serve (default: {' '.join(sb.LIBRARIES)})",
    )
    args = ap.parse_args()
    if args.corpora is None:
        ap.error("give --corpora or set DOCBUNDLE_SHARED")
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    args.bundles.mkdir(parents=True, exist_ok=True)
    paths = build_with_vectors(args.corpora, args.bundles, args.cache, args.libraries)
    print(f"bundles: {', '.join(f'{k} ({v.name})' for k, v in paths.items())}", flush=True)
    if "latency" not in skip:
        qs = [q for _, q in sb.make_queries(paths[args.main], seed=args.seed, per_kind=args.per_kind)]
        qfile = QUERIES_DIR / f"{args.main}.toml"
        qs += [q.text for q in load_queries(qfile, "dev")] if qfile.is_file() else []
        bench_latency(args.bundles, args.main, qs, args.passes)
    if "rss" not in skip:
        per_lib = {
            lib: [
                q for _, q in sb.make_queries(p, seed=args.seed + i, per_kind=25, english=lib.endswith("-en"))
            ]
            for i, (lib, p) in enumerate(paths.items())
        }
        bench_rss(args.bundles, args.main, per_lib, args.searches)
    if "rebuild" not in skip:
        bench_rebuild(args.corpora, args.bundles, args.main)
    if "size" not in skip:
        bench_size(paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
