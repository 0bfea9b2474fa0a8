"""One home for each bound, one name for each concept (issue 33, items 5 and 6).

- A bound is assigned in one module only (``docbundle.server.bounds`` for the server's, with the query
  bounds and the rank pool in ``docbundle.bundle.query``), and imported elsewhere under its own name:
  no copy (``RESOURCE_MAX_TOKENS = DEFAULT_MAX_TOKENS`` elsewhere) and no re-export
  (``from .bounds import MAX_LIMIT as MAX_LIMIT``), so changing one changes it everywhere.
- Retired names stay retired: each concept had several names (a review counted five meanings of
  "catalogue" and four of "resolve"); an identifier retired for one of them fails here if it comes back
  in the source of ``docbundle`` (a definition, an attribute, an import, a parameter).

Read from the source (``ast``), nothing imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (ROOT / "server" / "src" / "docbundle", ROOT / "indexer" / "src" / "docbundle")
SERVER = ROOT / "server" / "src" / "docbundle"


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for top in SOURCES:
        for path in sorted(top.rglob("*.py")):
            yield path.relative_to(top.parent).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _assigned(tree: ast.Module) -> set[str]:
    """The names a module assigns at its top level."""
    names: set[str] = set()
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _declared(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    raise AssertionError(f"{path} has no __all__")


# Each bound and the one module that assigns it.
HOMES: dict[str, str] = {
    name: "docbundle/server/bounds.py" for name in _declared(SERVER / "server" / "bounds.py")
}
HOMES |= {
    name: "docbundle/bundle/query.py"
    for name in ("MAX_QUERY_CHARS", "MAX_KEYWORD_CHARS", "RANK_POOL_MIN", "RANK_POOL_PER_HIT")
}


def test_each_bound_is_assigned_in_its_home_only_and_never_re_exported() -> None:
    copies: list[str] = []
    for where, tree in _modules():
        copies += [
            f"{where} assigns {name} (its home is {HOMES[name]})"
            for name in _assigned(tree) & HOMES.keys()
            if HOMES[name] != where
        ]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                copies += [
                    f"{where} re-exports {a.name} (import it from {HOMES[a.name]} where it is used)"
                    for a in node.names
                    if a.name in HOMES and a.asname == a.name
                ]
    assert not copies, "\n".join(copies)


def test_the_homes_define_what_this_test_checks() -> None:
    """The check above cannot pass by looking for names nobody defines."""
    found = {where: _assigned(tree) for where, tree in _modules()}
    assert all(name in found[home] for name, home in HOMES.items()), (
        "a bound this test names is gone from its home"
    )
    assert {"MAX_LIBRARY_ID_CHARS", "MAX_ECHO_CHARS", "RESOURCE_MAX_TOKENS", "MAX_URI_CHARS"} <= HOMES.keys()


# Identifiers retired for one concept, each with the name that replaced it (anywhere in the source).
RETIRED: dict[str, str] = {
    "Catalogue": "config.Config (libraries.toml is the config; the served set is the Catalog)",
    "NetPolicy": "pipeline.scope.AddressGate (the rules are docbundle.common.netpolicy)",
    "_system_resolve": "pipeline.scope._system_lookup (a DNS lookup)",
    "resolve_bundle": "layout.bundle_at",
    "_POOL_MIN": "bundle.query.rank_pool",
    "_POOL_PER_HIT": "bundle.query.rank_pool",
}
# Names one module alone may define (a def, a class or an assignment): "resolve" is what resolve_library
# does, "Mode" how a query's words combine.
DEFINED_ONLY_IN: dict[str, str] = {
    "resolve": "docbundle/server/resolve.py",
    "Resolver": "docbundle/server/resolve.py",
    "Mode": "docbundle/bundle/query.py",
}


def _identifiers(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """Every identifier the module names: definitions, arguments, imports, names and attributes."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id, node.lineno
        elif isinstance(node, ast.Attribute):
            yield node.attr, node.lineno
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name, node.lineno
        elif isinstance(node, ast.arg):
            yield node.arg, node.lineno
        elif isinstance(node, ast.alias):
            yield (node.asname or node.name).rpartition(".")[2], getattr(node, "lineno", 0)


def _definitions(tree: ast.Module) -> Iterator[tuple[str, int]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name, node.lineno
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            yield from ((t.id, node.lineno) for t in targets if isinstance(t, ast.Name))


def test_retired_names_stay_retired() -> None:
    back: list[str] = []
    for where, tree in _modules():
        back += [
            f"{where}:{line}: {name} is retired: {RETIRED[name]}"
            for name, line in _identifiers(tree)
            if name in RETIRED
        ]
        back += [
            f"{where}:{line}: {name} is defined in {DEFINED_ONLY_IN[name]} only; name this by what it does"
            for name, line in _definitions(tree)
            if DEFINED_ONLY_IN.get(name, where) != where
        ]
    assert not back, "\n".join(back)


def test_the_names_kept_are_still_defined_where_this_test_says() -> None:
    """The check above cannot pass because the kept names moved away."""
    found = {where: {name for name, _ in _definitions(tree)} for where, tree in _modules()}
    assert all(name in found[home] for name, home in DEFINED_ONLY_IN.items())
