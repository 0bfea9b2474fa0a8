"""Measure parse_page + chunk_markdown CPU over folders of pages, and check that chunks stay identical.

Usage:
    python benchmarks/chunk_speed.py PAGES_DIR [PAGES_DIR ...] [--repeat N] [--ext md mdx html txt]
                                     [--max-depth D] [--min-words N] [--max-words N]
                                     [--save FILE | --check FILE]

Every ``.md`` / ``.mdx`` file under each folder is parsed and chunked as the build does
(``parse_page(text, mdx=...)`` then ``chunk_markdown(page.body, ...)``; ``.mdx`` by suffix). With
``--ext ... html``, ``.html`` pages are converted to markdown first (outside the timing) and chunked
too; ``.txt`` files (llms-full.txt) are read as markdown. Per folder it prints pages, the best wall and CPU seconds (``time.process_time``: on a shared machine
wall time mostly measures the neighbours), pages/s and chunk sizes.

``--save FILE`` writes every page's parse result and chunks (every field) to FILE; ``--check FILE``
compares the current code's output with a saved file and lists the pages that differ (exit status 1
if any does). Save with the old code, change the chunker, then check::

    python benchmarks/chunk_speed.py ../shared/corpora/*/pages ../shared/corpora/html-rustbook \\
        --ext md mdx html --repeat 1 --save chunks-before.pickle
    python benchmarks/chunk_speed.py ../shared/corpora/*/pages ../shared/corpora/html-rustbook \\
        --ext md mdx html --repeat 3 --check chunks-before.pickle
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from docbundle.indexer.pipeline.chunk import Chunk, ParsedPage, chunk_markdown, parse_page

sys.path.insert(0, str(Path(__file__).resolve().parent))

from saved import save_or_check

# folder -> page path (relative) -> (parsed page, chunks)
Results = dict[str, dict[str, tuple[ParsedPage, list[Chunk]]]]


def _load_pages(folder: Path, exts: list[str]) -> list[tuple[str, str, bool]]:
    """(relative path, markdown text, mdx) for every page under ``folder``, decoded up front."""
    suffixes = tuple(f".{ext.lstrip('.')}" for ext in exts)
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in suffixes)
    pages: list[tuple[str, str, bool]] = []
    for path in paths:
        rel = path.relative_to(folder).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".html":
            from docbundle.indexer.pipeline.html.convert import convert_html

            text = convert_html(text, f"https://docs.example.invalid/{rel}").markdown
        pages.append((rel, text, path.suffix == ".mdx"))
    return pages


def _differ(old: tuple[ParsedPage, list[Chunk]], new: tuple[ParsedPage, list[Chunk]]) -> list[str]:
    """What differs between one page's saved and current parse result and chunks."""
    (old_page, old_chunks), (new_page, new_chunks) = old, new
    problems: list[str] = []
    if old_page != new_page:
        problems.append("parse_page differs")
    if len(old_chunks) != len(new_chunks):
        return [*problems, f"{len(old_chunks)} chunks before, {len(new_chunks)} now"]
    for k, (a, b) in enumerate(zip(old_chunks, new_chunks, strict=True)):
        if a != b:
            fields = [f for f in Chunk.__struct_fields__ if getattr(a, f) != getattr(b, f)]
            problems.append(f"chunk {k} differs in {', '.join(fields)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Parse and chunk every page under the folders; print CPU, throughput and chunk statistics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", type=Path, nargs="+", help="folders of .md / .mdx pages")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes; the best one is reported")
    parser.add_argument(
        "--ext",
        nargs="+",
        default=["md", "mdx"],
        help="page suffixes to read (md mdx html txt); .html is converted first, .txt read as markdown",
    )
    parser.add_argument("--max-depth", type=int, default=3)
    parser.add_argument("--min-words", type=int, default=60)
    parser.add_argument("--max-words", type=int, default=500)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--save", type=Path, help="write every page's parse result and chunks here")
    mode.add_argument("--check", type=Path, help="compare every page's output with a --save file")
    args = parser.parse_args(argv)

    results: Results = {}
    total_cpu = 0.0
    for folder in args.pages:
        pages = _load_pages(folder, args.ext)
        if not pages:
            print(f"no pages under {folder}", file=sys.stderr)
            return 1
        size_mb = sum(len(text.encode("utf-8")) for _, text, _ in pages) / 1e6
        best = best_cpu = float("inf")
        out: dict[str, tuple[ParsedPage, list[Chunk]]] = {}
        for _ in range(max(args.repeat, 1)):
            out = {}
            t0 = time.perf_counter()
            c0 = time.process_time()
            for rel, text, mdx in pages:
                page = parse_page(text, mdx=mdx)
                chunks = chunk_markdown(
                    page.body,
                    max_depth=args.max_depth,
                    min_words=args.min_words,
                    max_words=args.max_words,
                    mdx=page.mdx,
                )
                out[rel] = (page, chunks)
            best = min(best, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        total_cpu += best_cpu
        results[folder.as_posix()] = out
        words = [c.words for _, chunks in out.values() for c in chunks]
        n_mdx = sum(mdx for _, _, mdx in pages)
        print(f"{folder}")
        print(f"  pages    {len(pages)} ({n_mdx} mdx), {size_mb:.1f} MB")
        print(f"  time     {best_cpu:.3f} s CPU, {best:.3f} s wall (best of {max(args.repeat, 1)})")
        print(f"  speed    {len(pages) / best_cpu:.0f} pages/s, {size_mb / best_cpu:.2f} MB/s (CPU)")
        if words:
            over = sum(w > args.max_words for w in words)
            under = sum(w < args.min_words for w in words)
            print(
                f"  chunks   {len(words)} ({len(words) / len(pages):.1f} per page); words mean "
                f"{statistics.fmean(words):.0f}, median {statistics.median(words):.0f}, max {max(words)}; "
                f"{over} > max_words, {under} < min_words"
            )
    if len(args.pages) > 1:
        print(f"total      {total_cpu:.3f} s CPU")

    n_chunks = sum(len(chunks) for pages in results.values() for _, chunks in pages.values())
    what = f"{sum(len(p) for p in results.values())} pages, {n_chunks} chunks, every field"
    return save_or_check(results, args.save, args.check, _differ, what)


if __name__ == "__main__":
    raise SystemExit(main())
