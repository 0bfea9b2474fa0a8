"""Routing quality and speed of a search across many libraries (issue 22): recall of the K chosen, latency.

The five shared corpora (zh, ja, ko, large-en, medium-en; built once with ``quality.ensure_bundles``
into ``<bundles>/corpora`` and hard-linked into each catalogue) are served together with N distractor
libraries (``generate_distractors``): the first ``--built`` (300) are small libraries built through the
indexer from text that is not from those corpora (3-8 pages cut from the real llms.txt files of
``llms-txt-wild`` and the pages of ``html-rustbook``), the others copies of those under new ids, so
10,000 take about 3 minutes instead of 40 and each vocabulary is shared by N / 300 libraries (see
``generate_distractors``). Then, through the server's own ``Docs`` (the path of the MCP tool):

- routing recall: for each question of the graded sets whose corpus is served (``benchmarks/queries``;
  each set names its corpus), whether that corpus is among the K libraries the route index chooses
  (target: at least 95 %), per set and overall;
- the route index: its build time from the records and reusing every entry, its size;
- cross-library ``search_documents`` latency, p50 / p99 (targets at thousands of libraries: 100 ms /
  500 ms on warm libraries): every question asked once first, then each timed, and timed again right
  away (its libraries then open, past ``--max-open``'s least recently used); how many answers were
  ``stopped``, how many library searches were skipped and why, and the file descriptors held.

It prints figures and asserts nothing. Run niced on a shared machine:
``nice python benchmarks/routing_recall.py --corpora ../shared/corpora --distractors 1000 10000``.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
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


BUILT = 300  # distractors built through the indexer; the others are copies of them under new ids


def generate_distractors(
    root: Path, n: int, seed: int, corpora: Path | None = None, built: int = BUILT
) -> list[str]:
    """Write ``n`` small libraries into ``root``; returns their ids.

    The first ``built`` (at most ``n``) are built through the indexer (``build_target``), each 3-8
    pages cut from one source (a contiguous run of its sections), titled and described from its own
    words; they are built once per seed into ``root``'s sibling ``distractors-<seed>`` and hard-linked
    in. The others are copies of those under new identities (``catalog_scale._copy_as``: the manifest's
    library, content hash and build id made again, the files hard-linked), so each is a valid bundle
    whose routing record is its template's: ``n / built`` libraries share each vocabulary. That is
    the harder case for routing (a template that outranks the right corpus does so ``n / built`` times
    over, enough to fill K) at the cost of fewer distinct vocabularies.
    """
    from catalog_scale import _copy_as
    from docbundle.bundle.layout import current_bundle
    from docbundle.bundle.summary import update_summary

    assert corpora is not None
    real = min(n, built)
    cache = root.parent / f"distractors-{seed}"
    made = _build_distractors(cache, real, seed, corpora)
    rng = random.Random(seed + 1)
    ids = []
    t0 = time.perf_counter()
    for i in range(n):
        lib_id = f"lib{i:05d}"
        ids.append(lib_id)
        if (root / lib_id / "latest" / "CURRENT").exists():  # made by an earlier, smaller run
            continue
        if i < real:
            shutil.copytree(cache / lib_id, root / lib_id, copy_function=os.link)
            continue
        template = current_bundle(cache / made[rng.randrange(real)] / "latest")
        name = f"Library {i}"
        _copy_as(template, root, lib_id, name, f"Documentation of {name}.", rng.choice(CATEGORIES))
        if (i + 1) % 1000 == 0:
            print(f"  {i + 1}/{n} distractors ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    update_summary(root)
    return ids


def _build_distractors(out: Path, n: int, seed: int, corpora: Path) -> list[str]:
    """Build ``n`` distractors through the indexer into ``out`` (those already there are kept)."""
    from docbundle.indexer.config import load_config
    from docbundle.indexer.pipeline.build import build_target

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
            if (out / lib.id / "latest" / "CURRENT").exists():  # made by an earlier, smaller run
                continue
            (target,) = catalogue.targets(lib)
            outcome = build_target(target, out)
            if outcome.status not in ("built", "unchanged"):
                print(f"{lib.id}: {outcome.status}: {outcome.message}", file=sys.stderr)
            if (k + 1) % 100 == 0:
                print(f"  {k + 1}/{n} distractors built ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return [i for i in made if (out / i / "latest" / "CURRENT").exists()]


CATEGORIES = ("web", "data", "devops", "language", "cloud", "security", "ui", "tools")


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _open_files() -> int:
    """File descriptors this process holds (Linux; -1 elsewhere)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def measure(bundles: Path, sets: list[str], k: int, retire_after: float | None = None) -> None:
    """Print routing recall per set, the index's build figures and search latency, over ``bundles``.

    ``retire_after``: seconds a bundle past ``--max-open`` stays open (None: the server's default).
    """
    from docbundle.bundle.routeindex import ROUTING_INDEX, build_index
    from docbundle.bundle.search import query_words
    from docbundle.server.catalog import Catalog, CatalogSettings
    from docbundle.server.docs import Docs
    from docbundle.server.routing import MAX_ROUTE_WORDS, ROUTE_INDEX_WAIT_SECONDS

    # The settings serve uses (its warm-up included: issue 35), with this run's K and grace time.
    settings = (
        CatalogSettings.serving(route_libraries=k)
        if retire_after is None
        else CatalogSettings.serving(route_libraries=k, retire_after=retire_after)
    )
    catalog = Catalog.load(bundles, settings=settings)
    idle_fds = _open_files()
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
        f"{n} libraries; route index: {len(index.libraries)} entries ({derived} derived), "
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
    again: list[float] = []
    stopped = skipped = 0
    reasons: dict[str, int] = {}
    for _, _, text in questions:
        for timed in (times, again):  # the second: the same question right away, its libraries open
            t0 = time.perf_counter()
            result = docs.search(text).result
            timed.append(time.perf_counter() - t0)
            stopped += result.stopped
            skipped += len(result.skipped or [])
            for s in result.skipped or []:
                why = s.reason.split(":")[0][:60]
                reasons[why] = reasons.get(why, 0) + 1
    worst = "; ".join(f"{n} x {r}" for r, n in sorted(reasons.items(), key=lambda x: -x[1])[:3])
    print(
        f"search_documents without libraryId ({len(times)} questions, each asked once before): "
        f"p50 {1000 * statistics.median(times):.0f} ms, p99 {1000 * _percentile(times, 99):.0f} ms, "
        f"max {1000 * max(times):.0f} ms; asked again right away (its libraries open): "
        f"p50 {1000 * statistics.median(again):.0f} ms, p99 {1000 * _percentile(again, 99):.0f} ms; "
        f"stopped {stopped}; library searches skipped {skipped}" + (f" ({worst})" if worst else "")
    )
    print(f"open files: {idle_fds} after loading the catalogue, {_open_files()} after the searches")
    catalog.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpora", type=Path, required=True, help="the shared corpora folder")
    parser.add_argument("--bundles", type=Path, help="bundles folder (kept; default: a temporary one)")
    parser.add_argument("--distractors", type=int, nargs="+", default=[300], help="N distractors (each run)")
    parser.add_argument(
        "--built",
        type=int,
        default=BUILT,
        help="distractors built through the indexer; the others are copies of them under new ids",
    )
    parser.add_argument(
        "--retire-after",
        type=float,
        help="seconds a bundle past --max-open stays open before it is closed (default: the server's)",
    )
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--k", type=int, default=10, help="libraries a search routes to")
    parser.add_argument("--sets", nargs="+", help="query sets (default: those whose corpus is served)")
    args = parser.parse_args(argv)
    sets = args.sets or sorted(p.stem for p in QUERIES_DIR.glob("*.toml") if set_corpus(p.stem) in CORPORA)
    with tempfile.TemporaryDirectory(prefix="docbundle-routing-") as tmp:
        base = args.bundles or Path(tmp)
        shared = base / "corpora"  # the five corpora, built once, hard-linked into each catalogue
        ensure_bundles(args.corpora, shared, CORPORA, quiet=True)
        for n in sorted(args.distractors):
            bundles = base / f"n{n}"
            bundles.mkdir(parents=True, exist_ok=True)
            for name in CORPORA:
                if (shared / name).is_dir() and not (bundles / name).exists():
                    shutil.copytree(shared / name, bundles / name, copy_function=os.link)
            have = sum(1 for p in bundles.glob("lib*/latest/CURRENT"))
            if have < n:
                t0 = time.perf_counter()
                generate_distractors(bundles, n, args.seed, args.corpora, args.built)
                print(f"{n} distractors built in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            print(f"\n== 5 corpora + {n} distractors ==")
            measure(bundles, sets, args.k, args.retire_after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
