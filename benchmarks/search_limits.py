"""Worst-case search calls: how long one hostile ``search_documents`` call can take.

Usage::

    python benchmarks/search_limits.py [--bundles DIR --library ID] [--counts 1000,10000] [--repeat 3]

Without ``--bundles`` it searches a copy of the committed golden test bundle. ``--pattern`` adds the
worst case of phrase matching, for a bundle that repeats two words everywhere. It times, in process,
through ``Docs.search`` (what the ``search_documents`` tool calls):

1. calls with N distinct made-up keywords (the issue's attack), for each N of ``--counts``: the time,
   and whether the call was refused (an input bound) or answered;
2. the largest calls the input bounds admit (the slowest a single accepted call can be): as many
   distinct keywords as allowed, each as long as allowed; a query as long as allowed made of distinct
   words, of identifiers (``a.b.c`` parts), of CJK text and of quoted phrases; the same query over every
   library at once (no libraryId). Each is timed ``--repeat`` times on a fresh catalogue (cold caches)
   and the slowest run is printed.

It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import shutil
import string
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from docbundle.bundle import query
from docbundle.server import bounds, docs
from docbundle.server.catalog import Catalog
from docbundle.server.errors import ServerError

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "bundle" / "golden" / "v1"
GOLDEN_BUILD = "20260101-573833773b18"


def golden_root(base: Path) -> Path:
    """A bundles tree holding a copy of the golden bundle, as library ``golden``."""
    vdir = base / "golden" / "latest"
    shutil.copytree(GOLDEN, vdir / GOLDEN_BUILD)
    (vdir / "CURRENT").write_text(GOLDEN_BUILD + "\n", encoding="ascii")
    return base


def words(n: int, length: int, rng: random.Random) -> list[str]:
    """``n`` distinct lowercase made-up words of ``length`` letters."""
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice(string.ascii_lowercase) for _ in range(length)))
    return sorted(out)


def timed(call: Callable[[], object]) -> tuple[float, str]:
    """Seconds the call took, and ``answered`` or the start of the error it raised."""
    start = time.perf_counter()
    try:
        result = call()
    except ServerError as exc:
        return time.perf_counter() - start, f"refused: {str(exc)[:110]}"
    note = getattr(result, "message", None)
    return time.perf_counter() - start, "answered" + (f" ({note[:90]})" if note else "")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundles", type=Path, default=None, help="bundles directory (default: golden copy)")
    p.add_argument("--library", default="golden", help="library to search (default: golden)")
    p.add_argument("--counts", default="1000,10000", help="keyword counts of the attack calls")
    p.add_argument("--repeat", type=int, default=3, help="runs of each bounded worst case")
    p.add_argument(
        "--pattern",
        default=None,
        help="two words the library repeats everywhere (e.g. 'ping pong' for tests/server/attackkit.py's "
        "repeat bundle): adds the phrase worst case, the pattern repeated and then broken",
    )
    args = p.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.bundles or golden_root(Path(tmp) / "bundles")

        def search(**kw: object) -> Callable[[], object]:
            def run() -> object:
                catalog = Catalog.load(root)
                try:
                    return docs.Docs(catalog).search(**kw)  # type: ignore[arg-type]
                finally:
                    catalog.close()

            return run

        print("# N distinct keywords in one call")
        for n in (int(c) for c in args.counts.split(",")):
            seconds, outcome = timed(search(keywords=words(n, 8, rng), library_id=args.library))
            print(f"{n:>7} keywords: {seconds:8.3f} s  {outcome}")

        max_kw = getattr(bounds, "MAX_KEYWORDS", None)
        max_kw_chars = getattr(query, "MAX_KEYWORD_CHARS", None)
        max_query = getattr(query, "MAX_QUERY_CHARS", None)
        if max_kw is None or max_kw_chars is None or max_query is None:
            print(
                "no input bounds in docbundle.server.bounds / docbundle.bundle.query: nothing more to measure"
            )
            return 0
        print(f"\n# the largest calls the bounds admit (slowest of {args.repeat} cold runs)")
        print(f"MAX_KEYWORDS={max_kw} MAX_KEYWORD_CHARS={max_kw_chars} MAX_QUERY_CHARS={max_query}")
        plain = " ".join(words(max_query // 9, 8, rng))[:max_query]
        idents = " ".join(".".join(words(4, 4, rng)) for _ in range(max_query // 20))[:max_query]
        cjk = "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(max_query))
        phrases = " ".join(
            f'"{a} {b} {c}"' for a, b, c in zip(*[iter(words(600, 6, rng))] * 3, strict=False)
        )[:max_query]
        long_kw = [" ".join(words(max_kw_chars // 9, 8, rng))[:max_kw_chars] for _ in range(max_kw)]
        cases: dict[str, dict[str, object]] = {
            f"{max_kw} keywords of {max_kw_chars} chars": {"keywords": long_kw, "library_id": args.library},
            f"query of {max_query} chars, distinct words": {"query": plain, "library_id": args.library},
            f"query of {max_query} chars, identifiers": {"query": idents, "library_id": args.library},
            f"query of {max_query} chars, CJK": {"query": cjk, "library_id": args.library},
            f"query of {max_query} chars, quoted phrases": {"query": phrases, "library_id": args.library},
            "all of it at once, every library": {"query": plain, "keywords": long_kw},
        }
        if args.pattern:
            second = args.pattern.split()[-1]
            each = (max_query - 8) // 4 - 2
            phrase = " ".join([args.pattern] * ((each - 2 * len(second) - 2) // (len(args.pattern) + 1)))
            phrase += f" {second} {second}"
            cases["4 phrases: the pattern, then broken"] = {
                "query": " ".join(f'"{phrase}"' for _ in range(4)),
                "library_id": args.library,
            }
        worst = 0.0
        for name, kw in cases.items():
            runs = [timed(search(**kw)) for _ in range(args.repeat)]
            seconds = max(r[0] for r in runs)
            worst = max(worst, seconds)
            print(f"{name:<45} {seconds:8.3f} s  {runs[-1][1]}")
        print(f"\nslowest accepted call: {worst:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
