"""CPU per page of the page workers' ``prepare_page`` (convert, parse + chunk, analysis, safety scan),
per corpus, cold and warm, and a check that every prepared page stays identical.

Usage::

    python benchmarks/prepare_speed.py --corpora ../shared/corpora [--sets html-python ...]
                                       [--repeat N] [--save FILE | --check FILE]

Every page of each corpus folder (``--sets``; the three HTML sites by default) becomes the ``PageJob``
a build gives the workers: ``.html`` pages are converted first (``html=True``, relative links resolved
against ``https://docs.example.invalid/<path>``), ``.md``/``.mdx``/``.txt`` files are read as markdown
(``.mdx`` as MDX), with the default chunking settings. Per corpus and kind of page (html, markdown) it
prints CPU milliseconds per page (``time.process_time``: on a shared machine wall time mostly measures
the neighbours):

* cold: the first pass in a fresh process, as a new page worker meets them (its analysis caches empty;
  the garbage collector set as in a worker);
* warm: the best of ``--repeat`` passes more in that process (caches filled);
* the warm pass split by phase: HTML conversion, parse + chunk, analysis, safety scan (the functions
  ``prepare_page`` calls, wrapped with a CPU clock; the little left is ``prepare_page`` itself).

``--save FILE`` writes, for every page, a digest of each ``Prepared`` field and of the whole ``Prepared``
as pickled (the bytes a worker sends; pickle writes an object shared twice once, so a change of what is
shared shows too); ``--check FILE`` compares the current code's output with a saved file and lists the
pages and fields that differ (exit status 1 if any does). Save with the old code, change it, check::

    python benchmarks/prepare_speed.py --corpora ../shared/corpora --repeat 1 --save prepared-before.pickle \\
        --sets medium-en large-en ko zh ja html-python html-postgres html-rustbook llms-txt-wild
    python benchmarks/prepare_speed.py --corpora ../shared/corpora --check prepared-before.pickle \\
        --sets medium-en large-en ko zh ja html-python html-postgres html-rustbook llms-txt-wild

It asserts nothing else.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import pickle
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docbundle.indexer.pipeline.workerctx import GC_THRESHOLDS
from saved import save_or_check

DEFAULT_SETS = ("html-python", "html-postgres", "html-rustbook")
PHASES = ("convert", "parse+chunk", "analysis", "safety")
SUFFIXES = (".html", ".md", ".mdx", ".txt")
#: The collector's thresholds in a page worker (``prepare.worker._worker_init``), set here alike.
WORKER_GC_THRESHOLD = GC_THRESHOLDS
BASE_URL = "https://docs.example.invalid/"

# corpus -> page path (relative) -> field name ("*" for the whole Prepared) -> sha256 of its pickle
Digests = dict[str, dict[str, dict[str, str]]]


def load_jobs(folder: Path) -> list[tuple[str, Any]]:
    """(relative path, PageJob) for every page under ``folder``, in path order."""
    from docbundle.indexer.config import ChunkingConfig
    from docbundle.indexer.pipeline.prepare import PageJob

    c = ChunkingConfig()
    jobs = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in SUFFIXES):
        rel = path.relative_to(folder).as_posix()
        html = path.suffix == ".html"
        jobs.append(
            (
                rel,
                PageJob(
                    text=path.read_text(encoding="utf-8", errors="replace"),
                    mdx=path.suffix == ".mdx",
                    link_title="",
                    fallback_title=rel,
                    section="Docs",
                    prefer_page_title=True,
                    max_depth=c.max_depth,
                    min_words=c.min_words,
                    max_words=c.max_words,
                    html=html,
                    url=BASE_URL + rel if html else "",
                ),
            )
        )
    return jobs


def _digest(value: object) -> str:
    return hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()


def digests(prepared: Any) -> dict[str, str]:
    """A digest of each field of a ``Prepared`` and of the whole (``"*"``)."""
    out = {name: _digest(getattr(prepared, name)) for name in prepared.__struct_fields__}
    out["*"] = _digest(prepared)
    return out


class PhaseClock:
    """Wraps the functions ``prepare_page`` calls so that each phase's CPU seconds add up."""

    def __init__(self) -> None:
        from docbundle.indexer.pipeline import html
        from docbundle.indexer.pipeline.prepare import job as prepare

        self.spent = dict.fromkeys(PHASES, 0.0)
        self._patches: list[tuple[Any, str, Any]] = [
            (html, "convert_html", "convert"),
            (prepare, "parse_page", "parse+chunk"),
            (prepare, "chunk_markdown", "parse+chunk"),
            (prepare, "_analyse", "analysis"),
            (prepare, "scan_chunks", "safety"),
        ]
        self._saved: list[tuple[Any, str, Any]] = []

    def _wrap(self, fn: Callable[..., Any], phase: str) -> Callable[..., Any]:
        spent = self.spent
        clock = time.process_time

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[phase] += clock() - t0

        return timed

    def __enter__(self) -> PhaseClock:
        for module, name, phase in self._patches:
            original = getattr(module, name)
            self._saved.append((module, name, original))
            setattr(module, name, self._wrap(original, phase))
        return self

    def __exit__(self, *_: object) -> None:
        for module, name, original in self._saved:
            setattr(module, name, original)
        self._saved.clear()


def measure(folder: Path, repeat: int, digest: bool) -> dict[str, Any]:
    """This process's figures for one corpus (run in a fresh process, so the first pass is cold)."""
    from docbundle.indexer.pipeline.prepare import prepare_page

    gc.set_threshold(*WORKER_GC_THRESHOLD)

    jobs = load_jobs(folder)
    kinds = {"html": [j for _, j in jobs if j.html], "markdown": [j for _, j in jobs if not j.html]}
    out: dict[str, Any] = {"kinds": {}}
    found: dict[str, dict[str, str]] = {}
    for kind, group in kinds.items():
        if not group:
            continue
        c0 = time.process_time()
        for job in group:
            prepare_page(job)
        cold = time.process_time() - c0
        best = float("inf")
        phases: dict[str, float] = {}
        for _ in range(max(repeat, 1)):
            with PhaseClock() as clock:
                c0 = time.process_time()
                for job in group:
                    prepare_page(job)
                spent = time.process_time() - c0
            if spent < best:
                best, phases = spent, dict(clock.spent)
        out["kinds"][kind] = {
            "pages": len(group),
            "chars": sum(len(j.text) for j in group),
            "cold": cold,
            "warm": best,
            "phases": phases,
        }
    if digest:
        for rel, job in jobs:
            found[rel] = digests(prepare_page(job))
        out["digests"] = found
    return out


def differ(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """The fields of one page's ``Prepared`` whose digests differ ("*": the whole, as pickled)."""
    fields = [f for f in sorted(old.keys() | new.keys()) if old.get(f) != new.get(f)]
    return [f"differs in {', '.join(fields)}"] if fields else []


def _ms(seconds: float, pages: int) -> str:
    return f"{1000 * seconds / pages:6.2f}"


def main(argv: list[str] | None = None) -> int:
    """Measure each corpus in a fresh process; print CPU per page; save or check the outputs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, required=True, help="the folder holding the corpora")
    parser.add_argument("--sets", nargs="+", default=list(DEFAULT_SETS), help="corpus folders to measure")
    parser.add_argument("--repeat", type=int, default=3, help="warm passes; the best one is reported")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--save", type=Path, help="write a digest of every prepared page's fields here")
    mode.add_argument("--check", type=Path, help="compare every prepared page with a --save file")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # internal: one corpus, JSON out
    parser.add_argument("--digest", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.one is not None:
        print(json.dumps(measure(args.one, args.repeat, args.digest)))
        return 0

    digest = bool(args.save or args.check)
    now: Digests = {}
    print(f"{'corpus':<16}{'kind':<10}{'pages':>6}  {'cold':>6} {'warm':>6}  ms CPU/page warm: ", end="")
    print("  ".join(f"{p:>11}" for p in PHASES))
    for name in args.sets:
        folder = args.corpora / name
        if not folder.is_dir():
            print(f"{name}: no such corpus under {args.corpora}", file=sys.stderr)
            return 1
        command = [sys.executable, __file__, "--corpora", str(args.corpora), "--one", str(folder)]
        command += ["--repeat", str(args.repeat), *(["--digest"] if digest else [])]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        result = json.loads(done.stdout)
        for kind, r in result["kinds"].items():
            n = r["pages"]
            print(f"{name:<16}{kind:<10}{n:>6}  {_ms(r['cold'], n)} {_ms(r['warm'], n)}  {'':>17}", end="")
            print("  ".join(f"{_ms(r['phases'][p], n):>11}" for p in PHASES))
        if digest:
            now[name] = result["digests"]

    n_pages = sum(len(p) for p in now.values())
    what = f"{n_pages} pages, every field of every Prepared and its pickle"
    return save_or_check(now, args.save, args.check, differ, what)


if __name__ == "__main__":
    raise SystemExit(main())
