"""Crawl + build benchmark: serve a corpus folder on 127.0.0.1 and build it cold, then warm.

Usage: python benchmarks/crawl_build.py --corpora ../shared/corpora medium-en large-en

For each corpus it prints, for a cold run (empty crawl cache, no previous bundle) and a warm run (cache
filled, bundle present, nothing changed): crawl seconds and pages/s, build (parse + chunk + hash + index
+ write) seconds and pages/s, and the whole run's seconds. It asserts nothing. It measures the build
without embedding (``DOCBUNDLE_EMBED=0`` unless set): with the semantic extra installed a cold large-en
would embed 5,500 sections for half an hour; ``benchmarks/semantic_cost.py`` measures that. Pages are
prepared while the crawl runs (``prepare.Ahead``; the line says how many), so "build" is what is left
after the crawl, and "total" the whole run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("DOCBUNDLE_EMBED", "0")
sys.path.insert(0, str(ROOT / "tests"))

from docbundle.bundle.reader import verify_bundle  # noqa: E402
from docbundle.indexer.config import load_config  # noqa: E402
from docbundle.indexer.pipeline.build import Outcome, build_target  # noqa: E402
from docbundle.indexer.pipeline.cache import CrawlCache  # noqa: E402
from sitesrv import Site, run_site  # noqa: E402


def _run(config: Path, out: Path, cache: CrawlCache) -> tuple[Outcome, float]:
    catalogue = load_config(config)
    (target,) = catalogue.targets(catalogue.libraries[0])
    t0 = time.perf_counter()
    outcome = build_target(target, out, cache=cache)
    return outcome, time.perf_counter() - t0


def _line(label: str, o: Outcome, total: float) -> str:
    pages = o.pages_fetched or o.documents
    crawl_rate = pages / o.crawl_seconds if o.crawl_seconds else float("inf")
    if o.status == "unchanged":
        build = f"build skipped (nothing changed) {o.build_seconds:5.2f} s"
    else:
        build = f"build {o.build_seconds:6.2f} s = {o.documents / max(o.build_seconds, 1e-9):7.1f} pages/s"
    return (
        f"  {label:<5} {o.status:<9} pages={pages:5d} (304: {o.pages_not_modified:5d}, failed: {o.pages_failed}) "
        f"crawl {o.crawl_seconds:6.2f} s = {crawl_rate:7.1f} pages/s | {build} | total {total:6.2f} s | "
        f"docs={o.documents} chunks={o.chunks} prepared during the crawl={o.prepared_ahead}"
    )


def bench(corpus: Path) -> None:
    """Benchmark one corpus folder (it must hold llms.txt)."""
    site = Site()
    site.serve_dir(corpus)
    with run_site(site) as base, tempfile.TemporaryDirectory(prefix="docbundle-bench-") as tmp:
        work = Path(tmp)
        config = work / "libraries.toml"
        config.write_text(f'[[library]]\nid = "bench"\nllms_txt = "{base}/llms.txt"\n', encoding="utf-8")
        cache = CrawlCache(work / "cache")
        out = work / "bundles"
        print(f"{corpus.name}: served from {base}")
        cold, cold_total = _run(config, out, cache)
        print(_line("cold", cold, cold_total))
        warm, warm_total = _run(config, out, cache)
        print(_line("warm", warm, warm_total))
        if cold.bundle:
            t0 = time.perf_counter()
            verify_bundle(Path(cold.bundle))
            size = sum(p.stat().st_size for p in Path(cold.bundle).rglob("*") if p.is_file())
            print(
                f"  bundle {size / 1e6:.1f} MB, verify (sha256 of every file) {1000 * (time.perf_counter() - t0):.0f} ms"
            )
        if cold.status != "built" or warm.status != "unchanged":
            print(
                f"  unexpected statuses: cold={cold.status} ({cold.message}) warm={warm.status} ({warm.message})"
            )


def main() -> int:
    """Run the benchmark for each named corpus."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", type=Path, required=True, help="folder holding the corpus folders")
    ap.add_argument("names", nargs="+", help="corpus folder names, e.g. medium-en large-en")
    args = ap.parse_args()
    for name in args.names:
        corpus = args.corpora / name
        if not (corpus / "llms.txt").is_file():
            print(f"{name}: no llms.txt under {corpus}; skipped", file=sys.stderr)
            continue
        bench(corpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())
