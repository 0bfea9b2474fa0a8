"""``docbundle-index``: build bundles from a library catalogue, and the release tools that check, compare,
export and publish them.

Every command is one row of ``COMMANDS`` (a ``docbundle.common.clitable.Command``, the table the
``docbundle`` command is declared as too), declared beside its handler with its arguments; ``main``
dispatches through the table. Each handler imports its modules when it runs, so a command loads only
what it uses (``build`` neither ``add`` nor the release tools), and so do the page workers, which
import this module again; ``console`` is the console script. The commands, with their exit codes:

``build``: build bundles for the libraries in a config, into the bundles folder every ``docbundle``
command reads by default (``--out``, else ``$DOCBUNDLE_BUNDLES``, else the per-user data folder). 0 every
library was built or unchanged; 1 at least one library failed (the others were still built); 2 usage or
configuration error.

``add``: look at a site's llms.txt (title, sections, links, markdown vs HTML pages) and append a
validated ``[[library]]`` entry to the config, keeping its comments and layout; ``--build`` builds it.
0 added (and built); 1 the llms.txt cannot be fetched (or is an HTML page), holds no links, not one
probed page could be fetched, or the build failed (the entry is then taken out again); 2 usage or
configuration error (a bad id, an id or URL already in the config, a config that does not load).

``check``: check a library catalogue offline (``check.py``): every entry decodes, has a name and a
category of the taxonomy, names its site once, over https. 0 no problem; 1 problems, one line each; 2 the
file cannot be read as a catalogue at all.

``export``: export a bundle as JSON, SQLite or markdown. 0 written; 1 the bundle cannot be read or fails
verification, or the export cannot be written; 2 usage (including an existing ``--out`` without
``--force``, or one inside the bundle).

``diff``: compare two bundles. 0 whatever the differences (it is a report); 1 a bundle cannot be read or
fails verification; 2 usage.

``regress``: run golden queries against a bundle. 0 every expectation holds; 1 a [FAIL] (or the bundle
cannot be read); 2 usage or a malformed golden file.

``audit``: report freshness, completeness, coverage and content safety. 0 reported; 1 the bundle cannot
be read.

``package``: pack bundles as release assets. 0 written; 1 a bundle fails verification or nothing was
found.

``nightly``: the nightly release job for one shard of the catalogue (see ``release/nightly.py``). 0 every
library built or unchanged and passed its checks; 1 a library failed or regressed; 2 a configuration
error. ``--plan`` prints the CI matrices (``--dry-run``: the shards and releases, no network), ``--merge
DIR ... --release TAG`` merges the shards' release folders into one release, ``--roll DIR ... --previous
FILE`` writes the catalogue index of ``bundles-latest`` that ``docbundle pull`` reads, with the
catalogue's health ``status.json`` and the catalogue page ``catalogue.html``.

Any command whose reader closes stdout early (``| head``) stops quietly with 141 (128 + SIGPIPE).
Any command interrupted by Ctrl-C (SIGINT) or SIGTERM unwinds (published bundles intact, see
``interrupt.py``) and exits 130 or 143 (128 + the signal's number).
"""

from __future__ import annotations

import argparse
import atexit
import logging
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, NoReturn, TypeVar

import msgspec
from docbundle.bundle.userdirs import ENV_BUNDLES, default_bundles
from docbundle.common.clitable import Command, Group, arg, parser, run, table

from .errors import ConfigError
from .interrupt import TermAsInterrupt
from .pipeline.cache import CACHE_DIR

if TYPE_CHECKING:
    from .pipeline.build import Outcome
    from .release.diff import BundleDiff
    from .release.plan import Timings
    from .release.regress import RegressReport

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

#: Where the commands look when not told (relative to the current directory).
DEFAULT_CONFIG = Path("bundles/libraries.toml")
DEFAULT_GOLDEN_DIR = Path("bundles/golden")

# What the help texts show of modules only some commands import (each handler imports its modules when
# it runs, so that ``build`` loads neither ``add`` nor the release tools, and the page workers, which
# import this module again, load next to nothing). tests/indexer/test_cli_imports.py checks each against
# its home.
ENV_EMBED = "DOCBUNDLE_EMBED"  # pipeline/semantic.py
DEFAULT_PROBE = 20  # add.py
EXPORT_FORMATS = ("json", "sqlite", "markdown")  # release/export.py's FORMATS

R = TypeVar("R")


def _print_json(report: msgspec.Struct) -> None:
    sys.stdout.write(_as_json(report))


def _as_json(report: object) -> str:
    """``report`` as indented JSON, as ``--json`` prints it."""
    return msgspec.json.format(msgspec.json.encode(report), indent=2).decode() + "\n"


def _report(
    args: argparse.Namespace,
    failure: str,
    make: Callable[[], R],
    render: Callable[[R], str],
    as_json: Callable[[R], str] = _as_json,
) -> R | None:
    """Make a command's report and print it (``as_json`` with ``--json``, else ``render``); None, with
    ``docbundle-index: FAILURE: error`` on stderr, when a bundle or file cannot be read."""
    from docbundle.bundle.errors import BundleError

    try:
        report = make()
    except (BundleError, OSError) as exc:
        print(f"docbundle-index: {failure}: {exc}", file=sys.stderr)
        return None
    sys.stdout.write(as_json(report) if args.json else render(report))
    return report


# -- build ----------------------------------------------------------------------------------------


class Report(msgspec.Struct, kw_only=True):
    """The crawl report of one ``build`` run (``--json``, ``--report``)."""

    config: str
    out: str
    seconds: float
    built: int
    unchanged: int
    failed: int
    libraries: list[Outcome]


def _summary(report: Report) -> str:
    from .pipeline.build import describe_mix

    lines = [
        f"docbundle-index: {len(report.libraries)} library version(s): {report.built} built, "
        f"{report.unchanged} unchanged, {report.failed} failed ({report.seconds:.1f} s), in {report.out}"
    ]
    for o in report.libraries:
        name = f"{o.library}@{o.version}"
        if o.status == "failed":
            lines.append(f"  failed     {name}: {o.message}")
        else:
            lines.append(
                f"  {o.status:<10} {name}  {o.build_id}  {o.documents} docs ({describe_mix(o.obtained)}), "
                f"{o.chunks} chunks  (crawl {o.crawl_seconds:.1f} s: {o.pages_fetched} fetched, "
                + (f"{o.pages_followed} followed, " if o.pages_followed else "")
                + f"{o.pages_not_modified} not modified; index {o.build_seconds:.1f} s)"
            )
            if o.status == "built":
                lines.append(
                    f"             vectors: none ({o.vectors_note})"
                    if o.vectors_note
                    else f"             vectors: {o.embedded} embedded, {o.reused} reused"
                    + (f", {o.resumed} kept from an interrupted build" if o.resumed else "")
                    + f" ({o.embed_seconds:.1f} s)"
                )
                if o.keyword_build:
                    lines.append(
                        f"             keyword search served first from {o.keyword_build} "
                        f"({o.keyword_seconds:.1f} s after the start)"
                    )
        for f in o.failures[:20]:
            lines.append(f"             ! {f.url}: {f.error}")
        if len(o.failures) > 20:
            lines.append(f"             ! ... and {len(o.failures) - 20} more (see --json)")
        if o.conformance:
            lines.append(
                f"             llms.txt: {len(o.conformance)} deviation(s) from the spec, e.g. {o.conformance[0]}"
            )
    return "\n".join(lines)


def _announce(line: str) -> None:
    """A line for the person running the build, on stderr above the progress bar on a terminal
    (``tqdm.write`` lifts the bar, prints, and draws it again below), as a plain line in a log."""
    from tqdm import tqdm

    tqdm.write(f"docbundle-index: {line}", file=sys.stderr)
    sys.stderr.flush()


def cmd_build(args: argparse.Namespace) -> int:
    """Run ``build``."""
    from .pipeline.workerctx import fewer_collections, start_forkserver

    start_forkserver()  # its imports overlap with the pipeline's below (it returns at once)
    from docbundle.bundle.routeindex import refresh_index

    from .config import load_config
    from .pipeline.build import build_target
    from .pipeline.cache import CrawlCache
    from .pipeline.progress import make_progress

    catalogue = load_config(args.config)
    libraries = [catalogue.get(i) for i in args.library] if args.library else catalogue.libraries
    out = args.out if args.out is not None else default_bundles()
    cache = None if args.no_cache else CrawlCache(args.cache or out / CACHE_DIR)
    progress = None if args.quiet else make_progress
    announce = None if args.quiet else _announce
    t0 = time.perf_counter()
    outcomes: list[Outcome] = []
    with fewer_collections():
        for lib in libraries:
            for target in catalogue.targets(lib):
                if not args.quiet:
                    print(
                        f"docbundle-index: building {lib.id}@{target.version.name} from {target.source}",
                        file=sys.stderr,
                    )
                outcomes.append(
                    build_target(
                        target,
                        out,
                        cache=cache,
                        progress=progress,
                        embed=False if args.no_embed else None,
                        keyword_first=True,
                        announce=announce,
                    )
                )
    if any(o.status == "built" for o in outcomes):
        refresh_index(out)  # the catalogue's routing index, for servers over this folder
    report = Report(
        config=str(args.config),
        out=str(out),
        seconds=round(time.perf_counter() - t0, 3),
        built=sum(o.status == "built" for o in outcomes),
        unchanged=sum(o.status == "unchanged" for o in outcomes),
        failed=sum(o.status == "failed" for o in outcomes),
        libraries=outcomes,
    )
    data = msgspec.json.format(msgspec.json.encode(report), indent=2)
    if args.report:
        args.report.write_bytes(data + b"\n")
    if args.json:
        sys.stdout.write(data.decode() + "\n")
    else:
        print(_summary(report))
    return EXIT_FAILED if report.failed else EXIT_OK


BUILD = Command(
    "build",
    help="build bundles for the libraries in a config",
    description="Fetch each library's llms.txt and pages, and write a new bundle when the content changed.",
    run=cmd_build,
    args=(
        arg("--config", type=Path, default=DEFAULT_CONFIG, help="library catalogue (TOML)"),
        arg(
            "--out",
            type=Path,
            help=f"bundles directory (default: ${ENV_BUNDLES}, else the per-user data folder every docbundle "
            "command reads)",
        ),
        arg("--library", action="append", default=[], metavar="ID", help="build only this library (repeat)"),
        arg("--cache", type=Path, help=f"crawl cache directory (default: OUT/{CACHE_DIR})"),
        arg("--no-cache", action="store_true", help="ignore and do not write the crawl cache"),
        arg("--json", action="store_true", help="print the crawl report as JSON on stdout"),
        arg("--report", type=Path, help="also write the JSON crawl report to this file"),
        arg("--quiet", action="store_true", help="no progress output"),
        arg(
            "--no-embed",
            action="store_true",
            help=f"embed nothing this run: new content is built without vectors (like {ENV_EMBED}=0)",
        ),
    ),
)


# -- add ------------------------------------------------------------------------------------------


def cmd_add(args: argparse.Namespace) -> int:
    """Run ``add`` (and ``build`` for the new library with ``--build``, taking the entry back out when the
    build fails)."""
    from docbundle.common.terminal import printable

    from . import add
    from .errors import FetchError

    try:
        found = add.survey(args.url, allow_hosts=args.allow_host, probe=args.probe)
    except FetchError as exc:
        print(f"docbundle-index: cannot read the llms.txt: {printable(exc, 1000)}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        _print_json(found)
    else:
        sys.stdout.write(add.render_survey(found))
    if found.links == 0 and found.inline_docs == 0:
        print(f"docbundle-index: {args.url} lists no pages; nothing added", file=sys.stderr)
        return EXIT_FAILED
    if found.all_failed:
        print(f"docbundle-index: {add.render_all_failed(found)}", file=sys.stderr)
        return EXIT_FAILED
    choice = None
    catalogue = add.configured(args.config)
    home = add.version_home(catalogue, found, args.id)
    if home is not None:  # a new release of a listed library: one more [[library.version]] of it
        library_id = home.id
        added = add.append_version(
            args.config, found, library_id, allow_hosts=args.allow_host, write=not args.dry_run
        )
        print(
            f"docbundle-index: {found.url} is version {added.version} of library {library_id!r} (from the "
            f"title; {library_id!r} has {', '.join(v.name for v in home.version)}); to make it a library of "
            "its own instead, pass --id ID",
            file=sys.stderr,
        )
    elif args.id:
        library_id = args.id
    else:
        choice = add.choose_id(found, [lib.id for lib in catalogue.libraries] if catalogue else [])
        library_id = choice.id
    if home is None:
        added = add.append_entry(
            args.config, found, library_id, allow_hosts=args.allow_host, write=not args.dry_run
        )
    if choice is not None:
        taken = f" ({choice.wanted!r} is taken)" if choice.wanted != choice.id else ""
        origin = {"title": ", from the llms.txt's title", "host name": ", from the host name"}.get(
            choice.source, ""
        )
        print(
            f"docbundle-index: library id {choice.id!r}{taken}{origin}; clients pass it as libraryId "
            "(choose another with --id ID)",
            file=sys.stderr,
        )
    version = f" (version {added.version}, from the title)" if added.version else ""
    if args.dry_run:
        print(
            f"docbundle-index: {library_id!r}{version} would be added to {args.config} (dry run)",
            file=sys.stderr,
        )
        return EXIT_OK
    what = (
        f"version {added.version} of library {library_id!r}" if home else f"library {library_id!r}{version}"
    )
    print(f"docbundle-index: added {what} to {args.config}", file=sys.stderr)
    if not args.build:
        print(
            f"build it with: docbundle-index build --config {args.config} --library {library_id}",
            file=sys.stderr,
        )
        return EXIT_OK
    build = ["build", "--config", str(args.config), "--library", library_id]
    build += (["--out", str(args.out)] if args.out else []) + (["--no-embed"] if args.no_embed else [])
    code = EXIT_FAILED
    served = False
    try:
        code = cmd_build(_parser().parse_args(build))
    except KeyboardInterrupt:
        # Interrupted while embedding, the keyword-only bundle is served already and the rows embedded so
        # far are kept: the entry stays, for the build that resumes.
        vdir = (args.out or default_bundles()) / library_id / (added.version or "latest")
        served = (vdir / "CURRENT").is_file()
        if served:
            print(
                f"docbundle-index: interrupted; {library_id!r} stays in {args.config}, its keyword search is "
                f"served. Resume with: docbundle-index build --config {args.config} --library {library_id} "
                "(the rows embedded so far are kept)",
                file=sys.stderr,
            )
        raise
    finally:
        if code != EXIT_OK and not served:
            if add.remove_entry(args.config, added):
                print(
                    f"docbundle-index: the build did not succeed, so {library_id!r} was taken out of {args.config} "
                    "again (the file is as it was); fix what the build reports, then run add again",
                    file=sys.stderr,
                )
            else:
                print(
                    f"docbundle-index: the build did not succeed; {args.config} changed since the entry was added, "
                    f"so {library_id!r} was left in it",
                    file=sys.stderr,
                )
    return code


ADD = Command(
    "add",
    help="add a library to the config from its llms.txt URL",
    description="Fetch an llms.txt, show its title, sections, link count and how many pages are markdown "
    "or HTML, and append a validated [[library]] entry to the config (comments and layout kept).",
    run=cmd_add,
    args=(
        arg("url", metavar="URL", help="the http(s) address of the site's llms.txt"),
        arg("--id", default=None, help="the library id (default: from the llms.txt's title)"),
        arg("--config", type=Path, default=DEFAULT_CONFIG, help="library catalogue (TOML)"),
        arg(
            "--allow-host",
            action="append",
            default=[],
            metavar="HOST",
            help="also reach this private or loopback host (repeat); saved as the entry's allow_hosts",
        ),
        arg(
            "--probe",
            type=int,
            default=DEFAULT_PROBE,
            metavar="N",
            help=f"fetch up to N linked pages to count markdown vs HTML (default {DEFAULT_PROBE}; 0: none)",
        ),
        arg("--dry-run", action="store_true", help="show what was found; change nothing"),
        arg("--json", action="store_true", help="print what was found as JSON on stdout"),
        arg("--build", action="store_true", help="build the new library right away"),
        arg("--out", type=Path, help="with --build: bundles directory (as for build)"),
        arg(
            "--no-embed",
            action="store_true",
            help="with --build: embed nothing (keyword search only; a later build adds the vectors)",
        ),
    ),
)


# -- check ----------------------------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    """Run ``check``."""
    from .check import check_config, render_check

    report = check_config(args.config)
    sys.stdout.write(_as_json(report) if args.json else render_check(report))
    return EXIT_FAILED if report.problems else EXIT_OK


CHECK = Command(
    "check",
    help="check a library catalogue offline (names, categories, one entry per site, https)",
    description="Read a library catalogue without fetching anything: every entry must decode, have a name "
    "and a category of the taxonomy (docs/configuration.md), an https llms.txt (or a local path), and name "
    "a site no other entry names. One line per problem.",
    run=cmd_check,
    args=(
        arg("--config", type=Path, default=DEFAULT_CONFIG, help="library catalogue (TOML)"),
        arg("--json", action="store_true", help="print the report as JSON"),
    ),
)


# -- export ---------------------------------------------------------------------------------------


def cmd_export(args: argparse.Namespace) -> int:
    """Run ``export``."""
    from docbundle.bundle.errors import BundleError

    from .errors import ExportError, ExportUsageError
    from .release.export import export_bundle

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
    from docbundle.bundle.layout import resolve_bundle

    from .release.diff import diff_bundles
    from .release.regress import load_golden, regress

    def make() -> _Compared:
        diff = diff_bundles(args.old, args.new)
        if not args.golden:
            return _Compared(diff)
        new, old = resolve_bundle(args.new), resolve_bundle(args.old)
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

    from .release.diff import encode_diff

    data = msgspec.json.decode(encode_diff(c.diff))
    if c.effect is not None and c.before is not None:
        data["golden"] = {"before": c.before.overall, "after": c.effect.overall, "changed": c.effect.changed}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _render_compared(c: _Compared) -> str:
    from .release.diff import render_diff

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
    from docbundle.bundle.layout import resolve_bundle
    from docbundle.bundle.reader import read_manifest

    from .release.regress import load_golden, regress, render_regress

    def make() -> RegressReport:
        bundle = resolve_bundle(args.bundle)
        golden_path = args.golden
        if golden_path is None:
            library = read_manifest(bundle).library.id
            golden_path = DEFAULT_GOLDEN_DIR / f"{library}.toml"
        golden = load_golden(golden_path)
        baseline = resolve_bundle(args.baseline) if args.baseline else None
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
    from docbundle.bundle.layout import resolve_bundle

    from .release.audit import audit_bundle, render_audit

    report = _report(
        args,
        "cannot audit",
        lambda: audit_bundle(resolve_bundle(args.bundle)),
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
    from docbundle.bundle.layout import current_bundles, resolve_bundle
    from docbundle.bundle.release import package

    try:
        bundles: list[Path] = []
        for given in args.bundles:
            is_root = (
                given.is_dir() and not (given / "manifest.json").exists() and not (given / "CURRENT").exists()
            )
            bundles += current_bundles(given) if is_root else [resolve_bundle(given)]
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
    "deterministic .tar.gz archives, with SHA256SUMS and a catalogue index.json.",
    run=cmd_package,
    args=(
        arg("bundles", type=Path, nargs="+", metavar="DIR|BUNDLE", help="bundles directory or bundles"),
        arg("--out", type=Path, required=True, metavar="DIR", help="where the release assets go"),
    ),
)


# -- nightly --------------------------------------------------------------------------------------


def _nightly_plan(args: argparse.Namespace) -> int:
    """``nightly --plan``: the CI matrices (JSON) or, with ``--dry-run``, the report of the plan."""
    import json

    from .config import load_config
    from .release import plan

    target_minutes = plan.TARGET_SECONDS / 60 if args.target_minutes is None else args.target_minutes
    if not (target_minutes > 0 and math.isfinite(target_minutes)):  # nan and inf compare as "positive"
        raise ConfigError(
            f"--target-minutes must be a positive number of minutes (e.g. 30), not {target_minutes:g}"
        )
    catalogue = load_config(args.config)
    ids = [i for group in args.library for i in group.split(",") if i]
    if ids:  # a manual run of a few libraries: plan only those
        catalogue = msgspec.structs.replace(
            catalogue, libraries=[catalogue.get(i) for i in dict.fromkeys(ids)]
        )
    prefix = args.release_prefix or f"bundles-{time.strftime('%Y%m%d', time.gmtime())}"
    the_plan = plan.make_plan(
        catalogue,
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
    from .release import plan

    if args.plan_file is None:
        return [i for group in args.library for i in group.split(",") if i], args.shard
    if args.shard is None or args.library:
        raise ConfigError("--plan-file needs --shard K, and no --library")
    return plan.read_plan(args.plan_file).shard(args.shard).libraries, args.shard


def _shard_timings(folders: list[Path]) -> list[Timings]:
    from .release import plan

    return [plan.read_timings(folder / plan.TIMINGS) for folder in folders]


def _nightly_roll(args: argparse.Namespace) -> int:
    """``nightly --roll``: the catalogue index, timings, ``status.json`` and ``catalogue.html`` of
    ``bundles-latest``, from tonight's release folders and last night's files."""
    from docbundle.bundle.release import roll
    from docbundle.bundle.status import STATUS

    from .config import load_config
    from .release import plan, status

    catalogue = load_config(args.config)
    rolled = roll(args.previous, args.roll, args.dist)
    keep = {lib.id for lib in catalogue.libraries}
    timings = plan.merge_timings(plan.read_timings(args.timings), _shard_timings(args.roll), keep)
    plan.write_timings(timings, args.dist / plan.TIMINGS)
    previous = args.previous_status or (args.previous.parent / STATUS if args.previous else None)
    health = status.publish_health(
        catalogue, rolled, args.roll, args.dist, previous=previous, plan_file=args.plan_file
    )
    releases = len({e.release for e in rolled})
    print(f"nightly: {len(rolled)} bundle(s) in the catalogue index, in {releases} release(s), {args.dist}")
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

    from .pipeline.progress import make_progress
    from .pipeline.workerctx import fewer_collections
    from .release import nightly, plan, status

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
    "catalogue index (docs/releases.md).",
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
                    help="last night's catalogue index.json (bundles-latest): document counts for --plan, "
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
                    help="write the catalogue index, timings, status.json and catalogue.html of "
                    "bundles-latest into --dist: the merged release folders DIR replace the bundles of "
                    "--previous",
                ),
            ),
        ),
    ),
)


#: The subcommands, in the order ``--help`` lists them.
COMMANDS = table(BUILD, ADD, CHECK, EXPORT, DIFF, REGRESS, AUDIT, PACKAGE, NIGHTLY)


def _parser() -> argparse.ArgumentParser:
    return parser(
        "docbundle-index",
        "Crawl llms.txt documentation into versioned, content-hashed search bundles.",
        COMMANDS,
        distribution="docbundle-indexer",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``docbundle-index``."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="docbundle-index: %(message)s")
    args = _parser().parse_args(argv)
    interrupt = TermAsInterrupt()
    try:
        with interrupt:  # SIGTERM (a service manager, a CI cancel, ``timeout``) unwinds as Ctrl-C does
            return run(args)
    except ConfigError as exc:
        print(f"docbundle-index: config error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        name = signal.Signals(interrupt.received).name
        print(
            f"docbundle-index: interrupted ({name}); published bundles are intact, and the rows embedded so "
            "far are kept: the next build resumes from them",
            file=sys.stderr,
        )
        return interrupt.exit_code


def console() -> NoReturn:
    """The ``docbundle-index`` console script (and ``python -m docbundle.indexer.cli``): ``main``, then
    end the process without the interpreter's teardown.

    Freeing every object and module of a finished build took ~0.1 s after the last line was printed
    (issue 22, item 5), for nothing: the bundles, the catalogue index and the crawl cache are written
    and closed by then. So the exit handlers run first (the page workers are stopped, multiprocessing's
    and logging's clean-up), stdout and stderr are flushed, and ``os._exit`` ends the process with
    ``main``'s exit code. When another non-daemon thread is still running, or a stream cannot be
    flushed, or a profiler or tracer watches, it exits the ordinary way instead (which waits for the
    thread, reports the stream as it always has, or lets ``python -m cProfile -o FILE`` write FILE).
    Tests call ``main`` in their own process, never this.
    """
    code = main()
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)  # a profiler (``python -m cProfile``) or tracer writes what it saw after main
    if any(
        t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.current_thread()
    ):
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    console()
