"""No import circle among docbundle's modules (issue 33, item 8).

A circle (``a`` imports ``b`` which, directly or through others, imports ``a``) means neither module can
be read, tested or moved without the other, and which half of it runs first depends on who imported
first. The import contracts in ``.importlinter`` order packages and rooms; this check covers every
module, rooms or not. The graph is read from the source by grimp (the library import-linter builds its
graph with; nothing is imported), with every import counted: at module level, inside a function (a
late import is still a dependency) and under ``TYPE_CHECKING`` (a type the module names is one it
depends on).
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

PACKAGES = ("docbundle.common", "docbundle.bundle", "docbundle.server", "docbundle.indexer")


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every circle of ``graph``'s modules, each as one shortest loop through it (first module repeated
    at the end), sorted: the strongly connected components of two or more modules (Tarjan's algorithm,
    iterative: the graph may be deep), then the shortest chain back within each."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.find_modules_directly_imported_by(target)))))
                    break
                if target in on_stack:
                    low[module] = min(low[module], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        components.append(component)
    loops = []
    for component in components:
        first = min(component)
        nexts = sorted(component & graph.find_modules_directly_imported_by(first))
        back = min((graph.find_shortest_chain(importer=n, imported=first) or (n,) for n in nexts), key=len)
        loops.append([first, *back])
    return sorted(loops)


def test_no_module_is_in_an_import_circle() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    assert len(graph.modules) > 100  # the packages were found (not an empty graph that passes)
    found = "\n".join(" -> ".join(loop) for loop in circles(graph))
    assert found == "", f"import circles (break each: move what both halves need below them):\n{found}"


def test_the_check_finds_a_circle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A circle through a late import, one through ``TYPE_CHECKING`` and one at module level are each
    found and named as a loop; a module that only imports into a circle is not in it."""
    package = tmp_path / "circled"
    package.mkdir()
    files = {
        "__init__.py": "",
        "late.py": "def f() -> None:\n    from . import typed\n",
        "typed.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from . import late\n",
        "one.py": "from . import two\n",
        "two.py": "from . import three\n",
        "three.py": "from . import one\n",
        "outside.py": "from . import one, late\n",
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("circled", cache_dir=None)
    assert circles(graph) == [
        ["circled.late", "circled.typed", "circled.late"],
        ["circled.one", "circled.two", "circled.three", "circled.one"],
    ]
