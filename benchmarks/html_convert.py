"""Speed of ``convert_html`` (parse + main-content extraction + conversion) on the HTML corpora.

Usage::

    taskset -c 0 python benchmarks/html_convert.py --corpora ../shared/corpora [--sets html-python ...]
        [--rounds 3] [--profile html-python]

For each corpus folder (``html-python``, ``html-rustbook``, ``html-postgres`` by default) it reads every
``*.html`` page, decodes it with ``decode_html`` (not timed) and converts every page ``--rounds`` times
in this one process, keeping the best round. It prints, per corpus: pages, mean page size, pages/s and
MB/s of HTML. ``--profile NAME`` also prints the top of a cProfile of one round on that corpus. It
prints figures only and asserts nothing (the target, >= 150 pages/s per corpus on one core, is read by
a person).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

from docbundle.indexer.pipeline.html import CONVERTER_ID, convert_html, decode_html

DEFAULT_SETS = ("html-python", "html-rustbook", "html-postgres")


def load(folder: Path) -> list[tuple[str, str]]:
    pages = []
    for path in sorted(folder.rglob("*.html")):
        rel = path.relative_to(folder).as_posix()
        pages.append((f"https://docs.example.org/{folder.name}/{rel}", decode_html(path.read_bytes(), None)))
    return pages


def one_round(pages: list[tuple[str, str]]) -> float:
    start = time.perf_counter()
    for url, html in pages:
        convert_html(html, url)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--corpora", type=Path, required=True, help="folder holding the HTML corpora")
    parser.add_argument("--sets", nargs="+", default=list(DEFAULT_SETS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", default=None, help="corpus to profile one round of")
    args = parser.parse_args(argv)
    print(CONVERTER_ID)
    print(f"{'corpus':<16}{'pages':>7}{'KB/page':>9}{'pages/s':>10}{'MB/s':>8}")
    for name in args.sets:
        folder = args.corpora / name
        if not folder.is_dir():
            print(f"{name:<16} missing: {folder}", file=sys.stderr)
            continue
        pages = load(folder)
        if not pages:
            print(f"{name:<16}{0:>7}")
            continue
        size = sum(len(html.encode()) for _url, html in pages)
        best = min(one_round(pages) for _ in range(max(1, args.rounds)))
        print(
            f"{name:<16}{len(pages):>7}{size / len(pages) / 1024:>9.1f}"
            f"{len(pages) / best:>10.1f}{size / best / 1e6:>8.2f}"
        )
        if args.profile == name:
            profiler = cProfile.Profile()
            profiler.enable()
            one_round(pages)
            profiler.disable()
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
            print(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
