"""The release tools' commands: ``export``, ``diff``, ``regress``, ``audit`` and ``package`` (the work
is in ``indexer/release/`` and ``docbundle.bundle.release``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import msgspec
from docbundle.common.clitable import Command, arg

from .shared import DEFAULT_GOLDEN_DIR, EXIT_FAILED, EXIT_OK, EXIT_USAGE, EXPORT_FORMATS, _report

if TYPE_CHECKING:
    from ..release.diff import BundleDiff
    from ..release.regress import RegressReport


# -- export ---------------------------------------------------------------------------------------


def cmd_export(args: argparse.Namespace) -> int:
    """Run ``export``."""
    from docbundle.bundle.errors import BundleError

    from ..errors import ExportError, ExportUsageError
    from ..release.export import export_bundle

    try:
        result = export_bundle(args.bundle, args.format, args.out, force=args.force)
    except ExportUsageError as exc:
        print(f"docbundle-index: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (BundleError, ExportError) as exc:
        print(f"docbundle-index: cannot export: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        print(f"docbundle-index: export failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(
        f"docbundle-index: exported {result.bundle} ({result.documents} documents, {result.chunks} chunks) "
        f"as {result.format} to {args.out}"
    )
    return EXIT_OK


EXPORT = Command(
    "export",
    help="export a bundle as JSON, SQLite or markdown",
    description="Verify a bundle and write its documents and chunks in a format other tools read.",
    run=cmd_export,
    args=(
        arg(
            "bundle",
            type=Path,
            metavar="BUNDLE",
            help="a bundle directory, or a version directory (its CURRENT)",
        ),
        arg(
            "--format",
            required=True,
            choices=EXPORT_FORMATS,
            help="json file, sqlite file or markdown folder",
        ),
        arg("--out", required=True, type=Path, metavar="PATH", help="the file or folder to write"),
        arg("--force", action="store_true", help="replace an existing --out"),
    ),
)


# -- diff -----------------------------------------------------------------------------------------


def cmd_diff(args: argparse.Namespace) -> int:
    """Run ``diff``."""
    from docbundle.bundle.layout import bundle_at

    from ..release.diff import diff_bundles
    from ..release.regress import load_golden, regress

    def make() -> _Compared:
        diff = diff_bundles(args.old, args.new)
        if not args.golden:
            return _Compared(diff)
        new, old = bundle_at(args.new), bundle_at(args.old)
        golden = load_golden(args.golden)
        return _Compared(diff, regress(new, golden, baseline=old), regress(old, golden))

    return EXIT_OK if _report(args, "cannot compare", make, _render_compared, _compared_json) else EXIT_FAILED


DIFF = Command(
    "diff",
    help="compare two bundles",
    description="Report the documents, sections, counts, llms.txt findings and page errors that differ "
    "between two bundles (each a bundle directory, or a version directory: its CURRENT).",
    run=cmd_diff,
    args=(
        arg("old", type=Path, metavar="A", help="the old bundle (or version directory)"),
        arg("new", type=Path, metavar="B", help="the new bundle (or version directory)"),
        arg("--json", action="store_true", help="print the report as one JSON object"),
        arg(
            "--golden",
            type=Path,
            metavar="FILE",
            help="also run these golden queries on both and show what moved",
        ),
    ),
)


class _Compared(NamedTuple):
    """What ``diff`` reports: the differences, and with ``--golden`` the queries before and after."""

    diff: BundleDiff
    effect: RegressReport | None = None
    before: RegressReport | None = None


def _compared_json(c: _Compared) -> str:
    import json

    from ..release.diff import encode_diff

    data = msgspec.json.decode(encode_diff(c.diff))
    if c.effect is not None and c.before is not None:
        data["golden"] = {"before": c.before.overall, "after": c.effect.overall, "changed": c.effect.changed}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _render_compared(c: _Compared) -> str:
    from ..release.diff import render_diff

    text = render_diff(c.diff)
    if c.effect is None or c.before is None:
        return text
    o, n = c.before.overall, c.effect.overall
    lines = [
        f"golden queries ({len(c.effect.queries)}): " + ", ".join(f"{m} {o[m]:.3f} -> {n[m]:.3f}" for m in o)
    ]
    lines += [
        f"  {ch['id']}: {ch['before']} -> {ch['after']} (nDCG@10 {ch['ndcg10']})" for ch in c.effect.changed
    ]
    return text + "".join(line + "\n" for line in lines)


# -- regress --------------------------------------------------------------------------------------


def cmd_regress(args: argparse.Namespace) -> int:
    """Run ``regress``."""
    from docbundle.bundle.layout import bundle_at
    from docbundle.bundle.reader import read_manifest

    from ..release.regress import load_golden, regress, render_regress

    def make() -> RegressReport:
        bundle = bundle_at(args.bundle)
        golden_path = args.golden
        if golden_path is None:
            library = read_manifest(bundle).library.id
            golden_path = DEFAULT_GOLDEN_DIR / f"{library}.toml"
        golden = load_golden(golden_path)
        baseline = bundle_at(args.baseline) if args.baseline else None
        return regress(bundle, golden, baseline=baseline, split=args.split)

    report = _report(args, "cannot run the golden queries", make, lambda r: render_regress(r) + "\n")
    return EXIT_FAILED if report is None or report.failed else EXIT_OK


REGRESS = Command(
    "regress",
    help="run golden queries against a bundle and check expectations",
    description="Print nDCG@10, MRR@10 and Recall@10 per golden query and overall, one [OK]/[FAIL] line "
    "per stored expectation, and exit 1 on any FAIL.",
    run=cmd_regress,
    args=(
        arg("bundle", type=Path, metavar="BUNDLE", help="a bundle directory, or a version directory"),
        arg(
            "--golden",
            type=Path,
            help=f"golden query file (default: {DEFAULT_GOLDEN_DIR.as_posix()}/<libraryId>.toml, from the current "
            "directory)",
        ),
        arg(
            "--baseline",
            type=Path,
            metavar="BUNDLE",
            help="also list queries whose top results changed and test the nDCG@10 change (paired randomization)",
        ),
        arg(
            "--split",
            choices=("dev", "test", "all"),
            default="all",
            help="run only the queries of one half (their `split` key); the file-wide [expect] is checked only "
            "with all (default: %(default)s)",
        ),
        arg("--json", action="store_true", help="print the report as JSON"),
    ),
)


# -- audit ----------------------------------------------------------------------------------------


def cmd_audit(args: argparse.Namespace) -> int:
    """Run ``audit``."""
    from docbundle.bundle.layout import bundle_at

    from ..release.audit import audit_bundle, render_audit

    report = _report(
        args,
        "cannot audit",
        lambda: audit_bundle(bundle_at(args.bundle)),
        lambda r: render_audit(r) + "\n",
    )
    return EXIT_OK if report is not None else EXIT_FAILED


AUDIT = Command(
    "audit",
    help="report freshness, completeness, coverage and content safety of a bundle",
    description="Verify a bundle and report its age and last crawl, failed pages, empty pages and odd "
    "chunk sizes, and content-safety findings (hidden Unicode, text addressed to AI assistants).",
    run=cmd_audit,
    args=(
        arg("bundle", type=Path, metavar="BUNDLE", help="a bundle directory, or a version directory"),
        arg("--json", action="store_true", help="print the report as JSON"),
    ),
)


# -- package --------------------------------------------------------------------------------------


def cmd_package(args: argparse.Namespace) -> int:
    """Run ``package``."""
    from docbundle.bundle.errors import BundleError
    from docbundle.bundle.layout import bundle_at, current_bundles
    from docbundle.bundle.release import package

    try:
        bundles: list[Path] = []
        for given in args.bundles:
            is_root = (
                given.is_dir() and not (given / "manifest.json").exists() and not (given / "CURRENT").exists()
            )
            bundles += current_bundles(given) if is_root else [bundle_at(given)]
        if not bundles:
            print(f"docbundle-index: no bundles under {', '.join(map(str, args.bundles))}", file=sys.stderr)
            return EXIT_FAILED
        entries = package(bundles, args.out)
    except (BundleError, OSError) as exc:
        print(f"docbundle-index: cannot package: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for e in entries:
        print(f"{e.sha256}  {e.archive}  ({e.library}@{e.version}, {e.documents} documents)")
    print(f"docbundle-index: wrote {len(entries)} archive(s), SHA256SUMS and index.json to {args.out}")
    return EXIT_OK


PACKAGE = Command(
    "package",
    help="pack bundles as release assets (archives, SHA256SUMS, index.json)",
    description="Verify and pack every bundle a CURRENT names under DIR (or the given bundles) into "
    "deterministic .tar.gz archives, with SHA256SUMS and a release index.json.",
    run=cmd_package,
    args=(
        arg("bundles", type=Path, nargs="+", metavar="DIR|BUNDLE", help="bundles directory or bundles"),
        arg("--out", type=Path, required=True, metavar="DIR", help="where the release assets go"),
    ),
)
