"""The ``check`` command: a library catalogue checked offline (``indexer/check.py`` does the work)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from docbundle.common.clitable import Command, arg

from .shared import DEFAULT_CONFIG, EXIT_FAILED, EXIT_OK, _as_json

# -- check ----------------------------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    """Run ``check``."""
    from ..check import check_config, render_check

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
