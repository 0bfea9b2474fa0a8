"""What trusting the route index costs: a server's first build of it from verified records (issue 31).

Usage::

    python benchmarks/routing_verify.py [--libraries N] [--terms T] [--folder DIR]

A server routes only by an index it built itself from each bundle's ``routing.bin``, checked against a
manifest whose bytes match the sha256 the catalogue read (``docbundle.server.routing``), where it used
to load ``routing.idx`` as the indexer left it. This prints both over N generated libraries (the committed
golden bundle's manifest relabelled, each with a record of T terms drawn from a Zipf-like vocabulary of
50,000 words, so common words are shared and rare ones are not): loading the file (the old start), the
server's first build (the new start: every manifest and record read, checked and hashed), and a rebuild
after a reload that reuses every entry. Nothing is searched and no whoosh index is opened.

It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import tempfile
import time
from pathlib import Path

import msgspec
from docbundle.bundle.layout import write_current
from docbundle.bundle.manifest import MANIFEST_NAME, FileEntry, RoutingInfo, decode_manifest, encode_manifest
from docbundle.bundle.routeindex import build_index, read_index, update_index
from docbundle.bundle.routing import ROUTING_FILE, encode_record, make_record
from docbundle.server.catalog import Catalog, CatalogSettings
from docbundle.server.routing import Router

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "bundle" / "golden" / "v1-early"
VOCABULARY = 50_000


def generate(root: Path, libraries: int, terms: int) -> None:
    """``libraries`` bundles holding a manifest and a routing record each (nothing else is read)."""
    template = decode_manifest((GOLDEN / MANIFEST_NAME).read_bytes())
    build = template.build.build_id
    rng = random.Random(31)
    words = [f"w{i}" for i in range(VOCABULARY)]
    weights = [1.0 / (i + 1) for i in range(VOCABULARY)]
    for n in range(libraries):
        lib_id = f"lib-{n:05d}"
        bundle = root / lib_id / "latest" / build
        bundle.mkdir(parents=True)
        chosen = set(rng.choices(words, weights, k=terms * 2))
        record = make_record({w: rng.randint(1, 50) for w in sorted(chosen)[:terms]}, chunks=50)
        data = encode_record(record)
        (bundle / ROUTING_FILE).write_bytes(data)
        listed = FileEntry(path=ROUTING_FILE, size=len(data), sha256=hashlib.sha256(data).hexdigest())
        manifest = msgspec.structs.replace(
            template,
            library=msgspec.structs.replace(template.library, id=lib_id, name=lib_id),
            files=[*template.files, listed],
            routing=RoutingInfo(terms=len(record.terms), vocabulary=record.vocabulary),
        )
        (bundle / MANIFEST_NAME).write_bytes(encode_manifest(manifest))
        write_current(bundle.parent, build)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--libraries", type=int, default=2_000)
    parser.add_argument("--terms", type=int, default=300, help="terms in each library's routing record")
    parser.add_argument(
        "--folder", type=Path, help="where to generate the libraries (default: a temp folder)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = (args.folder or Path(tmp)) / f"routing-verify-{args.libraries}-{args.terms}"
        if not root.exists():
            t0 = time.perf_counter()
            generate(root, args.libraries, args.terms)
            update_index(root)  # as the indexer leaves it
            print(f"generated {args.libraries} libraries in {time.perf_counter() - t0:.1f} s")
        size = (root / "routing.idx").stat().st_size
        t0 = time.perf_counter()
        index, _ = read_index(root)
        loaded = time.perf_counter() - t0
        assert index is not None
        catalog = Catalog.load(root, settings=CatalogSettings.serving())  # as serve loads it
        router = Router(catalog)
        t0 = time.perf_counter()
        built, why = router.index(3600.0)
        first = time.perf_counter() - t0
        assert built is not None, why
        t0 = time.perf_counter()
        build_index(router._served(), built)
        reuse = time.perf_counter() - t0
        print(
            f"{args.libraries} libraries of {args.terms} terms: routing.idx {size / 1e6:.1f} MB, "
            f"{len(built.libs):,} postings"
        )
        print(f"  load routing.idx as the indexer left it (the old start): {loaded:.2f} s")
        print(f"  a server's first build from verified records (the new start): {first:.2f} s")
        print(f"  a rebuild after a reload, every entry reused: {reuse:.2f} s")
        catalog.close()


if __name__ == "__main__":
    main()
