"""Offline install of release archives: checksums, safe unpacking, manifest verification, lock pins."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from docbundle.bundle import publish as publishing
from docbundle.bundle.layout import current_bundles, read_current
from docbundle.bundle.reader import verify_bundle
from docbundle.bundle.release import SUMS, package
from docbundle.bundle.routeindex import load_index
from docbundle.server.cli import main as server_main
from docbundle.server.errors import InstallError
from docbundle.server.install import install
from serverkit import install_golden

GOLDEN = Path(__file__).resolve().parents[1] / "bundle" / "golden" / "v1-early"  # predates routing records


@pytest.fixture
def release(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "built"
    build_id = json.loads((GOLDEN / "manifest.json").read_text())["build"]["build_id"]
    shutil.copytree(GOLDEN, root / "golden" / "latest" / build_id)
    (root / "golden" / "latest" / "CURRENT").write_text(build_id + "\n")
    (entry,) = package(current_bundles(root), tmp_path / "release")
    return tmp_path / "release" / entry.archive, entry.content_hash


def test_install_brings_the_routing_index_up_to_date(release: tuple[Path, str], tmp_path: Path) -> None:
    archive, _ = release
    bundles = tmp_path / "airgapped"
    done = install(archive, bundles)
    index = load_index(bundles)
    assert index is not None and index.builds() == {("golden", "latest"): done.build_id}
    # The golden bundle predates routing records: its entry was derived from its search index.
    (entry,) = index.libraries
    assert entry.derived and [c.library.library_id for c in index.score([("useeffect",)])] == ["golden"]


def test_installing_several_archives_rebuilds_the_routing_index_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``docbundle install A B C``: one route index rebuild for the three (seconds each at 10,000)."""
    built = tmp_path / "built"
    for lib_id in ("golden", "second", "third"):
        install_golden(built, lib_id)
    entries = package(current_bundles(built), tmp_path / "release")
    assert len(entries) == 3
    rebuilds = []
    real = publishing.refresh_index
    monkeypatch.setattr(publishing, "refresh_index", lambda root: rebuilds.append(root) or real(root))
    bundles = tmp_path / "bundles"
    archives = [str(tmp_path / "release" / e.archive) for e in entries]
    assert server_main(["install", *archives, "--bundles", str(bundles)]) == 0, capsys.readouterr().err
    assert rebuilds == [bundles]
    index = load_index(bundles)
    assert index is not None and {lib for lib, _ in index.builds()} == {"golden", "second", "third"}


def _resum(archive: Path) -> None:
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    (archive.parent / SUMS).write_text(f"{digest}  {archive.name}\n")


def test_install_unpacks_verifies_and_points_current(release: tuple[Path, str], tmp_path: Path) -> None:
    archive, content_hash = release
    bundles = tmp_path / "airgapped"
    done = install(archive, bundles)
    assert (done.library, done.version, done.content_hash) == ("golden", "latest", content_hash)
    assert read_current(bundles / "golden" / "latest") == done.build_id
    assert verify_bundle(done.path).build.content_hash == content_hash
    assert not list((bundles / "golden" / "latest").glob(".tmp-*"))
    again = install(archive, bundles)
    assert again.already_present and again.build_id == done.build_id


def test_a_damaged_archive_is_refused_and_nothing_changes(release: tuple[Path, str], tmp_path: Path) -> None:
    archive, _ = release
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    with pytest.raises(InstallError, match="does not match its sha256"):
        install(archive, tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_an_archive_missing_from_the_sums_is_refused(release: tuple[Path, str], tmp_path: Path) -> None:
    archive, _ = release
    (archive.parent / SUMS).write_text("0" * 64 + "  other.tar.gz\n")
    with pytest.raises(InstallError, match="not listed"):
        install(archive, tmp_path / "b")
    (archive.parent / SUMS).unlink()
    with pytest.raises(InstallError, match="SHA256SUMS"):
        install(archive, tmp_path / "b")


def _tamper_inside(archive: Path, member_suffix: str) -> None:
    """Rewrite the archive with one file changed, and fresh (attacker-made) checksums."""
    out = io.BytesIO()
    with tarfile.open(archive) as src, tarfile.open(fileobj=out, mode="w:gz") as dst:
        for m in src.getmembers():
            f = src.extractfile(m) if m.isfile() else None
            body = f.read() if f else b""
            if m.name.endswith(member_suffix):
                body = body.replace(b"Golden", b"Evil!!", 1)
            m.size = len(body)
            dst.addfile(m, io.BytesIO(body) if m.isfile() else None)
    archive.write_bytes(out.getvalue())
    _resum(archive)


def test_content_altered_inside_the_archive_fails_manifest_verification(
    release: tuple[Path, str], tmp_path: Path
) -> None:
    archive, _ = release
    _tamper_inside(archive, "llms.txt")
    bundles = tmp_path / "b"
    with pytest.raises(InstallError, match="does not verify"):
        install(archive, bundles)
    assert read_current(bundles / "golden" / "latest") is None
    # Nothing but the (empty) version lock file that builds and installs share.
    assert [p.name for p in (bundles / "golden" / "latest").iterdir()] == [".lock"]


def test_unsafe_entries_are_refused(tmp_path: Path) -> None:
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("golden/latest/20260101-000000000000/../../../../escape.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    _resum(archive)
    with pytest.raises(InstallError, match="refusing archive entry"):
        install(archive, tmp_path / "b")
    assert not (tmp_path / "escape.txt").exists()

    link = tmp_path / "link.tar.gz"
    with tarfile.open(link, "w:gz") as tar:
        info = tarfile.TarInfo("golden/latest/20260101-000000000000/manifest.json")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    _resum(link)
    with pytest.raises(InstallError, match="only plain files"):
        install(link, tmp_path / "b")


def test_a_lock_file_that_pins_another_hash_refuses_the_install(
    release: tuple[Path, str], tmp_path: Path
) -> None:
    archive, content_hash = release
    bundles = tmp_path / "b"
    bundles.mkdir()
    (bundles / "bundles.lock").write_text(f'[libraries.golden]\nlatest = "{"0" * 64}"\n')
    with pytest.raises(InstallError, match="does not pin content hash"):
        install(archive, bundles)
    assert read_current(bundles / "golden" / "latest") is None
    (bundles / "bundles.lock").write_text(f'[libraries.golden]\nlatest = "{content_hash}"\n')
    assert install(archive, bundles).content_hash == content_hash


def test_the_install_command_says_live_reload_serves_it(release: tuple[Path, str], tmp_path: Path) -> None:
    """Not "restart a running server": live reload serves a new build (issue 23)."""
    archive, _ = release

    def run() -> str:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "docbundle.server",
                "install",
                str(archive),
                "--bundles",
                str(tmp_path / "b"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "restart a running server" not in done.stderr
        return done.stderr

    first = run()
    assert "a running `docbundle serve` over this folder serves it within 2 s (live reload)" in first
    assert "--reload-interval 0 needs a restart" in first
    assert "nothing changed: a running server over this folder already serves it" in run()
