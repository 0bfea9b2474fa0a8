"""The packages' import direction, read from the source (no import runs).

    docbundle.bundle   <- docbundle.server
    docbundle.bundle   <- docbundle.indexer          (the indexer never imports the server, and back)
    indexer.pipeline   <- indexer.release            (release tools use the pipeline, never the reverse)

One exception: the leaf modules in ``SHARED`` (the one address policy of every download, the one way to
print outside text) live in the server distribution and the indexer uses them too; they import nothing
of docbundle and nothing outside the standard library, so sharing them pulls no server code along.

A module-level or function-level import that breaks a rule fails here with the file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "server" / "src", ROOT / "indexer" / "src"]

# (importer prefix, forbidden prefix, why)
RULES = [
    ("docbundle.bundle", "docbundle.server", "the bundle format is below the server"),
    ("docbundle.bundle", "docbundle.indexer", "the bundle format is below the indexer"),
    ("docbundle.server", "docbundle.indexer", "the server never imports the indexer"),
    ("docbundle.indexer", "docbundle.server", "the indexer never imports the server"),
    ("docbundle.indexer.pipeline", "docbundle.indexer.release", "release tools use the pipeline, not back"),
]

# Leaf modules of the server distribution the indexer may import (issue 19: one implementation each).
SHARED = ("docbundle.server.netpolicy", "docbundle.server.terminal")


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return found


def _edges() -> list[tuple[str, Path, int, str]]:
    edges = []
    for src in SOURCES:
        for path in sorted(src.rglob("*.py")):
            module = _module_name(path, src)
            edges += [(module, path, line, target) for line, target in _imports(path, module)]
    return edges


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_imports_follow_the_layers() -> None:
    edges = _edges()
    assert len(edges) > 100  # the walk saw the packages
    broken = [
        f"{path.relative_to(ROOT)}:{line} imports {target} ({why})"
        for module, path, line, target in edges
        for importer, forbidden, why in RULES
        if _under(module, importer)
        and _under(target, forbidden)
        and not (importer == "docbundle.indexer" and any(_under(target, m) for m in SHARED))
    ]
    assert broken == []


def test_the_shared_modules_are_leaves_of_the_standard_library() -> None:
    import sys

    for module, path, line, target in _edges():
        if module in SHARED:
            top = target.split(".")[0]
            assert top == "__future__" or top in sys.stdlib_module_names, f"{path}:{line} imports {target}"
