"""The nightly job at catalogue scale, rehearsed on loopback: two nights of ``docbundle-index nightly``.

Usage: python benchmarks/nightly_rehearsal.py --corpora ../shared/corpora [--libraries 1000] [--shards K]
                                              [--work DIR] [--embed] [--timeout 10] [--retries 1]

A fake web on 127.0.0.1 (``tests/fakeweb.py``) serves ``--libraries`` documentation sites: the shared
corpora (markdown and HTML), the real llms.txt files of ``llms-txt-wild`` (links rewritten to loopback
pages), and generated sites, healthy or with one fault each (404/410, 429 with Retry-After, 503, timeouts,
slow bodies, robots.txt, HTML-only sites, JavaScript shells, redirects to another host, an llms.txt that
is HTML, an llms-full.txt over the page cap, a dead host). Night one runs the workflow's steps for all of
them (``tests/rehearsal.py``: plan, one build per shard, merge per release, roll the release index);
then the web changes (sites edited, broken, mended) and night two runs them again.

It prints, per night: wall time per shard, HTTP requests answered and documents built per second, the
chunks built (what a night with embedding would embed, at most), and the table of fault classes,
expected against reported; then what was lost (nothing, when all is well) and whether each library that
failed on night two still pulls its night-one bundle from the rolled index (``docbundle pull --from``).
It asserts nothing. Embedding is off unless ``--embed``: the model embeds about 3.2 passages/s on two
cores, so a first night of 1,000 libraries would take hours; ``docs/releases.md`` ("Cost on paper")
turns the chunk counts into runner time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakeweb import FakeWeb, SiteSpec, generated_specs, serve_fakeweb  # noqa: E402
from rehearsal import (  # noqa: E402
    Night,
    check_nothing_lost,
    class_table,
    expected_classes,
    pull_installs,
    two_nights,
)

#: The corpora served as sites, and the class each must report (HTML converted, or markdown).
CORPORA: dict[str, str] = {
    "medium-en": "built",
    "large-en": "built",
    "ko": "built",
    "zh": "built",
    "ja": "built",
    "html-python": "built:html",
    "html-rustbook": "built",  # 53 of its pages have a markdown sibling, served to Accept: text/markdown
    "html-postgres": "built:html",
}
#: The plan's estimate of a library version with no timings (100 pages at 0.2 s), to size night one's shards.
ESTIMATED_SECONDS = 20.0
#: The workflow's expected time of one shard (``nightly --plan``'s default --target-minutes).
WORKFLOW_MINUTES = 30.0
#: Pages cap of the crawl: the crawler's default (5 MiB), so the largest real llms-full.txt files fit.
MAX_BYTES = 5 * 1024 * 1024


def build_web(web: FakeWeb, corpora: Path | None, libraries: int, seed: int) -> None:
    """The corpora (when given), then the wild llms.txt files, then generated sites up to ``libraries``."""
    if corpora is not None:
        for name, expected in CORPORA.items():
            if (corpora / name / "llms.txt").is_file() and len(web.specs) < libraries:
                web.add_corpus(corpora / name, name).expected = expected
        wild = corpora / "llms-txt-wild"
        files = sorted(p for p in wild.rglob("*.txt") if p.is_file())
        for n, file in enumerate(files):
            if len(web.specs) >= libraries:
                break
            web.add_wild(file, f"wild-{n:02d}")
    for spec in generated_specs(libraries - len(web.specs), seed, start=len(web.specs)):
        web.add_generated(spec)


def report_night(night: Night, want: dict[str, str], specs: list[SiteSpec]) -> list[str]:
    """Print a night's shards and class table; return the libraries in the wrong class."""
    print(f"\nnight {night.number}: {len(night.entries)} libraries in {len(night.shards)} shard(s), "
          f"{len(night.releases)} release(s); the whole night (plan, shards, merge, roll) {night.seconds:.0f} s")  # fmt: skip
    print(f"  {'shard':>5} {'libraries':>9} {'wall s':>8} {'requests':>9} {'req/s':>7} {'docs':>7} {'docs/s':>7} "
          f"{'chunks':>8} {'exit':>4}")  # fmt: skip
    for s in night.shards:
        print(f"  {s.shard:>5} {len(s.libraries):>9} {s.seconds:>8.1f} {s.requests:>9} {s.requests / s.seconds:>7.1f} "
              f"{s.documents:>7} {s.documents / s.seconds:>7.1f} {s.chunks:>8} {s.exit:>4}")  # fmt: skip
    walls = [s.seconds for s in night.shards]
    total = sum(walls)
    requests, docs = sum(s.requests for s in night.shards), sum(s.documents for s in night.shards)
    chunks = sum(s.chunks for s in night.shards)
    print(f"  all   {len(night.entries):>9} {total:>8.1f} {requests:>9} {requests / total:>7.1f} {docs:>7} "
          f"{docs / total:>7.1f} {chunks:>8}   (shards one after another; median shard {statistics.median(walls):.1f} s, "
          f"longest {max(walls):.1f} s)")  # fmt: skip
    built = [lib for lib, e in night.entries.items() if e["status"] == "built"]
    print(f"  built {len(built)}, unchanged {sum(e['status'] == 'unchanged' for e in night.entries.values())}, "
          f"failed {sum(e['status'] == 'failed' for e in night.entries.values())}; chunks in the bundles built "
          f"tonight: {chunks} ({chunks / max(1, len(built)):.0f} per built library, {chunks / max(1, docs):.1f} per document)")  # fmt: skip
    table, wrong = class_table(specs, night, want)
    print("  fault classes, expected vs reported:")
    print(table)
    return wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpora", type=Path, help="the shared corpora folder (its sites join the generated ones)"
    )
    parser.add_argument(
        "--libraries", type=int, default=1000, help="sites and libraries in all (default 1000)"
    )
    parser.add_argument(
        "--shards",
        type=int,
        help="night one's shards (sizes --target-minutes; default: the workflow's 30 minutes)",
    )
    parser.add_argument(
        "--work", type=Path, help="keep bundles, releases and logs here (default: a temporary folder)"
    )
    parser.add_argument(
        "--embed", action="store_true", help="embed chunks (hours on 2 cores at 1,000 libraries)"
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="crawl timeout, s (the catalogue's: 20)")
    parser.add_argument("--retries", type=int, default=1, help="crawl retries (the catalogue's: 3)")
    parser.add_argument("--seed", type=int, default=32)
    args = parser.parse_args()
    os.environ["DOCBUNDLE_EMBED"] = "1" if args.embed else "0"
    corpora = args.corpora if args.corpora and args.corpora.is_dir() else None
    target = (
        WORKFLOW_MINUTES
        if args.shards is None
        else args.libraries * ESTIMATED_SECONDS / args.shards / 60 * 1.001
    )
    crawl = {"timeout": args.timeout, "retries": args.retries, "max_bytes": MAX_BYTES}
    print(f"nightly rehearsal: {args.libraries} libraries, --target-minutes {target:.2f} on both nights (the "
          f"workflow's is {WORKFLOW_MINUTES:g}), shards run one after "
          f"another on this machine ({os.cpu_count()} CPUs); crawl timeout {args.timeout:g} s, {args.retries} "
          f"retr{'y' if args.retries == 1 else 'ies'}.")  # fmt: skip
    print("Embedding: " + ("on (--embed)." if args.embed else
          "off (--no-embed is the default here: the model embeds about 3.2 passages/s on two cores, so a first "
          "night would take hours; the chunk counts below are what it would embed)."))  # fmt: skip
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="docbundle-rehearsal-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        config = work / "libraries.toml"
        with serve_fakeweb(max_bytes=MAX_BYTES) as web:
            build_web(web, corpora, args.libraries, args.seed)
            specs = web.specs
            kinds = sorted({s.kind for s in specs})
            print(f"fake web: {len(specs)} sites ({', '.join(f'{k} {sum(s.kind == k for s in specs)}' for k in kinds)}); "
                  "corpora served from disk")  # fmt: skip
            nights = two_nights(web, work, config, crawl, target_minutes=target, progress=True)
            wrong: list[str] = []
            for night, want in zip(nights, expected_classes(specs, nights), strict=True):
                wrong += [f"night {night.number}: {w}" for w in report_night(night, want, specs)]
            moved = sum(nights[0].shard_of[s.library] != nights[1].shard_of[s.library] for s in specs)
            print(f"\nshard moves: {moved} of {len(specs)} libraries changed shard on night two "
                  "(each starts without its previous bundle and crawl cache)")  # fmt: skip
            lost = check_nothing_lost(work, specs, nights)
            print(f"lost: {'nothing' if not lost else len(lost)}")
            for line in lost:
                print("  " + line)
            print(f"wrong class: {'none' if not wrong else len(wrong)}")
            for line in wrong:
                print("  " + line)
            broken = [s for s in specs if s.change == "break"]
            pulled = 0
            for spec in broken:
                got = pull_installs(web, work, spec.library, work / "pulled" / spec.library)
                want_id = nights[0].entries[spec.library].get("build_id")
                pulled += got == want_id
                if got != want_id:
                    print(f"  pull {spec.library}: installed {got}, expected night one's {want_id}")
            print(
                f"failed on night two, still pullable (night one's bundle from the rolled index): {pulled} of {len(broken)}"
            )
    print(f"\nrehearsal wall time: {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
