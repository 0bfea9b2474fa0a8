"""Release packaging: deterministic archives, SHA256SUMS and index.json that a consumer can check."""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from docbundle.bundle.errors import BundleIntegrityError
from docbundle.bundle.layout import current_bundles
from docbundle.bundle.reader import verify_bundle
from docbundle.bundle.release import SUMS, package

GOLDEN = Path(__file__).resolve().parents[1] / "bundle" / "golden" / "v1"


@pytest.fixture
def bundles_dir(tmp_path: Path) -> Path:
    root = tmp_path / "bundles"
    vdir = root / "golden" / "latest"
    build_id = json.loads((GOLDEN / "manifest.json").read_text())["build"]["build_id"]
    shutil.copytree(GOLDEN, vdir / build_id)
    (vdir / "CURRENT").write_text(build_id + "\n")
    return root


def test_archives_checksums_and_index_are_consistent(bundles_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    (entry,) = package(current_bundles(bundles_dir), out)
    archive = out / entry.archive
    assert entry.archive.startswith("golden-latest-") and entry.archive.endswith(".tar.gz")
    line = (out / SUMS).read_text().strip()
    assert line == f"{hashlib.sha256(archive.read_bytes()).hexdigest()}  {entry.archive}"
    index = json.loads((out / "index.json").read_text())
    assert index["bundles"][0]["content_hash"] == entry.content_hash
    assert index["bundles"][0]["sha256"] == entry.sha256

    unpacked = tmp_path / "unpacked"
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="data")
    restored = unpacked / "golden" / "latest" / entry.build_id
    assert verify_bundle(restored).build.content_hash == entry.content_hash
    # The value to pin in bundles.lock: the manifest covers every file, the index included.
    manifest_sha = hashlib.sha256((restored / "manifest.json").read_bytes()).hexdigest()
    assert index["bundles"][0]["manifest_sha256"] == entry.manifest_sha256 == manifest_sha


def _assert_normalised(archive: Path, mtime: int) -> None:
    """Nothing of the packing machine or moment is in ``archive``: fixed mtimes, owners and modes."""
    data = archive.read_bytes()
    # gzip header (RFC 1952): magic, CM, FLG, MTIME (4 bytes, little-endian), XFL, OS.
    assert data[:3] == b"\x1f\x8b\x08"
    assert data[3] & 0x08 == 0, "the gzip header carries a file name"
    assert int.from_bytes(data[4:8], "little") == 0, "the gzip header carries a timestamp"
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
    assert members and any(m.isdir() for m in members) and any(m.isfile() for m in members)
    for m in members:
        assert m.mtime == mtime, m.name
        assert (m.uid, m.gid, m.uname, m.gname) == (0, 0, "", ""), m.name
        assert m.mode == (0o755 if m.isdir() else 0o644), m.name
        assert m.isdir() or m.isfile(), m.name  # no links, devices or fifos
        assert m.pax_headers == {}, m.name  # no atime/ctime or high-resolution mtime


def test_packing_twice_gives_the_same_bytes(
    bundles_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    (a,) = package(current_bundles(bundles_dir), tmp_path / "a")
    (b,) = package(current_bundles(bundles_dir), tmp_path / "b")
    assert a.sha256 == b.sha256
    assert (tmp_path / "a" / a.archive).read_bytes() == (tmp_path / "b" / b.archive).read_bytes()
    # Two packs a few milliseconds apart cannot show a clock leaking in: look at the fields themselves.
    _assert_normalised(tmp_path / "a" / a.archive, mtime=0)


def test_source_date_epoch_sets_the_archive_mtimes(
    bundles_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    (entry,) = package(current_bundles(bundles_dir), tmp_path / "dist")
    _assert_normalised(tmp_path / "dist" / entry.archive, mtime=1_700_000_000)


def test_a_tampered_bundle_is_not_packaged(bundles_dir: Path, tmp_path: Path) -> None:
    (bundle,) = current_bundles(bundles_dir)
    with open(bundle / "llms.txt", "ab") as fh:
        fh.write(b"tampered")
    with pytest.raises(BundleIntegrityError):
        package([bundle], tmp_path / "dist")
    assert not (tmp_path / "dist" / SUMS).exists()
