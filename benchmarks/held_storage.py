"""Search through the held descriptors (what the server does) against whoosh's own file storage.

Usage::

    python benchmarks/held_storage.py BUNDLE_DIR [--queries FILE] [--repeat 3]

``BUNDLE_DIR`` is one built bundle (``<lib>/<version>/<buildId>``). The queries are the ``text = "..."``
lines of a golden TOML file (default ``benchmarks/queries/medium-en.toml``). For each storage it prints
the first search and the warm p50 / p99 over every query ``--repeat`` times, each storage with its own
searcher (cold posting cache). It also prints the time ``open_bundle`` takes (verify + hold). It prints
figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from docbundle.bundle import reader
from docbundle.bundle.search import BundleSearcher
from docbundle.bundle.store import DocStore

ROOT = Path(__file__).resolve().parents[1]


def _run(bundle: reader.Bundle, queries: list[str], label: str) -> None:
    searcher = BundleSearcher(bundle)
    t0 = time.perf_counter()
    searcher.search(queries[0])
    first = (time.perf_counter() - t0) * 1000
    times = []
    for q in queries:
        t = time.perf_counter()
        searcher.search(q)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    p50, p99 = times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))]
    print(
        f"  {label:<32} first {first:6.1f} ms   p50 {p50:5.2f} ms   p99 {p99:6.2f} ms   ({len(times)} searches)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--queries", type=Path, default=ROOT / "benchmarks" / "queries" / "medium-en.toml")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    texts = re.findall(r'^text\s*=\s*"(.*)"\s*$', args.queries.read_text(encoding="utf-8"), re.M)
    queries = (texts or ["install configuration"]) * args.repeat
    t = time.perf_counter()
    held = reader.open_bundle(args.bundle)
    print(f"{args.bundle.name}: open_bundle (verify + hold) {(time.perf_counter() - t) * 1000:.1f} ms")
    _run(held, queries, "held descriptors (pread)")
    held.close()
    manifest = reader.verify_bundle(args.bundle)
    by_path = reader.Bundle(
        args.bundle, manifest, DocStore(args.bundle), reader.open_index(args.bundle, use_mmap=False)
    )
    _run(by_path, queries, "by path (whoosh FileStorage)")
    by_path.close()


if __name__ == "__main__":
    main()
