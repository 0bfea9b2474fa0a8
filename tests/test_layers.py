"""The import rules, checked by import-linter from the contracts in the root ``.importlinter`` (no import
of the packages runs). The rules, with their reasons in that file:

    docbundle.bundle   <- docbundle.server
    docbundle.bundle   <- docbundle.indexer          (the indexer never imports the server, and back)
    docbundle.common   <- all of them                (the shared leaves import nothing else of docbundle)
    indexer.pipeline   <- indexer.release, cli       (release tools use the pipeline, never the reverse)
    no HTTP client in docbundle.server or docbundle.bundle
    the rooms of docbundle.server (tests/server/test_server_layout.py draws them; the second test: every
    module of the package is in one)
    the rooms of indexer.pipeline.llmstxt and indexer.pipeline.html (their package docstrings draw them)
    the rooms of indexer.cli: its command modules import only its shared module (its docstring says so)

The third test proves each contract bites: a copy of the sources, with one import added per contract
that breaks it, must be reported broken on every one of them.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".importlinter"
# lint-imports beside this interpreter: the one installed with the test dependencies.
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# contract id: (file of the sources, an import that breaks that contract and is allowed by nothing else)
BREAKS = {
    "parts": ("server/src/docbundle/server/docs.py", "import docbundle.indexer.config"),
    "pipeline": ("indexer/src/docbundle/indexer/pipeline/chunk.py", "import docbundle.indexer.release"),
    "no-http-client": ("server/src/docbundle/bundle/store.py", "import httpx2"),
    "server-rooms": ("server/src/docbundle/server/catalog/__init__.py", "from .. import render"),
    "server-roots": ("server/src/docbundle/server/jsonrpc.py", "from . import keys"),
    "mcp-free": ("server/src/docbundle/server/models.py", "import starlette.responses"),
    "llmstxt-rooms": ("indexer/src/docbundle/indexer/pipeline/llmstxt/model.py", "from . import links"),
    "html-rooms": ("indexer/src/docbundle/indexer/pipeline/html/tree.py", "from . import convert"),
    "common": ("server/src/docbundle/common/terminal.py", "import msgspec"),
    "prepare-rooms": ("indexer/src/docbundle/indexer/pipeline/prepare/job.py", "from . import pool"),
    "cli-rooms": ("indexer/src/docbundle/indexer/cli/check.py", "from . import release"),
}


SERVER = ROOT / "server" / "src" / "docbundle" / "server"


def _contracts() -> dict[str, str]:
    """Contract id -> name, from ``.importlinter``."""
    parser = configparser.ConfigParser()
    parser.read(CONFIG, encoding="utf-8")
    prefix = "importlinter:contract:"
    return {s.removeprefix(prefix): parser[s]["name"] for s in parser.sections() if s.startswith(prefix)}


def _lint(config: Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_imports_follow_the_contracts() -> None:
    contracts = _contracts()
    assert set(BREAKS) <= set(contracts)  # no rule was dropped from the file
    run = _lint(CONFIG, ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"Contracts: {len(contracts)} kept, 0 broken." in run.stdout, run.stdout


def test_every_server_module_is_in_a_room() -> None:
    """``server-rooms`` checks only the modules it names: a module left out may import any other (issue 33
    found seven left out). Every module and package of docbundle.server is in one of its layers, and
    every layer names one that exists."""
    parser = configparser.ConfigParser()
    parser.read(CONFIG, encoding="utf-8")
    layers = parser["importlinter:contract:server-rooms"]["layers"]
    rooms = {name.strip(" ()") for line in layers.splitlines() for name in line.replace(":", "|").split("|")}
    rooms.discard("")
    modules = {p.stem for p in SERVER.glob("*.py") if p.name != "__init__.py"}
    modules |= {p.name for p in SERVER.iterdir() if (p / "__init__.py").is_file()}
    assert sorted(modules - rooms) == [], "not in a layer of server-rooms in .importlinter: place each"
    assert sorted(rooms - modules) == [], "layers of server-rooms in .importlinter that name no module"


def test_every_contract_fails_on_an_import_that_breaks_it(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for part in ("server", "indexer"):
        shutil.copytree(
            ROOT / part / "src", src, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
        )
    for file, line in BREAKS.values():
        copy = src / Path(file).relative_to(Path(file).parts[0], "src")
        copy.write_text(copy.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    # The copies come first on the path, before the installed packages.
    run = _lint(CONFIG, tmp_path, {**os.environ, "PYTHONPATH": str(src)})
    assert run.returncode == 1, run.stdout + run.stderr
    report = " ".join(run.stdout.split())  # long names are wrapped
    contracts = _contracts()
    assert [i for i in BREAKS if f"{' '.join(contracts[i].split())} BROKEN" not in report] == [], run.stdout
