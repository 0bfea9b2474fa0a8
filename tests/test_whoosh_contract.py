"""Nothing but ``docbundle.bundle.whooshio`` imports whoosh (the import-linter contract in .importlinter).

The contract is run by ``lint-imports`` over the real packages, and once over a copy with a whoosh
import planted outside the door, which it must report.
"""

from __future__ import annotations

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
