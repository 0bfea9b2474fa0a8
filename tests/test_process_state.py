"""Process-level state lives in one module (issue 33, item 2): only ``docbundle.common.process`` ends a
process with ``os._exit``, runs the exit handlers by hand, asks for a parent-death signal (``prctl``),
switches the cyclic collector (``gc.freeze``, ``disable``, ``enable``, ``set_threshold``, ``unfreeze``),
writes ``OMP_NUM_THREADS`` or touches ``sys.modules`` and ``sys._getframe``.

The source of both distributions is scanned (its syntax tree: names bound by ``import`` and ``from``
included, comments and docstrings not), and the scan is shown to find each of these in a sample.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (ROOT / "server" / "src", ROOT / "indexer" / "src")

#: The one module allowed.
OWNER = "docbundle.common.process"

#: Modules still allowed while another branch of issue 33 moves them (split33 turns both into packages);
#: the lead points their calls at ``docbundle.common.process`` at merge and empties this tuple. A name
#: covers the package of that name too.
NOT_YET_POINTED_AT_PROCESS: tuple[str, ...] = ()

#: What only the owner may touch: (module, attribute).
FORBIDDEN = {
    ("os", "_exit"),
    ("atexit", "_run_exitfuncs"),
    ("gc", "freeze"),
    ("gc", "unfreeze"),
    ("gc", "disable"),
    ("gc", "enable"),
    ("gc", "set_threshold"),
    ("sys", "modules"),
    ("sys", "_getframe"),
}
#: Reached on whatever object (``ctypes.CDLL(None).prctl``).
FORBIDDEN_ATTRIBUTES = {"prctl"}
#: A string that names process state wherever it is written (``os.environ[...]``, ``putenv``).
FORBIDDEN_STRINGS = {"OMP_NUM_THREADS"}


def violations(source: str) -> list[str]:
    """Each use of process state in ``source``, as ``line: what``."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}  # local name -> the module it is bound to
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:  # ``import a.b`` binds ``a``; ``import a.b as c`` binds ``c`` to ``a.b``
                if alias.asname:
                    modules[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    modules[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            for alias in node.names:
                if (node.module, alias.name) in FORBIDDEN:
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_ATTRIBUTES:
                found.append(f"{node.lineno}: .{node.attr}")
            elif isinstance(node.value, ast.Name) and (modules.get(node.value.id), node.attr) in FORBIDDEN:
                found.append(f"{node.lineno}: {modules[node.value.id]}.{node.attr}")
        elif isinstance(node, ast.Constant) and node.value in FORBIDDEN_STRINGS:
            found.append(f"{node.lineno}: {node.value!r}")
    return sorted(set(found), key=lambda s: int(s.split(":")[0]))


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _allowed(module: str) -> bool:
    return module == OWNER or any(
        module == name or module.startswith(name + ".") for name in NOT_YET_POINTED_AT_PROCESS
    )


def test_only_the_process_module_touches_process_state() -> None:
    offenders: dict[str, list[str]] = {}
    scanned = 0
    for src in SOURCES:
        for path in sorted(src.rglob("*.py")):
            module = _module_name(path, src)
            scanned += 1
            if _allowed(module):
                continue
            found = violations(path.read_text(encoding="utf-8"))
            if found:
                offenders[module] = found
    assert scanned > 100  # both trees were found
    assert offenders == {}, f"process state outside {OWNER} (call its functions instead): {offenders}"


def test_the_process_module_is_where_they_are() -> None:
    # The owner really does these (so the rule is not kept by having moved them nowhere).
    path = ROOT / "server" / "src" / Path(*OWNER.split(".")).with_suffix(".py")
    found = " ".join(violations(path.read_text(encoding="utf-8")))
    for what in ("os._exit", ".prctl", "gc.freeze", "gc.disable", "sys.modules", "sys._getframe"):
        assert what in found


SAMPLE = """\
import os, gc as collector, sys
import ctypes
from os import _exit
from sys import modules
import atexit

os._exit(1)
collector.set_threshold(1, 2, 3)
ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)
os.environ["OMP_NUM_THREADS"] = "1"
sys.modules["x"] = None
frame = sys._getframe(0)
atexit._run_exitfuncs()
gc = object()
gc.freeze()  # not the collector: a local name
os.getpid()
"""


@pytest.mark.parametrize(
    "what",
    [
        "3: from os import _exit",
        "4: from sys import modules",
        "7: os._exit",
        "8: gc.set_threshold",
        "9: .prctl",
        "10: 'OMP_NUM_THREADS'",
        "11: sys.modules",
        "12: sys._getframe",
        "13: atexit._run_exitfuncs",
    ],
)
def test_the_scan_finds_each_kind(what: str) -> None:
    assert what in violations(SAMPLE)


def test_the_scan_passes_ordinary_code() -> None:
    found = violations(SAMPLE)
    assert not any(line.startswith(("14:", "15:", "16:")) for line in found), found
