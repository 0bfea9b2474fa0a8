"""docs/releases.md, followed command by command: build, check, package, install offline, pin, verify, serve."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from clikit import index_cli, server_cli
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]


def _index(*args: str) -> subprocess.CompletedProcess[str]:
    return index_cli(*args, timeout=180, cwd=ROOT)


def _server(*args: str) -> subprocess.CompletedProcess[str]:
    return server_cli(*args, timeout=180, cwd=ROOT)


def test_the_documented_release_flow_works_end_to_end(tmp_path: Path) -> None:
    built, dist, airgapped = tmp_path / "bundles", tmp_path / "dist", tmp_path / "srv"
    config = str(ROOT / "bundles" / "libraries.toml")

    r = _index("build", "--config", config, "--library", "docbundle", "--out", str(built), "--quiet")
    assert r.returncode == 0, r.stderr
    vdir = str(built / "docbundle" / "latest")
    r = _index("regress", vdir, "--golden", str(ROOT / "bundles" / "golden" / "docbundle.toml"))
    assert r.returncode == 0, r.stdout
    assert _index("audit", vdir).returncode == 0

    r = _index("package", str(built), "--out", str(dist))
    assert r.returncode == 0, r.stderr
    (archive,) = dist.glob("*.tar.gz")

    r = _server("install", str(archive), "--bundles", str(airgapped))
    assert r.returncode == 0, r.stderr
    r = _server("info", "--bundles", str(airgapped), "--json")
    assert r.returncode == 0, r.stderr
    (lib,) = json.loads(r.stdout)["libraries"]
    lock = airgapped / "bundles.lock"
    lock.write_text(f'[libraries.docbundle]\nlatest = "{lib["contentHash"]}"\n', encoding="utf-8")

    r = _server("verify", str(airgapped))
    assert r.returncode == 0, r.stdout + r.stderr
    anyio.run(_serve_and_search, airgapped, lock)

    lock.write_text(f'[libraries.docbundle]\nlatest = "{"0" * 64}"\n', encoding="utf-8")
    r = _server("install", str(archive), "--bundles", str(airgapped))
    assert r.returncode == 1 and "does not pin content hash" in r.stderr


async def _serve_and_search(bundles: Path, lock: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "docbundle.server", "serve", "--bundles", str(bundles), "--lock", str(lock)],
    )
    with anyio.fail_after(60):
        async with Client(params) as client:
            result = await client.call_tool(
                "search_documents", {"query": "how is the content hash computed", "libraryId": "docbundle"}
            )
    hits = result.structured_content["hits"]  # type: ignore[index]
    assert hits and hits[0]["documentId"] == "bundle-format.md"


@pytest.mark.parametrize(
    ("case", "code", "message"),
    [
        ("no archive", 2, "docbundle install: error: the following arguments are required: ARCHIVE"),
        ("missing archive", 1, "docbundle: error: {tmp}/nowhere.tar.gz not found"),
        ("no SHA256SUMS", 1, "docbundle: error: {tmp}/SHA256SUMS not found: download SHA256SUMS"),
    ],
    ids=["no-archive", "missing-archive", "no-sha256sums"],
)
def test_install_usage_and_missing_archive(case: str, code: int, message: str, tmp_path: Path) -> None:
    bundles = tmp_path / "bundles"
    if case == "no archive":
        args = ["install", "--bundles", str(bundles)]
    elif case == "missing archive":
        args = ["install", str(tmp_path / "nowhere.tar.gz"), "--bundles", str(bundles)]
    else:
        (tmp_path / "lib-latest-x.tar.gz").write_bytes(b"not an archive")
        args = ["install", str(tmp_path / "lib-latest-x.tar.gz"), "--bundles", str(bundles)]
    r = _server(*args)
    assert r.returncode == code, r.stderr
    assert message.format(tmp=tmp_path) in r.stderr
    assert "Traceback" not in r.stderr
    assert r.stdout == "" and not bundles.exists()  # nothing installed, nothing created
