"""The project's own HTML figures on real sites: serve each HTML corpus, build it, measure the bundle.

Usage::

    python benchmarks/html_sites.py --corpora ../shared/corpora [--sets html-python ...] [--keep DIR]
                                     [--reuse] [--worst N] [--split dev|test|all] [--save-run FILE]

For each corpus (``html-python``, ``html-rustbook``, ``html-postgres``) it serves the folder with the
corpora's own ``../tools/serve_site.py`` on 127.0.0.1 (a free port; the server is stopped at the
end), writes a one-library config into a temporary folder, runs ``docbundle-index build --json``
on it, opens the bundle the build wrote and prints:

* pages indexed -- share of the distinct pages the llms.txt links (``x``, ``x.html``, ``x/``,
  ``x#part`` count once) that have a document in the bundle (goal >= 99%);
* coverage, code intact, titles, boilerplate -- as ``benchmarks/html_candidates.py`` defines them,
  on the bundle's documents (the markdown a page became) against the same references; for a page
  the site served as markdown (its ``.md`` twin), code blocks are checked against that markdown's;
* pages/s -- documents / (crawl + index seconds) from the crawl report, and the wall time;
* search quality -- nDCG@10, MRR@10 and Recall@10 of the graded questions in
  ``benchmarks/queries/<corpus>.toml`` and of every set there whose ``corpus`` key names the corpus
  (``html-python-2.toml``), through the server's ``BundleSearcher``, for the dev and test halves
  (hits are mapped to the corpus file their URL names). ``--split dev`` runs the dev halves only
  (tune on those); ``--save-run FILE`` writes each query's scores as ``benchmarks/quality.py
  --save-run`` does, so ``quality.py``'s saved runs and these can be compared the same way;
  ``--keep DIR --reuse`` scores a bundle kept by an earlier ``--keep DIR`` run without building
  (for a ranking change; a chunking change needs a new build).

When the build fails or indexes nothing, it prints what the crawl report says (the build's message
and its first page failures) and the figures it has; it never makes one up. It asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from html_candidates import (
    SETS,
    Page,
    Result,
    load_corpus,
    norm_title,
    norm_ws,
    pct,
    score_outputs,
    split_output,
)
from process import stop
from quality import canonical

QUERIES = Path(__file__).resolve().parent / "queries"
K = 10
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)[^)]*\)")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of asking."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, proc: subprocess.Popen[bytes], seconds: float = 10.0) -> None:
    """Wait until ``url`` answers (raises when the server exits or never answers)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"serve_site.py exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1.0):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.05)
    raise RuntimeError(f"no answer from {url} within {seconds:.0f} s")


@contextlib.contextmanager
def served(corpora: Path, folder: Path) -> Iterator[str]:
    """Serve ``folder`` as a docs host does, with the corpora's own ``../tools/serve_site.py``, on a free
    loopback port; yields the base URL and stops the server on exit. Raises FileNotFoundError when the
    corpora have no serve_site.py."""
    serve = corpora.parent / "tools" / "serve_site.py"
    if not serve.is_file():
        raise FileNotFoundError(f"{serve} not found: it serves the HTML corpora as a docs host does")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, str(serve), str(folder), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_up(f"{base}/llms.txt", proc)
        yield base
    finally:
        stop(proc, 10)


def linked_pages(folder: Path) -> tuple[set[str], list[str]]:
    """The distinct corpus pages the llms.txt links, and the links that name no page."""
    text = (folder / "llms.txt").read_text(encoding="utf-8")
    pages: set[str] = set()
    dangling: list[str] = []
    for target in LINK.findall(text):
        rel = urllib.parse.urlsplit(target).path
        page = canonical(folder, rel)
        if page is None:
            dangling.append(target)
        else:
            pages.add(page)
    return pages, dangling


def indexer_command() -> list[str]:
    """``docbundle-index`` beside this interpreter, else on PATH."""
    beside = Path(sys.executable).with_name("docbundle-index")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("docbundle-index")
    if found is None:
        raise SystemExit("html_sites: docbundle-index not found (install the indexer package)")
    return [found]


def read_documents(bundle: Path) -> list[tuple[str, str, str, str]]:
    """(url, title, markdown, how it was obtained) of every document of a bundle."""
    from docbundle.bundle.reader import open_bundle

    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    obtained = {str(d.get("url")): str(d.get("obtained", "?")) for d in manifest.get("documents", [])}
    opened = open_bundle(bundle)
    try:
        return [(d.url, d.title, d.text, obtained.get(d.url, "?")) for d in opened.store]
    finally:
        opened.close()


def as_served_markdown(page: Page, twin: Path) -> Page:
    """The page with the code blocks of the markdown the site served (its ``.md`` twin) as reference."""
    blocks = split_output(twin.read_text(encoding="utf-8"))[1]
    return dataclasses.replace(page, pre_blocks=[b for b in (norm_ws(x) for x in blocks) if b])


def query_sets(name: str) -> list[str]:
    """The query sets that judge corpus ``name``: ``<name>.toml`` and every set whose ``corpus`` key names it."""
    from quality import set_corpus

    sets = [name] if (QUERIES / f"{name}.toml").is_file() else []
    sets += sorted(p.stem for p in QUERIES.glob("*.toml") if p.stem != name and set_corpus(p.stem) == name)
    return sets


@dataclasses.dataclass
class Scoring:
    """How to score search quality: the worst questions to print, the half to run, a run to fill."""

    worst: int = 0
    split: str = "all"  # dev | test | all
    run: dict[str, Any] | None = None  # per-query scores are added here (quality.py's --save-run format)


def search_quality(name: str, folder: Path, bundle: Path, scoring: Scoring) -> None:
    """nDCG@10, MRR@10 and Recall@10 of each query set judging ``name`` over the bundle, per half.

    Hits are mapped to the corpus file their URL names (so ``x``, ``x.html`` and ``x/`` are one
    page, whatever link style the llms.txt used) and reduced to distinct pages, first hit wins.
    Only the queries of ``scoring.split`` are run (``all``: both halves); with ``scoring.run``, each
    query's scores are added to it.
    """
    from docbundle.bundle.reader import open_bundle
    from docbundle.bundle.search import BundleSearcher
    from docbundle.indexer.release.metrics import mrr, ndcg, recall
    from quality import load_queries

    names = query_sets(name)
    if not names:
        print(f"  search quality: no query set for {name} under benchmarks/queries/")
        return
    opened = open_bundle(bundle)
    try:
        searcher = BundleSearcher(opened)
        pages: dict[int, str] = {}
        for set_name in names:
            queries = load_queries(QUERIES / f"{set_name}.toml", scoring.split)
            sums: dict[str, list[float]] = {}
            per_query: list[tuple[float, str, str, list[str], dict[str, int]]] = []
            scores: dict[str, dict[str, Any]] = {}
            for q in queries:
                outcome = searcher.search(q.text, limit=K, per_doc=1)
                ranked: list[str] = []
                for hit in outcome.hits:
                    if hit.doc not in pages:
                        url = opened.store.get(hit.doc).url
                        pages[hit.doc] = canonical(folder, urllib.parse.urlsplit(url).path) or url
                    if pages[hit.doc] not in ranked:
                        ranked.append(pages[hit.doc])
                rel = q.relevant
                got = (ndcg(ranked, rel, K), mrr(ranked, rel, K), recall(ranked, rel, K))
                half = q.split or "all"
                per_query.append((got[0], half, q.text, ranked, rel))
                scores[q.id] = {
                    "ndcg": round(got[0], 6),
                    "mrr": round(got[1], 6),
                    "recall": round(got[2], 6),
                    "kind": q.kind,
                    "need": q.need,
                    "split": q.split,
                }
                for h in {half, "all"}:
                    acc = sums.setdefault(h, [0.0, 0.0, 0.0, 0.0])
                    for j, value in enumerate((*got, 1.0)):
                        acc[j] += value
            if scoring.run is not None:
                scoring.run.setdefault("sets", {})[set_name] = scores
            label = "" if set_name == name else f" [{set_name}]"
            for half in ("dev", "test", "all"):
                if half in sums:
                    n, m, r, count = sums[half]
                    print(
                        f"  search quality{label} {half:4} ({int(count)} queries): nDCG@10 {n / count:.3f}  "
                        f"MRR@10 {m / count:.3f}  Recall@10 {r / count:.3f}"
                    )
            for value, half, text, ranked, rel in sorted(per_query, key=lambda x: x[0])[: scoring.worst]:
                want = ", ".join(f"{d}={g}" for d, g in sorted(rel.items(), key=lambda x: -x[1]))
                got_pages = " ".join(f"{i + 1}.{d}{'*' * rel.get(d, 0)}" for i, d in enumerate(ranked[:5]))
                print(f"    worst [{half}] nDCG {value:.2f} {text!r}: want {want}; got {got_pages}")
    finally:
        opened.close()


def run_corpus(corpora: Path, name: str, work: Path, scoring: Scoring, reuse: bool = False) -> None:
    folder = corpora / name
    serve = corpora.parent / "tools" / "serve_site.py"
    print(f"\n{name}")
    if reuse:
        from quality import bundle_path

        kept = bundle_path(work / "bundles", name)
        if kept is not None:
            print(f"  reusing the bundle built before ({kept.name}); build figures not measured again")
            search_quality(name, folder, kept, scoring)
            return
    if not folder.is_dir() or not serve.is_file():
        print(f"  skipped: {folder} or {serve} not found")
        return
    linked, dangling = linked_pages(folder)
    pages = {p.rel: p for p in load_corpus(folder, None)}
    with served(corpora, folder) as base:
        config = work / f"{name}.toml"
        config.write_text(f'[[library]]\nid = "{name}"\nllms_txt = "{base}/llms.txt"\n', encoding="utf-8")
        out = work / "bundles"
        t0 = time.perf_counter()
        done = subprocess.run(
            [
                *indexer_command(),
                "build",
                "--config",
                str(config),
                "--out",
                str(out),
                "--no-cache",
                "--json",
                "--quiet",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - t0
    print(f"  llms.txt links {len(linked)} distinct pages ({len(dangling)} links name no page on disk)")
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        err = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"  build exited {done.returncode} without a report: {err}")
        print(f"  pages indexed 0/{len(linked)} = {pct(0.0)} (nothing built)")
        return
    (outcome,) = report["libraries"]
    status = outcome["status"]
    print(
        f"  build exited {done.returncode}: status {status}"
        + (f" ({outcome['message']})" if outcome.get("message") else "")
        + f"; {outcome['pages_listed']} listed, {outcome['pages_fetched']} fetched, "
        f"{outcome['pages_failed']} failed, {outcome['documents']} documents, {outcome['chunks']} chunks"
    )
    for failure in outcome.get("failures", [])[:5]:
        print(f"    ! {failure.get('url')}: {failure.get('error')}")
    if len(outcome.get("failures", [])) > 5:
        print(f"    ! ... and {len(outcome['failures']) - 5} more")
    seconds = float(outcome.get("crawl_seconds", 0.0)) + float(outcome.get("build_seconds", 0.0))
    if not outcome.get("bundle"):
        print(f"  pages indexed 0/{len(linked)} = {pct(0.0)} (no bundle written)")
        return
    docs = read_documents(Path(outcome["bundle"]))
    outputs: list[tuple[Page, str | None, str]] = []
    indexed: set[str] = set()
    unmatched = 0
    kinds = Counter(how for *_, how in docs)
    for url, title, markdown, how in docs:
        rel = canonical(folder, urllib.parse.urlsplit(url).path)
        if rel is None or rel not in pages:
            unmatched += 1
            continue
        if rel in indexed:
            continue
        indexed.add(rel)
        page, twin = pages[rel], (folder / rel).with_suffix(".md")
        if how != "html" and twin.is_file():  # served markdown: its own code blocks are the reference
            page = as_served_markdown(page, twin)
        outputs.append((page, norm_title(title), markdown))
    got = len(indexed & linked)
    print(
        f"  pages indexed {got}/{len(linked)} = {pct(got / len(linked) if linked else 0.0)}"
        f"  ({len(docs)} documents, {unmatched} not matched to a corpus page; obtained: "
        + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
        + ")"
    )
    missing = sorted(linked - indexed)
    if missing:
        print(f"    missing e.g. {', '.join(missing[:5])}")
    if outputs:
        res = Result("docbundle", name)
        score_outputs(res, outputs)
        print(
            f"  coverage {pct(res.coverage)}  code {pct(res.code)}  title {pct(res.title)}  "
            f"boiler lines {pct(res.boiler_lines)}  shingles {pct(res.boiler_shingles)}"
        )
    rate = len(docs) / seconds if seconds else 0.0
    print(f"  build {rate:.1f} pages/s (crawl + index {seconds:.1f} s; wall {wall:.1f} s)")
    search_quality(name, folder, Path(outcome["bundle"]), scoring)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--corpora", type=Path, required=True, help="folder holding the html-* corpora")
    ap.add_argument("--sets", nargs="*", default=list(SETS), help="corpora to build")
    ap.add_argument("--worst", type=int, default=0, help="print the N worst questions per corpus")
    ap.add_argument("--keep", type=Path, default=None, help="write configs and bundles here (kept)")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="with --keep: score the bundle kept there, if any, without building",
    )
    ap.add_argument(
        "--split", choices=("dev", "test", "all"), default="all", help="run one half of the questions only"
    )
    ap.add_argument(
        "--save-run", type=Path, metavar="FILE", help="write per-query scores (quality.py's format)"
    )
    args = ap.parse_args(argv)
    if args.reuse and args.keep is None:
        ap.error("--reuse needs --keep")
    corpora = args.corpora.resolve()
    run: dict[str, Any] = {"mode": "balanced", "per_doc": 1, "split": args.split, "sets": {}}
    scoring = Scoring(args.worst, args.split, run)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        for name in args.sets:
            run_corpus(corpora, name, args.keep, scoring, args.reuse)
    else:
        with tempfile.TemporaryDirectory(prefix="html-sites-") as tmp:
            for name in args.sets:
                run_corpus(corpora, name, Path(tmp), scoring)
    if args.save_run:
        args.save_run.write_text(json.dumps(run, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"per-query scores written to {args.save_run}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
