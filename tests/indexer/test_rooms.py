"""The indexer's layout keeps its promises: read from the source, nothing is run. (That the build
pipeline never imports the release tools or the CLI is a contract in the root ``.importlinter``.)

- every exception class the indexer defines is in errors.py and drawn in its docstring's tree;
- the cli package's docstring names every registered command;
- every command a module of the cli package declares is in its table, and each module's commands run
  handlers of that module (its command group), so a command's code is where its row is.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

from docbundle.common.clitable import Command
from docbundle.indexer import cli, errors

PACKAGE = Path(errors.__file__).resolve().parent


def test_every_exception_class_is_in_the_drawn_tree() -> None:
    defined_elsewhere = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and path.name != "errors.py":
                bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
                if bases & {"Exception", "BaseException", "ValueError", "OSError", "RuntimeError"}:
                    defined_elsewhere.append(f"{path.name}:{node.name}")
                if any(b.endswith(("Error", "Refused", "Failed")) for b in bases):
                    defined_elsewhere.append(f"{path.name}:{node.name}")
    assert defined_elsewhere == []
    tree = errors.__doc__ or ""
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.IndexerError)]
    assert len(classes) >= 10
    assert [c.__name__ for c in classes if c.__name__ not in tree] == []
    assert all(c.__module__ == errors.__name__ for c in classes)


def test_the_cli_docstring_names_every_command() -> None:
    doc = cli.__doc__ or ""
    assert list(cli.COMMANDS) == [
        "build",
        "add",
        "check",
        "export",
        "diff",
        "regress",
        "audit",
        "package",
        "nightly",
    ]
    assert [name for name in cli.COMMANDS if f"``{name}``" not in doc] == []


def _declared(module: str) -> list[Command]:
    return [v for v in vars(importlib.import_module(module)).values() if isinstance(v, Command)]


def test_every_command_of_the_cli_package_is_in_its_table_beside_its_handler() -> None:
    modules = [f"{cli.__name__}.{m.name}" for m in pkgutil.iter_modules(cli.__path__)]
    assert len(modules) >= 5
    rows = {module: _declared(module) for module in modules}
    declared = [c for commands in rows.values() for c in commands]
    assert sorted(c.name for c in declared) == sorted(cli.COMMANDS)
    assert all(cli.COMMANDS[c.name] is c for c in declared)
    assert [(c.name, m) for m, commands in rows.items() for c in commands if c.run.__module__ != m] == []
