"""Catalogue scale (issue 22): a server over N small libraries plus the five shared corpora.

Usage::

    python benchmarks/catalog_scale.py [--corpora ../shared/corpora] [--bundles DIR] [--work DIR]
                                       [--sizes 100,1000,10000] [--calls 1000] [--runs 3] [--seed 7]
                                       [--reuse]

For each N it generates N small libraries (``generate_catalog``: real bundles, each written by the
indexer's own build in this process from a local three-page site, then copied under new ids with
their manifests, content hashes and build ids made again, so every one is a valid bundle that verifies)
into ``--work``/N, links in the five corpora's bundles (built once into ``--bundles`` by
``quality.ensure_bundles``, as ``serve_bench`` does) when ``--corpora`` exists, and prints:

1. start → first answer: ``docbundle serve`` spawned over stdio, driven by the MCP SDK client, timed
   from the spawn to the answer of its first ``search_documents`` (median of ``--runs``; the same
   search of the same library, the first corpus, at every N); the same for N = 5 (the five corpora alone, or five generated libraries without them): the bar is
   N = 10,000 ≤ 1.2 × N = 5;
2. RSS of the server idle (after the first answer) and after ``--calls`` mixed calls (searches in one
   library, list_libraries pages, resolve_library, list_documents, get_document), bar ≤ 250 MB;
3. the first list_libraries page: milliseconds and characters (text and JSON together), bar ≤ 16 KB;
4. resolve_library p50/p99 over names of the catalogue (exact ids, names, typos, prefixes), bar 20 ms.

``--reuse`` measures a catalogue already generated under ``--work`` (same N, same corpora) as it is,
instead of generating it again (at N = 10,000 that takes minutes).

It prints figures and asserts nothing. ``generate_catalog(root, n, seed)`` is importable (the
cross-library search benchmark generates its distractor libraries with it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from process import cpu_seconds, memory

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ("medium-en", "large-en", "ko", "zh", "ja")
TEMPLATES = 20  # libraries built for real; the others are copies of them under new identities
CATEGORIES = ("web", "data", "cloud", "mobile", "devtools", "security", "ml", "database", "testing", "ui")
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "router",
    "cache",
    "queue",
    "stream",
    "parser",
    "render",
    "widget",
    "schema",
    "token",
    "session",
    "plugin",
    "layout",
    "signal",
    "buffer",
    "cluster",
    "shard",
    "replica",
    "index",
    "column",
    "ledger",
    "vector",
    "tensor",
    "kernel",
    "socket",
    "thread",
    "module",
    "bundle",
    "compiler",
    "linker",
    "matrix",
    "graph",
    "node",
    "edge",
    "pixel",
    "canvas",
    "sprite",
    "shader",
    "codec",
    "packet",
    "frame",
    "gateway",
    "proxy",
    "tunnel",
    "broker",
    "topic",
    "channel",
    "cursor",
    "batch",
    "window",
    "lambda",
    "closure",
]


def _page(rng: random.Random, title: str) -> str:
    words = rng.sample(WORDS, 12)
    body = "\n\n".join(
        f"## {w.title()} {rng.choice(WORDS)}\n\n"
        + " ".join(rng.choice(WORDS) for _ in range(70))
        + f"\n\n```python\n{w}_{rng.randrange(1000)}.run()\n```"
        for w in words[:3]
    )
    return f"# {title}\n\n{' '.join(words)}.\n\n{body}\n"


def _build_templates(work: Path, count: int, seed: int, pages: int = 3) -> list[Path]:
    """``count`` bundles built by the indexer (``build_target``) from local sites of ``pages`` pages."""
    from docbundle.indexer.config import load_config
    from docbundle.indexer.pipeline.build import build_target

    rng = random.Random(seed)
    sites, entries = work / "sites", []
    for t in range(count):
        site = sites / f"t{t}"
        site.mkdir(parents=True, exist_ok=True)
        links = []
        for p in range(pages):
            title = f"{rng.choice(WORDS).title()} {rng.choice(WORDS)} guide {p}"
            (site / f"p{p}.md").write_text(_page(rng, title), encoding="utf-8")
            links.append(f"- [{title}](p{p}.md): {rng.choice(WORDS)} and {rng.choice(WORDS)}")
        (site / "llms.txt").write_text(
            f"# Template {t}\n\n> Generated.\n\n## Docs\n\n" + "\n".join(links) + "\n"
        )
        entries.append(
            f'[[library]]\nid = "template-{t}"\nname = "Template {t}"\nllms_txt = "{site}/llms.txt"\n'
        )
    config = work / "libraries.toml"
    config.write_text("\n".join(entries), encoding="utf-8")
    out = work / "templates"
    catalogue = load_config(config)
    built = []
    for lib in catalogue.libraries:
        for target in catalogue.targets(lib):
            outcome = build_target(target, out)
            if outcome.status != "built" or outcome.bundle is None:
                raise RuntimeError(f"template {lib.id}: {outcome.status} {outcome.message}")
            built.append(Path(outcome.bundle))
    return built


def _copy_as(template: Path, root: Path, lib_id: str, name: str, description: str, category: str) -> None:
    """``template`` published under ``root/lib_id/latest`` as a library of its own: the manifest's
    library, content hash and build id made again for the new identity, the files hard-linked."""
    import msgspec
    from docbundle.bundle import layout
    from docbundle.bundle.contenthash import content_hash
    from docbundle.bundle.manifest import LibraryInfo, decode_manifest, encode_manifest
    from docbundle.bundle.reader import read_manifest
    from docbundle.bundle.store import DocStore

    m = read_manifest(template)
    info = LibraryInfo(id=lib_id, name=name, description=description, category=category)
    with DocStore(template) as store:
        docs = list(store)
    chash = content_hash(info, m.version, m.build.chunking, m.build.search, docs)
    build_id = layout.make_build_id(m.build.built_at, chash)
    vdir = root / lib_id / "latest"
    tmp = vdir / f".tmp-{build_id}"
    shutil.copytree(template, tmp, copy_function=os.link)
    (tmp / "manifest.json").unlink()
    new = msgspec.structs.replace(
        m,
        library=info,
        build=msgspec.structs.replace(m.build, build_id=build_id, content_hash=chash, input_hash=""),
    )
    (tmp / "manifest.json").write_bytes(encode_manifest(decode_manifest(encode_manifest(new))))
    os.rename(tmp, vdir / build_id)
    layout.write_current(vdir, build_id)


def generate_catalog(root: Path, n: int, seed: int = 7, pages: int = 3) -> list[str]:
    """Write ``n`` small libraries of ``pages`` pages into the bundles folder ``root`` (ids
    ``lib-00000``...), all written from ``WORDS``, each a valid bundle that verifies; returns their ids. The summary (catalog.json) is written once at the
    end, as a build of each would have left it."""
    from docbundle.bundle.summary import update_summary

    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="docbundle-catalog-") as tmp:
        templates = _build_templates(Path(tmp), min(TEMPLATES, max(n, 1)), seed, pages)
        ids = []
        for i in range(n):
            lib_id = f"lib-{i:05d}"
            a, b = rng.sample(WORDS, 2)
            name = f"{a.title()}{b.title()} {i}"
            description = f"{a} {b} toolkit: {' '.join(rng.sample(WORDS, 6))}"
            _copy_as(templates[i % len(templates)], root, lib_id, name, description, rng.choice(CATEGORIES))
            ids.append(lib_id)
    update_summary(root)
    return ids


# -- measuring ----------------------------------------------------------------------------------


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


async def _session(bundles: Path, libs: list[str], calls: int, seed: int) -> dict[str, float]:
    import anyio
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "docbundle.server", "serve", "--bundles", str(bundles)]
    )
    out: dict[str, float] = {}
    rng = random.Random(seed)
    with anyio.fail_after(600):
        t0 = time.perf_counter()
        async with Client(params) as client:
            first = await client.call_tool(
                "search_documents", {"query": "router cache", "libraryId": libs[0]}
            )
            out["start"] = time.perf_counter() - t0
            out["first_error"] = float(first.is_error)
            pid = _server_pid()
            out["start_cpu"] = cpu_seconds(pid) if pid else float("nan")
            out["rss_idle"] = memory(pid).get("VmRSS", float("nan")) if pid else float("nan")
            t1 = time.perf_counter()
            page = await client.call_tool("list_libraries", {})
            out["list_ms"] = 1000 * (time.perf_counter() - t1)
            out["list_chars"] = len(json.dumps([c.model_dump() for c in page.content])) + len(
                json.dumps(page.structured_content or {})
            )
            out["total"] = float((page.structured_content or {}).get("total", -1))
            names = [f"lib-{rng.randrange(len(libs)):05d}" for _ in range(20)] + [
                "router",
                "cach",
                "vectr toolkit",
            ]
            lat: list[float] = []
            for name in names * 5:
                t = time.perf_counter()
                await client.call_tool("resolve_library", {"name": name})
                lat.append(1000 * (time.perf_counter() - t))
            out["resolve_first"] = lat[0]
            out["resolve_p50"], out["resolve_p99"] = _pct(lat[1:], 50), _pct(lat[1:], 99)
            cursor = (page.structured_content or {}).get("nextCursor")
            for i in range(calls):
                lib = rng.choice(libs)
                kind = i % 5
                if kind == 0 or kind == 1:
                    await client.call_tool(
                        "search_documents", {"query": " ".join(rng.sample(WORDS, 2)), "libraryId": lib}
                    )
                elif kind == 2:
                    r = await client.call_tool("list_libraries", {"cursor": cursor} if cursor else {})
                    cursor = (r.structured_content or {}).get("nextCursor")
                elif kind == 3:
                    await client.call_tool("resolve_library", {"name": rng.choice(WORDS)})
                else:
                    await client.call_tool("list_documents", {"libraryId": lib})
            out["rss_after"] = memory(pid).get("VmRSS", float("nan")) if pid else float("nan")
    return out


def _server_pid() -> int | None:
    """The pid of this process's ``docbundle serve`` child (the SDK client does not expose it)."""
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == me and b"docbundle.server" in cmd:
            return int(d.name)
    return None


def _resolve_in_process(bundles: Path, libs: list[str], seed: int) -> dict[str, float]:
    """resolve_library's own time (``Docs.resolve_library`` on a loaded catalogue), without the stdio
    round trip: the first call (which builds the word index) and p50/p99 of the rest."""
    from docbundle.server.catalog import Catalog
    from docbundle.server.docs import Docs

    rng = random.Random(seed)
    catalog = Catalog.load(bundles)
    try:
        docs = Docs(catalog)
        names = [rng.choice(libs) for _ in range(40)] + [
            f"{a} {b}" for a, b in (rng.sample(WORDS, 2) for _ in range(40))
        ]
        names += [w[:-1] + "x" for w in rng.sample(WORDS, 20)]  # typos
        lat = []
        for name in names:
            t = time.perf_counter()
            docs.resolve_library(name)
            lat.append(1000 * (time.perf_counter() - t))
    finally:
        catalog.close()
    return {"first": lat[0], "p50": _pct(lat[1:], 50), "p99": _pct(lat[1:], 99)}


async def _first_answer(bundles: Path, library: str) -> float:
    """Seconds from spawning ``docbundle serve`` over stdio to the answer of one search of ``library``."""
    import anyio
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "docbundle.server", "serve", "--bundles", str(bundles)]
    )
    with anyio.fail_after(600):
        t0 = time.perf_counter()
        async with Client(params) as client:
            await client.call_tool("search_documents", {"query": "router cache", "libraryId": library})
            return time.perf_counter() - t0


def paired_starts(small: Path, big: Path, library: str, pairs: int) -> tuple[float, float, float]:
    """Start → first answer over ``small`` and ``big`` taken in turn, ``pairs`` times (so a machine that
    drifts, or a page cache that warms, weighs on both alike): the two medians and the median ratio."""
    import anyio

    a, b = [], []
    for _ in range(pairs):
        a.append(anyio.run(_first_answer, small, library))
        b.append(anyio.run(_first_answer, big, library))
    return (
        statistics.median(a),
        statistics.median(b),
        statistics.median(y / x for x, y in zip(a, b, strict=True)),
    )


def measure(bundles: Path, libs: list[str], calls: int, runs: int, seed: int) -> dict[str, float]:
    """The figures of one catalogue: the median start of ``runs`` sessions, the rest from the last."""
    import anyio

    results = [anyio.run(_session, bundles, libs, calls if r == runs - 1 else 0, seed) for r in range(runs)]
    last = results[-1]
    last["start"] = statistics.median(r["start"] for r in results)
    last["start_cpu"] = statistics.median(r["start_cpu"] for r in results)
    last.update({f"inproc_{k}": v for k, v in _resolve_in_process(bundles, libs, seed).items()})
    return last


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link of ``src`` (no bytes copied), or a copy when it lives on another file system."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _link_corpora(bundles: Path, target: Path) -> list[str]:
    """The corpora's library folders under ``target``: real folders of hard-linked files, since a server
    refuses a library folder that is a symbolic link (docs/security.md, "Files of the bundles folder")."""
    linked = []
    for name in CORPORA:
        if (bundles / name).is_dir():
            shutil.copytree(bundles / name, target / name, copy_function=_link_or_copy)
            linked.append(name)
    return linked


def _reusable(root: Path, n: int) -> tuple[list[str], list[str]] | None:
    """The corpora and generated ids of a catalogue generated earlier under ``root`` for this ``n``
    (None when there is none, or it holds another number of libraries)."""
    if not (root / "catalog.json").is_file():
        return None
    corpora = [name for name in CORPORA if (root / name).is_dir()]
    ids = sorted(p.name for p in root.iterdir() if p.name.startswith("lib-") and p.is_dir())
    wanted = 0 if n == 5 and corpora else n
    return (corpora, ids) if len(ids) == wanted else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", type=Path, default=ROOT.parent / "shared" / "corpora")
    parser.add_argument("--bundles", type=Path, default=None, help="the five corpora's bundles (built once)")
    parser.add_argument("--work", type=Path, default=None, help="where the generated catalogues go (kept)")
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--pairs", type=int, default=8, help="start-only sessions of N = 5 and each N taken in turn (0: none)"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="measure the catalogues already under --work when they fit"
    )
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="docbundle-catalog-scale-"))
    corpora_bundles: Path | None = None
    if args.corpora.is_dir():
        from quality import ensure_bundles

        corpora_bundles = args.bundles or work / "corpora-bundles"
        ensure_bundles(args.corpora, corpora_bundles, CORPORA, quiet=True)
    sizes = [5, *(int(s) for s in args.sizes.split(",") if s)]
    rows = []
    for n in sizes:
        root = work / f"n{n}"
        reused = _reusable(root, n) if args.reuse else None
        if reused is not None:
            corpora, ids = reused
            made = 0.0
        else:
            if root.exists():
                shutil.rmtree(root)
            root.mkdir(parents=True)
            corpora = _link_corpora(corpora_bundles, root) if corpora_bundles else []
            t0 = time.perf_counter()
            ids = generate_catalog(root, 0 if n == 5 and corpora else n, args.seed)
            made = time.perf_counter() - t0
        if corpora and reused is None:
            from docbundle.bundle.summary import update_summary

            update_summary(root)
        libs = (corpora or []) + ids if n == 5 else ids + corpora
        # The first answer is the same search of the same library at every N (the first corpus), so the
        # ratio measures the catalogue's size alone: a generated library carries vectors, and a first
        # hybrid search waits for the query encoder to load, which the five corpora's bundles may not.
        if corpora:
            libs.remove(corpora[0])
            libs.insert(0, corpora[0])
        print(
            f"N = {n}: {len(ids)} generated in {made:.1f} s, {len(corpora)} corpora; measuring...", flush=True
        )
        fig = measure(root, libs, args.calls if n != 5 else 0, args.runs, args.seed)
        fig["first_library"] = libs[0] if corpora else ""  # type: ignore[assignment]
        rows.append((n, fig))
        print(
            f"  start → first answer {fig['start']:.2f} s (server CPU {fig['start_cpu']:.2f} s); RSS idle {fig['rss_idle'] / 1:.0f} MB, after "
            f"{args.calls if n != 5 else 0} calls {fig.get('rss_after', float('nan')):.0f} MB; list_libraries first page "
            f"{fig['list_ms']:.1f} ms, {fig['list_chars']:.0f} characters (total {fig['total']:.0f}); resolve_library "
            f"p50 {fig['resolve_p50']:.1f} ms, p99 {fig['resolve_p99']:.1f} ms over stdio (first call {fig['resolve_first']:.0f} ms); "
            f"in-process p50 {fig['inproc_p50']:.2f} ms, p99 {fig['inproc_p99']:.2f} ms (first, index built: "
            f"{fig['inproc_first']:.0f} ms)",
            flush=True,
        )
    base = rows[0][1]["start"]
    for n, fig in rows[1:]:
        print(
            f"N = {n}: start {fig['start'] / base:.2f}× N = 5 (bar 1.2×), server CPU "
            f"{fig['start_cpu'] / rows[0][1]['start_cpu']:.2f}×; first page {fig['list_chars'] / 1024:.1f} KB "
            f"(bar 16); RSS {fig.get('rss_after', float('nan')):.0f} MB (bar 250); resolve p99 {fig['inproc_p99']:.1f} ms "
            f"in-process, {fig['resolve_p99']:.1f} ms over stdio (bar 20)"
        )
    for n, _fig in rows[1:] if args.pairs and rows[0][1].get("first_library") else []:
        small, big = work / "n5", work / f"n{n}"
        a, b, ratio = paired_starts(small, big, str(rows[0][1]["first_library"]), args.pairs)
        print(
            f"N = {n}: start, {args.pairs} sessions of each taken in turn: N = 5 {a:.2f} s, N = {n} {b:.2f} s "
            f"(medians); median ratio {ratio:.2f}× (bar 1.2×)"
        )
    print(f"catalogues kept in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
