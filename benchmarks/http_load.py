"""HTTP load benchmark: concurrent MCP clients searching large-en over streamable HTTP on loopback.

Usage::

    python benchmarks/http_load.py --bundles ../bench-bundles [--corpora ../shared/corpora]
                                   [--clients 16] [--seconds 60] [--think-ms 250] [--rate off] [--workers 1]

The large-en bundle is built into ``--bundles`` from ``--corpora`` (or ``$DOCBUNDLE_SHARED/corpora``)
the way ``benchmarks/serve_bench.py`` builds it, and reused when present. A keys file with one API
key per client is made in a temporary folder, and ``docbundle serve --transport http --keys FILE``
runs as a subprocess on 127.0.0.1 as deployed (JSON access log at INFO, to a temporary file; rate
limit ``--rate``, default ``off`` so that the figures are the server's, not the limiter's; every
request still goes through key checks and the limiter).

Each client is the MCP SDK's ``Client`` over ``streamable_http_client`` with its own key in
``X-API-Key``, calling ``search_documents`` on large-en; in the timed window a tenth of its calls are
``list_libraries`` and a tenth ``get_chunk_with_context`` around its last hit (a mixed load; the
latency figures are the searches'). Queries are drawn (fixed seed) from the
bundle's titles, headings and identifiers plus the hand-written set of serve_bench.py. Warm-up: the
clients run every distinct query once between them (untimed: opening the library, the first scrypt
of each key, the search caches). Then, for ``--seconds``, each client calls with random queries,
pausing ``--think-ms`` between calls (an assistant reads an answer before it asks again; 0 makes a
closed loop that measures capacity instead). It prints requests/s, latency percentiles, the error
count and the server's resident memory at the start and end of the timed window (sampled every
``--sample-every`` seconds, split into anonymous and file-backed pages: the document store is
memory-mapped, so pages read for the first time count as resident), each beside its target, and
asserts nothing. With ``--workers N`` (N > 1) the server forks N worker processes; the memory figures
are then the supervisor's alone. The clients run in this process: on a small machine they share the CPU with the
server.

Last, it scrapes the server's ``/metrics`` (with a client's key) and checks that the requests counted
per tool (``docbundle_requests_total``, every outcome) equal the calls the clients sent, exactly: with
``--workers 2`` one scrape must see both workers. It prints ``[OK]`` or ``[FAIL]`` per tool and exits
1 on a mismatch.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import anyio
from clikit import serve_http_argv
from process import memory as process_memory
from process import stop
from quality import bundle_path, bundles_parser, ensure_bundles, machine
from serve_bench import HAND_WRITTEN, _pct, make_queries

LIBRARY = "large-en"
TARGETS = {"p99": 100.0, "rss_growth": 10.0}  # ms at 16 clients; percent over the run


@dataclass
class Tally:
    """What the clients saw: latencies and errors of the timed window, and the warm-up count."""

    latencies: list[float] = field(default_factory=list)  # ms, successful searches
    errors: Counter[str] = field(default_factory=Counter)
    sent: Counter[str] = field(default_factory=Counter)  # calls sent, by tool (warm-up included)
    warm_calls: int = 0
    warm_errors: int = 0


def start_server(
    bundles: Path, keys: Path, rate: str, log: Path, workers: int = 1
) -> tuple[subprocess.Popen[bytes], str]:
    """Start the HTTP server as deployed; returns the process and its /mcp URL."""
    cmd = serve_http_argv(bundles, "--keys", str(keys), "--rate", rate, "--workers", str(workers))
    fh = log.open("wb")
    # stderr to a file: a pipe nobody drains would block the server once full.
    proc = subprocess.Popen(cmd, stderr=fh, stdout=subprocess.DEVNULL)
    fh.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            if "over streamable HTTP at " in line:
                return proc, line.split(" at ")[1].split()[0]
        if proc.poll() is not None:
            raise RuntimeError(
                f"server exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}"
            )
        time.sleep(0.05)
    proc.kill()
    raise TimeoutError("server did not print its URL within 60 s")


def memory(pid: int) -> dict[str, float]:
    """VmRSS, RssAnon, RssFile and VmHWM of a process in MB (empty off Linux)."""
    return process_memory(pid, ("VmRSS", "RssAnon", "RssFile", "VmHWM"))


@dataclass
class Plan:
    """The shared schedule: warm-up, then a timed window that opens once every client is warm."""

    url: str
    queries: list[str]
    clients: int
    seconds: float
    think: float
    seed: int
    warmed: int = 0
    go: anyio.Event = field(default_factory=anyio.Event)
    t_start: float = 0.0
    t_end: float = 0.0


async def client_loop(plan: Plan, index: int, key: str, tally: Tally) -> None:
    """One MCP client: its share of the warm-up queries, then random queries until the window ends."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    rng = random.Random(plan.seed + index)
    last_hit: dict[str, Any] | None = None

    async def call(tool: str, arguments: dict[str, Any]) -> tuple[float, str | None]:
        nonlocal last_hit
        tally.sent[tool] += 1
        t0 = time.perf_counter()
        try:
            r = await c.call_tool(tool, arguments)
        except Exception as exc:  # an error is a figure to report, not a reason to stop
            return 0.0, f"{type(exc).__name__}: {str(exc)[:80]}"
        if r.is_error:
            return 0.0, f"tool error: {str(r.content[0])[:80]}"
        hits = (r.structured_content or {}).get("hits") if tool == "search_documents" else None
        if hits:
            last_hit = hits[0]
        return (time.perf_counter() - t0) * 1000, None

    async def search(query: str) -> tuple[float, str | None]:
        return await call("search_documents", {"query": query, "libraryId": LIBRARY, "limit": 5})

    async def other() -> str | None:
        """A call that is not a search (a fifth of the timed ones): its error, if any."""
        if rng.random() < 0.5 or last_hit is None:
            return (await call("list_libraries", {}))[1]
        arguments = {
            "libraryId": LIBRARY,
            "documentId": last_hit["documentId"],
            "chunkId": last_hit["chunkId"],
        }
        return (await call("get_chunk_with_context", arguments))[1]

    try:
        async with (
            create_mcp_http_client(headers={"X-API-Key": key}) as http,
            Client(streamable_http_client(plan.url, http_client=http)) as c,
        ):
            # Warm-up: every distinct query once (split between the clients), so the window measures a
            # server whose caches have seen the whole query set; not timed.
            for query in plan.queries[index :: plan.clients]:
                _, err = await search(query)
                tally.warm_calls += 1
                tally.warm_errors += err is not None
            plan.warmed += 1
            if plan.warmed == plan.clients:
                plan.t_start = time.perf_counter()
                plan.t_end = plan.t_start + plan.seconds
                plan.go.set()
            await plan.go.wait()
            # Staggered starts, so that with a think time the clients do not move in lockstep.
            await anyio.sleep(rng.random() * plan.think)
            while time.perf_counter() < plan.t_end:
                if rng.random() < 0.2:
                    err = await other()
                    if err is not None:
                        tally.errors[err] += 1
                else:
                    ms, err = await search(rng.choice(plan.queries))
                    if err is not None:
                        tally.errors[err] += 1
                    else:
                        tally.latencies.append(ms)
                if plan.think:
                    await anyio.sleep(plan.think)
    except Exception as exc:
        tally.errors[f"client failed: {type(exc).__name__}: {exc}"[:120]] += 1
        plan.warmed += 1  # do not hold the others back
        if plan.warmed == plan.clients and not plan.go.is_set():
            plan.t_start = time.perf_counter()
            plan.t_end = plan.t_start + plan.seconds
            plan.go.set()


async def run_load(
    plan: Plan, keys: list[str], pid: int, every: float
) -> tuple[Tally, list[dict[str, float]]]:
    """Run the clients; returns the tally and the server's memory sampled from the window's start."""
    tally = Tally()
    samples: list[dict[str, float]] = []

    async def sample() -> None:
        await plan.go.wait()
        while time.perf_counter() < plan.t_end:
            samples.append({"t": time.perf_counter() - plan.t_start, **memory(pid)})
            await anyio.sleep(min(every, max(plan.t_end - time.perf_counter(), 0.01)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        for i, key in enumerate(keys):
            tg.start_soon(client_loop, plan, i, key, tally)
    samples.append({"t": time.perf_counter() - plan.t_start, **memory(pid)})
    return tally, samples


def main() -> int:
    """Build or reuse large-en, run the load, print the figures beside their targets."""
    ap = bundles_parser(__doc__.splitlines()[0], "bundles cache: built once, reused when present")
    ap.add_argument("--clients", type=int, default=16, help="concurrent MCP clients (default 16)")
    ap.add_argument("--seconds", type=float, default=60.0, help="timed duration (default 60)")
    ap.add_argument(
        "--think-ms",
        type=float,
        default=250.0,
        help="pause between a client's calls, ms (default 250; 0 saturates)",
    )
    ap.add_argument(
        "--sample-every", type=float, default=10.0, help="seconds between RSS samples (default 10)"
    )
    ap.add_argument("--rate", default="off", help="the server's --rate (default off)")
    ap.add_argument("--workers", type=int, default=1, help="the server's --workers (default 1)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    args.bundles.mkdir(parents=True, exist_ok=True)
    if bundle_path(args.bundles, LIBRARY) is None:
        if args.corpora is None:
            ap.error(f"no {LIBRARY} bundle under {args.bundles}: give --corpora or set DOCBUNDLE_SHARED")
        ensure_bundles(args.corpora, args.bundles, [LIBRARY])
    bundle = bundle_path(args.bundles, LIBRARY)
    if bundle is None:
        print(f"no {LIBRARY} bundle; nothing to measure", file=sys.stderr)
        return 1
    queries = [q for _, q in make_queries(bundle, seed=args.seed, per_kind=60)] + HAND_WRITTEN

    from docbundle.server.keys import create_key

    with tempfile.TemporaryDirectory(prefix="docbundle-http-load-") as tmp:
        keys_file = Path(tmp) / "keys.toml"
        keys = [create_key(keys_file, f"load client {i}")[1] for i in range(args.clients)]
        log = Path(tmp) / "server.log"
        proc, url = start_server(args.bundles, keys_file, args.rate, log, args.workers)
        try:
            launch = memory(proc.pid)
            plan = Plan(url, queries, args.clients, args.seconds, args.think_ms / 1000, args.seed)
            tally, samples = anyio.run(run_load, plan, keys, proc.pid, args.sample_every)
            wall = plan.t_end - plan.t_start
            scraped = scrape(url, keys[0])
        finally:
            stop(proc, 20)
        access = [
            line for line in log.read_text(errors="replace").splitlines() if '"event":"request"' in line
        ]
    # Time spent inside the server per search, from its access log: every warm-up call has been
    # logged before the timed window opens, so the timed searches are the search lines after them.
    calls = [json.loads(line) for line in access if '"tool":"search_documents"' in line]
    inside = [float(r["latencyMs"]) for r in calls[tally.warm_calls :] if r.get("outcome") == "ok"]

    lat = tally.latencies
    n_err = sum(tally.errors.values())
    print(
        f"bundle: {LIBRARY} ({bundle.name}); {len(queries)} distinct queries; {args.clients} clients, one API key each"
    )
    print(f"{machine()}; server --rate {args.rate}; think time {args.think_ms:g} ms per client")
    print(
        f"warm-up: {tally.warm_calls} calls (every query once), {tally.warm_errors} errors; then {wall:.1f} s timed"
    )
    if lat:
        print(f"  requests: {len(lat)} ok, {len(lat) / wall:.1f} requests/s")
        p99 = _pct(lat, 99)
        print(
            f"  latency ms: p50 {_pct(lat, 50):.1f}  p90 {_pct(lat, 90):.1f}  p99 {p99:.1f}  max {max(lat):.1f}"
        )
        print(f"  p99 target < {TARGETS['p99']:g} ms: {'met' if p99 < TARGETS['p99'] else 'NOT MET'}")
    if inside:
        print(
            f"  inside the server (access log): p50 {_pct(inside, 50):.1f}  p90 {_pct(inside, 90):.1f}  "
            f"p99 {_pct(inside, 99):.1f}  max {max(inside):.1f} ms; the rest is loopback and the clients' "
            "own work (MCP SDK parsing and output-schema validation) on the same CPUs"
        )
    print(f"  errors: {n_err} (target 0: {'met' if n_err == 0 else 'NOT MET'})")
    for what, count in tally.errors.most_common(5):
        print(f"    {count} × {what}")
    nan = float("nan")
    first, last = samples[0] if samples else {}, samples[-1] if samples else {}
    growth = (last.get("VmRSS", nan) - first.get("VmRSS", nan)) / first.get("VmRSS", nan) * 100
    print(
        f"  server RSS MB: {launch.get('VmRSS', nan):.1f} at launch; {first.get('VmRSS', nan):.1f} at the window's "
        f"start, {last.get('VmRSS', nan):.1f} at its end (peak {last.get('VmHWM', nan):.1f}): {growth:+.1f}% "
        f"(target < {TARGETS['rss_growth']:g}%: {'met' if growth < TARGETS['rss_growth'] else 'NOT MET'})"
    )
    print(
        "  RSS samples (s: total = anon + file MB): "
        + ", ".join(
            f"{x['t']:.0f}: {x.get('VmRSS', nan):.1f} = {x.get('RssAnon', nan):.1f} + {x.get('RssFile', nan):.1f}"
            for x in samples
        )
    )
    print(f"  server access-log lines: {len(access)}")
    return 0 if check_counts(tally.sent, scraped, args.workers) else 1


def scrape(url: str, key: str) -> dict[str, float]:
    """Requests per tool (every outcome) as the server's ``/metrics`` counts them."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    request = urllib.request.Request(url.removesuffix("/mcp") + "/metrics", headers={"X-API-Key": key})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    counted: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "docbundle_requests_total":
                counted[sample.labels["tool"]] += int(sample.value)
    return dict(counted)


def check_counts(sent: Counter[str], counted: dict[str, float], workers: int) -> bool:
    """Print, per tool, the calls sent beside the requests ``/metrics`` counted; True when all match."""
    print(f"metrics: one scrape of /metrics after the load ({workers} worker{'s' if workers > 1 else ''})")
    ok = True
    for tool in sorted(set(sent) | {t for t in counted if not t.startswith("_")}):
        match = counted.get(tool, 0) == sent[tool]
        ok &= match
        print(f"  [{'OK' if match else 'FAIL'}] {tool}: {sent[tool]} sent, {counted.get(tool, 0):g} counted")
    others = {t: v for t, v in counted.items() if t.startswith("_")}
    print(f"  requests that call no tool (initialize, tools/list ...): {others}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
