"""Routing quality and speed of a search across many libraries (issue 22): recall of the K chosen, latency.

The five shared corpora (zh, ja, ko, large-en, medium-en; built with ``quality.ensure_bundles``) are
served together with N generated distractor libraries (``generate_distractors``: small libraries cut
from text that is not from those corpora, the real llms.txt files of ``llms-txt-wild`` and the pages
of ``html-rustbook``; any function with its signature can stand in, e.g. a catalogue generator
``generate(root, n, seed)``). Then, through the server's own ``Docs`` (the path of the MCP tool):

- routing recall: for each question of the graded sets whose corpus is served (``benchmarks/queries``;
  each set names its corpus), whether that corpus is among the K libraries the routing index chooses
  (target: at least 95 %), per set and overall;
- the routing index: its build time from the records, its size;
- cross-library ``search_documents`` latency on warm libraries (every question asked once first, then
  timed), p50 / p99 (targets at thousands of libraries: 100 ms / 500 ms), and how many answers were
  ``stopped``.

It prints figures and asserts nothing. Run niced on a shared machine:
``nice python benchmarks/routing_recall.py --corpora ../shared/corpora --distractors 300``.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import QUERIES_DIR, ensure_bundles, load_queries, set_corpus

CORPORA = ("zh", "ja", "ko", "large-en", "medium-en")
_HEADING = re.compile(r"^#{1,3} ", re.M)
_WORD = re.compile(r"[a-z][a-z0-9-]{2,14}")

Generator = Callable[[Path, int, int], list[str]]


def _sources(corpora: Path) -> list[tuple[str, list[str]]]:
    """Text not from the five corpora, as (name, sections): llms-txt-wild files, html-rustbook pages."""
    out: list[tuple[str, list[str]]] = []
    for path in sorted((corpora / "llms-txt-wild").glob("*.txt")):
        text = path.read_text(encoding="utf-8", errors="replace")
        parts = [p.strip() for p in _HEADING.split(text) if len(p.strip()) > 200]
        if len(parts) >= 4:
            out.append((path.stem, parts))
    book = sorted((corpora / "html-rustbook").rglob("*.md"))
    if book:
        pages = [p.read_text(encoding="utf-8", errors="replace") for p in book]
        out.append(("rustbook", [p for p in pages if len(p) > 200]))
    return out


def generate_distractors(root: Path, n: int, seed: int, corpora: Path | None = None) -> list[str]:
    """Build ``n`` small libraries into ``root``: each 3-8 pages cut from one source (a contiguous run of
    its sections), titled and described from its own words; returns their ids."""
    from docbundle.indexer.config import load_config
    from docbundle.indexer.pipeline.build import build_target

    assert corpora is not None
    sources = _sources(corpora)
    rng = random.Random(seed)
    made: list[str] = []
    with tempfile.TemporaryDirectory(prefix="docbundle-distractors-") as tmp:
        lines = []
        for i in range(n):
            name, sections = rng.choice(sources)
            count = rng.randint(3, min(8, len(sections)))
            start = rng.randrange(0, len(sections) - count + 1)
            words = [
                w for w in _WORD.findall(" ".join(sections[start : start + count]).lower()) if len(w) > 4
            ]
            title = " ".join(rng.sample(words, 2)).title() if len(words) >= 2 else f"Library {i}"
            lib_id = f"lib{i:05d}"
            site = Path(tmp) / lib_id
            site.mkdir()
            links = []
            for j, section in enumerate(sections[start : start + count]):
                head = section.splitlines()[0][:80].strip("# ") or f"Part {j}"
                (site / f"p{j}.md").write_text(f"# {head}\n\n{section[:6000]}\n", encoding="utf-8")
                links.append(f"- [{head}](p{j}.md)")
            (site / "llms.txt").write_text(
                f"# {title}\n\n> Documentation of {title} ({name}).\n\n## Docs\n\n" + "\n".join(links) + "\n",
                encoding="utf-8",
            )
            lines.append(
                f'[[library]]\nid = "{lib_id}"\nname = "{title}"\ncategory = "{rng.choice(CATEGORIES)}"\n'
                f'llms_txt = "{site}/llms.txt"\n'
            )
            made.append(lib_id)
        config = Path(tmp) / "libraries.toml"
        config.write_text("\n".join(lines), encoding="utf-8")
        catalogue = load_config(config)
        t0 = time.perf_counter()
        for k, lib in enumerate(catalogue.libraries):
            if (root / lib.id / "latest" / "CURRENT").exists():  # made by an earlier, smaller run
                continue
            (target,) = catalogue.targets(lib)
            outcome = build_target(target, root)
            if outcome.status not in ("built", "unchanged"):
                print(f"{lib.id}: {outcome.status}: {outcome.message}", file=sys.stderr)
            if (k + 1) % 100 == 0:
                print(f"  {k + 1}/{n} distractors built ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return made


CATEGORIES = ("web", "data", "devops", "language", "cloud", "security", "ui", "tools")


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def measure(bundles: Path, sets: list[str], k: int) -> None:
    """Print routing recall per set, the index's build figures and search latency, over ``bundles``."""
    from docbundle.bundle.routeindex import ROUTING_INDEX, build_index
    from docbundle.bundle.search import query_words
    from docbundle.server.catalog import Catalog
    from docbundle.server.docs import Docs
    from docbundle.server.routing import MAX_ROUTE_WORDS, ROUTE_INDEX_WAIT_SECONDS

    catalog = Catalog.load(bundles)
    catalog.route_libraries = k
    docs = Docs(catalog)
    n = len(catalog.library_ids())
    (bundles / ROUTING_INDEX).unlink(missing_ok=True)
    t0 = time.perf_counter()
    index, _ = docs.router.index(ROUTE_INDEX_WAIT_SECONDS * 100)
    first = time.perf_counter() - t0
    assert index is not None
    served = docs.router._served()
    t0 = time.perf_counter()
    build_index(served, index)
    reuse = time.perf_counter() - t0
    derived = sum(lib.derived for lib in index.libraries)
    print(
        f"{n} libraries; routing index: {len(index.libraries)} entries ({derived} derived), "
        f"{len(index.hashes):,} terms, {len(index.libs):,} postings, "
        f"{(bundles / ROUTING_INDEX).stat().st_size / 1e6:.1f} MB; built from records in {first:.2f} s, "
        f"rebuilt reusing every entry in {reuse:.2f} s"
    )
    questions: list[tuple[str, str, str]] = []
    for name in sets:
        for q in load_queries(QUERIES_DIR / f"{name}.toml"):
            questions.append((name, set_corpus(name), q.text))
    hits: dict[str, list[int]] = {}
    t_route: list[float] = []
    for name, corpus, text in questions:
        t0 = time.perf_counter()
        route = docs.router.route(query_words(text, None, MAX_ROUTE_WORDS))
        t_route.append(time.perf_counter() - t0)
        chosen = [e.library_id for e in route.targets]
        hits.setdefault(name, []).append(int(corpus in chosen))
    total = [x for v in hits.values() for x in v]
    print(f"routing recall at K={k} (the question's corpus among the libraries chosen):")
    for name, got in hits.items():
        print(f"  {name:16} {sum(got):3}/{len(got):3}  {100 * sum(got) / len(got):5.1f} %")
    print(f"  {'all':16} {sum(total):3}/{len(total):3}  {100 * sum(total) / len(total):5.1f} %")
    print(
        f"routing alone: p50 {1000 * statistics.median(t_route):.1f} ms, p99 {1000 * _percentile(t_route, 99):.1f} ms"
    )
    for _, _, text in questions:  # warm: every chosen library opened once
        docs.search(text)
    times: list[float] = []
    stopped = 0
    for _, _, text in questions:
        t0 = time.perf_counter()
        result = docs.search(text).result
        times.append(time.perf_counter() - t0)
        stopped += result.stopped
    print(
        f"search_documents without libraryId, warm ({len(times)} questions): "
        f"p50 {1000 * statistics.median(times):.0f} ms, p99 {1000 * _percentile(times, 99):.0f} ms, "
        f"max {1000 * max(times):.0f} ms; stopped {stopped}"
    )
    catalog.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpora", type=Path, required=True, help="the shared corpora folder")
    parser.add_argument("--bundles", type=Path, help="bundles folder (kept; default: a temporary one)")
    parser.add_argument("--distractors", type=int, nargs="+", default=[300], help="N distractors (each run)")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--k", type=int, default=10, help="libraries a search routes to")
    parser.add_argument("--sets", nargs="+", help="query sets (default: those whose corpus is served)")
    args = parser.parse_args(argv)
    sets = args.sets or sorted(p.stem for p in QUERIES_DIR.glob("*.toml") if set_corpus(p.stem) in CORPORA)
    with tempfile.TemporaryDirectory(prefix="docbundle-routing-") as tmp:
        base = args.bundles or Path(tmp)
        for n in sorted(args.distractors):
            bundles = base / f"n{n}"
            bundles.mkdir(parents=True, exist_ok=True)
            ensure_bundles(args.corpora, bundles, CORPORA, quiet=True)
            have = sum(1 for p in bundles.glob("lib*/latest/CURRENT"))
            if have < n:
                t0 = time.perf_counter()
                generate_distractors(bundles, n, args.seed, args.corpora)
                print(f"{n} distractors built in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            print(f"\n== 5 corpora + {n} distractors ==")
            measure(bundles, sets, args.k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
