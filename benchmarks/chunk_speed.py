"""Measure parse_page + chunk_markdown speed and chunk sizes over a folder of .md / .mdx pages.

Usage: python benchmarks/chunk_speed.py PAGES_DIR [--repeat N] [--max-depth D] [--min-words N] [--max-words N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from docbundle.indexer.pipeline.chunk import chunk_markdown, parse_page


def main(argv: list[str] | None = None) -> int:
    """Parse and chunk every page under a folder and print throughput and chunk statistics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", type=Path)
    parser.add_argument("--repeat", type=int, default=3, help="timed passes; the best one is reported")
    parser.add_argument("--max-depth", type=int, default=3)
    parser.add_argument("--min-words", type=int, default=60)
    parser.add_argument("--max-words", type=int, default=500)
    args = parser.parse_args(argv)

    paths = sorted(p for p in args.pages.rglob("*") if p.is_file() and p.suffix in (".md", ".mdx"))
    if not paths:
        print(f"no .md/.mdx pages under {args.pages}", file=sys.stderr)
        return 1
    # Decode up front so the timing covers parsing and chunking only.
    pages = [(p.read_text(encoding="utf-8", errors="replace"), p.suffix == ".mdx") for p in paths]
    size_mb = sum(len(text.encode("utf-8")) for text, _ in pages) / 1e6

    best = best_cpu = float("inf")
    words: list[int] = []
    for _ in range(max(args.repeat, 1)):
        words = []
        t0 = time.perf_counter()
        c0 = time.process_time()
        for text, mdx in pages:
            page = parse_page(text, mdx=mdx)
            chunks = chunk_markdown(
                page.body,
                max_depth=args.max_depth,
                min_words=args.min_words,
                max_words=args.max_words,
                mdx=page.mdx,
            )
            words.extend(c.words for c in chunks)
        best = min(best, time.perf_counter() - t0)
        # CPU time as well: on a shared machine wall time mostly measures the neighbours.
        best_cpu = min(best_cpu, time.process_time() - c0)

    n_mdx = sum(mdx for _, mdx in pages)
    print(f"pages      {len(pages)} ({n_mdx} mdx), {size_mb:.1f} MB")
    print(f"time       {best:.3f} s wall, {best_cpu:.3f} s CPU (best of {max(args.repeat, 1)})")
    print(f"speed      {len(pages) / best:.0f} pages/s, {size_mb / best:.2f} MB/s (wall)")
    print(f"           {len(pages) / best_cpu:.0f} pages/s, {size_mb / best_cpu:.2f} MB/s (CPU)")
    print(f"chunks     {len(words)} ({len(words) / len(pages):.1f} per page)")
    if words:
        over = sum(w > args.max_words for w in words)
        under = sum(w < args.min_words for w in words)
        print(
            f"words      mean {statistics.fmean(words):.0f}, median {statistics.median(words):.0f}, "
            f"max {max(words)}; {over} chunks > max_words, {under} < min_words"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
