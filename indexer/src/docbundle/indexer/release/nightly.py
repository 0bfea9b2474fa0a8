"""The nightly job for one shard of the catalogue: build, check, and package what changed.

``docbundle-index nightly --config bundles/libraries.toml --out bundles --dist dist [--library ID ...]``

For each library version: remember the bundle ``CURRENT`` named before (the last published one, when
the bundles directory was restored from the previous run), build, and when a new bundle was built, run
the library's golden queries (``bundles/golden/<id>.toml`` if present) against it with the previous
bundle as baseline. A bundle whose checks pass is packed into ``--dist`` (archive, ``SHA256SUMS``,
``index.json``); unchanged libraries are skipped; a library that fails to build or fails its checks is
left out and makes the exit status 1, while the others are still packaged.

``--shards N`` prints the catalogue split into N groups as a JSON list (the CI matrix, ``shards``) and
exits; ``--merge DIR ...`` merges the shards' ``--dist`` folders into ``--dist`` (the release,
``docbundle.bundle.release.merge``) and exits; ``--roll DIR --previous FILE`` writes the rolling release
(every library version's newest bundle, ``docbundle.bundle.release.roll``) into ``--dist`` and exits.
The command's arguments and output are in ``cli.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
from docbundle.bundle.errors import BundleError
from docbundle.bundle.layout import CURRENT, current_bundle, note_current_moved, version_dir, write_current
from docbundle.bundle.release import package

from ..config import load_config
from ..pipeline.build import build_target
from ..pipeline.cache import CACHE_DIR, CrawlCache
from ..pipeline.progress import ProgressFactory
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


def run(
    config: Path,
    out: Path,
    dist: Path,
    libraries: list[str],
    golden_dir: Path,
    progress: ProgressFactory | None = None,
) -> list[NightlyEntry]:
    """Build, check and package the given libraries (all when empty), showing each build's phases with
    ``progress`` when given."""
    catalogue = load_config(config)
    chosen = [catalogue.get(i) for i in libraries] if libraries else catalogue.libraries
    cache = CrawlCache(out / CACHE_DIR)
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
            outcome = build_target(target, out, cache=cache, progress=progress)
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
                        note_current_moved(vdir)
                if entry.status == "built":
                    to_pack.append(bundle)
            entries.append(entry)
    dist.mkdir(parents=True, exist_ok=True)
    package(to_pack, dist)
    (dist / "nightly.json").write_text(
        json.dumps(msgspec.to_builtins(entries), indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return entries
