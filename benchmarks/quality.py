"""Search quality: graded queries over real corpora, scored with nDCG@10, MRR@10 and Recall@10.

Usage::

    python benchmarks/quality.py --corpora ../shared/corpora [--bundles DIR] [--compare-plain]
                                 [--sets medium-en ko] [--worst 5] [--per-query] [--split dev|test|all]
                                 [--save-run FILE] [--compare-run FILE]

Each query set lives in ``benchmarks/queries/<set>.toml`` (its corpus is the set's name, or the file's
top-level ``corpus`` key, so several sets can judge one corpus): ``[[query]]`` tables with ``id``,
``text``, ``kind`` (keyword, identifier, question or phrase) and ``relevant``, a table mapping
document ids (page paths relative to the corpus llms.txt) to a grade on the set's top-level ``scale``:
``"1-2"`` (the default, every set graded before issue 36) 2 = the page that answers the query, 1 = a
related page that helps; ``"0-3"`` 3 = answers, 2 = answers partly, 1 = related. On both, 0 = judged not
relevant (a pooled page a judge looked at; it scores as an ungraded page). Grades are scored as written
(``docbundle.indexer.release.metrics``), so a 1-2 set scores as it always did. Two optional keys: ``need`` (how-to, concept, api, error, config
or identifier) and ``split`` (dev = tune on it, test = score it once at the end); an unknown value is
refused with the query id named. Means are printed per kind, per need and per split (dev, test, all);
``--split`` keeps one half (default: all).

Comparing two rankings: ``--save-run FILE`` writes our per-query scores (JSON) and ``--compare-run FILE``
reads such a file from an earlier run (e.g. before a code change) and tests the per-query nDCG@10
differences of the queries both runs scored with a paired randomization test
(``docbundle.indexer.release.metrics.paired_test``: 10,000 sign flips, fixed seed, two-sided p), per set
and per split.

The corpus is served on 127.0.0.1 (``tests/sitesrv.py``) and built with the indexer's own
``build_target`` into ``--bundles DIR`` (a temporary folder if not given); a bundle already present
there (``<DIR>/<corpus>/latest/CURRENT``) is reused. Every query runs through the server's
``BundleSearcher``; hits are reduced to a ranked list of distinct documents (first appearance
wins) and scored. ``--compare-plain`` also runs the same queries through a plain whoosh
``MultifieldParser`` (OR group, BM25F defaults) on the same index, grouped to documents the same
way, so the two can be compared. It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import posixpath
import sys
import tempfile
import time
import tomllib
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from docbundle.bundle.store import DocStore

ROOT = Path(__file__).resolve().parents[1]
QUERIES_DIR = Path(__file__).resolve().parent / "queries"
K = 10
KINDS = ("keyword", "identifier", "question", "phrase")

Ranker = Callable[[str], list[str]]


# --------------------------------------------------------------------------------------------------
# corpora and bundles


def default_corpora() -> Path | None:
    """The corpora folder from ``DOCBUNDLE_SHARED`` (``<it>/corpora``), or None when unset."""
    shared = os.environ.get("DOCBUNDLE_SHARED")
    return Path(shared) / "corpora" if shared else None


def bundles_parser(description: str, bundles_help: str) -> argparse.ArgumentParser:
    """A parser with the options of a benchmark that serves built bundles: ``--corpora`` (default
    ``default_corpora()``) and a required ``--bundles`` folder."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--corpora", type=Path, default=default_corpora(), help="folder holding the corpora")
    ap.add_argument("--bundles", type=Path, required=True, help=bundles_help)
    return ap


def machine() -> str:
    """``machine: <CPUs>, <load average>; <Python version>``: the line a timing benchmark prints first."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (
        f"machine: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"{sys.version.split()[0]}"
    )


def bundle_path(bundles: Path, library_id: str, version: str = "latest") -> Path | None:
    """The bundle ``CURRENT`` names for a library version under ``bundles``, or None."""
    from docbundle.bundle.errors import BundleError
    from docbundle.bundle.layout import current_bundle

    try:
        return current_bundle(bundles / library_id / version)
    except (BundleError, ValueError):
        return None


# HTML corpora (their llms.txt links ``x``, ``x.html``, ``x/``, ``x#part``): library id -> corpus folder.
# Their graded sets name pages by the corpus file (``canonical``), not by the bundle's document id.
_PAGE_FOLDERS: dict[str, Path] = {}


def is_html_corpus(folder: Path) -> bool:
    """True for a corpus of whole HTML pages (``html-python``, ``html-rustbook``, ``html-postgres``)."""
    return folder.name.startswith("html-") and (folder / "llms.txt").is_file()


@contextlib.contextmanager
def _serving(corpora: Path, corpus: Path) -> Iterator[str]:
    """Serve one corpus on loopback: an HTML corpus as a docs host does (``/page`` -> ``page.html``,
    ``/dir/`` -> ``dir/index.html``, through the corpora's own ``serve_site.py``), a markdown corpus as
    plain files."""
    if is_html_corpus(corpus):
        from html_sites import served

        with served(corpora, corpus) as base:
            yield base
        return
    from sitesrv import Site, run_site

    site = Site()
    site.serve_dir(corpus)
    with run_site(site) as base:
        yield base


def canonical(folder: Path, path: str) -> str | None:
    """The corpus file a site path names (``x`` / ``x.html`` / ``x/`` / ``x.md``), or None."""
    path = urllib.parse.unquote(path.split("#", 1)[0].split("?", 1)[0]).lstrip("/")
    if path.endswith(".html.md"):
        path = path[: -len(".md")]
    elif path.endswith(".md") and (folder / (path[:-3] + ".html")).is_file():
        path = path[:-3] + ".html"
    directory = path.endswith("/") or path in ("", ".")
    path = posixpath.normpath(path) if path else "."
    path = "" if path == "." else path
    if directory:
        candidates = [f"{path}/index.html" if path else "index.html"]
    else:
        candidates = [path, path + ".html", path + "/index.html"]
    for c in candidates:
        if (folder / c).is_file():
            return c
    return None


def page_namer(library_id: str) -> Callable[[str, str], str]:
    """(document id, url) -> the page id the graded sets use: the corpus file for an HTML corpus served
    by ``ensure_bundles`` (every link style of one page names one file), else the document id."""
    folder = _PAGE_FOLDERS.get(library_id)
    if folder is None:
        return lambda doc_id, _url: doc_id
    return lambda doc_id, url: canonical(folder, urllib.parse.urlsplit(url).path) or doc_id


def library_of(bundle_dir: Path) -> str:
    """The library id of a bundle folder built by ``ensure_bundles`` (``<bundles>/<id>/<version>/<build>``)."""
    return bundle_dir.resolve().parents[1].name


def ensure_bundles(
    corpora: Path, bundles: Path, names: Iterable[str], *, quiet: bool = False
) -> dict[str, Path]:
    """Build each named corpus into ``bundles`` (library id = corpus name) unless already there.

    Each corpus folder is served from a loopback HTTP server and built with ``build_target``, as in
    ``benchmarks/crawl_build.py``. Returns library id → bundle directory for the ones available.
    """
    sys.path.insert(0, str(ROOT / "tests"))
    from docbundle.indexer.config import load_config
    from docbundle.indexer.pipeline.build import build_target

    found: dict[str, Path] = {}
    for name in names:
        if is_html_corpus(corpora / name):
            _PAGE_FOLDERS[name] = corpora / name
        existing = bundle_path(bundles, name)
        if existing is not None:
            found[name] = existing
            continue
        corpus = corpora / name
        if not (corpus / "llms.txt").is_file():
            print(f"{name}: no llms.txt under {corpus}; skipped", file=sys.stderr)
            continue
        t0 = time.perf_counter()
        with _serving(corpora, corpus) as base, tempfile.TemporaryDirectory(prefix="docbundle-bench-") as tmp:
            config = Path(tmp) / "libraries.toml"
            config.write_text(
                f'[[library]]\nid = "{name}"\nname = "{name}"\nllms_txt = "{base}/llms.txt"\n',
                encoding="utf-8",
            )
            catalogue = load_config(config)
            (target,) = catalogue.targets(catalogue.libraries[0])
            outcome = build_target(target, bundles)
        if outcome.status not in ("built", "unchanged") or not outcome.bundle:
            print(f"{name}: build {outcome.status}: {outcome.message}", file=sys.stderr)
            continue
        if not quiet:
            print(
                f"built {name}: {outcome.documents} docs, {outcome.chunks} chunks in "
                f"{time.perf_counter() - t0:.1f} s ({outcome.pages_failed} pages failed)",
                file=sys.stderr,
            )
        found[name] = Path(outcome.bundle)
    return found


# --------------------------------------------------------------------------------------------------
# query sets


@dataclass(frozen=True)
class Query:
    """One graded query."""

    id: str
    text: str
    kind: str
    relevant: dict[str, int]
    need: str = ""  # how-to | concept | api | error | config | identifier; "" = not given
    split: str = ""  # dev | test; "" = not given
    scale: str = "1-2"  # the set's grade scale (metrics.SCALES): "1-2" or "0-3"


def set_corpus(name: str, folder: Path = QUERIES_DIR) -> str:
    """The corpus a query set judges: its file's top-level ``corpus`` key, else the set's own name."""
    qfile = folder / f"{name}.toml"
    if not qfile.is_file():
        return name
    return str(tomllib.loads(qfile.read_text(encoding="utf-8")).get("corpus", name))


def load_queries(path: Path, split: str = "all") -> list[Query]:
    """Read a query set (the queries of one ``split``, or all); checks ids unique, labels known, grades on
    the set's ``scale`` (default 1-2; 0 allowed on both) with at least one page graded 1 or more."""
    from docbundle.indexer.release.metrics import DEFAULT_SCALE, check_grades, check_labels, in_split

    data = tomllib.loads(path.read_text(encoding="utf-8"))
    scale = str(data.get("scale", DEFAULT_SCALE))
    out: list[Query] = []
    seen: set[str] = set()
    for raw in data.get("query", []):
        q = Query(
            raw["id"],
            raw["text"],
            raw.get("kind", "keyword"),
            dict(raw["relevant"]),
            str(raw.get("need", "")),
            str(raw.get("split", "")),
            scale,
        )
        if q.id in seen:
            raise ValueError(f"{path}: duplicate query id {q.id!r}")
        if q.kind not in KINDS:
            raise ValueError(f"{path}: query {q.id!r} has unknown kind {q.kind!r}")
        try:
            check_labels(q.id, q.need, q.split)
            check_grades(q.id, q.relevant, scale)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        seen.add(q.id)
        if in_split(q.split, split):
            out.append(q)
    return out


def label_groups(queries: list[Query]) -> list[tuple[str, list[str]]]:
    """(label, query ids) for the means: per kind, per need, per split (dev, test, all) and overall.

    A label no query carries is left out (a set without ``need`` prints no need rows).
    """
    from docbundle.indexer.release.metrics import NEEDS, SPLITS

    out: list[tuple[str, list[str]]] = []
    for key, values in (("kind", KINDS), ("need", NEEDS), ("split", SPLITS)):
        for value in values:
            ids = [q.id for q in queries if getattr(q, key) == value]
            if ids:
                out.append((f"{key} {value}" if key != "kind" else value, ids))
    if any(q.split for q in queries):
        out.append(("split all", [q.id for q in queries]))
    out.append(("", [q.id for q in queries]))
    return out


# --------------------------------------------------------------------------------------------------
# metrics (the project's own: docbundle.indexer.release.metrics)


@dataclass
class Score:
    """The metrics of one query under one ranker."""

    ndcg: float
    mrr: float
    recall: float
    ranked: list[str]
    ms: float


def score(q: Query, ranked: list[str], ms: float) -> Score:
    """Score one ranked list."""
    from docbundle.indexer.release.metrics import mrr, ndcg, recall

    return Score(
        ndcg(ranked, q.relevant, K), mrr(ranked, q.relevant, K), recall(ranked, q.relevant, K), ranked, ms
    )


@dataclass
class Report:
    """Per-query scores of one ranker over one set."""

    name: str
    scores: dict[str, Score] = field(default_factory=dict)

    def mean(self, attr: str, ids: Iterable[str] | None = None) -> float:
        """Mean of one metric over the given query ids (all when None)."""
        vals = [getattr(self.scores[i], attr) for i in (ids if ids is not None else self.scores)]
        return sum(vals) / len(vals) if vals else 0.0


# --------------------------------------------------------------------------------------------------
# rankers


def _distinct(doc_ids: Iterable[str], k: int = K) -> list[str]:
    out: list[str] = []
    for d in doc_ids:
        if d not in out:
            out.append(d)
            if len(out) == k:
                break
    return out


def _doc_ids(store: DocStore, library_id: str = "") -> Callable[[int], str]:
    """A page id (``page_namer``) from a document's number in ``store``, each looked up once."""
    names: dict[int, str] = {}
    name = page_namer(library_id)

    def doc_id(n: int) -> str:
        if n not in names:
            rec = store.get(n)
            names[n] = name(rec.id, rec.url)
        return names[n]

    return doc_id


def ours(bundle_dir: Path, per_doc: int, mode: str = "balanced") -> tuple[Ranker, Callable[[], None]]:
    """A ranker over the server's ``BundleSearcher``."""
    from docbundle.bundle.reader import open_bundle
    from docbundle.bundle.search import BundleSearcher

    bundle = open_bundle(bundle_dir, use_mmap=False)
    searcher = BundleSearcher(bundle)
    doc_id = _doc_ids(bundle.store, library_of(bundle_dir))

    def rank(text: str) -> list[str]:
        outcome = searcher.search(text, limit=K, per_doc=per_doc, mode=mode)  # type: ignore[arg-type]
        return _distinct(doc_id(h.doc) for h in outcome.hits)

    return rank, bundle.close


def plain(bundle_dir: Path) -> tuple[Ranker, Callable[[], None]]:
    """A ranker over plain whoosh: MultifieldParser(title, headings, body, code), OR group, BM25F."""
    from docbundle.bundle.reader import open_bundle
    from docbundle.bundle.whooshio import searching
    from whoosh.qparser import MultifieldParser, OrGroup
    from whoosh.query.qcore import QueryError

    bundle = open_bundle(bundle_dir, use_mmap=False)
    schema = bundle.index.schema
    parser = MultifieldParser(["title", "headings", "body", "code"], schema, group=OrGroup)
    # `code` has no positions, so a quoted phrase cannot run on it: phrases fall back to the others.
    no_code = MultifieldParser(["title", "headings", "body"], schema, group=OrGroup)
    doc_id = _doc_ids(bundle.store, library_of(bundle_dir))

    def rank(text: str) -> list[str]:
        with searching(bundle.index) as s:
            try:
                results = s.search(parser.parse(text), limit=20 * K)
            except QueryError:
                results = s.search(no_code.parse(text), limit=20 * K)
            return _distinct(doc_id(hit["doc"]) for hit in results)

    return rank, bundle.close


def evaluate(name: str, queries: list[Query], rank: Ranker) -> Report:
    """Run every query through ``rank`` and score it."""
    report = Report(name)
    for q in queries:
        t0 = time.perf_counter()
        ranked = rank(q.text)
        report.scores[q.id] = score(q, ranked, 1000 * (time.perf_counter() - t0))
    return report


# --------------------------------------------------------------------------------------------------
# printing


def _short(doc: str) -> str:
    return doc.removeprefix("pages/")


def print_set(
    label: str,
    queries: list[Query],
    reports: list[Report],
    *,
    per_query: bool,
    worst: int,
) -> None:
    """Print per-query figures (optionally), means by kind and overall, and the worst queries."""
    by_id = {q.id: q for q in queries}
    print(f"\n=== {label}: {len(queries)} queries ===")
    if per_query:
        head = "".join(f" | {r.name:>6} nDCG  MRR   R@10" for r in reports)
        print(f"{'query':<28} {'kind':<10}{head}")
        for q in queries:
            cells = "".join(
                f" | {r.scores[q.id].ndcg:11.3f} {r.scores[q.id].mrr:5.2f} {r.scores[q.id].recall:5.2f}"
                for r in reports
            )
            print(f"{q.id[:28]:<28} {q.kind:<10}{cells}")
    print(f"{'':<28} {'':<10}" + "".join(f" | {r.name:>6} nDCG  MRR   R@10" for r in reports))
    for group, ids in label_groups(queries):
        cells = "".join(
            f" | {r.mean('ndcg', ids):11.3f} {r.mean('mrr', ids):5.2f} {r.mean('recall', ids):5.2f}"
            for r in reports
        )
        name = f"mean ({group})" if group else "MEAN"
        print(f"{name:<28} {f'n={len(ids)}':<10}{cells}")
    for r in reports:
        ms = sorted(s.ms for s in r.scores.values())
        print(f"{r.name}: query time median {ms[len(ms) // 2]:.2f} ms, max {ms[-1]:.2f} ms")
    main = reports[0]
    if worst:
        print(f"\nworst {worst} for {main.name} (by nDCG@10, then MRR):")
        for qid in sorted(main.scores, key=lambda i: (main.scores[i].ndcg, main.scores[i].mrr))[:worst]:
            q, s = by_id[qid], main.scores[qid]
            print(
                f"  {qid} [{'/'.join(x for x in (q.kind, q.need, q.split) if x)}] {q.text!r}: nDCG {s.ndcg:.3f}, MRR {s.mrr:.2f}, R@10 {s.recall:.2f}"
            )
            want = ", ".join(f"{_short(d)}={g}" for d, g in sorted(q.relevant.items(), key=lambda x: -x[1]))
            print(f"      wanted: {want}")
            got = ", ".join(
                f"{i + 1}.{_short(d)}{'*' * q.relevant.get(d, 0)}" for i, d in enumerate(s.ranked[:5])
            )
            print(f"      got:    {got or '(nothing)'}")
            for other in reports[1:]:
                o = other.scores[qid]
                print(f"      {other.name}: nDCG {o.ndcg:.3f}, MRR {o.mrr:.2f}")


def main() -> int:
    """Build or reuse bundles, run the query sets and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", type=Path, default=default_corpora(), help="folder holding the corpora")
    ap.add_argument("--bundles", type=Path, help="bundles folder to build into / reuse (default: a temp dir)")
    ap.add_argument(
        "--sets", nargs="+", default=["medium-en", "ko"], help="query sets (file names under queries/)"
    )
    ap.add_argument("--compare-plain", action="store_true", help="also score a plain whoosh baseline")
    ap.add_argument("--per-query", action="store_true", help="print every query's figures")
    ap.add_argument("--worst", type=int, default=5, help="list the N worst queries of our search")
    ap.add_argument("--per-doc", type=int, default=1, help="per_doc passed to BundleSearcher.search")
    ap.add_argument("--mode", default="balanced", help="mode passed to BundleSearcher.search")
    ap.add_argument("--no-ours", action="store_true", help="skip our search (plain baseline only)")
    ap.add_argument(
        "--split", choices=("dev", "test", "all"), default="all", help="score one half only (default: all)"
    )
    ap.add_argument("--save-run", type=Path, metavar="FILE", help="write our per-query scores as JSON")
    ap.add_argument(
        "--compare-run",
        type=Path,
        metavar="FILE",
        help="a --save-run file of an earlier run: test our nDCG@10 change against it (paired randomization)",
    )
    args = ap.parse_args()
    if args.corpora is None:
        ap.error("give --corpora or set DOCBUNDLE_SHARED")
    previous = load_run(args.compare_run) if args.compare_run else None
    run: dict[str, object] = {"mode": args.mode, "per_doc": args.per_doc, "split": args.split, "sets": {}}
    comparisons: list[str] = []

    with tempfile.TemporaryDirectory(prefix="docbundle-quality-") as tmp:
        bundles = args.bundles or Path(tmp)
        bundles.mkdir(parents=True, exist_ok=True)
        corpus_of = {name: set_corpus(name) for name in args.sets}
        paths = ensure_bundles(args.corpora, bundles, dict.fromkeys(corpus_of.values()))
        summary: list[str] = []
        for name in args.sets:
            qfile = QUERIES_DIR / f"{name}.toml"
            if corpus_of[name] not in paths or not qfile.is_file():
                print(f"{name}: no bundle or no {qfile.name}; skipped", file=sys.stderr)
                continue
            queries = load_queries(qfile, args.split)
            if not queries:
                print(
                    f"{name}: no query in the {args.split} half (no `split` keys?); skipped", file=sys.stderr
                )
                continue
            bundle_dir = paths[corpus_of[name]]
            _check_ids(name, queries, bundle_dir)
            rankers: list[tuple[str, Callable[[Path], tuple[Ranker, Callable[[], None]]]]] = []
            if not args.no_ours:
                rankers.append(("ours", lambda p: ours(p, args.per_doc, args.mode)))
            if args.compare_plain or args.no_ours:
                rankers.append(("plain", plain))
            reports = []
            for rname, make in rankers:
                rank, close = make(bundle_dir)
                try:
                    reports.append(evaluate(rname, queries, rank))
                finally:
                    close()
            print_set(name, queries, reports, per_query=args.per_query, worst=args.worst)
            if not args.no_ours:
                ours_report = reports[0]
                sets = run["sets"]
                assert isinstance(sets, dict)
                sets[name] = {
                    q.id: {
                        "ndcg": round(ours_report.scores[q.id].ndcg, 6),
                        "mrr": round(ours_report.scores[q.id].mrr, 6),
                        "recall": round(ours_report.scores[q.id].recall, 6),
                        "kind": q.kind,
                        "need": q.need,
                        "split": q.split,
                    }
                    for q in queries
                }
                if previous is not None:
                    comparisons += compare_to_run(name, queries, ours_report, previous)
            for r in reports:
                summary.append(
                    f"{name:<10} {r.name:<6} nDCG@10 {r.mean('ndcg'):.3f}  MRR@10 {r.mean('mrr'):.3f}  "
                    f"Recall@10 {r.mean('recall'):.3f}  ({len(queries)} queries)"
                )
        print("\n=== summary ===")
        print("\n".join(summary))
        if previous is not None:
            print(f"\n=== against {args.compare_run} (before -> now) ===")
            print("\n".join(comparisons) or "no set in common")
        if args.save_run:
            args.save_run.write_text(json.dumps(run, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            print(f"per-query scores written to {args.save_run}", file=sys.stderr)
    return 0


def load_run(path: Path) -> dict[str, dict[str, dict[str, float]]]:
    """The per-query nDCG@10 of a ``--save-run`` file: set -> query id -> {"ndcg", ...}."""
    data = json.loads(path.read_text(encoding="utf-8"))
    sets = data.get("sets") if isinstance(data, dict) else None
    if not isinstance(sets, dict):
        raise SystemExit(f"{path}: not a --save-run file (no 'sets')")
    return sets


def compare_to_run(
    name: str, queries: list[Query], now: Report, previous: dict[str, dict[str, dict[str, float]]]
) -> list[str]:
    """Lines comparing ``now`` with a saved run over the queries both scored: all, then per split."""
    from docbundle.indexer.release.metrics import SPLITS, paired_test

    before = previous.get(name)
    if not before:
        return [f"{name:<10} not in the saved run"]
    common = [q for q in queries if q.id in before]
    lines = []
    halves = [("all", common)] + [(h, [q for q in common if q.split == h]) for h in SPLITS]
    for half, qs in halves:
        if not qs or (half != "all" and len(qs) == len(common)):
            continue
        c = paired_test(
            [float(before[q.id]["ndcg"]) for q in qs], [round(now.scores[q.id].ndcg, 6) for q in qs]
        )  # as saved
        lines.append(f"{name:<10} {half:<4} {c.describe()}")
    missing = len(queries) - len(common)
    if missing:
        lines.append(f"{name:<10} ({missing} queries not in the saved run are left out)")
    return lines


def _check_ids(name: str, queries: list[Query], bundle_dir: Path) -> None:
    """Warn about judged document ids the bundle does not hold (a typo scores as a miss)."""
    from docbundle.bundle.reader import read_manifest

    known = {d.path for d in read_manifest(bundle_dir).documents}
    for q in queries:
        for d in q.relevant:
            if d not in known:
                print(f"{name}: query {q.id!r} judges {d!r}, which is not in the bundle", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
