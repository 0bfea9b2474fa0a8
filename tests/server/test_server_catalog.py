"""The catalogue: manifests at start-up, verified lazy opening, failures reported, lock files."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest
from docbundle.bundle import reader
from docbundle.bundle.manifest import MANIFEST_NAME, decode_manifest, encode_manifest
from docbundle.server.catalog import Catalog
from docbundle.server.errors import (
    InvalidIdError,
    LibraryUnavailableError,
    LockFileError,
    UnknownLibraryError,
    UnknownVersionError,
)
from docbundle.server.lockfile import LockFile
from serverkit import BROKEN, GOLDEN_BUILD, GOLDEN_HASH, flip_byte


def test_load_reads_manifests_only(bundles_root: Path) -> None:
    # In a fresh interpreter: loading the catalogue must not import whoosh or open any bundle.
    code = (
        "import sys; from pathlib import Path; from docbundle.server.catalog import Catalog; "
        f"c = Catalog.load(Path({str(bundles_root)!r})); "
        "print(sorted(c.library_ids()), [c.state(e)[0] for e in c.entries()], 'whoosh' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert (
        out.stdout.strip()
        == "['cjk', 'demo', 'golden'] ['available', 'available', 'available', 'available'] False"
    )


def test_default_version_is_the_one_marked_latest(catalog: Catalog) -> None:
    demo = catalog.library("demo")
    assert demo.default_version == "2.x"
    assert list(demo.versions) == ["2.x", "1.x"]
    assert catalog.version_entry("demo").version == "2.x"
    assert catalog.version_entry("demo", "latest").version == "2.x"  # no version is literally named latest
    assert catalog.version_entry("demo", "1.x").version == "1.x"
    assert catalog.version_entry("golden", "latest").build_id == GOLDEN_BUILD
    assert (demo.name, demo.category) == ("Demo SDK", "payments")


def test_lookup_errors_say_what_exists(catalog: Catalog) -> None:
    with pytest.raises(
        UnknownLibraryError, match=r"unknown library 'nope'. Available libraries: cjk, demo, golden"
    ):
        catalog.version_entry("nope")
    with pytest.raises(UnknownVersionError, match=r"has no version '3.x'. Versions: 2.x, 1.x"):
        catalog.version_entry("demo", "3.x")
    with pytest.raises(
        InvalidIdError, match=r"ids are lower-case letters, digits and .-., at most 64 characters"
    ):
        catalog.version_entry("../etc")
    with pytest.raises(InvalidIdError, match="invalid version"):
        catalog.version_entry("demo", "../1.x")
    assert catalog.version_entry(" Golden ").library_id == "golden"  # case and spaces forgiven


def test_open_verifies_before_whoosh_and_caches(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_verify, real_open = reader._verify, reader.open_bundle

    def verify(path: Path) -> Any:
        calls.append("verify")
        return real_verify(path)

    def open_(path: Path, **kw: Any) -> Any:
        calls.append(f"open verify={kw.get('verify', True)}")
        return real_open(path, **kw)

    monkeypatch.setattr(reader, "_verify", verify)
    monkeypatch.setattr(reader, "open_bundle", open_)
    first = catalog.open("golden")
    assert catalog.open("golden") is first
    # One open, which hashes every file (through the descriptors it then reads) before whoosh runs.
    assert calls == ["open verify=True", "verify"]
    assert catalog.state(first.entry) == ("ready", None)


class _Arrivals:
    """Counts the calls of ``catalog.version_entry``, the first step of every ``Catalog.open``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, catalog: Catalog) -> None:
        self.count = 0
        self._cond = threading.Condition()
        real = catalog.version_entry

        def version_entry(*args: Any, **kwargs: Any) -> Any:
            with self._cond:
                self.count += 1
                self._cond.notify_all()
            return real(*args, **kwargs)

        monkeypatch.setattr(catalog, "version_entry", version_entry)

    def wait_for(self, callers: int, timeout: float = 30.0) -> None:
        """Block until ``callers`` calls have come in (an event, not a guess at how long they take)."""
        with self._cond:
            arrived = self._cond.wait_for(lambda: self.count >= callers, timeout)
            assert arrived, f"only {self.count} of {callers} callers arrived"


def test_concurrent_first_requests_open_a_library_once(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[int] = []
    real_open = reader.open_bundle
    arrived = _Arrivals(monkeypatch, catalog)

    def slow_open(path: Path, **kw: Any) -> Any:
        opened.append(1)
        # Hold the open until every caller has come in: none of them can have found it opened.
        arrived.wait_for(8)
        return real_open(path, **kw)

    monkeypatch.setattr(reader, "open_bundle", slow_open)
    barrier = threading.Barrier(8)
    results: list[object] = []

    def worker() -> None:
        barrier.wait(timeout=5)
        results.append(catalog.open("golden"))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(results) == 8 and len({id(r) for r in results}) == 1
    assert len(opened) == 1


@pytest.mark.parametrize("library", sorted(BROKEN))
def test_a_damaged_bundle_is_refused_with_its_reason(broken_root: Path, library: str) -> None:
    cat = Catalog.load(broken_root)
    try:
        with pytest.raises(LibraryUnavailableError, match="unavailable") as info:
            cat.open(library)
        assert BROKEN[library] in info.value.reason
        assert str(broken_root) not in info.value.reason  # no server paths in messages
        assert cat.state(cat.version_entry(library)) == ("failed", info.value.reason)
        # The intact library still opens and answers.
        assert cat.open("golden").searcher.search("useEffect").hits
    finally:
        cat.close()


def test_a_failed_open_is_remembered_not_retried(
    golden_root: Path, golden_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flip_byte(golden_bundle / "index" / "_MAIN_1.toc")
    verifies: list[Path] = []
    real_verify = reader._verify

    def verify(path: Path) -> Any:
        verifies.append(path)
        return real_verify(path)

    monkeypatch.setattr(reader, "_verify", verify)
    cat = Catalog.load(golden_root)
    for _ in range(3):
        with pytest.raises(LibraryUnavailableError, match=r"index/_MAIN_1.toc does not match its sha256"):
            cat.open("golden")
    assert len(verifies) == 1


def test_a_manifest_changed_after_start_up_is_refused(golden_root: Path, golden_bundle: Path) -> None:
    cat = Catalog.load(golden_root)
    path = golden_bundle / MANIFEST_NAME
    m = decode_manifest(path.read_bytes())
    m2 = msgspec.structs.replace(m, library=msgspec.structs.replace(m.library, description="changed"))
    path.write_bytes(encode_manifest(m2))
    with pytest.raises(LibraryUnavailableError, match="changed after the server read it"):
        cat.open("golden")


def test_misplaced_bundles_and_odd_folders(tmp_path: Path, golden_bundle: Path) -> None:
    root = golden_bundle.parents[2]
    (root / "libraries.toml").write_text("", encoding="utf-8")  # config files beside bundles
    (root / "queries").mkdir()  # a folder without version directories is not a library
    (root / "queries" / "golden.toml").write_text("", encoding="utf-8")
    (root / "other" / "latest").mkdir(parents=True)
    (root / "other" / "latest" / "CURRENT").write_text(GOLDEN_BUILD, encoding="ascii")
    shutil.copytree(golden_bundle, root / "other" / "latest" / GOLDEN_BUILD)
    (root / "empty" / "latest").mkdir(parents=True)
    (root / "empty" / "latest" / ".lock").write_text("", encoding="ascii")
    cat = Catalog.load(root)
    assert cat.library_ids() == ["empty", "golden", "other"]
    assert "manifest is for library 'golden'" in (cat.version_entry("other").problem or "")
    assert "no bundle built yet" in (cat.version_entry("empty").problem or "")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Catalog.load(tmp_path / "nowhere")


# -- lock files -------------------------------------------------------------------------------------


def _lock(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "bundles.lock"
    path.write_text(body, encoding="utf-8")
    return path


def test_lock_file_pins_are_enforced(tmp_path: Path, bundles_root: Path) -> None:
    demo = json.loads(
        (bundles_root / "demo" / "2.x")
        .joinpath((bundles_root / "demo" / "2.x" / "CURRENT").read_text().strip(), MANIFEST_NAME)
        .read_text()
    )["build"]["content_hash"]
    lock = _lock(
        tmp_path,
        f'[libraries.golden]\nlatest = "{GOLDEN_HASH}"\n\n[libraries.demo]\n"2.x" = "{"0" * 64}"\n'
        f'"1.x" = {{ content_hash = "{demo}" }}\n',
    )
    cat = Catalog.load(bundles_root, lock=lock)
    try:
        assert cat.open("golden").entry.content_hash == GOLDEN_HASH
        with pytest.raises(
            LibraryUnavailableError,
            match=r"does not match 000000000000… pinned in the lock file bundles.lock",
        ):
            cat.open("demo", "2.x")
        with pytest.raises(LibraryUnavailableError, match="does not match"):
            cat.open("demo", "1.x")  # 1.x is pinned to 2.x's hash
        with pytest.raises(LibraryUnavailableError, match="cjk/latest is not pinned in the lock file"):
            cat.open("cjk")
    finally:
        cat.close()


def test_lock_manifest_sha256_catches_a_rewritten_bundle(
    tmp_path: Path, golden_root: Path, golden_bundle: Path
) -> None:
    manifest_path = golden_bundle / MANIFEST_NAME
    pinned = hashlib.sha256(manifest_path.read_bytes()).hexdigest()
    lock = _lock(
        tmp_path,
        f'[libraries.golden]\nlatest = {{ content_hash = "{GOLDEN_HASH}", manifest_sha256 = "{pinned}" }}\n',
    )
    first = Catalog.load(golden_root, lock=lock)
    assert first.open("golden").entry.build_id == GOLDEN_BUILD
    first.close()
    # Tamper with a file and fix the manifest's file list to match: verification alone passes, and the
    # content hash in the manifest is unchanged, but the pinned manifest bytes differ.
    flip_byte(golden_bundle / "docs.bin")
    m = decode_manifest(manifest_path.read_bytes())
    digest = hashlib.sha256((golden_bundle / "docs.bin").read_bytes()).hexdigest()
    files = [msgspec.structs.replace(f, sha256=digest) if f.path == "docs.bin" else f for f in m.files]
    manifest_path.write_bytes(encode_manifest(msgspec.structs.replace(m, files=files)))
    reader.verify_bundle(golden_bundle)
    cat = Catalog.load(golden_root, lock=lock)
    with pytest.raises(LibraryUnavailableError, match="does not match the manifest_sha256 pinned"):
        cat.open("golden")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[libraries.golden\n", "not readable TOML"),
        ("version = 1\n", "unknown top-level key"),
        ('[libraries.golden]\nlatest = "abc"\n', "content_hash must be 64 lowercase hex digits"),
        ('[libraries.golden]\nlatest = { content_hash = "' + "a" * 64 + '", sha = "x" }\n', "unknown key"),
        ('[libraries."Bad Id"]\nlatest = "' + "a" * 64 + '"\n', "valid library id"),
    ],
)
def test_malformed_lock_files_are_rejected(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(LockFileError, match=message):
        LockFile.load(_lock(tmp_path, body))
    with pytest.raises(LockFileError, match="not found"):
        LockFile.load(tmp_path / "absent.lock")
