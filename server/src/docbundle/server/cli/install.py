"""``docbundle install`` (a release archive you have, offline) and ``docbundle pull`` (one fetched from a
release over http(s): the only command that uses the network). Both end in ``docbundle.server.install``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from docbundle.bundle.status import STATES
from docbundle.bundle.userdirs import default_bundles
from docbundle.common.clitable import Command, arg

from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, bundle_args, err

if TYPE_CHECKING:
    from ..install import Installed
    from ..offers import Filters

INSTALL_LOCK_HELP = "lock file (default: DIR/bundles.lock)"


def _installed(done: Installed) -> str:
    """``installed LIB@VERSION build ID (content HASH)``, and whether it was there already."""
    note = " (already present; CURRENT points at it)" if done.already_present else ""
    return f"installed {done.library}@{done.version} build {done.build_id} (content {done.content_hash[:12]}){note}"


def install(args: argparse.Namespace) -> int:
    """Install each archive in turn; one that fails does not stop the others (exit 1 if any failed)."""
    from .. import install as installing  # whoosh and tarfile only for this command
    from ..errors import InstallError

    bundles: Path = args.bundles or default_bundles()
    if args.sums is not None and len(args.archive) > 1:
        sums_dirs = {a.parent.resolve() for a in args.archive}
        if len(sums_dirs) > 1:
            err(
                "--sums names one SHA256SUMS: give archives of one release folder, or install them one by one"
            )
            return EXIT_USAGE
    failed = 0
    installed = []
    for archive in args.archive:
        if not archive.is_file():
            err(f"{archive} not found")
            failed += 1
            continue
        try:
            done = installing.install(archive, bundles, sums=args.sums, lock=args.lock, refresh=False)
        except InstallError as exc:
            err(str(exc))
            failed += 1
            continue
        installed.append(done)
        print(f"{_installed(done)} in {bundles}")
    if installed:
        installing.refresh_routing(bundles)  # once for them all: a rebuild takes seconds at 10,000 libraries
        print(installing.served_note(installed), file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def pull(args: argparse.Namespace) -> int:
    """Run ``pull``: list what a release offers (filtered), or fetch and install one library's bundle."""
    from ..errors import InstallError
    from ..install import served_note
    from ..offers import Filters
    from ..pull import parse_spec, pull, release_base  # network code only here

    given: list[str] = args.spec
    if not args.list and (len(given) != 1 or args.category or args.state):
        err(
            "give LIBRARY[@VERSION] to install, or --list [WORDS] [--category CAT] [--state STATE] "
            "to see what the release offers"
        )
        return EXIT_USAGE
    try:
        base = release_base(args.release)
        spec = None if args.list else parse_spec(given[0])
    except InstallError as exc:
        err(str(exc))
        return EXIT_USAGE
    try:
        if spec is None:
            return _list(
                base, Filters(tuple(given), args.category or "", args.state or ""), as_json=args.json
            )
        done = pull(spec, base, args.bundles or default_bundles(), lock=args.lock)
    except InstallError as exc:
        err(str(exc))
        return EXIT_FAILED
    print(_installed(done))
    print(served_note([done]), file=sys.stderr)
    return EXIT_OK


def _list(base: str, filters: Filters, *, as_json: bool) -> int:
    """``pull --list``: the release's entries that ``filters`` keep, with their health when it has any."""
    import msgspec

    from ..errors import PullError
    from ..offers import render_list, rows
    from ..pull import guard_for, read_index, read_status

    guard = guard_for(base)
    entries = read_index(base, guard)
    try:
        status = read_status(base, guard)
    except PullError as exc:
        # status.json is the nightly's health report, not what installs: a damaged one leaves the list
        # without states (said on stderr) unless a filter needs them. index.json decides what is pulled.
        if filters.category or filters.state:
            raise
        print(f"docbundle: warning: {exc}; listing without states", file=sys.stderr)
        status = None
    found = rows(entries, status, filters)
    if as_json:
        listed = {
            "release": base,
            "bundles": msgspec.to_builtins([r.bundle for r in found]),
            "status": None if status is None else msgspec.to_builtins([r.health for r in found if r.health]),
        }
        print(json.dumps(listed, indent=2))
    else:
        sys.stdout.write(render_list(found, total=len(entries) if filters.active() else None))
    return EXIT_OK


INSTALL = Command(
    "install",
    help="install a release archive (offline)",
    description="Check a release archive against SHA256SUMS, unpack it safely, verify it against its "
    "manifest and the lock file, then point CURRENT at it. Needs no network.",
    run=install,
    args=(
        arg(
            "archive",
            metavar="ARCHIVE",
            type=Path,
            nargs="+",
            help="<libraryId>-<version>-<buildId>.tar.gz ...",
        ),
        *bundle_args(INSTALL_LOCK_HELP),
        arg(
            "--sums", type=Path, default=None, metavar="FILE", help="SHA256SUMS (default: beside the archive)"
        ),
    ),
)

PULL = Command(
    "pull",
    help="download a prebuilt bundle from a release and install it",
    description="Download a library's bundle from a release (index.json, SHA256SUMS, archive) over "
    "http(s) and install it with the checks of docbundle install. The only command that uses the network.",
    run=pull,
    args=(
        arg(
            "spec",
            metavar="LIBRARY[@VERSION] | WORDS",
            nargs="*",
            help="the library to install, e.g. docbundle or docbundle@latest; with --list: words every "
            "listed library holds (in its id, name, category or description)",
        ),
        arg(
            "--from",
            dest="release",
            metavar="URL",
            default=None,
            help="the release folder holding index.json (default: $DOCBUNDLE_RELEASES, else the project's "
            "catalogue, the release bundles-latest)",
        ),
        arg(
            "--list",
            action="store_true",
            help="list what the release offers (state and age from its status.json) and install nothing",
        ),
        arg("--category", metavar="CAT", default=None, help="with --list: only libraries of this category"),
        arg(
            "--state",
            choices=STATES,
            default=None,
            help="with --list: only library versions in this state (from the release's status.json)",
        ),
        arg("--json", action="store_true", help="with --list: print the release's entries as JSON"),
        *bundle_args(INSTALL_LOCK_HELP),
    ),
)
