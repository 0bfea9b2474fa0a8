"""The nightly job for one shard of the catalogue: build, check, and package what changed.

``docbundle-index nightly --config bundles/libraries.toml --out bundles --dist dist [--library ID ...]``

For each library version: remember the bundle ``CURRENT`` named before (the last published one, when
the bundles directory was restored from the previous run), build, and when a new bundle was built, run
the library's golden queries (``bundles/golden/<id>.toml`` if present) against it with the previous
bundle as baseline. A bundle whose checks pass is packed into ``--dist`` at once (archive, ``SHA256SUMS``,
``index.json``, rewritten after every library, so a job cut at its time limit keeps what it finished); unchanged libraries are skipped; a library that fails to build or fails its checks is
left out and makes the exit status 1, while the others are still packaged.

Each run also writes ``timings.json`` into ``--dist``: the seconds each library took and the shard it ran
in, which the next night's plan reads (``plan.py``); and ``nightly.json``, what happened to each library
version (its state, failure class and counts), which ``--merge`` carries to ``--roll`` (``status.py``).

``--embed-budget MINUTES`` bounds the first embeddings of a shard: once that many minutes have passed
since the shard's start, a library version embedding for the first time (no vectors of this embedder in
its current bundle) stops at the next batch and publishes its keyword-only bundle, its rows kept in the
embedding checkpoint (``pipeline/checkpoint.py``, inside ``--out``, which the workflow caches) for the
next night to resume; the libraries after it build keyword-only until their vectors come on a later
night. So a first night, which embeds the whole catalogue (docs/releases.md, "Cost on paper"), ends
inside the job's time limit and publishes every library, and the catalogue's vectors arrive over the
next nights. ``timings.json`` records a library's seconds without its embedding (and the embedding
apart), so the plan, sized by crawl and index time, keeps its shards from one night to the next.

``--plan`` prints the CI matrices from the config and last night's timings and index (``plan.py``) and
exits; ``--plan-file FILE --shard K`` builds the libraries of shard K of that plan; ``--merge DIR ...
--release TAG`` merges the shards' ``--dist`` folders into one release folder (``--dist``), each entry
naming TAG (``docbundle.bundle.release.merge``); ``--roll DIR ... --previous FILE`` writes the catalogue
index of ``bundles-latest`` (``docbundle.bundle.release.roll``), the merged timings, the catalogue's health
``status.json`` (``status.py``) and the catalogue page ``catalogue.html`` (``page.py``) into ``--dist``.
The command's arguments and output are in ``cli/nightly.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

from docbundle.bundle.errors import BundleError
from docbundle.bundle.layout import CURRENT, current_bundle, version_dir, write_current
from docbundle.bundle.publish import batch, note_current_moved
from docbundle.bundle.release import PackagedBundle, pack_bundle, write_release_files

from ..config import load_config
from ..pipeline.build import build_target
from ..pipeline.cache import CACHE_DIR, CrawlCache
from ..pipeline.progress import ProgressFactory
from .plan import TIMINGS, LibraryTiming, Timings, write_timings
from .regress import load_golden, regress, render_regress
from .status import NightlyEntry, reason_of, write_outcomes


def run(
    config: Path,
    out: Path,
    dist: Path,
    libraries: list[str],
    golden_dir: Path,
    progress: ProgressFactory | None = None,
    shard: int | None = None,
    embed_budget: float | None = None,
) -> list[NightlyEntry]:
    """Build, check and package the given libraries (all when empty), showing each build's phases with
    ``progress`` when given; ``timings.json`` records each library's seconds (and ``shard``). First
    embeddings stop ``embed_budget`` seconds after the start (module docstring)."""
    deadline = None if embed_budget is None else time.monotonic() + embed_budget
    loaded = load_config(config)
    chosen = [loaded.get(i) for i in libraries] if libraries else loaded.libraries
    cache = CrawlCache(out / CACHE_DIR)
    entries: list[NightlyEntry] = []
    packed: list[PackagedBundle] = []
    timings = Timings()
    dist.mkdir(parents=True, exist_ok=True)
    with batch(out):  # the route index once, at the end
        for lib in chosen:
            started = time.monotonic()
            embedding = 0.0
            golden_file = golden_dir / f"{lib.id}.toml"
            for target in loaded.targets(lib):
                vdir = version_dir(out, lib.id, target.version.name)
                try:
                    previous: Path | None = current_bundle(vdir)
                except BundleError:
                    previous = None
                outcome = build_target(
                    target,
                    out,
                    cache=cache,
                    progress=progress,
                    keyword_first=deadline is not None,
                    embed_deadline=deadline,
                )
                embedding += outcome.embed_seconds
                entry = NightlyEntry(
                    library=lib.id,
                    version=target.version.name,
                    status=outcome.status,
                    message=outcome.message,
                    build_id=outcome.build_id,
                    previous=previous.name if previous else None,
                    reason=reason_of(outcome.status, outcome.failure_kind, outcome.failure_status),
                    documents=outcome.documents,
                    chunks=outcome.chunks,
                    vectors=0
                    if outcome.vectors_note
                    else outcome.chunks,  # one row per chunk when it has them
                )
                if outcome.status == "built" and outcome.bundle:
                    bundle = Path(outcome.bundle)
                    if golden_file.is_file():
                        report = regress(bundle, load_golden(golden_file), baseline=previous)
                        entry.regress = render_regress(report, per_query=False)
                        if report.failed:
                            entry.status = entry.reason = "regressed"
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
                        packed.append(pack_bundle(bundle, dist))
                entries.append(entry)
            timings.libraries[lib.id] = LibraryTiming(
                seconds=round(max(0.0, time.monotonic() - started - embedding), 3),
                embed_seconds=round(embedding, 3),
                shard=shard,
            )
            _record(dist, packed, timings, entries)
    _record(dist, packed, timings, entries)  # also when there was nothing to build
    return entries


def _record(dist: Path, packed: list[PackagedBundle], timings: Timings, entries: list[NightlyEntry]) -> None:
    """Bring ``dist`` up to date after a library: its archives are packed already; ``SHA256SUMS``,
    ``index.json``, ``timings.json`` and ``nightly.json`` are replaced atomically. A shard cut at the job's
    time limit then leaves every library it finished published by the workflow's ``if: always()`` upload,
    and those it never reached reported by their absence (``no-report``, ``status.py``)."""
    write_release_files(dist, packed)
    write_timings(timings, dist / TIMINGS)
    write_outcomes(entries, dist)
