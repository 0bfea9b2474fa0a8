"""The ``docbundle`` command as a person at a shell meets it (issue 14): one default bundles folder and
keys file, messages in the shell's terms, info that checks what it shows, pipes, versions, plurals."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import msgspec
import pytest
from docbundle.bundle.manifest import MANIFEST_NAME, SafetyFinding, decode_manifest, encode_manifest
from docbundle.bundle.release import package
from docbundle.bundle.userdirs import default_bundles, default_keys
from docbundle.server.cli import main
from serverkit import GOLDEN_BUILD, flip_byte, install_golden

TOOL_NAMES = re.compile(
    r"list_libraries|list_library_versions|search_documents|get_document|list_documents|"
    r"get_chunk_with_context|libraryId|maxTokens|mode='|server operator"
)


def docbundle(*args: str, stdin: str = "", timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``docbundle ARGS`` in a fresh process (the environment, with its private user folders, inherited)."""
    return subprocess.run(
        [sys.executable, "-m", "docbundle.server", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=timeout,
        check=False,
    )


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# -- one default folder ------------------------------------------------------------------------------


def test_the_default_bundles_folder_is_per_user_and_info_says_how_to_fill_it() -> None:
    folder = default_bundles()
    assert folder.parts[-2:] == ("docbundle", "bundles") and os.environ["XDG_DATA_HOME"] in str(folder)
    r = docbundle("verify")
    assert r.returncode == 1 and "in the default folder (the per-user default); get one with" in r.stdout
    r = docbundle("info")
    assert r.returncode == 0, r.stderr
    assert f"no libraries installed. Looked in {folder} (the per-user default)" in r.stdout
    assert "docbundle install ARCHIVE" in r.stdout and "docbundle-index build --config FILE" in r.stdout
    # search from any folder reads the same place, and says the same.
    r = docbundle("search", "golden", "hooks")
    assert r.returncode == 2 and f"Looked in {folder}" in r.stderr and "docbundle install ARCHIVE" in r.stderr
    assert r.stderr.startswith("docbundle: error: unknown library 'golden': no library is installed. Looked")
    assert not TOOL_NAMES.search(r.stderr), r.stderr


def test_every_command_reads_the_default_folder_once_something_is_there(tmp_path: Path) -> None:
    install_golden(default_bundles())
    r = docbundle("search", "golden", "cleanup")
    assert r.returncode == 0 and f"golden@latest (build {GOLDEN_BUILD})" in r.stdout, r.stderr
    r = docbundle("verify")
    assert r.returncode == 0 and r.stdout.startswith(f"OK   golden/latest/{GOLDEN_BUILD}"), r.stdout
    r = docbundle("serve")  # stdio: ends when its client (stdin) does
    assert r.returncode == 0, r.stderr
    assert f"serving 1 library from {default_bundles()} over stdio" in r.stderr


def test_keys_create_writes_the_file_serve_reads(tmp_path: Path) -> None:
    r = docbundle("serve", "--transport", "http", "--port", "0")
    assert r.returncode == 2 and f"there is no keys file at {default_keys()}" in r.stderr
    assert "docbundle keys create --name NAME" in r.stderr
    r = docbundle("keys", "create", "--name", "laptop")
    assert r.returncode == 0 and default_keys().is_file() and f"in {default_keys()}" in r.stderr
    with subprocess.Popen(
        [sys.executable, "-m", "docbundle.server", "serve", "--transport", "http", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stderr is not None
        try:
            warning = proc.stderr.readline()  # JSON lines: the empty folder first, then the address
            line = proc.stderr.readline()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert "serving no library: none is installed in" in warning and "`docbundle install ARCHIVE`" in warning
    assert '"event":"listening"' in line.replace(" ", ""), line
    assert f"API keys from {default_keys()}: 1 active" in line and "serving 0 libraries" in line


# -- messages ----------------------------------------------------------------------------------------


def test_search_messages_name_commands_not_mcp_tools(
    capsys: pytest.CaptureFixture[str], golden_root: Path
) -> None:
    code, _, err = run(capsys, "search", "nope", "x", "--bundles", str(golden_root))
    assert code == 2 and "Run `docbundle info` for names and descriptions" in err
    code, out, _ = run(capsys, "search", "golden", "kubernetes", "--bundles", str(golden_root))
    assert code == 0 and "Retry with --mode broad" in out
    code, _, err = run(capsys, "search", "golden", "x", "--version", "9.x", "--bundles", str(golden_root))
    assert code == 2 and "Omit --version" in err
    flip_byte(golden_root / "golden" / "latest" / GOLDEN_BUILD / "docs.bin")
    code, _, err = run(capsys, "search", "golden", "cleanup", "--bundles", str(golden_root))
    assert code == 1 and "docbundle-index build --library golden" in err and "docbundle install" in err
    for text in (out, err):
        assert not TOOL_NAMES.search(text), text


# -- info checks what it shows ----------------------------------------------------------------------


def test_info_calls_a_truncated_bundle_corrupt(capsys: pytest.CaptureFixture[str], golden_root: Path) -> None:
    docs_bin = golden_root / "golden" / "latest" / GOLDEN_BUILD / "docs.bin"
    docs_bin.write_bytes(docs_bin.read_bytes()[:-10])
    code, out, _ = run(capsys, "info", "--bundles", str(golden_root))
    assert code == 0
    assert "corrupt: docs.bin size differs from the manifest; rebuild or reinstall" in out
    code, out, _ = run(capsys, "info", "--json", "--bundles", str(golden_root))
    (lib,) = json.loads(out)["libraries"]
    assert lib["status"] == "failed" and lib["reason"].startswith("corrupt: docs.bin size differs")
    code, out, _ = run(capsys, "info", "golden", "--bundles", str(golden_root))
    assert "corrupt: docs.bin size differs from the manifest; rebuild or reinstall" in out


def test_info_of_a_library_checks_hashes(capsys: pytest.CaptureFixture[str], golden_root: Path) -> None:
    code, out, _ = run(capsys, "info", "golden", "--bundles", str(golden_root))
    assert code == 0 and "(files verified)" in out and "available" not in out
    code, out, _ = run(capsys, "info", "golden", "--json", "--bundles", str(golden_root))
    assert json.loads(out)["versions"][0]["availability"] == "ready"
    flip_byte(golden_root / "golden" / "latest" / GOLDEN_BUILD / "docs.bin")  # same size, other bytes
    code, out, _ = run(capsys, "info", "golden", "--bundles", str(golden_root))
    assert "corrupt: docs.bin content differs from its sha256 in the manifest; rebuild or reinstall" in out


def test_info_shows_safety_findings_as_text(capsys: pytest.CaptureFixture[str], golden_root: Path) -> None:
    bundle = golden_root / "golden" / "latest" / GOLDEN_BUILD
    m = decode_manifest((bundle / MANIFEST_NAME).read_bytes())
    finding = SafetyFinding(path="guides/hooks.md", kind="instructions", detail="'ignore previous'", chunk=1)
    (bundle / MANIFEST_NAME).write_bytes(encode_manifest(msgspec.structs.replace(m, safety=[finding])))
    code, out, _ = run(capsys, "info", "--bundles", str(golden_root))
    assert code == 0 and "1 safety finding (instructions): see `docbundle info golden`" in out
    code, out, _ = run(capsys, "info", "golden", "--bundles", str(golden_root))
    assert "1 safety finding (instructions)" in out
    assert "instructions in guides/hooks.md chunk 1: 'ignore previous'" in out


def test_verify_json(capsys: pytest.CaptureFixture[str], golden_root: Path) -> None:
    install_golden(golden_root, "other")
    flip_byte(golden_root / "other" / "latest" / GOLDEN_BUILD / "docs.idx", 20)
    code, out, _ = run(capsys, "verify", str(golden_root), "--json")
    assert code == 1
    results = {r["bundle"]: r for r in json.loads(out)}
    assert results["golden/latest"]["ok"] and results["golden/latest"]["buildId"] == GOLDEN_BUILD
    assert results["golden/latest"]["files"] > 3 and results["golden/latest"]["error"] is None
    assert not results["other/latest"]["ok"] and "docs.idx does not match" in results["other/latest"]["error"]
    code, out, _ = run(capsys, "verify", str(golden_root / "golden" / "latest"), "--json")
    assert code == 0 and json.loads(out)[0]["ok"]


# -- shell conventions --------------------------------------------------------------------------------


def test_a_closed_pipe_ends_quietly(golden_root: Path) -> None:
    """``docbundle search ... --json | head``: the reader is gone before the first write."""
    for args in (["search", "golden", "cleanup", "--json"], ["info", "--json"], ["verify", "--json"]):
        r, w = os.pipe()
        os.close(r)  # the reader has gone before the process writes anything
        with os.fdopen(w, "wb") as stdout:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "docbundle.server",
                    *args,
                    *(["--bundles", str(golden_root)] if args[0] != "verify" else [str(golden_root)]),
                ],
                stdout=stdout,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
                check=False,
            )
        assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
        assert proc.returncode == 141, (args, proc.returncode, proc.stderr)


def test_version_comes_from_the_distribution_metadata() -> None:
    r = docbundle("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"docbundle {version('docbundle-server')}"


def test_install_takes_several_archives(tmp_path: Path) -> None:
    built = tmp_path / "built"
    install_golden(built)
    install_golden(built, "other")
    entries = package(
        [built / lib / "latest" / GOLDEN_BUILD for lib in ("golden", "other")], tmp_path / "rel"
    )
    archives = [str(tmp_path / "rel" / e.archive) for e in entries]
    r = docbundle("install", *archives)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("installed ") == 2 and f"in {default_bundles()}" in r.stdout
    r = docbundle("info")
    assert [line.split()[0] for line in r.stdout.splitlines()[1:]] == ["golden", "other"]
    r = docbundle("install", archives[0], str(tmp_path / "absent.tar.gz"))
    assert r.returncode == 1 and "already present" in r.stdout and "absent.tar.gz not found" in r.stderr


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--port", "9000"], "--port applies"),
        (["--host", "0.0.0.0"], "--host applies"),
        (["--no-auth"], "--no-auth applies"),
        (["--port", "9000", "--no-auth"], "--port, --no-auth apply"),
    ],
)
def test_http_flags_are_refused_for_stdio_alike(
    capsys: pytest.CaptureFixture[str], golden_root: Path, flags: list[str], named: str
) -> None:
    code, out, err = run(capsys, "serve", "--bundles", str(golden_root), *flags)
    assert code == 2 and out == ""
    assert f"{named} only to --transport http" in err and "add --transport http" in err
