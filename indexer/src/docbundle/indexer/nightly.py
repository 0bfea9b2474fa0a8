"""The nightly job for one shard of the catalogue: build, check, and package what changed.

``python -m docbundle.indexer.nightly --config bundles/libraries.toml --out bundles --dist dist [--library ID ...]``

For each library version: remember the bundle ``CURRENT`` named before (the last published one, when
the bundles directory was restored from the previous run), build, and when a new bundle was built, run
the library's golden queries (``bundles/golden/<id>.toml`` if present) against it with the previous
bundle as baseline. A bundle whose checks pass is packed into ``--dist`` (archive, ``SHA256SUMS``,
``index.json``); unchanged libraries are skipped; a library that fails to build or fails its checks is
left out and makes the exit status 1, while the others are still packaged.

``--shards N`` prints the catalogue split into N groups as a JSON list (the CI matrix) and exits;
``--merge DIR ...`` merges the shards' ``--dist`` folders into ``--dist`` (the release) and exits.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import msgspec
from docbundle.bundle.errors import BundleError
from docbundle.bundle.layout import CURRENT, current_bundle, version_dir, write_current
from docbundle.bundle.release import merge, package

from .build import build_target
from .cache import CrawlCache
from .config import load_config
from .errors import ConfigError
from .regress import load_golden, regress, render_regress


class NightlyEntry(msgspec.Struct, kw_only=True):
    """What the nightly job did with one library version."""

    library: str
    version: str
    status: str  # built | unchanged | failed | regressed
    message: str = ""
    build_id: str | None = None
    previous: str | None = None
    regress: str = ""


def shards(config: Path, count: int) -> list[str]:
    """The library ids split into ``count`` comma-joined groups (at most 256: GitHub's matrix limit)."""
    ids = [lib.id for lib in load_config(config).libraries]
    n = max(1, min(count, 256, len(ids)))
    return [",".join(ids[i::n]) for i in range(n) if ids[i::n]]


def run(config: Path, out: Path, dist: Path, libraries: list[str], golden_dir: Path) -> list[NightlyEntry]:
    """Build, check and package the given libraries (all when empty)."""
    catalogue = load_config(config)
    chosen = [catalogue.get(i) for i in libraries] if libraries else catalogue.libraries
    cache = CrawlCache(out / ".crawl-cache")
    entries: list[NightlyEntry] = []
    to_pack: list[Path] = []
    for lib in chosen:
        golden_file = golden_dir / f"{lib.id}.toml"
        for target in catalogue.targets(lib):
            vdir = version_dir(out, lib.id, target.version.name)
            try:
                previous: Path | None = current_bundle(vdir)
            except BundleError:
                previous = None
            outcome = build_target(target, out, cache=cache)
            entry = NightlyEntry(
                library=lib.id,
                version=target.version.name,
                status=outcome.status,
                message=outcome.message,
                build_id=outcome.build_id,
                previous=previous.name if previous else None,
            )
            if outcome.status == "built" and outcome.bundle:
                bundle = Path(outcome.bundle)
                if golden_file.is_file():
                    report = regress(bundle, load_golden(golden_file), baseline=previous)
                    entry.regress = render_regress(report, per_query=False)
                    if report.failed:
                        entry.status = "regressed"
                        entry.message = (
                            f"{len(report.failed)} golden-query expectation(s) failed; not published"
                        )
                        # Put CURRENT back: otherwise the next run would find this content "unchanged"
                        # and never publish or re-check it.
                        if previous is not None:
                            write_current(vdir, previous.name)
                        else:
                            (vdir / CURRENT).unlink(missing_ok=True)
                if entry.status == "built":
                    to_pack.append(bundle)
            entries.append(entry)
    dist.mkdir(parents=True, exist_ok=True)
    package(to_pack, dist)
    (dist / "nightly.json").write_text(
        json.dumps(msgspec.to_builtins(entries), indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return entries


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m docbundle.indexer.nightly", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--config", type=Path, default=Path("bundles/libraries.toml"))
    ap.add_argument(
        "--out", type=Path, default=Path("bundles"), help="bundles directory (restored between runs)"
    )
    ap.add_argument("--dist", type=Path, default=Path("dist"), help="where release assets are written")
    ap.add_argument("--golden", type=Path, default=Path("bundles/golden"), help="folder of <libraryId>.toml")
    ap.add_argument(
        "--library", action="append", default=[], help="a library id or comma-joined ids (repeat)"
    )
    ap.add_argument("--shards", type=int, help="print the catalogue split into N groups as JSON, and exit")
    ap.add_argument(
        "--merge", type=Path, nargs="+", metavar="DIR", help="merge shard dist folders into --dist"
    )
    args = ap.parse_args(argv)
    try:
        if args.shards:
            print(json.dumps(shards(args.config, args.shards)))
            return 0
        if args.merge:
            merged = merge(args.merge, args.dist)
            print(f"nightly: {len(merged)} bundle(s) in {args.dist}")
            return 0
        ids = [i for group in args.library for i in group.split(",") if i]
        entries = run(args.config, args.out, args.dist, ids, args.golden)
    except ConfigError as exc:
        print(f"nightly: config error: {exc}", file=sys.stderr)
        return 2
    for e in entries:
        print(f"{e.status:<10} {e.library}@{e.version} {e.build_id or ''} {e.message}")
        if e.regress:
            print("\n".join("           " + line for line in e.regress.splitlines()))
    return 1 if any(e.status in ("failed", "regressed") for e in entries) else 0


if __name__ == "__main__":
    sys.exit(main())
