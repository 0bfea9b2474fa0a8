"""The ``docbundle`` command: search, info, verify, serve's argument errors, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clikit import server_cli
from docbundle.server.cli import main
from serverkit import BROKEN, GOLDEN_BUILD, GOLDEN_HASH, flip_byte


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_search_for_humans_and_scripts(capsys: pytest.CaptureFixture[str], bundles_root: Path) -> None:
    code, out, _ = run(capsys, "search", "golden", "useEffect cleanup", "--bundles", str(bundles_root))
    assert code == 0
    assert f"golden@latest (build {GOLDEN_BUILD})" in out
    assert "1. Hooks › Cleanup" in out and "guides/hooks.md chunk 1" in out
    code, out, _ = run(
        capsys,
        "search",
        "demo",
        "legacyInstaller",
        "--version",
        "1.x",
        "--json",
        "--bundles",
        str(bundles_root),
    )
    data = json.loads(out)
    assert code == 0 and data["version"] == "1.x" and data["hits"][0]["documentId"] == "guides/install.md"
    code, out, _ = run(capsys, "search", "cjk", "数据库", "--limit", "1", "--bundles", str(bundles_root))
    assert code == 0 and "zh/database.md" in out
    code, out, _ = run(capsys, "search", "golden", "kubernetes", "--bundles", str(bundles_root))
    assert code == 0 and "No results" in out and "--mode broad" in out


def test_search_errors_and_exit_codes(
    capsys: pytest.CaptureFixture[str], bundles_root: Path, broken_root: Path
) -> None:
    code, _, err = run(capsys, "search", "nope", "x", "--bundles", str(bundles_root))
    assert code == 2 and "unknown library 'nope'. Available libraries: cjk, demo, golden" in err
    code, _, err = run(capsys, "search", "golden", "x", "--limit", "50", "--bundles", str(bundles_root))
    assert code == 2 and "limit must be between 1 and 20" in err
    code, _, err = run(capsys, "search", "flipped", "x", "--bundles", str(broken_root))
    assert code == 1 and "does not match its sha256" in err
    code, _, err = run(capsys, "search", "golden", "x", "--bundles", str(bundles_root / "absent"))
    assert code == 2 and "does not exist" in err
    with pytest.raises(SystemExit) as usage:
        main(["search", "golden"])
    assert usage.value.code == 2


def test_info(
    capsys: pytest.CaptureFixture[str], bundles_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCBUNDLE_BUNDLES", str(bundles_root))  # the default bundles directory
    code, out, _ = run(capsys, "info")
    assert code == 0
    assert out.splitlines()[0] == f"3 libraries in {bundles_root} (from $DOCBUNDLE_BUNDLES)"
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["cjk", "demo", "golden"]
    assert f"3 docs, build {GOLDEN_BUILD}" in out
    code, out, _ = run(capsys, "info", "demo")
    assert code == 0 and "2.x: active (default, latest)" in out and "1.x: deprecated (lts)" in out
    code, out, _ = run(capsys, "info", "golden", "--json")
    data = json.loads(out)
    assert code == 0 and data["library"]["contentHash"] == GOLDEN_HASH and data["versions"][0]["default"]
    code, out, _ = run(capsys, "info", "--json")
    assert code == 0 and [lib["id"] for lib in json.loads(out)["libraries"]] == ["cjk", "demo", "golden"]


def test_verify_a_bundles_directory(
    capsys: pytest.CaptureFixture[str], bundles_root: Path, broken_root: Path
) -> None:
    code, out, _ = run(capsys, "verify", str(bundles_root))
    assert code == 0
    assert sorted(line.split()[1].rsplit("/", 1)[0] for line in out.splitlines()) == [
        "cjk/latest",
        "demo/1.x",
        "demo/2.x",
        "golden/latest",
    ]
    assert all(line.startswith("OK ") for line in out.splitlines())
    code, out, _ = run(capsys, "verify", str(broken_root))
    assert code == 1
    assert f"OK   golden/latest/{GOLDEN_BUILD}" in out
    for library, reason in BROKEN.items():
        line = next(x for x in out.splitlines() if x.startswith(f"FAIL {library}/latest"))
        assert reason in line


def test_verify_one_bundle(capsys: pytest.CaptureFixture[str], golden_bundle: Path) -> None:
    code, out, _ = run(capsys, "verify", str(golden_bundle))
    assert code == 0 and out.startswith(f"OK   golden/latest/{GOLDEN_BUILD}")
    code, out, _ = run(capsys, "verify", str(golden_bundle.parent))  # a version directory: what CURRENT names
    assert code == 0 and GOLDEN_BUILD in out
    flip_byte(golden_bundle / "docs.idx", 20)
    code, out, _ = run(capsys, "verify", str(golden_bundle))
    assert code == 1 and "FAIL" in out and "docs.idx does not match its sha256" in out


def test_verify_checks_the_lock_file(
    capsys: pytest.CaptureFixture[str], golden_root: Path, tmp_path: Path
) -> None:
    lock = tmp_path / "bundles.lock"
    lock.write_text(f'[libraries.golden]\nlatest = "{GOLDEN_HASH}"\n', encoding="utf-8")
    assert run(capsys, "verify", str(golden_root), "--lock", str(lock))[0] == 0
    lock.write_text(f'[libraries.golden]\nlatest = "{"1" * 64}"\n', encoding="utf-8")
    code, out, _ = run(capsys, "verify", str(golden_root), "--lock", str(lock))
    assert code == 1 and "pinned in the lock file" in out
    # A bundles.lock inside the bundles directory is used without being named.
    (golden_root / "bundles.lock").write_text(lock.read_text(encoding="utf-8"), encoding="utf-8")
    assert run(capsys, "verify", str(golden_root))[0] == 1
    lock.write_text("not toml [", encoding="utf-8")
    code, _, err = run(capsys, "info", "--bundles", str(golden_root), "--lock", str(lock))
    assert code == 2 and "not readable TOML" in err


def test_serve_refuses_a_missing_bundles_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "serve", "--bundles", str(tmp_path / "absent"))
    assert code == 2 and out == "" and "does not exist" in err


def test_python_dash_m_runs_the_cli() -> None:
    out = server_cli("--help", timeout=30)
    assert out.returncode == 0
    assert all(cmd in out.stdout for cmd in ("serve", "search", "info", "verify"))


def test_an_empty_query_names_what_the_command_takes(bundles_root: Path) -> None:
    """The CLI has no keywords option: its error names QUERY, not the MCP tool's parameters (issue 23)."""
    done = server_cli("search", "golden", "  ", "--bundles", str(bundles_root), timeout=60)
    assert done.returncode == 2
    assert done.stderr == (
        "docbundle: error: nothing to search for. Give QUERY: words or a question, e.g. `docbundle search "
        'LIBRARY "useEffect cleanup"`.\n'
    )


def test_a_wrong_lock_pin_says_once_to_fix_the_lock_file(golden_root: Path) -> None:
    """The bundle is intact: the advice is the lock file, not a rebuild, and it is said once (issue 23)."""
    (golden_root / "bundles.lock").write_text(f'[libraries.golden]\nlatest = "{"a" * 64}"\n')
    done = server_cli("search", "golden", "hooks", "--bundles", str(golden_root))
    assert done.returncode == 1
    assert done.stderr.count("does not match aaaaaaaaaaaa") == 1, done.stderr
    assert "Rebuild it" not in done.stderr
    assert (
        "The bundle itself is intact: if it is the one to serve, put its content hash in the lock file "
        "(`docbundle info golden --json` prints it as contentHash)" in done.stderr
    )
    # The documented way to get that hash works, and gives the one the bundle has.
    info = server_cli("info", "golden", "--json", "--bundles", str(golden_root))
    assert info.returncode == 0 and json.loads(info.stdout)["versions"][0]["contentHash"] == GOLDEN_HASH


def test_info_works_with_a_malformed_lock_file(golden_root: Path) -> None:
    (golden_root / "bundles.lock").write_text("x = [\n")
    done = server_cli("info", "--json", "--bundles", str(golden_root))
    assert done.returncode == 0, done.stderr
    assert [lib["id"] for lib in json.loads(done.stdout)["libraries"]] == ["golden"]
    assert "is not readable TOML" in done.stderr and "shown without the lock file" in done.stderr
    pinned = server_cli("info", "golden", "--json", "--bundles", str(golden_root))
    assert pinned.returncode == 0 and json.loads(pinned.stdout)["versions"][0]["contentHash"] == GOLDEN_HASH
    # Serving still refuses a lock file it cannot read.
    served = server_cli("search", "golden", "hooks", "--bundles", str(golden_root))
    assert served.returncode == 2 and "is not readable TOML" in served.stderr


@pytest.mark.parametrize(
    ("option", "value"), [("--body-timeout", "nan"), ("--body-timeout", "inf"), ("--rate", "9" * 400)]
)
def test_non_finite_numbers_are_refused_naming_the_option(option: str, value: str, tmp_path: Path) -> None:
    # "nan" compares as neither <= 0 nor > 0, and 400 digits parse as inf: both were taken (issue 31).
    serve = ("serve", "--bundles", str(tmp_path), "--transport", "http", "--port", "0")
    done = server_cli(*serve, option, value, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"error: argument {option}: " in done.stderr and "Traceback" not in done.stderr
