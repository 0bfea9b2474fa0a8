"""Hostile pages: the slowest adversarial input of each parser entry point, at sizes doubling to the cap.

Usage::

    python benchmarks/hostile.py [--max-bytes N] [--start-bytes N] [--give-up SECONDS]
    python benchmarks/hostile.py --cjk-paragraph [--cjk-sizes 1900000,5000000]
    python benchmarks/hostile.py --server resolve summary
    python benchmarks/hostile.py --hybrid-query [ARGS of benchmarks/hostile_query.py]   (semantic extra)

For each entry point (meta refresh, HTML decode, HTML parse, main-content selection, HTML conversion,
llms.txt parsing, markdown links, front matter, chunking) it builds every adversarial shape below
(long runs of one character or token, deep nesting, many attributes) at sizes doubling from
``--start-bytes`` up to ``--max-bytes`` (default: the crawler's page-size cap), times the call once per
shape and prints, per size, the slowest shape, its time, and the ratio to the previous size. Linear
code shows ratios near 2 (at most about 2 when the size doubles); a ratio near 4 is quadratic. A
shape whose call takes longer than ``--give-up`` seconds is not grown further and is marked ``over``.
Main-content selection is timed on an already parsed tree; the parse is its own row, through
``html.parse_html``, which bounds the nesting depth first (lexbor's tree building grows with the square
of the depth).

``--server resolve summary`` runs the server sections instead (issue 31, items 4 and 6): the time of one
``resolve_library`` call against the query's length at 1,000 and 10,000 generated libraries (flat or
linear, never a scan of the vocabulary per word), and one ``list_libraries`` page over a summary whose
entries name another build than ``CURRENT`` (summary rewrites and seconds against the number of such
entries). ``--hybrid-query`` runs ``benchmarks/hostile_query.py`` (issue 31, item 5): a hybrid search's
time against the query's length, and another client's search latency while the longest one runs.

``--cjk-paragraph`` runs only the "CJK paragraph size" section instead (issue 31, item 13): for each
size of ``--cjk-sizes`` (UTF-8 bytes) it builds, with ``docbundle-index build`` in a fresh process, a
local library whose one page is a single CJK paragraph of that size, and prints the build's peak RSS
(the process and its workers), the bundle's index size, the number of chunks, and the CPU seconds of
one ``search_documents`` call that returns the page (in process, through ``Docs.search``, after a
first call has opened and verified the bundle).

It prints figures and asserts nothing (issue 19).

``--hybrid-query`` runs ``hostile_query.py`` instead (issue 31: hybrid query length, and one client's long
query beside another client's searches; needs the semantic extra); its options follow the flag.

Server sections (issue 31), run instead with ``--server resolve summary`` (either or both):

- ``resolve``: ``resolve_library``'s work (``Docs.resolve_library``, what its lookup thread runs) per
  query, against query length (125 to 2,000 characters, doubling) at 1,000 and 10,000 generated
  libraries, for each hostile shape (words of two alternating letters, the vocabulary's commonest
  3-letter prefixes, random words, one long word, CJK); the slowest shape per length and the ratio
  to the previous length (linear: near 2 or below, as the work per query is bounded);
- ``summary``: one ``list_libraries`` page (maxTokens 50,000) over a catalogue summary whose N entries
  all name another build than ``CURRENT`` (copies of the golden bundle), N doubling: its time and how
  many times the summary was rewritten (one since issue 31, N before);
- ``claims``: the first ``list_libraries`` page (no maxTokens: every library, then 50,000) over a right summary
  at 1,000 and 10,000 libraries (copies of the golden bundle): each library shown is checked, its
  manifest read, since issue 31 item 10; the time of the first call, of the same call again (nothing
  read), and the difference per library shown;
- ``page``: the operator page's two data answers at 1,000 and 10,000 libraries (copies of the golden
  bundle): the first ``/ui/libraries`` (its 500 rows checked, their manifests read, since issue 35, so
  every worker shows the same rows), the same again, and ``/ui/requests`` (a scrape parsed for its
  request families) before and after those checks; the bytes of each answer and of the scrape.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import random
import shutil
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docbundle.indexer.pipeline import html, llmstxt
from docbundle.indexer.pipeline.chunk import chunk_markdown, parse_page
from docbundle.indexer.pipeline.crawl import CrawlOptions

URL = "http://127.0.0.1:8765/docs/page.html"


def _fill(unit: str, size: int, head: str = "", tail: str = "") -> str:
    return head + unit * max(0, (size - len(head) - len(tail)) // len(unit)) + tail


def _nested(open_: str, close: str, size: int, inner: str = "text") -> str:
    n = max(1, size // (len(open_) + len(close)))
    return "<html><body>" + open_ * n + inner + close * n + "</body></html>"


_REFRESH = '<meta http-equiv="refresh" content="'
HTML_SHAPES: dict[str, Callable[[int], str]] = {
    "nested <div>": lambda n: _nested("<div>", "</div>", n),
    "nested <aside><a>": lambda n: _nested("<aside><a href=#>x</a>", "</aside>", n),
    "nested <header>": lambda n: _nested("<header>", "</header>", n),
    "flat <p>": lambda n: _fill("<p>word word</p>", n, "<html><body><main>"),
    "many attributes": lambda n: _fill(' a="b"', n, "<html><body><main><div", ">text</div></main>"),
    "<a> in <h2>": lambda n: _fill("<h2><a href='#'>x</a></h2>", n, "<html><body><main>"),
    "<pre> run": lambda n: _fill("<pre>x ", n, "<html><body><main>"),
    "< run": lambda n: _fill("<", n, "<html><body>"),
    "space run": lambda n: _fill(" ", n, "<html><body>", "x"),
}
REFRESH_SHAPES: dict[str, Callable[[int], str]] = {
    "spaces in url": lambda n: _fill(" ", n, _REFRESH + "0; url=x", 'x">'),
    "quotes in url": lambda n: _fill("'", n, _REFRESH + "0; url=x", 'x">'),
    "digits and dots": lambda n: _fill("0.", n, _REFRESH, '">'),
    "url= repeated": lambda n: _fill("url=", n, _REFRESH + "0;", '">'),
    "many metas": lambda n: _fill('<meta http-equiv="refresh">', n),
}
DECODE_SHAPES: dict[str, Callable[[int], bytes]] = {
    "<meta run": lambda n: _fill("<meta ", n).encode(),
    "charset= run": lambda n: _fill("charset=", n, "<meta ").encode(),
    "<?xml spaces": lambda n: _fill(" ", n, "<?xml").encode(),
    "invalid bytes": lambda n: b"\xff" * n,
}
TEXT_SHAPES: dict[str, Callable[[int], str]] = {
    "[ run": lambda n: _fill("[", n),
    "]( run": lambda n: _fill("](", n),
    "[x]( run": lambda n: _fill("[x](", n),
    "![ run": lambda n: _fill("![", n),
    "` run": lambda n: _fill("`", n),
    "* run": lambda n: _fill("*", n),
    "\\ run": lambda n: _fill("\\", n),
    "> nesting": lambda n: _fill("> ", n),
    "- nesting": lambda n: _fill("- ", n),
    "list items": lambda n: _fill("- [a](b): c\n", n, "# T\n\n## S\n\n"),
    "headings": lambda n: _fill("## h\n", n),
    "fences": lambda n: _fill("```\n", n),
    "space run": lambda n: _fill(" ", n, "# T\n\n", "x"),
    "newline run": lambda n: _fill("\n", n, "# T", "x"),
    "< run": lambda n: _fill("<", n),
}
FRONT_SHAPES: dict[str, Callable[[int], str]] = {
    "unclosed ---": lambda n: _fill("a: b\n", n, "---\n"),
    "nested yaml": lambda n: _fill("[", n, "---\na: ", "\n---\nx\n"),
    "--- runs": lambda n: _fill("---\n", n),
    "+++ toml": lambda n: _fill("a = 1\n", n, "+++\n", "+++\nx\n"),
    "space run": lambda n: _fill(" ", n, "---\ntitle: ", "\n---\n"),
}


def _chunk(text: str) -> None:
    page = parse_page(text)
    chunk_markdown(page.body, max_depth=3, min_words=60, max_words=500)


def _select(page: str) -> Callable[[], object]:
    tree = html.parse_html(page)
    return lambda: html.select_main(tree, "generic")


ENTRY_POINTS: list[
    tuple[str, dict[str, Callable[[int], object]], Callable[[object], Callable[[], object]]]
] = [
    ("meta refresh", REFRESH_SHAPES, lambda page: lambda: html.meta_refresh_target(str(page), URL)),  # type: ignore[dict-item]
    ("html decode", DECODE_SHAPES, lambda body: lambda: html.decode_html(bytes(body), None)),  # type: ignore[dict-item]
    ("html parse (lexbor)", HTML_SHAPES, lambda page: lambda: html.parse_html(str(page))),  # type: ignore[dict-item]
    ("main-content selection", HTML_SHAPES, lambda page: _select(str(page))),  # type: ignore[dict-item]
    ("html conversion", HTML_SHAPES, lambda page: lambda: html.convert_html(str(page), URL)),  # type: ignore[dict-item]
    ("llms.txt", TEXT_SHAPES, lambda text: lambda: llmstxt.parse_llms_txt(str(text), URL)),  # type: ignore[dict-item]
    ("markdown links", TEXT_SHAPES, lambda text: lambda: llmstxt.find_links(str(text))),  # type: ignore[dict-item]
    ("front matter", FRONT_SHAPES, lambda text: lambda: parse_page(str(text))),  # type: ignore[dict-item]
    ("chunking", TEXT_SHAPES, lambda text: lambda: _chunk(str(text))),  # type: ignore[dict-item]
]


def main() -> None:
    if sys.argv[1:2] == ["--hybrid-query"]:
        import hostile_query  # benchmarks/ is on the path when this script runs

        hostile_query.main(sys.argv[2:])
        return
    if "--cjk-paragraph" in sys.argv:
        cjk_paragraph_main()
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument(
        "--max-bytes", type=int, default=CrawlOptions().max_bytes, help="largest size (default: the cap)"
    )
    ap.add_argument("--start-bytes", type=int, default=16 * 1024, help="smallest size")
    ap.add_argument(
        "--give-up", type=float, default=5.0, help="stop growing a shape whose call took this long"
    )
    ap.add_argument("--only", nargs="*", default=[], help="entry points to run (default: all)")
    ap.add_argument(
        "--server",
        nargs="+",
        choices=tuple(SERVER_SECTIONS),
        help="run these server sections instead of the page parsers (issue 31)",
    )
    args = ap.parse_args()
    if args.server:
        for section in args.server:
            SERVER_SECTIONS[section]()
        return
    sizes = []
    size = args.start_bytes
    while size <= args.max_bytes:
        sizes.append(size)
        size *= 2
    worst_ratio: dict[str, float] = {}
    for name, shapes, prepare in ENTRY_POINTS:
        if args.only and name not in args.only:
            continue
        print(f"\n{name}")
        print(f"  {'bytes':>9}  {'slowest shape':<20} {'seconds':>9}  {'x prev':>6}")
        given_up: set[str] = set()
        previous: float | None = None
        for size in sizes:
            slowest, slowest_shape = 0.0, ""
            for shape, make in shapes.items():
                if shape in given_up:
                    continue
                call = prepare(make(size))
                started = time.perf_counter()
                call()
                took = time.perf_counter() - started
                if took > args.give_up:
                    given_up.add(shape)
                    print(
                        f"  {size:>9}  {shape:<20} {took:>9.4f}  over {args.give_up:g} s: not grown further"
                    )
                    continue
                if took >= slowest:
                    slowest, slowest_shape = took, shape
            ratio = "" if previous is None or previous < 1e-3 else f"{slowest / previous:6.2f}"
            if ratio:
                worst_ratio[name] = max(worst_ratio.get(name, 0.0), slowest / previous)  # type: ignore[operator]
            print(f"  {size:>9}  {slowest_shape:<20} {slowest:>9.4f}  {ratio:>6}")
            previous = slowest
        if given_up:
            print(
                f"  shapes stopped at the --give-up time (not grown further; see their ratios above): {', '.join(sorted(given_up))}"
            )
    print("\nworst time ratio per size doubling (over 1 ms):")
    for name, ratio in worst_ratio.items():
        print(f"  {name:<24} {ratio:5.2f}")


# --- CJK paragraph size (issue 31, item 13) -----------------------------------------------------------

# The word searched for (it ends every sentence; the rest is drawn from all CJK unified ideographs, so
# nearly every pair of characters is a term of its own, as in the attack).
_CJK_WORD = "数据库"
# The build of one page in a fresh interpreter: prints its own and its workers' peak RSS (KiB on Linux).
_BUILD = """
import resource, sys
from docbundle.indexer.cli import main
code = main(sys.argv[1:])
print("RSS", max(resource.getrusage(r).ru_maxrss for r in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))
sys.exit(code)
"""


def cjk_paragraph(size: int) -> str:
    """A page that is one heading and one CJK paragraph (no line break) of about ``size`` UTF-8 bytes."""
    rng = random.Random(size)
    sentences: list[str] = []
    total = 0
    while total < size:
        sentence = (
            "".join(chr(rng.randrange(0x4E00, 0x9FA6)) for _ in range(rng.randrange(20, 60)))
            + _CJK_WORD
            + "。"
        )
        sentences.append(sentence)
        total += len(sentence.encode())
    return "# 数据库手册\n\n" + "".join(sentences) + "\n"


def _cjk_build(tmp: Path, size: int) -> tuple[int, Path]:
    """Build the one-page library in a fresh process: (peak RSS in KiB, the bundle folder)."""
    site = tmp / "site"
    site.mkdir()
    (site / "page.md").write_text(cjk_paragraph(size), encoding="utf-8")
    (site / "llms.txt").write_text("# CJK\n\n- [Page](page.md)\n", encoding="utf-8")
    config = tmp / "docbundle.toml"
    config.write_text(
        f'[[library]]\nid = "cjk"\nllms_txt = "{site / "llms.txt"}"\n'
        f"crawl = {{ max_bytes = {size + 1024 * 1024} }}\n",
        encoding="utf-8",
    )
    out = tmp / "bundles"
    run = subprocess.run(
        [sys.executable, "-c", _BUILD, "build", "--config", str(config), "--out", str(out), "--no-cache"],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        raise SystemExit(f"build of {size} bytes failed:\n{run.stdout}\n{run.stderr}")
    rss = int(run.stdout.rsplit("RSS ", 1)[1].split()[0])
    (bundle,) = (p.parent for p in out.glob("cjk/*/*/manifest.json"))
    return rss, bundle


def _cjk_search_cpu(root: Path) -> tuple[float, float]:
    """CPU seconds of the first (opening) and of a second search for the word in every sentence."""
    from docbundle.server import docs
    from docbundle.server.catalog import Catalog

    catalog = Catalog.load(root)
    try:
        times = []
        for _ in range(2):
            started = time.process_time()
            docs.Docs(catalog).search(_CJK_WORD, library_id="cjk", mode="fulltext")
            times.append(time.process_time() - started)
        return times[0], times[1]
    finally:
        catalog.close()


def cjk_paragraph_main() -> None:
    """The "CJK paragraph size" section: build cost, index size and search CPU per paragraph size."""
    ap = argparse.ArgumentParser(description="CJK paragraph size")
    ap.add_argument("--cjk-paragraph", action="store_true")
    ap.add_argument("--cjk-sizes", default="1900000,5000000", help="paragraph sizes in UTF-8 bytes")
    args = ap.parse_args()
    print("CJK paragraph size")
    print(
        f"  {'bytes':>9}  {'build RSS MB':>12}  {'index MB':>9}  {'chunks':>6}  {'open s':>7}  {'search CPU s':>12}"
    )
    for size in (int(s) for s in args.cjk_sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            rss, bundle = _cjk_build(Path(tmp), size)
            manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
            index = sum(f.stat().st_size for f in (bundle / "index").rglob("*") if f.is_file())
            chunks = manifest.get("counts", {}).get("chunks", "?")
            opening, search = _cjk_search_cpu(Path(tmp) / "bundles")
            print(
                f"  {size:>9}  {rss / 1024:>12.0f}  {index / 1e6:>9.1f}  {chunks!s:>6}  {opening:>7.2f}  {search:>12.3f}"
            )


# -- server sections (issue 31) ---------------------------------------------------------------------

RESOLVE_SIZES = (1_000, 10_000)  # libraries
QUERY_LENGTHS = (125, 250, 500, 1_000, 2_000)  # characters; 2,000 is the bound of a name
STALE_SIZES = (50, 100, 200, 400)  # summary entries naming another build than CURRENT
CLAIM_SIZES = (1_000, 10_000)  # libraries of the claims section (a right summary)
RUNS = 3  # each query timed this many times; the best is shown (the machine is shared)


def _pseudo_words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 10))) for _ in range(n)]


def _catalog(libraries: int) -> Any:
    """An in-memory catalogue of ``libraries`` generated libraries (names, descriptions of random words)."""
    from docbundle.bundle.manifest import Counts, LibraryInfo, VersionInfo
    from docbundle.bundle.summary import SummaryEntry
    from docbundle.server.catalog import Catalog, LibraryEntry, VersionEntry

    rng = random.Random(31)
    libs = {}
    for i in range(libraries):
        lib_id = f"lib-{i:05d}"
        name, second = _pseudo_words(rng, 2)
        entry = SummaryEntry(
            library=LibraryInfo(
                id=lib_id,
                name=f"{name.title()} {second} toolkit",
                description=" ".join(_pseudo_words(rng, 8)),
                category=rng.choice(("web", "data", "cloud", "ml")),
            ),
            version=VersionInfo(name="latest"),
            build_id="20260101-000000000000",
            content_hash="0" * 64,
            built_at="2026-01-01T00:00:00Z",
            manifest_sha256="0" * 64,
            counts=Counts(documents=1, chunks=1),
            languages=["en"],
        )
        libs[lib_id] = LibraryEntry(lib_id, {"latest": VersionEntry(lib_id, "latest", None, entry)}, "latest")
    return Catalog(Path(tempfile.gettempdir()), libs)


def _pairs(n: int) -> str:
    """Words of two alternating letters, 8 to 16 letters (``abababab acacacac ...``)."""
    out: list[str] = []
    for size in itertools.cycle(range(8, 17)):
        for x, y in itertools.permutations(string.ascii_lowercase, 2):
            out.append((x + y) * (size // 2) + x * (size % 2))
            if sum(len(w) + 1 for w in out) > n:
                return " ".join(out)[:n]
    raise AssertionError("unreachable")


def _resolve_shapes(catalog: Any) -> dict[str, Callable[[int], str]]:
    vocabulary = sorted(
        {w for lib in catalog.libraries() for w in f"{lib.name} {lib.description}".lower().split()}
    )
    prefixes = [p for p, _ in collections.Counter(w[:3] for w in vocabulary).most_common()]
    rng = random.Random(7)
    return {
        "letter pairs": _pairs,
        "common prefixes": lambda n: " ".join(prefixes * (n // 4 // max(len(prefixes), 1) + 1))[:n],
        "random words": lambda n: " ".join(_pseudo_words(rng, n // 4))[:n],
        "one long word": lambda n: ("ab" * n)[:n],
        "cjk": lambda n: "".join(
            chr(0x4E00 + (i * 7919) % 20_000) + (" " if i % 3 == 2 else "") for i in range(n)
        )[:n],
    }


def resolve_section() -> None:
    """Time per resolve query against its length, at 1,000 and 10,000 libraries."""
    from docbundle.server.docs import Docs

    for libraries in RESOLVE_SIZES:
        catalog = _catalog(libraries)
        docs = Docs(catalog)
        started = time.perf_counter()
        docs.resolver.index()
        print(
            f"\nresolve_library at {libraries:,} libraries (word index built in {time.perf_counter() - started:.2f} s)"
        )
        print(f"  {'chars':>6}  {'slowest shape':<16} {'ms':>8}  {'x prev':>6}")
        previous = None
        for length in QUERY_LENGTHS:
            worst, worst_shape = 0.0, ""
            for shape, make in _resolve_shapes(catalog).items():
                query = make(length)
                best = min(_timed(lambda q=query, d=docs: d.resolve_library(q, 10)) for _ in range(RUNS))
                if best >= worst:
                    worst, worst_shape = best, shape
            ratio = "" if previous is None else f"{worst / previous:6.2f}"
            print(f"  {length:>6}  {worst_shape:<16} {worst * 1000:>8.2f}  {ratio:>6}")
            previous = worst
        catalog.close()


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


GOLDEN_BUILD = "20260101-573833773b18"


def _golden_copies(root: Path, n: int) -> None:
    """``n`` libraries under ``root``, each the golden bundle (hard links) under its own id, and the
    catalogue summary written from their manifests (``Catalog.load`` over a folder with none)."""
    import msgspec
    from docbundle.bundle.manifest import MANIFEST_NAME, decode_manifest, encode_manifest
    from docbundle.server.catalog import Catalog

    golden = Path(__file__).resolve().parent.parent / "tests" / "bundle" / "golden" / "v1-early"
    for i in range(n):
        vdir = root / f"lib-{i:05d}" / "latest"
        shutil.copytree(golden, vdir / GOLDEN_BUILD, copy_function=os.link)
        # Relabelled (a new file: the others stay hard links); the manifest is not in its own list.
        manifest = vdir / GOLDEN_BUILD / MANIFEST_NAME
        m = decode_manifest(manifest.read_bytes())
        m = msgspec.structs.replace(m, library=msgspec.structs.replace(m.library, id=f"lib-{i:05d}"))
        manifest.unlink()
        manifest.write_bytes(encode_manifest(m))
        (vdir / "CURRENT").write_text(GOLDEN_BUILD + "\n", encoding="ascii")
    Catalog.load(root).close()  # no summary yet: read from the manifests and written


def summary_section() -> None:
    """One list_libraries page over a summary whose every entry names another build than CURRENT."""
    import msgspec
    from docbundle.bundle import summary
    from docbundle.server.catalog import Catalog
    from docbundle.server.docs import Docs

    writes: list[int] = []
    write = summary.write_summary

    def counted(root: Path, entries: Any) -> bool:
        writes.append(1)
        return write(root, entries)

    summary.write_summary = counted  # type: ignore[assignment]
    print("\nlist_libraries over a stale catalogue summary (every entry names another build than CURRENT)")
    print(f"  {'entries':>7}  {'listed':>6}  {'rewrites':>8}  {'seconds':>8}  {'x prev':>6}")
    previous = None
    for n in STALE_SIZES:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "bundles"
            _golden_copies(root, n)
            lie = [
                msgspec.structs.replace(e, build_id="20250101-000000000000")
                for e in summary.read_summary(root) or []
            ]
            write(root, lie)
            catalog = Catalog.load(root)
            writes.clear()
            took = _timed(lambda c=catalog: Docs(c).list_libraries(max_tokens=50_000))
            listed = len(Docs(catalog).list_libraries(max_tokens=50_000).libraries)
            catalog.close()
        ratio = "" if previous is None else f"{took / previous:6.2f}"
        print(f"  {n:>7}  {listed:>6}  {len(writes):>8}  {took:>8.3f}  {ratio:>6}")
        previous = took
    summary.write_summary = write  # type: ignore[assignment]


def claims_section() -> None:
    """The first list_libraries page over a summary that is right, at N libraries: each library the page
    shows is checked, its manifest read (issue 31, item 10: a checked entry is the manifest's, never
    the summary's claim); the second page call finds them checked and reads nothing."""
    from docbundle.server.catalog import Catalog
    from docbundle.server.docs import Docs

    print("\nlist_libraries over a right summary: the first page checks what it shows (manifests read)")
    print(
        f"  {'libraries':>9}  {'maxTokens':>9}  {'listed':>6}  {'first s':>8}  {'again s':>8}  {'ms/check':>8}"
    )
    for n in CLAIM_SIZES:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "bundles"
            _golden_copies(root, n)
            for max_tokens in (None, 50_000):
                catalog = Catalog.load(root)
                docs = Docs(catalog)
                first = _timed(lambda d=docs, t=max_tokens: d.list_libraries(max_tokens=t))
                again = _timed(lambda d=docs, t=max_tokens: d.list_libraries(max_tokens=t))
                listed = len(docs.list_libraries(max_tokens=max_tokens).libraries)
                catalog.close()
                shown = "none" if max_tokens is None else max_tokens
                per = (first - again) / max(listed, 1) * 1000
                print(f"  {n:>9}  {shown:>9}  {listed:>6}  {first:>8.3f}  {again:>8.3f}  {per:>8.2f}")


def page_section() -> None:
    """The operator page's data at N libraries: ``/ui/libraries`` checks the rows it shows (issue 35),
    ``/ui/requests`` parses a scrape, which grows with the libraries checked."""
    import json

    from docbundle.server.catalog import Catalog
    from docbundle.server.http.metrics import Metrics
    from docbundle.server.http.page import library_rows, request_figures

    print("\noperator page: /ui/libraries (first, again) and /ui/requests (before, after the checks)")
    print(
        f"  {'libraries':>9}  {'rows':>5}  {'first s':>8}  {'again s':>8}  {'KB':>6}"
        f"  {'req s':>7}  {'req s':>7}  {'scrape KB':>9}  {'req KB':>6}"
    )
    for n in CLAIM_SIZES:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "bundles"
            _golden_copies(root, n)
            catalog = Catalog.load(root)
            metrics = Metrics(catalog)
            metrics.tools = frozenset({"search_documents"})
            for i in range(100):  # a request series to summarise
                metrics.record(
                    "/mcp",
                    {"rpcMethod": "tools/call", "tool": "search_documents", "outcome": "ok"},
                    0.001 * (i % 50),
                    None,
                    scrape=False,
                )
            before = _timed(lambda m=metrics: request_figures(m.scrape()))
            first = _timed(lambda c=catalog: library_rows(c, b""))
            again = _timed(lambda c=catalog: library_rows(c, b""))
            rows = library_rows(catalog, b"")
            after = _timed(lambda m=metrics: request_figures(m.scrape()))
            scraped = metrics.scrape()
            figures = request_figures(scraped)
            catalog.close()
        size = len(json.dumps(rows)) / 1000
        print(
            f"  {n:>9}  {rows['shown']:>5}  {first:>8.3f}  {again:>8.3f}  {size:>6.0f}  {before:>7.3f}"
            f"  {after:>7.3f}  {len(scraped) / 1000:>9.0f}  {len(json.dumps(figures)) / 1000:>6.1f}"
        )


SERVER_SECTIONS: dict[str, Callable[[], None]] = {
    "resolve": resolve_section,
    "summary": summary_section,
    "claims": claims_section,
    "page": page_section,
}


if __name__ == "__main__":
    main()
