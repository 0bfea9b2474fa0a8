"""The ``build`` and ``add`` commands: build bundles for the libraries of a config, and add a library
to the config from its llms.txt (building it with ``--build``)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from docbundle.bundle.userdirs import ENV_BUNDLES, default_bundles
from docbundle.common.clitable import Command, arg, parser, table

from ..pipeline.cache import CACHE_DIR
from .shared import DEFAULT_CONFIG, DEFAULT_PROBE, ENV_EMBED, EXIT_FAILED, EXIT_OK, _print_json

if TYPE_CHECKING:
    from ..pipeline.build import Outcome


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
    from ..pipeline.build import describe_mix

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
    from ..pipeline.workerctx import fewer_collections, start_forkserver

    start_forkserver()  # its imports overlap with the pipeline's below (it returns at once)
    from docbundle.bundle.publish import batch

    from ..config import load_config
    from ..pipeline.build import build_target
    from ..pipeline.cache import CrawlCache
    from ..pipeline.progress import make_progress

    config = load_config(args.config)
    libraries = [config.get(i) for i in args.library] if args.library else config.libraries
    out = args.out if args.out is not None else default_bundles()
    cache = None if args.no_cache else CrawlCache(args.cache or out / CACHE_DIR)
    progress = None if args.quiet else make_progress
    announce = None if args.quiet else _announce
    t0 = time.perf_counter()
    outcomes: list[Outcome] = []
    # The catalogue's route index (for servers over this folder) is rebuilt once, after the last build.
    with fewer_collections(), batch(out):
        for lib in libraries:
            for target in config.targets(lib):
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


def _build_args(argv: list[str]) -> argparse.Namespace:
    """``docbundle-index build ...`` parsed as the command line parses it, from ``BUILD``'s own rows (so
    ``add --build`` needs neither the package's table nor the other commands' modules)."""
    return parser("docbundle-index", "", table(BUILD), distribution="docbundle-indexer").parse_args(argv)


# -- add ------------------------------------------------------------------------------------------


def cmd_add(args: argparse.Namespace) -> int:
    """Run ``add`` (and ``build`` for the new library with ``--build``, taking the entry back out when the
    build fails)."""
    from docbundle.common.terminal import printable

    from .. import add
    from ..errors import FetchError

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
    config = add.configured(args.config)
    home = add.version_home(config, found, args.id)
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
        choice = add.choose_id(found, [lib.id for lib in config.libraries] if config else [])
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
        code = cmd_build(_build_args(build))
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
