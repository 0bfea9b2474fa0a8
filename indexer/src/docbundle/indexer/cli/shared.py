"""What the command modules of ``docbundle-index`` share: exit codes, the paths the commands look at
when not told, the values help texts show of modules only some commands import, and the report
printers."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import msgspec

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

#: Where the commands look when not told (relative to the current directory).
DEFAULT_CONFIG = Path("bundles/libraries.toml")
DEFAULT_GOLDEN_DIR = Path("bundles/golden")

# What the help texts show of modules only some commands import (each handler imports its modules when
# it runs, so that ``build`` loads neither ``add`` nor the release tools, and the page workers, which
# import this package again, load next to nothing). tests/indexer/test_cli_imports.py checks each against
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
