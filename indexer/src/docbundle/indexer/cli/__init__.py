"""``docbundle-index``: build bundles from a library catalogue, and the release tools that check, compare,
export and publish them.

Every command is one row of ``COMMANDS`` (a ``docbundle.common.clitable.Command``, the table the
``docbundle`` command is declared as too), declared beside its handler with its arguments, in the
module of its group: ``build`` (build, add), ``check``, ``release`` (export, diff, regress, audit,
package) and ``nightly`` (with its plan, merge and roll). They import nothing of this package but
``shared`` (exit codes, default paths, the report printers; the ``cli-rooms`` contract in
``.importlinter``); this module puts them in one table, and ``main`` dispatches through it. Each
handler imports its modules when it runs, so a command loads only what it uses (``build`` neither
``add`` nor the release tools), and so do the page workers, which import this package again;
``console`` is the console script. The commands, with their exit codes:

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
FILE`` writes the release index of ``bundles-latest`` that ``docbundle pull`` reads, with the
catalogue's health ``status.json`` and the catalogue page ``catalogue.html``.

Any command whose reader closes stdout early (``| head``) stops quietly with 141 (128 + SIGPIPE).
Any command interrupted by Ctrl-C (SIGINT) or SIGTERM unwinds (published bundles intact, see
``interrupt.py``) and exits 130 or 143 (128 + the signal's number).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from docbundle.common.clitable import parser, run, table
from docbundle.common.process import exit_without_teardown

from ..errors import ConfigError
from ..interrupt import TermAsInterrupt
from .build import ADD, BUILD
from .check import CHECK
from .nightly import NIGHTLY
from .release import AUDIT, DIFF, EXPORT, PACKAGE, REGRESS
from .shared import (
    DEFAULT_CONFIG,
    DEFAULT_GOLDEN_DIR,
    DEFAULT_PROBE,
    ENV_EMBED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    EXPORT_FORMATS,
)

__all__ = [
    "COMMANDS",
    "DEFAULT_CONFIG",
    "DEFAULT_GOLDEN_DIR",
    "DEFAULT_PROBE",
    "ENV_EMBED",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXPORT_FORMATS",
    "console",
    "main",
]


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
    end the process without the interpreter's teardown (``_end_without_teardown``). Tests call ``main``
    in their own process, never this."""
    _end_without_teardown(main())


def _end_without_teardown(code: int) -> NoReturn:
    """End the process with ``code`` (``main``'s exit code) without the interpreter's teardown.

    Freeing every object and module of a finished build took ~0.1 s after the last line was printed
    (issue 22, item 5), for nothing: the bundles, the release index and the crawl cache are written
    and closed by then. So the exit handlers run first (the page workers are stopped, multiprocessing's
    and logging's clean-up), stdout and stderr are flushed, and ``os._exit`` ends the process with
    ``main``'s exit code. When another non-daemon thread is still running, or a stream cannot be
    flushed, or a profiler or tracer watches, it exits the ordinary way instead (which waits for the
    thread, reports the stream as it always has, or lets ``python -m cProfile -o FILE`` write FILE).
    """
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)  # a profiler (``python -m cProfile``) or tracer writes what it saw after main
    if any(
        t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.current_thread()
    ):
        sys.exit(code)
    exit_without_teardown(code)  # exit handlers, streams flushed, then os._exit
