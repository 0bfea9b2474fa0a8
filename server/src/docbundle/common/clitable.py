"""The command table both command-line programs are declared as: ``docbundle`` and ``docbundle-index``.

A program is a table of ``Command`` rows (name, help, description, handler, and its arguments as ``arg``
rows, each what ``argparse`` ``add_argument`` takes; a ``Group`` of them is shown under its own title;
a command with ``actions`` has sub-commands of its own, as ``docbundle keys create``). ``parser`` builds
the ``argparse`` parser from the table, ``run`` calls the handler the parsed arguments name. The
program itself keeps what is its own: its top-level options, logging and how its errors read.

Pure standard library; the server and the indexer import it (the ``common`` contract in ``.importlinter``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EXIT_PIPE", "Arg", "Command", "Group", "arg", "parser", "run", "table", "version_of"]

EXIT_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a command whose reader closed the pipe

Handler = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Arg:
    """One argument: the flags (or the name) and the keywords ``add_argument`` takes."""

    flags: tuple[str, ...]
    options: Mapping[str, Any]


def arg(*flags: str, **options: Any) -> Arg:
    """An argument row: ``arg("--limit", type=int, default=5, help="...")``."""
    return Arg(flags, options)


@dataclass(frozen=True)
class Group:
    """Arguments shown under their own title in ``--help`` (``serve``'s "HTTP transport")."""

    title: str
    args: tuple[Arg, ...]


@dataclass(frozen=True)
class Command:
    """One (sub)command: its name, help, handler and arguments, in the order ``--help`` shows them.

    A command with ``actions`` dispatches to one of them (``run`` is then unused), by the argument
    ``<name>_command``."""

    name: str
    help: str
    description: str
    run: Handler | None = None
    args: tuple[Arg | Group, ...] = ()
    actions: tuple[Command, ...] = field(default=())


def table(*commands: Command) -> dict[str, Command]:
    """The commands by name, in the order given (the order ``--help`` lists them)."""
    return {c.name: c for c in commands}


def version_of(distribution: str) -> str:
    """The installed distribution's version: its metadata (from pyproject) is the one source."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def parser(
    prog: str, description: str, commands: Mapping[str, Command], *top: Arg, distribution: str
) -> argparse.ArgumentParser:
    """The parser of a program: ``--version`` (``PROG VERSION``, the installed ``distribution``'s version),
    its other top-level arguments ``top``, then one sub-parser per command."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    _add_args(p, (arg("--version", action="version", version=f"{prog} {version_of(distribution)}"), *top))
    _add_commands(p, commands.values(), dest="command", metavar="COMMAND")
    return p


def _add_commands(p: argparse.ArgumentParser, commands: Any, dest: str, metavar: str) -> None:
    sub = p.add_subparsers(dest=dest, required=True, metavar=metavar)
    for c in commands:
        sp = sub.add_parser(c.name, help=c.help, description=c.description)
        _add_args(sp, c.args)
        if c.actions:
            _add_commands(sp, c.actions, dest=f"{c.name}_command", metavar="ACTION")
        else:
            sp.set_defaults(handler=c.run)


def _add_args(p: argparse.ArgumentParser, rows: Sequence[Arg | Group]) -> None:
    for row in rows:
        if isinstance(row, Group):
            group = p.add_argument_group(row.title)
            for a in row.args:
                group.add_argument(*a.flags, **a.options)
        else:
            p.add_argument(*row.flags, **row.options)


def run(args: argparse.Namespace) -> int:
    """Call the handler ``args`` name and return its exit code; when stdout's reader went away
    (``... --json | head``), stop quietly with ``EXIT_PIPE``."""
    try:
        code: int = args.handler(args)
        sys.stdout.flush()  # inside the try: a closed pipe shows up here as often as in print
        return code
    except BrokenPipeError:
        # Python would print a traceback when it flushes stdout at exit; pointing stdout at /dev/null
        # first makes that flush silent.
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
        return EXIT_PIPE
