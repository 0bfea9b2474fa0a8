"""Issue 9, items 8, 9 and 11: hostile release archives are refused early, with a clear message.

A tar bomb must be refused before it fills the disk, a build id with a trailing newline must not pass
the install (it would write a CURRENT that takes the library down), and malformed archives get an
``InstallError`` that says what is wrong, never a traceback; nothing is left behind.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

import pytest
from docbundle.bundle.layout import BUILD_ID_RE, LIBRARY_ID_RE, VERSION_RE
from docbundle.server.errors import InstallError, LockFileError
from docbundle.server.install import install
from docbundle.server.lockfile import LockFile

GOLDEN = Path(__file__).resolve().parents[1] / "bundle" / "golden" / "v1"
BUILD = json.loads((GOLDEN / "manifest.json").read_text())["build"]["build_id"]
ROOT = f"golden/latest/{BUILD}"


def _members(root: str = ROOT) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """The golden bundle as (header, data) pairs, folders first, as docbundle-index package writes."""
    out: list[tuple[tarfile.TarInfo, bytes | None]] = []
    for rel in [".", "index"]:
        info = tarfile.TarInfo(root if rel == "." else f"{root}/{rel}")
        info.type = tarfile.DIRTYPE
        out.append((info, None))
    for path in sorted(p for p in GOLDEN.rglob("*") if p.is_file()):
        data = path.read_bytes()
        info = tarfile.TarInfo(f"{root}/{path.relative_to(GOLDEN).as_posix()}")
        info.size = len(data)
        out.append((info, data))
    return out


def _write(entries: list[tuple[tarfile.TarInfo, bytes | None]], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    archive = out / "bundle.tar.gz"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    archive.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    _sum(archive)
    return archive


def _sum(archive: Path) -> None:
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    (archive.parent / "SHA256SUMS").write_text(f"{digest}  {archive.name}\n")


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def test_the_intact_archive_installs(tmp_path: Path) -> None:
    done = install(_write(_members(), tmp_path / "rel"), tmp_path / "b")
    assert done.build_id == BUILD


def test_a_tar_bomb_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    bomb = 64 * 1024**2
    entries = []
    for info, data in _members():
        if info.name.endswith("/docs.bin"):
            info.size, data = bomb, bytes(bomb)  # 64 MiB of zeros: ~64 KB compressed
        entries.append((info, data))
    archive = _write(entries, tmp_path / "rel")
    assert archive.stat().st_size < 1024**2
    bundles = tmp_path / "b"
    with pytest.raises(InstallError, match=r"docs.bin' is 67108864 bytes, the manifest says \d+"):
        install(archive, bundles)
    assert _du(bundles) == 0


def test_a_bomb_declared_by_a_rewritten_manifest_stops_at_the_first_mismatch(tmp_path: Path) -> None:
    """Even when the manifest declares the huge sizes, extraction stops at the first bad file."""
    bomb = 32 * 1024**2
    entries = []
    for info, data in _members():
        if info.name.endswith("/manifest.json"):
            m = json.loads(data or b"")
            for f in m["files"]:
                if f["path"] in ("docs.bin", "docs.idx"):
                    f["size"] = bomb  # sha256 left as it was: the zeros will not match it
            data = json.dumps(m).encode()
            info.size = len(data)
        elif info.name.endswith(("/docs.bin", "/docs.idx")):
            info.size, data = bomb, bytes(bomb)
        entries.append((info, data))
    bundles = tmp_path / "b"
    with pytest.raises(InstallError, match="docs.bin does not match its sha256"):
        install(_write(entries, tmp_path / "rel"), bundles)
    assert _du(bundles) == 0  # the temporary folder is gone; docs.idx was never written


@pytest.mark.parametrize("pattern", [LIBRARY_ID_RE, VERSION_RE, BUILD_ID_RE])
def test_id_patterns_refuse_a_trailing_newline(pattern: object) -> None:
    import re

    assert isinstance(pattern, re.Pattern)
    good = {LIBRARY_ID_RE: "golden", VERSION_RE: "latest", BUILD_ID_RE: BUILD}[pattern]
    assert pattern.match(good) and pattern.fullmatch(good)
    assert not pattern.match(good + "\n") and not pattern.fullmatch(good + "\n")


def test_a_build_id_with_a_trailing_newline_does_not_install(tmp_path: Path) -> None:
    entries = []
    for info, data in _members():
        info.name = info.name.replace(BUILD, BUILD + "\n")
        entries.append((info, data))
    bundles = tmp_path / "b"
    with pytest.raises(InstallError, match=r"is not under <libraryId>/<version>/<buildId>/"):
        install(_write(entries, tmp_path / "rel"), bundles)
    assert not (bundles / "golden" / "latest" / "CURRENT").exists()


def test_lock_files_refuse_a_hash_with_a_trailing_newline(tmp_path: Path) -> None:
    lock = tmp_path / "bundles.lock"
    lock.write_text('[libraries.golden]\nlatest = "' + "a" * 64 + '\\n"\n')
    with pytest.raises(LockFileError, match="content_hash must be 64 lowercase hex digits"):
        LockFile.load(lock)
    lock.write_text('[libraries."golden\\n"]\nlatest = "' + "a" * 64 + '"\n')
    with pytest.raises(LockFileError, match="valid library id"):
        LockFile.load(lock)


def _malformed(kind: str, tmp_path: Path) -> Path:
    members = _members()
    if kind == "truncated":
        archive = _write(members, tmp_path / "rel")
        archive.write_bytes(archive.read_bytes()[:-300])
        _sum(archive)
        return archive
    if kind == "garbage":
        archive = tmp_path / "rel" / "bundle.tar.gz"
        archive.parent.mkdir(parents=True)
        archive.write_bytes(gzip.compress(b"\x00not a tar file" * 100))
        _sum(archive)
        return archive
    if kind == "duplicate":
        members.append(members[-1])
    elif kind == "file-and-folder":
        info = tarfile.TarInfo(f"{ROOT}/docs.bin")
        info.type = tarfile.DIRTYPE
        members.insert(2, (info, None))
    elif kind == "folder-as-file":
        info = tarfile.TarInfo(f"{ROOT}/index")
        info.size = 3
        members = [m for m in members if m[0].name != f"{ROOT}/index"] + [(info, b"abc")]
    elif kind == "no-manifest":
        members = [m for m in members if not m[0].name.endswith("manifest.json")]
    elif kind == "empty":
        members = []
    return _write(members, tmp_path / "rel")


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("truncated", "is damaged or not a bundle archive"),
        ("garbage", "is damaged or not a bundle archive"),
        ("duplicate", "twice"),
        ("file-and-folder", "twice"),
        ("folder-as-file", "not listed in the manifest"),
        ("no-manifest", "no manifest.json"),
        ("empty", "empty"),
    ],
)
def test_malformed_archives_get_a_clear_error_and_leave_nothing(
    kind: str, message: str, tmp_path: Path
) -> None:
    archive = _malformed(kind, tmp_path)
    bundles = tmp_path / "b"
    with pytest.raises(InstallError, match=message):
        install(archive, bundles)
    assert _du(bundles) == 0
    done = subprocess.run(
        [sys.executable, "-m", "docbundle.server", "install", str(archive), "--bundles", str(bundles)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "docbundle: error:" in done.stderr
    assert "Traceback" not in done.stderr


# Runs argv[1:] and prints its exit code, stderr and peak RSS (KiB): the only child of this process,
# so RUSAGE_CHILDREN is that command's own figure.
_PEAK_RSS = """
import json, resource, subprocess, sys
r = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=300)
print(json.dumps([r.returncode, r.stderr, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))
"""


def _pax_bomb(out: Path, header_bytes: int) -> Path:
    """The golden archive behind one PAX header of ``header_bytes`` (a single ``comment`` record),
    gzipped as it is written, so neither this test nor the disk holds the header itself."""
    record_len = header_bytes
    head = f"{record_len} comment=".encode()
    filler = record_len - len(head) - 1
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = tarfile.XHDTYPE, header_bytes
    golden = io.BytesIO()
    with tarfile.open(fileobj=golden, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for member, data in _members():
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
    out.mkdir(parents=True, exist_ok=True)
    archive = out / "bundle.tar.gz"
    gz = zlib.compressobj(6, zlib.DEFLATED, 31)
    with open(archive, "wb") as fh:
        fh.write(gz.compress(info.tobuf(tarfile.USTAR_FORMAT) + head))
        piece = b"a" * (1024 * 1024)
        left = filler
        while left > 0:
            fh.write(gz.compress(piece[: min(left, len(piece))]))
            left -= min(left, len(piece))
        fh.write(gz.compress(b"\n" + bytes(-header_bytes % 512) + golden.getvalue()))
        fh.write(gz.flush())
    _sum(archive)
    return archive


def _install_measured(archive: Path, bundles: Path) -> tuple[int, str, int]:
    """``docbundle install ARCHIVE --bundles BUNDLES`` in a child process: its exit code, its stderr, and
    its peak RSS in KiB."""
    cmd = [sys.executable, "-m", "docbundle.server", "install", str(archive), "--bundles", str(bundles)]
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *cmd], capture_output=True, text=True, timeout=320, check=True
    )
    code, stderr, peak_kib = json.loads(done.stdout)
    return code, stderr, peak_kib


def test_a_pax_header_bomb_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """Issue 19, item 5: a 256 MiB PAX header in a ~260 KB archive (its SHA256SUMS matching) is refused
    from its 512-byte header, through the CLI, and the install's peak RSS stays far below its size."""
    bomb = 256 * 1024**2
    archive = _pax_bomb(tmp_path / "rel", bomb)
    assert archive.stat().st_size < 1024**2
    bundles = tmp_path / "b"
    code, stderr, peak_kib = _install_measured(archive, bundles)
    assert code == 1, stderr
    assert f"holds a {bomb}-byte PAX header, over the 65536-byte limit" in stderr
    assert "Traceback" not in stderr
    assert peak_kib < 300 * 1024, f"peak RSS {peak_kib // 1024} MiB"
    assert _du(bundles) == 0


class _Padded(io.RawIOBase):
    """``padding`` spaces, then ``tail``, produced as they are read (the test never holds the padding)."""

    def __init__(self, padding: int, tail: bytes) -> None:
        self.left, self.tail = padding, tail

    def readable(self) -> bool:
        return True

    def readinto(self, buf: bytearray | memoryview) -> int:  # type: ignore[override]
        n = len(buf)
        if self.left > 0:
            n = min(n, self.left)
            buf[:n] = b" " * n
            self.left -= n
            return n
        n = min(n, len(self.tail))
        buf[:n], self.tail = self.tail[:n], self.tail[n:]
        return n


def _padded_manifest_archive(out: Path, padding: int) -> Path:
    """The golden archive whose manifest.json is ``padding`` bytes of JSON whitespace before the real
    manifest: valid JSON, so only its size can refuse it. Gzipped as it is written."""
    out.mkdir(parents=True, exist_ok=True)
    archive = out / "bundle.tar.gz"
    with gzip.open(archive, "wb", compresslevel=1) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for info, data in _members():
            if data is not None and info.name.endswith("/manifest.json"):
                info.size = padding + len(data)
                tar.addfile(info, io.BufferedReader(_Padded(padding, data), 1024 * 1024))
            else:
                tar.addfile(info, io.BytesIO(data) if data is not None else None)
    _sum(archive)
    return archive


def test_an_oversized_manifest_is_refused_from_its_header(tmp_path: Path) -> None:
    """Issue 19, item 5 (the manifest's share): a 200 MiB manifest.json (valid JSON: whitespace, then the
    real manifest) is refused from its tar header, through the CLI; install never holds it in memory."""
    padding = 200 * 1024**2
    archive = _padded_manifest_archive(tmp_path / "rel", padding)
    bundles = tmp_path / "b"
    code, stderr, peak_kib = _install_measured(archive, bundles)
    assert code == 1, stderr
    assert "manifest.json is" in stderr and "byte limit" in stderr, stderr
    assert "Traceback" not in stderr
    assert peak_kib < 150 * 1024, f"peak RSS {peak_kib // 1024} MiB"
    assert _du(bundles) == 0


def test_an_archive_whose_manifest_is_nested_too_deeply_gets_a_clear_error(tmp_path: Path) -> None:
    """Issue 31, item 3: a manifest.json of 10 KB nested 5,000 deep (msgspec raises RecursionError on it)
    is refused with what is wrong, through the CLI, no traceback, nothing left behind."""
    nested = b'{"format_version": 1, "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    members = []
    for info, data in _members():
        if info.name.endswith("/manifest.json"):
            info.size, data = len(nested), nested
        members.append((info, data))
    archive = _write(members, tmp_path / "rel")
    bundles = tmp_path / "b"
    done = subprocess.run(
        [sys.executable, "-m", "docbundle.server", "install", str(archive), "--bundles", str(bundles)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "docbundle: error:" in done.stderr, done.stderr
    assert "manifest.json is nested too deeply" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert _du(bundles) == 0
