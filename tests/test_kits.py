"""The suite's own rules (issue 33, item 9), read from its source (no import runs): one way to build a
bundle tree (``treekit.build``) and one HTTP client (``httpkit``, httpx2). Eight builders and three HTTP
clients had grown, each a little different; a new one fails here and belongs in the kit instead."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# The one module that builds libraries in a test's process, and the script that regenerates the golden
# bundle (run by hand, outside pytest, without tests/ on its path).
BUILDERS = {"treekit.py", "bundle/make_golden.py"}
# The one module that makes HTTP clients.
HTTP_CLIENTS = {"server/httpkit.py"}
# What makes an HTTP client or sends a request without one, by module.
HTTP_MODULES = {"http.client", "urllib.request"}
HTTPX_CALLS = {
    "Client",
    "AsyncClient",
    "request",
    "get",
    "post",
    "put",
    "delete",
    "head",
    "options",
    "stream",
}


def _sources() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel.startswith("bundle/golden/"):
            continue
        yield rel, ast.parse(path.read_text(encoding="utf-8"), filename=rel)


def _calls(tree: ast.Module) -> Iterator[ast.Call]:
    return (node for node in ast.walk(tree) if isinstance(node, ast.Call))


def test_only_treekit_builds_libraries() -> None:
    found = [
        f"{rel}:{call.lineno}"
        for rel, tree in _sources()
        if rel not in BUILDERS
        for call in _calls(tree)
        if (isinstance(call.func, ast.Name) and call.func.id == "build_target")
        or (isinstance(call.func, ast.Attribute) and call.func.attr == "build_target")
    ]
    assert found == [], f"build a test's libraries with treekit.build (a Tree, or a preset), not: {found}"


def _http_import(node: ast.AST) -> bool:
    """Whether ``node`` imports a module that makes HTTP requests (besides httpx2)."""
    if isinstance(node, ast.Import):
        return any(a.name in HTTP_MODULES for a in node.names)
    if isinstance(node, ast.ImportFrom) and node.module is not None:
        return node.module in HTTP_MODULES or any(
            f"{node.module}.{a.name}" in HTTP_MODULES for a in node.names
        )
    return False


def _httpx_call(call: ast.Call) -> bool:
    """Whether ``call`` makes an httpx2 client or sends a request without one (``httpx2.post(...)``)."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "httpx2"
        and func.attr in HTTPX_CALLS
    )


def test_only_httpkit_makes_http_clients() -> None:
    found = [
        f"{rel}:{node.lineno}"
        for rel, tree in _sources()
        if rel not in HTTP_CLIENTS
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom | ast.Call)
        and (_http_import(node) or (isinstance(node, ast.Call) and _httpx_call(node)))
    ]
    assert found == [], f"reach a server with httpkit (client, request, session), not: {found}"
