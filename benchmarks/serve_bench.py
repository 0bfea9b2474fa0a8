"""Server benchmark: cold start over stdio, first search, warm search latency and memory.

Usage::

    python benchmarks/serve_bench.py --corpora ../shared/corpora --bundles ../bench-bundles
                                     [--runs 5] [--searches 1000] [--seed 7] [--skip stdio,rss]

Bundles of medium-en, large-en, ko, zh and ja are built once from a loopback crawl into ``--bundles``
(library id = corpus folder name; about 45 s) and reused when present. Then it prints, each beside its
target:

1. process start → first ``search_documents`` answered over stdio: the server is spawned
   (``python -m docbundle.server serve --bundles DIR``), sent ``initialize``,
   ``notifications/initialized`` and a ``tools/call`` as raw JSON-RPC lines, and timed until the
   call's answer arrives (median of ``--runs``); the first search opens and verifies large-en;
2. first search on an unopened library, in-process: ``Catalog.load`` then the first search on
   large-en (bundle verification included), median over fresh catalogs;
3. warm search p50/p99 on large-en over generated queries (keywords, identifiers such as
   ``sap.m.Table``, quoted phrases, long questions; drawn from the bundle's titles, headings and code
   with a fixed seed) plus hand-written ones;
4. resident memory (VmRSS / VmHWM) of the stdio server after it has searched all five libraries
   ``--searches`` times, and of a bare in-process catalog doing the same.

Page-cache state is not controlled: the bundle files are warm in the OS cache after the first run.
It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import select
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from process import memory
from quality import bundle_path, bundles_parser, ensure_bundles, machine

LIBRARIES = ("medium-en", "large-en", "ko", "zh", "ja")
MAIN = "large-en"
PROTOCOL = "2025-11-25"
TARGETS = {
    "stdio": 0.8,  # seconds, process start to first search_documents answer
    "first": 60.0,  # ms, first search on an unopened large-en (verification included)
    "p50": 3.0,  # ms, warm search on large-en
    "p99": 15.0,  # ms
    "rss": 150.0,  # MB, all five open after the searches
}

HAND_WRITTEN = [
    "sap.m.Table",
    "sap.ui.table.Table",
    "sap.ui.model.odata.v4.ODataModel",
    "sap.ui.core.mvc.XMLView",
    "sap.ui.define",
    "sap.m.MessageBox",
    "SmartFilterBar",
    "ODataListBinding",
    "attachPress",
    "getModel",
    "data binding",
    "two-way binding",
    "i18n resource bundle",
    "routing and navigation",
    "fragment",
    "busy indicator",
    "flexible column layout",
    "unit test with QUnit",
    "OPA5 integration test",
    "content security policy",
    '"expression binding"',
    '"growing list"',
    '"manifest.json"',
    '"component-preload.js"',
    "how do I bind an OData V4 list to a table and sort it on the server",
    "what is the difference between a JSON model and an OData model",
    "how can I make my app load faster with asynchronous module loading",
    "how do I show a message toast after the user presses a button",
    "why does my XML view not find the controller when I navigate to a detail page",
    "how do I write a custom control with its own renderer and properties",
    "how to configure the flexible column layout for a master detail app with three columns",
    "what does the smart table do with annotations like LineItem and SelectionFields",
    "how can I enable draft handling for a list report in SAP Fiori elements",
    "data model view controller table list binding",  # many common words: a slow case
]

_STOP = frozenset([
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "is", "it",
    "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "will", "with", "you", "your",
    "can", "how", "what", "when", "which", "use", "using", "used", "not", "new",
])  # fmt: skip
_IDENT_RE = re.compile(r"\bsap(?:\.[A-Za-z0-9_]+){2,}\b|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9-]{2,}")
_QUESTION_TEMPLATES = [
    "how do I {a} in my {b} app",
    "what is the recommended way to use {a} together with {b}",
    "how can I configure {a} so that {b} works",
    "why does {a} not work with {b} after upgrading",
    "{a}: how to {b}",
]


# --------------------------------------------------------------------------------------------------
# helpers


def _pct(values: Sequence[float], p: float) -> float:
    """The p-th percentile (nearest rank) of values."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))
    return ordered[k]


def _verdict(value: float, target: float) -> str:
    return "met" if value <= target else "NOT MET"


def _print_target(label: str, value: float, target: float, unit: str) -> None:
    fmt = ".3f" if unit == "s" else ".1f" if unit == "MB" else ".2f"
    print(f"  {label:<58} {value:{fmt}} {unit:<3} target ≤ {target:g} {unit}: {_verdict(value, target)}")


# --------------------------------------------------------------------------------------------------
# queries


def _bundle_docs(bundle_dir: Path) -> list[tuple[str, list[str], str]]:
    """(title, headings, first code-ish text) for every document in a bundle's store."""
    from docbundle.bundle.store import DocStore

    out: list[tuple[str, list[str], str]] = []
    with DocStore(bundle_dir) as store:
        for rec in store:
            heads = sorted({h for c in rec.chunks for h in c.heading_path if h})
            out.append((rec.title, heads, rec.text[:20000]))
    return out


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD_RE.findall(text) if w.lower() not in _STOP]


def make_queries(
    bundle_dir: Path, *, seed: int, per_kind: int, english: bool = True
) -> list[tuple[str, str]]:
    """Deterministic (kind, query) pairs drawn from a bundle's titles, headings and code identifiers.

    Kinds: ``keyword`` (1-3 words of a title or heading), ``identifier`` (dotted ``sap.*`` names and
    camelCase words found in the text), ``phrase`` (2-4 consecutive heading words in quotes) and
    ``question`` (long natural-language questions built from templates; for CJK corpora, whole
    headings instead).
    """
    rng = random.Random(seed)
    docs = _bundle_docs(bundle_dir)
    labels = sorted({t for t, _, _ in docs if t} | {h for _, hs, _ in docs for h in hs})
    idents = sorted({m for _, _, text in docs for m in _IDENT_RE.findall(text)})
    out: list[tuple[str, str]] = []
    word_labels = [lab for lab in labels if len(_content_words(lab)) >= 1] if english else labels
    for _ in range(per_kind):
        lab = rng.choice(word_labels)
        if english:
            words = _content_words(lab)
            start = rng.randrange(len(words))
            out.append(("keyword", " ".join(words[start : start + rng.randint(1, 3)])))
        else:
            out.append(("keyword", lab[: rng.randint(2, 8)]))
    if idents:
        for ident in rng.sample(idents, min(per_kind, len(idents))):
            out.append(("identifier", ident))
    multi = [lab for lab in labels if len(lab.split()) >= 2]
    for _ in range(per_kind):
        words = rng.choice(multi).split() if multi else ["x", "y"]
        start = rng.randrange(max(1, len(words) - 1))
        out.append(
            ("phrase", '"' + " ".join(words[start : start + rng.randint(2, 4)]).replace('"', "") + '"')
        )
    for _ in range(per_kind):
        if english:
            a = " ".join(_content_words(rng.choice(word_labels))[:4]).lower()
            b = " ".join(_content_words(rng.choice(word_labels))[:4]).lower()
            out.append(("question", rng.choice(_QUESTION_TEMPLATES).format(a=a, b=b)))
        else:
            out.append(("question", rng.choice(labels)))
    return [(k, q) for k, q in out if q.strip('" ')]


# --------------------------------------------------------------------------------------------------
# (1) stdio cold start, and (4) RSS of the server


def server_command(bundles: Path, template: str | None) -> list[str]:
    """The command that starts the server over stdio."""
    if template:
        return [part.replace("{bundles}", str(bundles)) for part in shlex.split(template)]
    return [sys.executable, "-m", "docbundle.server", "serve", "--bundles", str(bundles)]


class StdioServer:
    """A server subprocess spoken to with newline-delimited JSON-RPC."""

    def __init__(self, cmd: list[str]) -> None:
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._buf = b""
        self._next_id = 0

    def send(self, method: str, params: dict[str, object] | None = None, *, notify: bool = False) -> int:
        """Write one request (or notification); returns its id."""
        msg: dict[str, object] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        rid = -1
        if not notify:
            self._next_id += 1
            rid = msg["id"] = self._next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()
        return rid

    def wait_for(self, rid: int, timeout: float = 60.0) -> dict[str, object]:
        """Read lines until the answer to ``rid`` arrives."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                if not line.strip():
                    continue
                msg: dict[str, object] = json.loads(line)
                if msg.get("id") == rid and ("result" in msg or "error" in msg):
                    return msg
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer to request {rid} within {timeout} s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                data = os.read(fd, 1 << 16)
                if not data:
                    raise RuntimeError(f"the server exited (status {self.proc.wait()}): {self.stderr_tail()}")
                self._buf += data

    def call(self, name: str, arguments: dict[str, object]) -> dict[str, object]:
        """One tools/call, waited for."""
        return self.wait_for(self.send("tools/call", {"name": name, "arguments": arguments}))

    def handshake(self) -> None:
        """initialize + notifications/initialized (sent without waiting)."""
        self._init_id = self.send(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "docbundle-serve-bench", "version": "0"},
            },
        )
        self.send("notifications/initialized", notify=True)

    def stderr_tail(self) -> str:
        """The last lines the server wrote on stderr (only once it has exited)."""
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read().decode(errors="replace")[-2000:]

    def close(self) -> None:
        """Close stdin and wait; kill if it does not exit."""
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _check(answer: dict[str, object]) -> str | None:
    """A problem with a tools/call answer, or None."""
    if "error" in answer:
        return f"JSON-RPC error {answer['error']}"
    result = answer.get("result")
    if not isinstance(result, dict):
        return f"unexpected answer {str(answer)[:200]}"
    if result.get("isError"):
        content = result.get("content") or [{}]
        return f"tool error: {str(content[0].get('text', ''))[:300]}"
    return None


def bench_stdio(cmd: list[str], runs: int, query: str) -> tuple[list[float], list[float]]:
    """Seconds from spawn to the initialize answer and to the first search_documents answer, per run."""
    inits: list[float] = []
    times: list[float] = []
    for i in range(runs):
        server = StdioServer(cmd)
        try:
            server.handshake()
            rid = server.send(
                "tools/call", {"name": "search_documents", "arguments": {"query": query, "libraryId": MAIN}}
            )
            server.wait_for(server._init_id)
            inits.append(time.perf_counter() - server.t0)
            answer = server.wait_for(rid)
            times.append(time.perf_counter() - server.t0)
            problem = _check(answer)
            if problem:
                print(f"  run {i + 1}: {problem}")
        finally:
            server.close()
    return inits, times


def bench_bare_import(runs: int) -> list[float]:
    """Seconds a fresh interpreter takes to import the MCP SDK's server (what any SDK server pays)."""
    out: list[float] = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import mcp.server.mcpserver"], check=True)
        out.append(time.perf_counter() - t0)
    return out


def bench_server_rss(cmd: list[str], queries: dict[str, list[str]], searches: int) -> None:
    """RSS of the stdio server after searching every library ``searches`` times in all."""
    server = StdioServer(cmd)
    try:
        server.handshake()
        server.wait_for(server._init_id)
        idle = memory(server.proc.pid)
        libs = [lib for lib in LIBRARIES if queries.get(lib)]
        lat: list[float] = []
        errors = 0
        first_error = ""
        for i in range(searches):
            lib = libs[i % len(libs)]
            qs = queries[lib]
            t0 = time.perf_counter()
            answer = server.call(
                "search_documents", {"query": qs[(i // len(libs)) % len(qs)], "libraryId": lib}
            )
            lat.append(1000 * (time.perf_counter() - t0))
            problem = _check(answer)
            if problem:
                errors += 1
                first_error = first_error or problem
        mem = memory(server.proc.pid)
    finally:
        server.close()
    print(f"(4) memory of the stdio server ({', '.join(libs)} searched, {searches} tools/call)")
    print(f"  idle after initialize: VmRSS {idle.get('VmRSS', float('nan')):.1f} MB")
    _print_target("VmRSS after the searches", mem.get("VmRSS", float("nan")), TARGETS["rss"], "MB")
    print(f"  VmHWM (peak) {mem.get('VmHWM', float('nan')):.1f} MB")
    print(
        f"  warm tools/call round trip over stdio: p50 {_pct(lat[len(libs) :], 50):.2f} ms, "
        f"p99 {_pct(lat[len(libs) :], 99):.2f} ms (first call per library excluded)"
    )
    if errors:
        print(f"  {errors} calls failed; first: {first_error}")


# --------------------------------------------------------------------------------------------------
# (2) first search in-process, (3) warm latency, (4b) in-process RSS


def bench_first_search(bundles: Path, runs: int, query: str) -> None:
    """Catalog.load + first search on an unopened large-en, over fresh catalogs."""
    import docbundle.bundle.search  # noqa: F401 - imports are (1)'s cost, not this one's
    from docbundle.bundle.reader import verify_bundle
    from docbundle.server.catalog import Catalog

    parts: dict[str, list[float]] = {"load": [], "open": [], "search": [], "total": [], "verify": []}
    for _ in range(runs):
        t0 = time.perf_counter()
        catalog = Catalog.load(bundles)
        t1 = time.perf_counter()
        opened = catalog.open(MAIN)
        t2 = time.perf_counter()
        opened.searcher.search(query)
        t3 = time.perf_counter()
        catalog.close()
        for key, value in (("load", t1 - t0), ("open", t2 - t1), ("search", t3 - t2), ("total", t3 - t0)):
            parts[key].append(1000 * value)
        path = opened.bundle.path
        t4 = time.perf_counter()
        verify_bundle(path)
        parts["verify"].append(1000 * (time.perf_counter() - t4))
    med = {k: statistics.median(v) for k, v in parts.items()}
    print(f"(2) first search on an unopened {MAIN}, in-process (median of {runs} fresh catalogs)")
    print(f"  Catalog.load (manifests of {len(LIBRARIES)} libraries)   {med['load']:7.2f} ms")
    print(f"  catalog.open (verify + open index + searcher)   {med['open']:7.2f} ms")
    print(f"    of which verify_bundle (sha256 of every file, timed separately) ≈ {med['verify']:.2f} ms")
    print(f"  first search                                    {med['search']:7.2f} ms")
    _print_target("Catalog.load + open + first search", med["total"], TARGETS["first"], "ms")
    print(f"  (all runs: {', '.join(f'{t:.1f}' for t in parts['total'])} ms; modules imported beforehand)")


def bench_warm(bundles: Path, queries: list[tuple[str, str]], limit: int, passes: int) -> None:
    """Warm search latency on large-en, overall and by query kind."""
    from docbundle.server.catalog import Catalog

    catalog = Catalog.load(bundles)
    searcher = catalog.open(MAIN).searcher
    for _, q in queries:  # warm-up pass: fills the searcher's caches
        searcher.search(q, limit=limit)
    times: list[tuple[float, str, str]] = []
    empty = 0
    for _ in range(passes):
        for kind, q in queries:
            t0 = time.perf_counter()
            outcome = searcher.search(q, limit=limit)
            times.append((1000 * (time.perf_counter() - t0), kind, q))
            empty += not outcome.hits
    catalog.close()
    ms = [t for t, _, _ in times]
    print(
        f"(3) warm search on {MAIN}: {len(queries)} queries × {passes} passes after a warm-up pass, "
        f"limit={limit} (queries that found nothing: {empty // passes})"
    )
    _print_target("p50", _pct(ms, 50), TARGETS["p50"], "ms")
    _print_target("p99", _pct(ms, 99), TARGETS["p99"], "ms")
    print(f"  mean {statistics.fmean(ms):.2f} ms, p90 {_pct(ms, 90):.2f} ms, max {max(ms):.2f} ms")
    for kind in ("keyword", "identifier", "phrase", "question", "hand"):
        sub = [t for t, k, _ in times if k == kind]
        if sub:
            print(
                f"    {kind:<10} n={len(sub) // passes:<4} p50 {_pct(sub, 50):6.2f} ms  p99 {_pct(sub, 99):6.2f} ms"
            )
    worst = sorted({(round(t, 2), q) for t, _, q in times}, reverse=True)[:5]
    print("  slowest: " + "; ".join(f"{t:.1f} ms {q[:60]!r}" for t, q in worst))


def rss_child(bundles: Path, queries_file: Path, searches: int) -> None:
    """In a fresh process: load the catalog, open every library, search; print VmRSS as JSON."""
    from docbundle.server.catalog import Catalog

    queries: dict[str, list[str]] = json.loads(queries_file.read_text(encoding="utf-8"))
    marks: dict[str, dict[str, float]] = {"start": memory()}
    catalog = Catalog.load(bundles)
    libs = [lib for lib in LIBRARIES if queries.get(lib)]
    for lib in libs:
        catalog.open(lib)
    marks["opened"] = memory()
    for i in range(searches):
        lib = libs[i % len(libs)]
        qs = queries[lib]
        catalog.open(lib).searcher.search(qs[(i // len(libs)) % len(qs)])
    marks["searched"] = memory()
    print(json.dumps(marks))


def bench_inprocess_rss(bundles: Path, queries: dict[str, list[str]], searches: int) -> None:
    """Run ``rss_child`` in a fresh interpreter and print its figures."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as fh:
        json.dump(queries, fh)
        qfile = Path(fh.name)
    try:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--rss-child",
                str(qfile),
                "--bundles",
                str(bundles),
                "--searches",
                str(searches),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        qfile.unlink()
    if out.returncode != 0:
        print(f"  in-process RSS child failed: {out.stderr[-1500:]}")
        return
    marks = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        "  in-process (catalog only, no MCP): "
        + ", ".join(f"{k} {v.get('VmRSS', float('nan')):.1f} MB" for k, v in marks.items())
        + f" (peak {marks['searched'].get('VmHWM', float('nan')):.1f} MB)"
    )


# --------------------------------------------------------------------------------------------------


def main() -> int:
    """Build or reuse the bundles and print every figure beside its target."""
    ap = bundles_parser(__doc__.splitlines()[0], "bundles cache: built once, reused when present")
    ap.add_argument("--runs", type=int, default=5, help="cold runs for (1) and (2)")
    ap.add_argument("--searches", type=int, default=1000, help="searches before the RSS reading")
    ap.add_argument("--per-kind", type=int, default=60, help="generated warm queries per kind")
    ap.add_argument("--passes", type=int, default=3, help="timed passes over the warm queries")
    ap.add_argument("--limit", type=int, default=5, help="hits per search (the tool's default)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--server-cmd",
        help="server command line; {bundles} is replaced (default: python -m docbundle.server serve --bundles {bundles})",
    )
    ap.add_argument(
        "--skip", default="", help="comma-separated parts to skip: stdio,first,warm,rss (server),inproc-rss"
    )
    ap.add_argument("--rss-child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.rss_child:
        rss_child(args.bundles, args.rss_child, args.searches)
        return 0
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    args.bundles.mkdir(parents=True, exist_ok=True)
    if args.corpora is None:
        missing = [lib for lib in LIBRARIES if not (args.bundles / lib / "latest" / "CURRENT").is_file()]
        if missing:
            ap.error(f"bundles missing for {', '.join(missing)}: give --corpora or set DOCBUNDLE_SHARED")
        paths = {lib: p for lib in LIBRARIES if (p := bundle_path(args.bundles, lib)) is not None}
    else:
        paths = ensure_bundles(args.corpora, args.bundles, LIBRARIES)
    if MAIN not in paths:
        print(f"no {MAIN} bundle; nothing to measure", file=sys.stderr)
        return 1

    warm = make_queries(paths[MAIN], seed=args.seed, per_kind=args.per_kind)
    warm += [("hand", q) for q in HAND_WRITTEN]
    per_lib: dict[str, list[str]] = {}
    for i, lib in enumerate(LIBRARIES):
        if lib in paths:
            english = lib.endswith("-en")
            qs = make_queries(paths[lib], seed=args.seed + i, per_kind=25, english=english)
            per_lib[lib] = [q for _, q in qs]
    first_query = "sap.m.Table growing list"

    print(f"bundles: {', '.join(f'{k} ({v.name})' for k, v in paths.items())}")
    print(machine())
    cmd = server_command(args.bundles, args.server_cmd)
    if "stdio" not in skip:
        try:
            inits, times = bench_stdio(cmd, args.runs, first_query)
        except (OSError, RuntimeError, TimeoutError) as exc:
            print(f"(1) stdio: could not run {shlex.join(cmd)}: {exc}")
        else:
            print(
                f"(1) stdio: process start → first search_documents answered ({MAIN}, opened and verified on the call)"
            )
            _print_target(f"median of {len(times)}", statistics.median(times), TARGETS["stdio"], "s")
            print(f"  all runs: {', '.join(f'{t:.3f}' for t in times)} s")
            print(
                f"  of which start → initialize answered (imports, catalog): median {statistics.median(inits):.3f} s; "
                f"the first search itself (open + verify + search): {statistics.median(times) - statistics.median(inits):.3f} s"
            )
            bare = bench_bare_import(args.runs)
            ratio = statistics.median(times) / statistics.median(bare)
            print(
                f"  bare `python -c 'import mcp.server.mcpserver'` in the same run: median {statistics.median(bare):.3f} s; "
                f"start → first answer is {ratio:.2f}× it (issue 13's goal: ≤ 1.15×)"
            )
    if "first" not in skip:
        bench_first_search(args.bundles, max(args.runs, 5) + 1, first_query)
    if "warm" not in skip:
        bench_warm(args.bundles, warm, args.limit, args.passes)
    if "rss" not in skip:
        try:
            bench_server_rss(cmd, per_lib, args.searches)
        except (OSError, RuntimeError, TimeoutError) as exc:
            print(f"(4) memory of the stdio server: could not run {shlex.join(cmd)}: {exc}")
    if "inproc-rss" not in skip:
        bench_inprocess_rss(args.bundles, per_lib, args.searches)
    return 0


if __name__ == "__main__":
    sys.exit(main())
