"""Nothing but ``docbundle.bundle.whooshio`` imports whoosh (the import-linter contract in .importlinter).

The contract is run by ``lint-imports`` over the real packages, and once over a copy with a whoosh
import planted outside the door, which it must report. The door is a package of one module per concern
behind a facade: code outside it imports the facade only, and the facade offers every public name of
its modules but the tunables (which are set on the module that reads them).
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("server/src", "indexer/src")
CONTRACT = "whoosh-door"
DOOR = Path("server/src/docbundle/bundle/whooshio")  # a package: one module per concern
_IMPORT_RE = re.compile(r"^\s*(?:import whoosh|from whoosh)\b", re.MULTILINE)


def _lint(sources: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` for the door contract, with the packages under ``sources`` first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(sources / s) for s in SOURCES)
    script = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(script), "--config", str(ROOT / ".importlinter"), "--contract", CONTRACT, "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=sources,
    )


def test_only_the_door_imports_whoosh() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


def test_the_contract_reports_a_whoosh_import_outside_the_door(tmp_path: Path) -> None:
    for s in SOURCES:
        shutil.copytree(ROOT / s, tmp_path / s, ignore=shutil.ignore_patterns("__pycache__"))
    planted = tmp_path / "server/src/docbundle/bundle/search.py"
    planted.write_text(planted.read_text() + "\n\ndef _parse() -> None:\n    import whoosh.qparser\n")
    done = _lint(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "docbundle.bundle.search -> whoosh" in done.stdout


def test_the_source_text_names_whoosh_imports_in_the_door_only() -> None:
    found = sorted(
        str(p.relative_to(ROOT))
        for s in SOURCES
        for p in (ROOT / s).rglob("*.py")
        if _IMPORT_RE.search(p.read_text(encoding="utf-8"))
    )
    assert found
    assert [f for f in found if Path(f).parent != DOOR] == []


# -- the facade: the door's modules are reached through docbundle.bundle.whooshio only -----------------

FACADE = "docbundle.bundle.whooshio"
# Read by the module that defines it, so it is set there; a copy on the facade would change nothing.
TUNABLES = {"PARALLEL_MIN_POSTINGS"}


def _door_modules(root: Path) -> set[str]:
    return {p.stem for p in (root / DOOR).glob("*.py") if p.stem != "__init__"}


def _module_name(path: Path, source: Path) -> str:
    return ".".join(path.relative_to(source).with_suffix("").parts).removesuffix(".__init__")


def _facade_bypasses(root: Path) -> list[str]:
    """``file: module`` for every import, outside the door, of one of the door's modules."""
    modules = _door_modules(ROOT)
    found = []
    for s in SOURCES:
        for path in (root / s).rglob("*.py"):
            name = _module_name(path, root / s)
            if name == FACADE or name.startswith(FACADE + "."):
                continue
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    targets = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = package.rsplit(".", node.level - 1)[0] if node.level else ""
                    target = ".".join(p for p in (base, node.module or "") if p)
                    targets = [target, *(f"{target}.{a.name}" for a in node.names)]
                else:
                    continue
                found += [
                    f"{path.relative_to(root)}: {t}"
                    for t in targets
                    if t.startswith(FACADE + ".") and t.removeprefix(FACADE + ".").split(".")[0] in modules
                ]
    return sorted(found)


def test_code_outside_the_door_imports_its_facade_only() -> None:
    assert _facade_bypasses(ROOT) == []


def test_an_import_of_a_door_module_is_reported(tmp_path: Path) -> None:
    plants = {
        "server/src/docbundle/bundle/search.py": "from .whooshio.reading import PostingReader\n",
        "server/src/docbundle/server/docs.py": "import docbundle.bundle.whooshio.storage\n",
        "indexer/src/docbundle/indexer/pipeline/write.py": "from docbundle.bundle.whooshio import writing\n",
    }
    for file, line in plants.items():
        (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / file).write_text(line, encoding="utf-8")
    assert _facade_bypasses(tmp_path) == [
        "indexer/src/docbundle/indexer/pipeline/write.py: docbundle.bundle.whooshio.writing",
        "server/src/docbundle/bundle/search.py: docbundle.bundle.whooshio.reading",
        "server/src/docbundle/bundle/search.py: docbundle.bundle.whooshio.reading.PostingReader",
        "server/src/docbundle/server/docs.py: docbundle.bundle.whooshio.storage",
    ]


def test_the_facade_offers_every_public_name_of_the_door_but_its_tunables() -> None:
    facade = importlib.import_module(FACADE)
    public: set[str] = set()
    for module in _door_modules(ROOT):
        public |= set(importlib.import_module(f"{FACADE}.{module}").__all__)
    assert public >= TUNABLES
    assert sorted(facade.__all__) == sorted(public - TUNABLES)
    assert [n for n in facade.__all__ if not hasattr(facade, n)] == []
    assert [n for n in TUNABLES if hasattr(facade, n)] == []  # setting it there would do nothing
