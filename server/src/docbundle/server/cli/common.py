"""What every ``docbundle`` command shares: exit codes, the bundles folder and its options, errors on stderr.

Imports neither the MCP SDK nor whoosh (``docbundle --help`` and the shell commands start quickly).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from docbundle.bundle.userdirs import ENV_BUNDLES, bundles_origin, default_bundles
from docbundle.common.clitable import Arg, arg
from docbundle.common.terminal import printable

from ..catalog import Catalog, CatalogSettings
from ..lockfile import find_lock

if TYPE_CHECKING:
    from ..provenance import Policy

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
LOCK_HELP = "lock file pinning content hashes (default: DIR/bundles.lock when it exists)"


def bundle_args(lock_help: str = LOCK_HELP) -> tuple[Arg, Arg]:
    """``--bundles`` and ``--lock``: the options of every command reading a bundles directory."""
    return (
        arg(
            "--bundles",
            type=Path,
            default=None,
            metavar="DIR",
            help=f"bundles directory (default: ${ENV_BUNDLES}, else the per-user data folder: see "
            "`docbundle info`)",
        ),
        arg("--lock", type=Path, default=None, metavar="FILE", help=lock_help),
    )


def provenance_args() -> tuple[Arg, Arg, Arg]:
    """``--require-provenance``, ``--signer-workflow`` and ``--trusted-root``: how ``install``, ``pull`` and
    ``verify`` check an archive's attestation (``docbundle.server.provenance``)."""
    return (
        arg(
            "--require-provenance",
            action="store_true",
            help="refuse an archive without an attestation that verifies (default: a missing one is a "
            "warning; one that does not verify is always refused)",
        ),
        arg(
            "--signer-workflow",
            metavar="OWNER/REPO/PATH",
            default=None,
            help="the workflow whose signature is expected (default: $DOCBUNDLE_SIGNER_WORKFLOW, else the "
            "nightly workflow of this docbundle's repository, .github/workflows/nightly.yml)",
        ),
        arg(
            "--trusted-root",
            type=Path,
            default=None,
            metavar="FILE",
            help="Sigstore trusted_root.json (default: $DOCBUNDLE_TRUSTED_ROOT, else the one docbundle ships)",
        ),
    )


def provenance_policy(args: argparse.Namespace) -> Policy:
    """The provenance policy the options of ``provenance_args`` give (``ProvenanceError`` when malformed)."""
    from ..provenance import policy

    return policy(args.signer_workflow, args.trusted_root, required=args.require_provenance)


def warn(message: str) -> None:
    """``docbundle: warning: MESSAGE`` on stderr."""
    print(f"docbundle: warning: {printable(message, 4000, lines=True)}", file=sys.stderr)


def err(message: str) -> None:
    """``docbundle: error: MESSAGE`` on stderr."""
    # Messages quote what a release, a redirect or a bundle said: no escape sequence reaches the terminal.
    print(f"docbundle: error: {printable(message, 4000, lines=True)}", file=sys.stderr)


def root(args: argparse.Namespace) -> Path:
    """The bundles folder a command reads: ``--bundles``, else the default (created when missing)."""
    if args.bundles is not None:
        return Path(args.bundles)
    folder = default_bundles()
    # The default folder is this program's own: an absent one is an empty one, not a usage error.
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def load(args: argparse.Namespace, settings: CatalogSettings | None = None) -> Catalog:
    """The catalogue of the bundles folder ``args`` name, with its lock file (and a server's
    ``settings``; a one-shot command takes the defaults)."""
    folder = root(args)
    return Catalog.load(folder, lock=find_lock(folder, args.lock), settings=settings)


def where(folder: Path, args: argparse.Namespace) -> str:
    """``/path (the per-user default)``: a bundles folder and why it is the one used."""
    why = "--bundles" if getattr(args, "bundles", None) is not None else bundles_origin()
    return f"{folder} ({why})"


def where_to_get(args: argparse.Namespace) -> str:
    """Where the bundles were looked for, and the commands that put a library there."""
    folder = args.bundles if getattr(args, "bundles", None) is not None else default_bundles()
    return "\n".join(
        [
            f". Looked in {where(folder, args)}; --bundles DIR or ${ENV_BUNDLES} look elsewhere.",
            "Get a library:",
            "  docbundle pull --list                      what the project's release offers",
            "  docbundle install ARCHIVE                  a release archive you have (offline)",
            "  docbundle-index build --config FILE        build from a catalogue (it writes to this folder)",
        ]
    )


def ways() -> str:
    """``get one with `docbundle pull LIBRARY`, ... or `docbundle-index build --config FILE```."""
    return (
        "get one with `docbundle pull LIBRARY`, `docbundle install ARCHIVE` or "
        "`docbundle-index build --config FILE`"
    )


@contextlib.contextmanager
def catalog_quiet() -> Iterator[None]:
    """Silence the catalogue's log lines about bundles that fail to open: the command prints the reasons
    itself, in the user's terms (the level is restored afterwards)."""
    logger = logging.getLogger("docbundle.server.catalog")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
