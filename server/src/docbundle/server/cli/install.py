"""``docbundle install`` (a release archive you have, offline) and ``docbundle pull`` (one fetched from a
release over http(s): the only command that uses the network). Both end in ``docbundle.server.install``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from docbundle.bundle.userdirs import default_bundles

from ..clitable import Command, arg
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, bundle_args, err

if TYPE_CHECKING:
    from ..install import Installed

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
    """Run ``pull``: list what a release offers, or fetch and install one library's bundle."""
    from ..errors import InstallError
    from ..install import served_note
    from ..pull import parse_spec, pull, read_index, release_base, render_list  # network code only here

    if args.list == (args.spec is not None):
        err("give LIBRARY[@VERSION] to install, or --list to see what the release offers")
        return EXIT_USAGE
    try:
        base = release_base(args.release)
        spec = None if args.list else parse_spec(args.spec)
    except InstallError as exc:
        err(str(exc))
        return EXIT_USAGE
    try:
        if spec is None:
            entries = read_index(base)
            if args.json:
                import msgspec

                print(json.dumps({"release": base, "bundles": msgspec.to_builtins(entries)}, indent=2))
            else:
                sys.stdout.write(render_list(entries))
            return EXIT_OK
        done = pull(spec, base, args.bundles or default_bundles(), lock=args.lock)
    except InstallError as exc:
        err(str(exc))
        return EXIT_FAILED
    print(_installed(done))
    print(served_note([done]), file=sys.stderr)
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
        arg("spec", metavar="LIBRARY[@VERSION]", nargs="?", help="e.g. docbundle or docbundle@latest"),
        arg(
            "--from",
            dest="release",
            metavar="URL",
            default=None,
            help="the release folder holding index.json (default: $DOCBUNDLE_RELEASES, else the project's "
            "catalogue, the release bundles-latest)",
        ),
        arg("--list", action="store_true", help="list what the release offers and install nothing"),
        arg("--json", action="store_true", help="with --list: print the release's entries as JSON"),
        *bundle_args(INSTALL_LOCK_HELP),
    ),
)
