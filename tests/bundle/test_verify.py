"""Verification refuses any bundle that is not exactly what its manifest describes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from docbundle.bundle.errors import (
    BundleFormatError,
    BundleIntegrityError,
    BundleNotFoundError,
    UnsupportedFormatVersionError,
)
from docbundle.bundle.layout import current_bundle, read_current
from docbundle.bundle.reader import open_bundle, verify_bundle

GOLDEN = Path(__file__).parent / "golden" / "v1"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    copy = tmp_path / "lib" / "latest" / "20260101-b0a7e23f036e"
    shutil.copytree(GOLDEN, copy)
    return copy


def _edit_manifest(bundle: Path, edit) -> None:  # type: ignore[no-untyped-def]
    m = json.loads((bundle / "manifest.json").read_text())
    edit(m)
    (bundle / "manifest.json").write_text(json.dumps(m))


def test_a_missing_file_is_refused(bundle: Path) -> None:
    (bundle / "docs.idx").unlink()
    with pytest.raises(BundleIntegrityError, match="missing file.*docs.idx"):
        verify_bundle(bundle)


def test_an_extra_file_is_refused(bundle: Path) -> None:
    (bundle / "index" / "evil.pkl").write_bytes(b"cos\nsystem\n")
    with pytest.raises(BundleIntegrityError, match="unexpected file.*index/evil.pkl"):
        verify_bundle(bundle)


def test_a_changed_size_is_refused(bundle: Path) -> None:
    with open(bundle / "llms.txt", "ab") as fh:
        fh.write(b"\n")
    with pytest.raises(BundleIntegrityError, match="llms.txt is .* bytes, the manifest says"):
        verify_bundle(bundle)


def test_an_unknown_format_version_is_refused(bundle: Path) -> None:
    _edit_manifest(bundle, lambda m: m.update(format_version=2))
    with pytest.raises(UnsupportedFormatVersionError, match="format_version 2 is not supported"):
        open_bundle(bundle)


def test_a_path_escaping_the_bundle_is_refused(bundle: Path) -> None:
    _edit_manifest(bundle, lambda m: m["files"].append({"path": "../x", "size": 0, "sha256": ""}))
    with pytest.raises(BundleIntegrityError, match="unsafe path"):
        verify_bundle(bundle)


def test_a_symlinked_file_is_refused(bundle: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside"
    shutil.copy(bundle / "llms.txt", target)
    (bundle / "llms.txt").unlink()
    (bundle / "llms.txt").symlink_to(target)
    with pytest.raises(BundleIntegrityError, match="symbolic link"):
        verify_bundle(bundle)


def test_a_directory_without_manifest_is_not_a_bundle(tmp_path: Path) -> None:
    with pytest.raises(BundleNotFoundError, match="no manifest.json"):
        verify_bundle(tmp_path)


def test_current_names_the_served_bundle(bundle: Path) -> None:
    vdir = bundle.parent
    assert read_current(vdir) is None
    with pytest.raises(BundleNotFoundError, match="no bundle built yet"):
        current_bundle(vdir)
    (vdir / "CURRENT").write_text(bundle.name + "\n")
    assert current_bundle(vdir) == bundle
    (vdir / "CURRENT").write_text("../../etc\n")
    with pytest.raises(BundleFormatError, match="does not hold a build id"):
        read_current(vdir)
    (vdir / "CURRENT").write_text("20990101-000000000000\n")
    with pytest.raises(BundleNotFoundError, match="does not exist"):
        current_bundle(vdir)
