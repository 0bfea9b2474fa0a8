"""The project's own HTML figures on real sites: serve each HTML corpus, build it, measure the bundle.

Usage::

    python benchmarks/html_sites.py --corpora ../shared/corpora [--sets html-python ...] [--keep DIR]

For each corpus (``html-python``, ``html-rustbook``, ``html-postgres``) it serves the folder with the
corpora's own ``../tools/serve_site.py`` on 127.0.0.1 (a free port; the server is stopped at the
end), writes a one-library config into a temporary folder, runs ``docbundle-index build --json``
on it, opens the bundle the build wrote and prints:

* pages indexed -- share of the distinct pages the llms.txt links (``x``, ``x.html``, ``x/``,
  ``x#part`` count once) that have a document in the bundle (goal >= 99%);
* coverage, code intact, titles, boilerplate -- as ``benchmarks/html_candidates.py`` defines them,
  on the bundle's documents (the markdown a page became) against the same references;
* pages/s -- documents / (crawl + index seconds) from the crawl report, and the wall time.

When the build fails or indexes nothing, it prints what the crawl report says (the build's message
and its first page failures) and the figures it has; it never makes one up. It asserts nothing.
"""

from __future__ import annotations

import argparse
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from html_candidates import SETS, Page, Result, load_corpus, norm_title, pct, score_outputs

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


def canonical(folder: Path, path: str) -> str | None:
    """The corpus file a site path names (``x`` / ``x.html`` / ``x/`` / ``x.md``), or None."""
    path = urllib.parse.unquote(path.split("#", 1)[0].split("?", 1)[0]).lstrip("/")
    if path.endswith(".html.md"):
        path = path[: -len(".md")]
    elif path.endswith(".md") and (folder / (path[:-3] + ".html")).is_file():
        path = path[:-3] + ".html"
    candidates = (
        [path + "index.html"]
        if path.endswith("/") or not path
        else [path, path + ".html", path + "/index.html"]
    )
    for c in candidates:
        if (folder / c).is_file():
            return c
    return None


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


def read_documents(bundle: Path) -> list[tuple[str, str, str]]:
    """(url, title, markdown) of every document of a bundle."""
    from docbundle.bundle.reader import open_bundle

    opened = open_bundle(bundle)
    try:
        return [(d.url, d.title, d.text) for d in opened.store]
    finally:
        opened.close()


def run_corpus(corpora: Path, name: str, work: Path) -> None:
    folder = corpora / name
    serve = corpora.parent / "tools" / "serve_site.py"
    print(f"\n{name}")
    if not folder.is_dir() or not serve.is_file():
        print(f"  skipped: {folder} or {serve} not found")
        return
    linked, dangling = linked_pages(folder)
    pages = {p.rel: p for p in load_corpus(folder, None)}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, str(serve), str(folder), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_up(f"{base}/llms.txt", proc)
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
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
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
    for url, title, markdown in docs:
        rel = canonical(folder, urllib.parse.urlsplit(url).path)
        if rel is None or rel not in pages:
            unmatched += 1
            continue
        if rel in indexed:
            continue
        indexed.add(rel)
        outputs.append((pages[rel], norm_title(title), markdown))
    got = len(indexed & linked)
    print(
        f"  pages indexed {got}/{len(linked)} = {pct(got / len(linked) if linked else 0.0)}"
        f"  ({len(docs)} documents, {unmatched} not matched to a corpus page)"
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--corpora", type=Path, required=True, help="folder holding the html-* corpora")
    ap.add_argument("--sets", nargs="*", default=list(SETS), help="corpora to build")
    ap.add_argument("--keep", type=Path, default=None, help="write configs and bundles here (kept)")
    args = ap.parse_args(argv)
    corpora = args.corpora.resolve()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        for name in args.sets:
            run_corpus(corpora, name, args.keep)
        return 0
    with tempfile.TemporaryDirectory(prefix="html-sites-") as tmp:
        for name in args.sets:
            run_corpus(corpora, name, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
