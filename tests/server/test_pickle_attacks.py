"""Issue 9, item 4: a bundle whose whoosh pickles run code is refused, and never runs it.

The attack: replace the index TOC with one whose pickled segment list calls ``os.system``, then
rewrite the manifest's size and sha256 for that file. The content hash does not cover index bytes,
so the bundle keeps its content hash and a content-hash-only lock pin still matches. Every entry point
that reads the index must refuse it without running the payload: ``docbundle verify``, ``docbundle
install``, the server opening it, and a server that already opened the bundle before the TOC was
swapped on disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
from clikit import server_cli
from docbundle.bundle import safepickle
from docbundle.bundle.schema import make_schema
from docbundle.server.catalog import Catalog
from docbundle.server.errors import InstallError, LibraryUnavailableError
from docbundle.server.install import install
from serverkit import GOLDEN_BUILD
from whoosh.filedb.filestore import FileStorage
from whoosh.index import TOC

TOC_NAME = "index/_MAIN_1.toc"


class _Payload:
    """Pickles as a call to os.system: a shell command that leaves a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def evil_toc(marker: Path, workdir: Path) -> bytes:
    """A well-formed whoosh TOC whose segment list is the payload."""
    workdir.mkdir(parents=True, exist_ok=True)
    TOC(make_schema(), [_Payload(marker)], 1).write(FileStorage(str(workdir)), "MAIN")
    return (workdir / "_MAIN_1.toc").read_bytes()


def plant(bundle: Path, data: bytes, rel: str = TOC_NAME) -> None:
    """Replace one file of a bundle and rewrite its manifest entry so that verification passes."""
    (bundle / rel).write_bytes(data)
    manifest_path = bundle / "manifest.json"
    m = json.loads(manifest_path.read_text(encoding="utf-8"))
    for f in m["files"]:
        if f["path"] == rel:
            f["size"] = len(data)
            f["sha256"] = hashlib.sha256(data).hexdigest()
    manifest_path.write_text(json.dumps(m, indent=2), encoding="utf-8")


def test_the_restricted_unpickler_refuses_a_payload_and_reads_plain_data(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    with pytest.raises(safepickle.UnsafePickleError, match=r"names posix\.system"):
        safepickle.restricted_loads(pickle.dumps(_Payload(marker), 2))
    assert not marker.exists()
    assert safepickle.restricted_loads(pickle.dumps({"a": [1, 2.5, b"x", ("t",)]}, 2)) == {
        "a": [1, 2.5, b"x", ("t",)]
    }


def test_docbundle_verify_refuses_a_code_running_toc_without_running_it(
    golden_bundle: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    plant(golden_bundle, evil_toc(marker, tmp_path / "evil"))
    done = server_cli("verify", str(golden_bundle), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL" in done.stdout and "posix.system" in done.stdout
    assert "Traceback" not in done.stderr
    assert not marker.exists()


def test_the_server_refuses_it_and_keeps_serving_the_others(golden_root: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = golden_root / "evil" / "latest"
    shutil.copytree(golden_root / "golden" / "latest", evil)
    m = json.loads((evil / GOLDEN_BUILD / "manifest.json").read_text(encoding="utf-8"))
    m["library"]["id"] = "evil"
    (evil / GOLDEN_BUILD / "manifest.json").write_text(json.dumps(m), encoding="utf-8")
    plant(evil / GOLDEN_BUILD, evil_toc(marker, tmp_path / "evil-toc"))
    cat = Catalog.load(golden_root)
    try:
        with pytest.raises(LibraryUnavailableError, match=r"posix\.system"):
            cat.open("evil")
        assert cat.open("golden").searcher.search("useEffect").hits
    finally:
        cat.close()
    assert not marker.exists()


def test_a_toc_swapped_after_opening_is_never_read(
    golden_root: Path, golden_bundle: Path, tmp_path: Path
) -> None:
    """whoosh re-reads its TOC for every searcher; the server decodes it once, from the verified bytes."""
    marker = tmp_path / "pwned"
    cat = Catalog.load(golden_root)
    try:
        lib = cat.open("golden")
        before = [h.doc for h in lib.searcher.search("useEffect").hits]
        toc = golden_bundle / TOC_NAME
        with open(toc, "r+b") as fh:  # in place: the same inode the server may hold
            fh.write(evil_toc(marker, tmp_path / "evil"))
            fh.truncate()
        for query in ("useEffect", "install", "hooks"):
            lib.searcher.search(query)
        assert [h.doc for h in lib.searcher.search("useEffect").hits] == before
    finally:
        cat.close()
    assert not marker.exists()


def _archive(bundle_root: Path, out: Path) -> Path:
    """A release archive of the one bundle under ``bundle_root``, with its SHA256SUMS."""
    out.mkdir(parents=True)
    archive = out / f"golden-latest-{GOLDEN_BUILD}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(bundle_root / "golden" / "latest" / GOLDEN_BUILD, arcname=f"golden/latest/{GOLDEN_BUILD}")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    (out / "SHA256SUMS").write_text(f"{digest}  {archive.name}\n")
    return archive


def test_install_refuses_a_code_running_toc_even_with_a_content_hash_pin(
    golden_root: Path, golden_bundle: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    content_hash = json.loads((golden_bundle / "manifest.json").read_text())["build"]["content_hash"]
    plant(golden_bundle, evil_toc(marker, tmp_path / "evil"))
    archive = _archive(golden_root, tmp_path / "release")
    target = tmp_path / "airgapped"
    target.mkdir()
    (target / "bundles.lock").write_text(f'[libraries.golden]\nlatest = "{content_hash}"\n')
    with pytest.raises(InstallError, match=r"posix\.system"):
        install(archive, target)
    assert not (target / "golden" / "latest" / "CURRENT").exists()
    assert not list((target / "golden" / "latest").glob(".tmp-*"))
    done = server_cli("install", str(archive), "--bundles", str(target), cwd=tmp_path)
    assert done.returncode != 0 and "posix.system" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists()
