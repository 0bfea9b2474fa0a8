"""Install a release archive into a bundles directory, offline: ``docbundle install ARCHIVE --bundles DIR``.

Checks, in order, before anything becomes visible:

1. the archive's sha256 is listed in ``SHA256SUMS`` (beside the archive, or ``--sums FILE``) and matches;
2. every member is a regular file or directory under one ``<libraryId>/<version>/<buildId>/`` prefix
   (no links, devices, absolute paths or ``..``; sizes bounded);
3. the unpacked bundle verifies against its manifest (every file's sha256, nothing missing or extra),
   and the manifest names the same library, version and build as the paths;
4. a lock file, when one is in use, pins this content hash (and manifest sha256) for that version.

The bundle is unpacked into a temporary directory beside its final place, fsynced, renamed, and only
then does ``CURRENT`` move to it (atomically). A failure at any step leaves the bundles directory as it
was. A server that is already running keeps serving what it opened; restart it to serve the new build.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from docbundle.bundle.errors import BundleError
from docbundle.bundle.layout import BUILD_ID_RE, LIBRARY_ID_RE, VERSION_RE, fsync_dir, write_current
from docbundle.bundle.reader import verify_bundle

from .catalog import LockFile, find_lock

SUMS = "SHA256SUMS"
MAX_UNPACKED_BYTES = 8 * 1024**3
MAX_MEMBERS = 100_000


class InstallError(Exception):
    """The archive cannot be installed; the message says why and what to do."""


@dataclass(frozen=True)
class Installed:
    """What was installed."""

    library: str
    version: str
    build_id: str
    content_hash: str
    path: Path
    already_present: bool


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def check_sums(archive: Path, sums: Path | None) -> None:
    """The archive must be listed in SHA256SUMS with its exact sha256."""
    sums = sums or archive.parent / SUMS
    try:
        lines = sums.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise InstallError(
            f"{sums} not found: download SHA256SUMS with the archive, or pass --sums FILE"
        ) from exc
    listed = {}
    for line in lines:
        parts = line.strip().split()
        if len(parts) == 2:
            listed[parts[1].lstrip("*")] = parts[0].lower()
    expected = listed.get(archive.name)
    if expected is None:
        raise InstallError(f"{archive.name} is not listed in {sums}")
    if _sha256(archive) != expected:
        raise InstallError(
            f"{archive.name} does not match its sha256 in {sums}: the download is damaged or altered"
        )


def _prefix(members: list[tarfile.TarInfo]) -> tuple[str, str, str]:
    if not members or len(members) > MAX_MEMBERS:
        raise InstallError("the archive is empty or has too many entries to be a bundle")
    total = 0
    prefix: tuple[str, str, str] | None = None
    for m in members:
        path = PurePosixPath(m.name)
        if path.is_absolute() or ".." in path.parts or not (m.isfile() or m.isdir()):
            raise InstallError(
                f"refusing archive entry {m.name!r}: only plain files and folders inside the bundle"
            )
        if len(path.parts) < 3:
            raise InstallError(f"archive entry {m.name!r} is not under <libraryId>/<version>/<buildId>/")
        lib, version, build = path.parts[:3]
        if not (LIBRARY_ID_RE.match(lib) and VERSION_RE.match(version) and BUILD_ID_RE.match(build)):
            raise InstallError(f"archive entry {m.name!r} is not under <libraryId>/<version>/<buildId>/")
        if prefix is None:
            prefix = (lib, version, build)
        elif prefix != (lib, version, build):
            raise InstallError("the archive holds more than one bundle; install one archive per bundle")
        total += m.size
        if total > MAX_UNPACKED_BYTES:
            raise InstallError(f"the archive unpacks to more than {MAX_UNPACKED_BYTES} bytes")
    assert prefix is not None
    return prefix


def install(
    archive: Path,
    bundles: Path,
    *,
    sums: Path | None = None,
    lock: Path | None = None,
    verify_sums: bool = True,
) -> Installed:
    """Verify and install one release archive; see the module docstring."""
    if verify_sums:
        check_sums(archive, sums)
    try:
        tar = tarfile.open(archive, "r:gz")  # noqa: SIM115 - closed by the with block below
    except (OSError, tarfile.TarError) as exc:
        raise InstallError(f"{archive} is not a readable .tar.gz: {exc}") from exc
    with tar:
        members = tar.getmembers()
        lib, version, build_id = _prefix(members)
        vdir = bundles / lib / version
        vdir.mkdir(parents=True, exist_ok=True)
        tmp = vdir / f".tmp-install-{build_id}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            for m in members:
                rel = PurePosixPath(m.name).relative_to(f"{lib}/{version}/{build_id}")
                dest = tmp.joinpath(*rel.parts)
                if m.isdir():
                    dest.mkdir(parents=True, exist_ok=True)
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(m)
                if src is None:
                    raise InstallError(f"archive entry {m.name!r} has no data")
                with src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out)
                    out.flush()
                    os.fsync(out.fileno())
            manifest = verify_bundle(tmp)
            named = (manifest.library.id, manifest.version.name, manifest.build.build_id)
            if named != (lib, version, build_id):
                raise InstallError(
                    f"the manifest describes {'/'.join(named)}, but the archive puts it at {lib}/{version}/{build_id}"
                )
            lock_path = find_lock(bundles, lock)
            if lock_path is not None:
                pin = LockFile.load(lock_path).pins.get((lib, version))
                if pin is None or pin.content_hash != manifest.build.content_hash:
                    raise InstallError(
                        f"{lock_path} does not pin content hash {manifest.build.content_hash} for {lib}@{version}; "
                        "update the lock file first if this bundle is wanted"
                    )
                if pin.manifest_sha256 and pin.manifest_sha256 != _sha256(tmp / "manifest.json"):
                    raise InstallError(f"{lock_path} pins another manifest sha256 for {lib}@{version}")
            final = vdir / build_id
            present = final.exists()
            if present:
                verify_bundle(final)  # the same build id: keep the copy there if it is intact
                shutil.rmtree(tmp)
            else:
                fsync_dir(tmp)
                os.rename(tmp, final)
                fsync_dir(vdir)
            write_current(vdir, build_id)
        except BundleError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise InstallError(f"the bundle in {archive.name} does not verify: {exc}") from exc
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return Installed(lib, version, build_id, manifest.build.content_hash, final, present)
