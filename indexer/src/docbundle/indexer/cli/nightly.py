"""The ``nightly`` command: the nightly release job of one shard, and its ``--plan``, ``--merge`` and
``--roll`` steps (``indexer/release/nightly.py`` and ``plan.py`` do the work)."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from docbundle.common.clitable import Command, Group, arg

from ..errors import ConfigError
from .shared import DEFAULT_CONFIG, DEFAULT_GOLDEN_DIR, EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from ..release.plan import Timings


# -- nightly --------------------------------------------------------------------------------------


def _nightly_plan(args: argparse.Namespace) -> int:
    """``nightly --plan``: the CI matrices (JSON) or, with ``--dry-run``, the report of the plan."""
    import json

    from ..config import load_config
    from ..release import plan

    target_minutes = plan.TARGET_SECONDS / 60 if args.target_minutes is None else args.target_minutes
    if not (target_minutes > 0 and math.isfinite(target_minutes)):  # nan and inf compare as "positive"
        raise ConfigError(
            f"--target-minutes must be a positive number of minutes (e.g. 30), not {target_minutes:g}"
        )
    config = load_config(args.config)
    ids = [i for group in args.library for i in group.split(",") if i]
    if ids:  # a manual run of a few libraries: plan only those
        config = msgspec.structs.replace(config, libraries=[config.get(i) for i in dict.fromkeys(ids)])
    prefix = args.release_prefix or f"bundles-{time.strftime('%Y%m%d', time.gmtime())}"
    the_plan = plan.make_plan(
        config,
        plan.read_timings(args.timings),
        plan.read_documents(args.previous),
        release_prefix=prefix,
        target_seconds=target_minutes * 60,
        max_shards=plan.MAX_SHARDS if args.max_shards is None else args.max_shards,
    )
    if args.plan_out:
        args.plan_out.write_bytes(msgspec.json.encode(the_plan) + b"\n")
    if args.dry_run:
        sys.stdout.write(plan.render_plan(the_plan, full=args.all))
    else:
        print(json.dumps(plan.matrices(the_plan), separators=(",", ":")))
    return EXIT_OK


def _plan_libraries(args: argparse.Namespace) -> tuple[list[str], int | None]:
    """The library ids to build: ``--plan-file`` with ``--shard``, else ``--library`` (all when none)."""
    from ..release import plan

    if args.plan_file is None:
        return [i for group in args.library for i in group.split(",") if i], args.shard
    if args.shard is None or args.library:
        raise ConfigError("--plan-file needs --shard K, and no --library")
    return plan.read_plan(args.plan_file).shard(args.shard).libraries, args.shard


def _shard_timings(folders: list[Path]) -> list[Timings]:
    from ..release import plan

    return [plan.read_timings(folder / plan.TIMINGS) for folder in folders]


def _nightly_roll(args: argparse.Namespace) -> int:
    """``nightly --roll``: the release index, timings, ``status.json`` and ``catalogue.html`` of
    ``bundles-latest``, from tonight's release folders and last night's files."""
    from docbundle.bundle.release import roll
    from docbundle.bundle.status import STATUS

    from ..config import load_config
    from ..release import plan, status

    config = load_config(args.config)
    rolled = roll(args.previous, args.roll, args.dist)
    keep = {lib.id for lib in config.libraries}
    timings = plan.merge_timings(plan.read_timings(args.timings), _shard_timings(args.roll), keep)
    plan.write_timings(timings, args.dist / plan.TIMINGS)
    previous = args.previous_status or (args.previous.parent / STATUS if args.previous else None)
    health = status.publish_health(
        config, rolled, args.roll, args.dist, previous=previous, plan_file=args.plan_file
    )
    releases = len({e.release for e in rolled})
    print(f"nightly: {len(rolled)} bundle(s) in the release index, in {releases} release(s), {args.dist}")
    print(status.render_health(health))
    return EXIT_OK


def _embed_budget(minutes: float | None) -> float | None:
    """``--embed-budget MINUTES`` in seconds (None: no budget)."""
    if minutes is None:
        return None
    if not (minutes >= 0 and math.isfinite(minutes)):
        raise ConfigError(
            f"--embed-budget must be a number of minutes, 0 or more (e.g. 180), not {minutes:g}"
        )
    return minutes * 60


def cmd_nightly(args: argparse.Namespace) -> int:
    """Run ``nightly`` (its messages keep the ``nightly:`` prefix of the job's logs)."""
    from docbundle.bundle.errors import BundleError
    from docbundle.bundle.release import merge

    from ..pipeline.progress import make_progress
    from ..pipeline.workerctx import fewer_collections
    from ..release import nightly, plan, status

    try:
        if args.plan:
            return _nightly_plan(args)
        if args.roll:
            return _nightly_roll(args)
        if args.merge:
            merged = merge(args.merge, args.dist, release=args.release or "")
            plan.write_timings(
                plan.merge_timings(plan.Timings(), _shard_timings(args.merge)), args.dist / plan.TIMINGS
            )
            status.merge_outcomes(args.merge, args.dist)
            print(f"nightly: {len(merged)} bundle(s) in {args.dist}")
            return EXIT_OK
        ids, shard = _plan_libraries(args)
        # Progress on stderr (plain lines in a CI log), so the job's log shows each long phase.
        with fewer_collections():
            entries = nightly.run(
                args.config,
                args.out,
                args.dist,
                ids,
                args.golden,
                progress=make_progress,
                shard=shard,
                embed_budget=_embed_budget(args.embed_budget),
            )
    except ConfigError as exc:
        print(f"nightly: config error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BundleError as exc:
        print(f"nightly: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for e in entries:
        print(f"{e.status:<10} {e.library}@{e.version} {e.build_id or ''} {e.message}")
        if e.regress:
            print("\n".join("           " + line for line in e.regress.splitlines()))
    return EXIT_FAILED if any(e.status in ("failed", "regressed") for e in entries) else EXIT_OK


NIGHTLY = Command(
    "nightly",
    help="the nightly release job: plan, build, check and package what changed, publish",
    description="The nightly job for one shard of the catalogue: build, check, and package what changed. "
    "--plan splits the catalogue into CI jobs and releases; --merge and --roll make the releases and the "
    "release index (docs/releases.md).",
    run=cmd_nightly,
    args=(
        arg("--config", type=Path, default=DEFAULT_CONFIG),
        arg("--out", type=Path, default=Path("bundles"), help="bundles directory (restored between runs)"),
        arg("--dist", type=Path, default=Path("dist"), help="where release assets are written"),
        arg("--golden", type=Path, default=DEFAULT_GOLDEN_DIR, help="folder of <libraryId>.toml"),
        arg("--library", action="append", default=[], help="a library id or comma-joined ids (repeat)"),
        arg(
            "--embed-budget",
            type=float,
            metavar="MINUTES",
            help="after MINUTES from the start, a first embedding stops and publishes keyword-only; "
            "the next run resumes it",
        ),
        Group(
            "planning (no network)",
            (
                arg(
                    "--plan",
                    action="store_true",
                    help="print the CI matrices of tonight's plan as JSON, and exit",
                ),
                arg(
                    "--dry-run",
                    action="store_true",
                    help="with --plan: print the shards and releases instead",
                ),
                arg(
                    "--all",
                    action="store_true",
                    help="with --dry-run: every library of each shard and every asset of each release",
                ),
                arg(
                    "--timings",
                    type=Path,
                    metavar="FILE",
                    help="last night's timings.json (bundles-latest), for --plan and --roll",
                ),
                arg(
                    "--previous",
                    type=Path,
                    metavar="FILE",
                    help="last night's release index.json (bundles-latest): document counts for --plan, "
                    "the entries --roll keeps",
                ),
                arg(
                    "--previous-status",
                    type=Path,
                    metavar="FILE",
                    help="last night's status.json, for --roll to count failed nights (default: beside "
                    "--previous)",
                ),
                arg(
                    "--release-prefix",
                    metavar="PREFIX",
                    help="tonight's release tags are PREFIX-01, PREFIX-02, ...",
                ),
                arg(
                    "--target-minutes",
                    type=float,
                    help="expected time of one shard",
                ),
                arg("--max-shards", type=int, help="at most this many CI jobs"),
                arg("--plan-out", type=Path, metavar="FILE", help="with --plan: write the whole plan here"),
                arg(
                    "--plan-file",
                    type=Path,
                    metavar="FILE",
                    help="build the libraries of --shard in this plan; with --roll: tonight's plan, so a "
                    "library no shard reported counts as failed",
                ),
                arg(
                    "--shard",
                    type=int,
                    metavar="K",
                    help="the shard this job builds (recorded in timings.json)",
                ),
            ),
        ),
        Group(
            "publishing",
            (
                arg(
                    "--merge",
                    type=Path,
                    nargs="+",
                    metavar="DIR",
                    help="merge shard dist folders into --dist",
                ),
                arg(
                    "--release",
                    metavar="TAG",
                    help="with --merge: the release tag the merged folder is published as",
                ),
                arg(
                    "--roll",
                    type=Path,
                    nargs="+",
                    metavar="DIR",
                    help="write the release index, timings, status.json and catalogue.html of "
                    "bundles-latest into --dist: the merged release folders DIR replace the bundles of "
                    "--previous",
                ),
            ),
        ),
    ),
)
