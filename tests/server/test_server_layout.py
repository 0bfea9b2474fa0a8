"""The rooms of docbundle.server, read from the source (no import runs): the one exception tree.

Who may import whom is drawn here and checked by the root ``.importlinter`` (tests/test_layers.py):

    words <- errors <- lockfile <- catalog/ <- models <- render <- documents <- hits <- docs <- mcp/ <- cli
                                          libraries <- docs    jsonrpc <- http/, stdio <- cli
                               catalog <- routing <- hits, docs
                               catalog <- resolve <- libraries, docs, mcp/
                               catalog <- install <- pull <- cli          catalog <- reload <- cli
                      errors <- keys <- http/, cli                errors <- offers <- cli
                      errors <- provenance <- install, pull, cli

Every module of the package is in a room (tests/test_layers.py); those that import nothing of it (words,
bounds, observe, budget, comments, lookups, logs) are at the bottom.

The operations (docs and the modules it calls, models, render, words) never import a transport or the
MCP SDK; the MCP server never imports a transport; the transports never import the MCP server's modules
(they are handed one).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from docbundle.server import errors

PACKAGE = Path(errors.__file__).resolve().parent


def test_every_server_exception_is_in_the_drawn_tree() -> None:
    drawn = (errors.__doc__ or "").split("The hierarchy::", 1)[1].split("\n\n", 2)[1]
    defined = [
        (name, cls)
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, Exception) and cls.__module__ == errors.__name__
    ]
    assert len(defined) >= 13
    for name, cls in defined:
        assert issubclass(cls, errors.ServerError), name
        assert f" {name} " in f" {drawn} ".replace("\n", " "), f"{name} is not drawn in errors.py"
    # No other module of the package defines an exception of its own. One kind is allowed, in mcp/ only:
    # a subclass of an MCP SDK exception, which the SDK must see as its own type (errors.py may not
    # import the SDK: the mcp-free contract of .importlinter).
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        from_sdk = {
            alias.asname or alias.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "mcp"
            for alias in n.names
        }
        own = [
            n.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ClassDef)
            and any(isinstance(b, ast.Name) and b.id.endswith(("Error", "Exception")) for b in n.bases)
            and not (
                path.parent.name == "mcp"
                and all(isinstance(b, ast.Name) and b.id in from_sdk for b in n.bases)
            )
        ]
        assert own == [], f"{path.relative_to(PACKAGE)} defines {own}: put it in errors.py's tree"


def test_search_records_are_built_by_keyword() -> None:
    # A hit before fitting and one library's ranking carry several numbers and lists of the same type:
    # built by position, two swapped fields still type-check and give wrong answers (issue 33, item 10).
    from dataclasses import fields, is_dataclass

    from docbundle.server.hits import RawHit
    from docbundle.server.semantic import Ranking

    for record in (RawHit, Ranking):
        assert is_dataclass(record), record
        assert record.__dataclass_params__.frozen, record  # type: ignore[attr-defined]
        assert all(f.kw_only for f in fields(record)), record
