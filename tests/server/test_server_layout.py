"""The rooms of docbundle.server, read from the source (no import runs): who may import whom, and the
one exception tree.

    words <- errors <- lockfile <- catalog <- models <- render <- documents <- hits <- docs <- mcp/ <- cli
                                          libraries <- docs    jsonrpc <- http/, stdio <- cli

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
SDK = ("mcp", "uvicorn", "starlette")

# (importer, what it must not import, why); names relative to docbundle.server, "mcp" alone is the SDK.
OPERATIONS = ("docs", "libraries", "hits", "documents", "words")
RULES = [
    ("words", ("docbundle.server.",), "words is the root: it imports nothing of the package"),
    *[
        ("errors", (f"docbundle.server.{m}",), "errors imports only words")
        for m in ("lockfile", "catalog", "models", "render", *OPERATIONS[:-1], "mcp", "cli")
    ],
    (
        "lockfile",
        ("docbundle.server.catalog", "docbundle.server.docs"),
        "the lock file is below the catalogue",
    ),
    (
        "catalog",
        ("docbundle.server.docs", "docbundle.server.models"),
        "the catalogue is below the operations",
    ),
    ("models", ("docbundle.server.docs", "docbundle.server.render"), "results are below what builds them"),
    (
        "render",
        tuple(f"docbundle.server.{m}" for m in OPERATIONS[:-1]),
        "renderings are below the operations",
    ),
    *[
        (m, ("docbundle.server.mcp", "docbundle.server.http", "docbundle.server.stdio", *SDK), "MCP-free")
        for m in OPERATIONS
    ],
    ("documents", ("docbundle.server.hits", "docbundle.server.docs"), "documents are below search and docs"),
    ("hits", ("docbundle.server.docs",), "search is below docs"),
    ("libraries", ("docbundle.server.docs", "docbundle.server.hits"), "lookups are below docs"),
    ("models", ("docbundle.server.mcp", "docbundle.server.http", *SDK), "MCP-free"),
    ("render", ("docbundle.server.mcp", "docbundle.server.http", *SDK), "MCP-free"),
    ("mcp.", ("docbundle.server.http", "docbundle.server.stdio", "docbundle.server.cli"), "no transport"),
    ("http.", ("docbundle.server.mcp", "docbundle.server.stdio", "docbundle.server.cli"), "handed a server"),
    ("stdio", ("docbundle.server.mcp", "docbundle.server.http", "docbundle.server.cli"), "handed a server"),
    ("jsonrpc", ("docbundle.server.", *SDK), "shared by both transports, below them"),
]


def _modules() -> dict[str, Path]:
    return {
        ".".join(p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__"): p
        for p in sorted(PACKAGE.rglob("*.py"))
    }


def _imports(name: str, path: Path) -> list[tuple[int, str]]:
    full = "docbundle.server" + ("" if name == "__init__" else f".{name}")
    package = full if path.name == "__init__.py" else full.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                up = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{up}.{base}" if base else up
            found.append((node.lineno, base))
    return found


def _breaks(target: str, forbidden: str) -> bool:
    if forbidden in SDK:
        return target == forbidden or target.startswith(forbidden + ".")
    return target == forbidden.rstrip(".") or target.startswith(forbidden.rstrip(".") + ".")


def test_the_rooms_import_one_way() -> None:
    modules = _modules()
    assert {"docs", "models", "render", "lockfile", "jsonrpc", "mcp.server", "mcp.tools", "http.app"} <= set(
        modules
    )
    assert set(OPERATIONS) <= set(modules)
    broken = [
        f"{path.relative_to(PACKAGE)}:{line} imports {target} ({why})"
        for importer, forbidden, why in RULES
        for name, path in modules.items()
        if name == importer or (importer.endswith(".") and name.startswith(importer))
        for line, target in _imports(name, path)
        if any(_breaks(target, f) for f in forbidden)
    ]
    assert broken == []


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
    # No other module of the package defines an exception of its own.
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = [
            n.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ClassDef)
            and any(isinstance(b, ast.Name) and b.id.endswith(("Error", "Exception")) for b in n.bases)
        ]
        assert own == [], f"{path.relative_to(PACKAGE)} defines {own}: put it in errors.py's tree"
