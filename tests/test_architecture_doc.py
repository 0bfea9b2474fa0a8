"""docs/architecture.md stays true (issue 33, item 4: five of its claims had drifted, thirteen modules were
missing from its tables).

- Its tables list every module of the four packages, one row each with its role, and no module that is
  gone: a package is its folder (``cli/``), a module in it its path (``cli/serve``). The failure says
  which rows to add or remove, under which heading.
- What it says start-up imports is what ``docbundle`` imports before a command runs.

Read from the source and the file; the start-up check runs one interpreter.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
# Each package's folder; its table is under the heading "## `docbundle.<name>` ...".
PACKAGES = {
    "docbundle.common": ROOT / "server" / "src" / "docbundle" / "common",
    "docbundle.bundle": ROOT / "server" / "src" / "docbundle" / "bundle",
    "docbundle.server": ROOT / "server" / "src" / "docbundle" / "server",
    "docbundle.indexer": ROOT / "indexer" / "src" / "docbundle" / "indexer",
}
_HEADING = re.compile(r"^## `(docbundle\.\w+)`")
_ROW = re.compile(r"^\| `([\w/]+)` \| (.*\S) \|$")


def modules_of(package: Path) -> set[str]:
    """``package``'s modules as the tables name them: ``name``, ``sub/name``, and ``sub/`` for a package
    (its ``__init__``); a folder without ``__init__.py`` (data) is not a package."""
    names = set()
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).parts
        folders = [package.joinpath(*parts[:i]) for i in range(1, len(parts))]
        if not all((f / "__init__.py").is_file() for f in folders):
            continue
        if parts[-1] == "__init__.py":
            if len(parts) > 1:
                names.add("/".join(parts[:-1]) + "/")
        else:
            names.add("/".join((*parts[:-1], path.stem)))
    return names


def documented(text: str) -> tuple[dict[str, list[str]], list[str]]:
    """The module rows under each package's heading, and the table rows that are not one module with its
    role (``| `name` | role |``)."""
    rows: dict[str, list[str]] = {}
    malformed = []
    package = None
    for line in text.splitlines():
        if line.startswith("## "):
            match = _HEADING.match(line)
            package = match.group(1) if match else None
            if package is not None:
                rows.setdefault(package, [])
            continue
        if package is None or not line.startswith("|") or line.startswith(("| module |", "|---")):
            continue
        row = _ROW.match(line)
        if row is None:
            malformed.append(f"{package}: {line[:80]}")
        else:
            rows[package].append(row.group(1))
    return rows, malformed


def test_the_tables_list_every_module_once() -> None:
    rows, malformed = documented(DOC.read_text(encoding="utf-8"))
    problems = [f"  not one module with its role (`name` | role): {line}" for line in malformed]
    for package, folder in PACKAGES.items():
        heading = f"## `{package}`"
        if package not in rows:
            problems.append(f"  no table under a heading {heading} (...)")
        listed = rows.get(package, [])
        present = modules_of(folder)
        missing = sorted(present - set(listed))
        stale = sorted(set(listed) - present)
        twice = sorted({name for name in listed if listed.count(name) > 1})
        if missing:
            problems.append(f"  add under {heading}, one row each: " + ", ".join(f"`{m}`" for m in missing))
        if stale:
            problems.append(
                f"  remove under {heading} (no such module): " + ", ".join(f"`{m}`" for m in stale)
            )
        if twice:
            problems.append(f"  listed twice under {heading}: " + ", ".join(f"`{m}`" for m in twice))
    problems += [
        f"  a table for {p}, which is not a package of PACKAGES here"
        for p in sorted(set(rows) - set(PACKAGES))
    ]
    assert problems == [], "docs/architecture.md's module tables are out of date:\n" + "\n".join(problems)


def test_the_check_sees_a_missing_a_stale_and_a_malformed_row(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "data").mkdir()
    for name in ("__init__.py", "a.py", "sub/__init__.py", "sub/b.py", "data/tool.py"):
        (package / name).write_text("", encoding="utf-8")
    assert modules_of(package) == {"a", "sub/", "sub/b"}
    text = "## `docbundle.pkg` (x)\n\n| module | what |\n|---|---|\n| `a` | one |\n| `gone` | old |\n| `a`, `b` | two |\n"
    rows, malformed = documented(text)
    assert rows == {"docbundle.pkg": ["a", "gone"]}
    assert malformed == ["docbundle.pkg: | `a`, `b` | two |"]


def test_start_up_imports_what_the_doc_says() -> None:
    """The doc: start-up imports the CLI and the catalogue, neither pydantic, the MCP SDK, whoosh nor
    uvicorn."""
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    assert "imports the CLI, the catalogue and what the catalogue reads of the bundle format" in text
    assert "neither pydantic, the MCP SDK, whoosh nor uvicorn" in text
    code = (
        "import sys, docbundle.server.cli as c; c._parser(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'mcp', 'whoosh', 'uvicorn'}), "
        "'docbundle.server.catalog' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["[]", "True"]
