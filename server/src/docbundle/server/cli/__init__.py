"""``docbundle``: serve documentation bundles over MCP, and search, inspect or verify them from a shell.

Commands: ``serve`` (stdio or streamable HTTP), ``search``, ``info``, ``verify``, ``install``, ``pull``,
``keys`` (API keys for the HTTP transport: ``create``, ``list``, ``revoke``). Each is one row of
``COMMANDS`` (a ``docbundle.common.clitable.Command``: name, help, handler and arguments), declared in
its module: ``serve``; ``search`` (search, info); ``verify``; ``install`` (install, pull); ``keys``.
``common`` holds what they share.

Every command reads one bundles folder: ``--bundles DIR``, else ``$DOCBUNDLE_BUNDLES``, else the per-user
data folder that ``docbundle-index build`` writes to as well (``docbundle.bundle.userdirs``). The keys
file is ``--keys FILE``, else ``$DOCBUNDLE_KEYS``, else the per-user ``keys.toml``, for ``keys`` and
``serve`` alike. Messages speak to a shell user: errors and next steps in ``words.SHELL`` (commands
and options, no MCP tool names).

Exit codes: 0 success; 1 something failed (a bundle did not verify, a library could not be opened, the
HTTP port could not be bound); 2 usage or configuration error (bad arguments, unknown library, missing
bundles directory, malformed lock file, missing or malformed keys file, HTTP with neither keys nor
``--no-auth``, unknown key id); 141 (128 + SIGPIPE) when the reader of stdout went away (``| head``).

Only ``serve`` imports the MCP SDK, so the other commands start quickly. Logs go to stderr (JSON lines
when serving HTTP); in stdio mode stdout belongs to MCP.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from docbundle.common.clitable import EXIT_PIPE, arg, parser, run, table

from ..errors import LibraryUnavailableError, ServerError, UnknownLibraryError
from ..words import SHELL
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, err, where_to_get
from .install import INSTALL, PULL
from .keys import KEYS
from .search import INFO, SEARCH
from .serve import DEFAULT_HOST, DEFAULT_PORT, SERVE
from .verify import VERIFY

__all__ = [
    "COMMANDS",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_PIPE",
    "EXIT_USAGE",
    "main",
]

#: The commands, in the order ``--help`` lists them. A command is a row here and a module of its own.
COMMANDS = table(SERVE, SEARCH, INFO, VERIFY, INSTALL, PULL, KEYS)


def _parser() -> argparse.ArgumentParser:
    return parser(
        "docbundle",
        "Serve prebuilt documentation bundles to AI assistants over MCP (read-only, no network).",
        COMMANDS,
        arg("-v", "--verbose", action="store_true", help="log at INFO level (stderr)"),
        distribution="docbundle-server",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``docbundle`` command."""
    args = _parser().parse_args(argv)
    # Before the MCP SDK is imported: MCPServer() configures root logging at INFO unless a handler exists.
    level = getattr(args, "log_level", None)
    logging.basicConfig(
        level=level.upper() if level else logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="docbundle: %(levelname)s %(name)s: %(message)s",
    )
    try:
        return run(args)
    except UnknownLibraryError as exc:
        if exc.available:
            err(exc.told(SHELL))
        else:  # nothing installed: say where we looked and how to get a library, not "see docbundle info"
            err(f"unknown library {exc.library_id!r}: no library is installed" + where_to_get(args))
        return EXIT_USAGE
    except LibraryUnavailableError as exc:
        err(exc.told(SHELL))
        return EXIT_FAILED
    except ServerError as exc:
        err(exc.told(SHELL))
        return EXIT_USAGE
    except (FileNotFoundError, NotADirectoryError) as exc:
        err(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_FAILED
