"""Install a release archive into a bundles directory, offline: ``docbundle install ARCHIVE --bundles DIR``.

Checks, in order, before anything becomes visible:

1. the archive's sha256 is listed in ``SHA256SUMS`` (beside the archive, or ``--sums FILE``) and matches;
2. the raw tar headers are walked in bounded reads before ``tarfile`` sees them
   (``docbundle.bundle.release.scan_tar_headers``): an extended header (PAX, GNU long name or long link)
   over 64 KiB, their sum over 1 MiB, global PAX headers and sparse files are refused, so the memory an
   install takes does not depend on what the archive declares;
3. every member is a regular file or directory under one ``<libraryId>/<version>/<buildId>/`` prefix
   (no links, devices, absolute paths, ``..`` or duplicates; at most ``MAX_MEMBERS`` entries);
4. the manifest is read first (at most ``MAX_MANIFEST_BYTES``) and names the same library, version
   and build as the paths; a lock file, when one is in use, pins this content hash (and manifest
   sha256) for that version;
5. every file entry is listed in the manifest with the size the archive declares, the total fits
   ``MAX_UNPACKED_BYTES`` and the free disk space, all before a byte is written; then each file is
   copied (never past its declared size) and hashed as it is written, stopping at the first mismatch
   (a tar bomb writes at most one file's declared size before it is refused);
6. the unpacked bundle verifies again and its index loads through the restricted unpickler.

The bundle is unpacked into a temporary directory beside its final place, fsynced, renamed, and only
then does ``CURRENT`` move to it (atomically). A failure at any step leaves the bundles directory as it
was. A server that is already running keeps serving what it opened; restart it to serve the new build.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from docbundle.bundle import layout
from docbundle.bundle.errors import BundleError, BundleFormatError, VersionLockedError
from docbundle.bundle.layout import BUILD_ID_RE, LIBRARY_ID_RE, VERSION_RE
from docbundle.bundle.manifest import MANIFEST_NAME, MAX_MANIFEST_BYTES, FileEntry, Manifest, decode_manifest
from docbundle.bundle.publish import publish
from docbundle.bundle.reader import check_bundle, verify_bundle
from docbundle.bundle.release import SUMS, read_sums, scan_tar_headers
from docbundle.bundle.routeindex import refresh_index

from .errors import InstallError
from .lockfile import LockFile, find_lock

MAX_UNPACKED_BYTES = 8 * 1024**3
MAX_MEMBERS = 100_000
_COPY_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Installed:
    """What was installed."""

    library: str
    version: str
    build_id: str
    content_hash: str
    path: Path
    already_present: bool


def served_note(installed: list[Installed]) -> str:
    """When a running server serves what ``installed`` lists: live reload picks up new builds, no restart."""
    from .catalog import DEFAULT_RELOAD_SECONDS

    if all(i.already_present for i in installed):
        return "nothing changed: a running server over this folder already serves it"
    return (
        f"a running `docbundle serve` over this folder serves it within {DEFAULT_RELOAD_SECONDS:g} s "
        "(live reload); one started with --reload-interval 0 needs a restart"
    )


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def check_sums(archive: Path, sums: Path | None) -> None:
    """The archive must be listed in SHA256SUMS with its exact sha256."""
    sums = sums or archive.parent / SUMS
    try:
        text = sums.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise InstallError(
            f"{sums} not found: download SHA256SUMS with the archive, or pass --sums FILE"
        ) from exc
    listed = read_sums(text)
    expected = listed.get(archive.name)
    if expected is None:
        raise InstallError(f"{archive.name} is not listed in {sums}")
    if _sha256(archive) != expected:
        raise InstallError(
            f"{archive.name} does not match its sha256 in {sums}: the download is damaged or altered"
        )


def _prefix(members: list[tarfile.TarInfo]) -> tuple[str, str, str]:
    if not members:
        raise InstallError("the archive is empty: it holds no bundle")
    prefix: tuple[str, str, str] | None = None
    seen: set[str] = set()
    for m in members:
        path = PurePosixPath(m.name)
        if path.is_absolute() or ".." in path.parts or not (m.isfile() or m.isdir()):
            raise InstallError(
                f"refusing archive entry {m.name[:120]!r}: only plain files and folders inside the bundle"
            )
        if len(path.parts) < 3:
            raise InstallError(
                f"archive entry {m.name[:120]!r} is not under <libraryId>/<version>/<buildId>/"
            )
        lib, version, build = path.parts[:3]
        if not (
            LIBRARY_ID_RE.fullmatch(lib) and VERSION_RE.fullmatch(version) and BUILD_ID_RE.fullmatch(build)
        ):
            raise InstallError(
                f"archive entry {m.name[:120]!r} is not under <libraryId>/<version>/<buildId>/"
            )
        if prefix is None:
            prefix = (lib, version, build)
        elif prefix != (lib, version, build):
            raise InstallError("the archive holds more than one bundle; install one archive per bundle")
        key = path.as_posix()
        if key in seen:
            raise InstallError(
                f"the archive lists {m.name[:120]!r} twice; it was not made by docbundle-index package"
            )
        seen.add(key)
    assert prefix is not None
    return prefix


def _read_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """Every member header, at most MAX_MEMBERS of them (a bomb of tiny entries stops early)."""
    members: list[tarfile.TarInfo] = []
    for m in tar:
        members.append(m)
        if len(members) > MAX_MEMBERS:
            raise InstallError(f"the archive has more than {MAX_MEMBERS} entries; a bundle has far fewer")
    return members


def _read_manifest(tar: tarfile.TarFile, member: tarfile.TarInfo | None) -> tuple[Manifest, bytes]:
    if member is None or not member.isfile():
        raise InstallError("the archive holds no manifest.json at the top of its bundle")
    if member.size > MAX_MANIFEST_BYTES:
        raise InstallError(f"manifest.json is {member.size} bytes, over the {MAX_MANIFEST_BYTES}-byte limit")
    src = tar.extractfile(member)
    assert src is not None
    with src:
        data = src.read(MAX_MANIFEST_BYTES + 1)
    try:
        return decode_manifest(data), data
    except BundleError as exc:
        raise InstallError(f"manifest.json in the archive is not a valid manifest: {exc}") from exc


def _plan(
    members: list[tarfile.TarInfo], root: str, manifest: Manifest, vdir: Path
) -> list[tuple[tarfile.TarInfo, FileEntry]]:
    """Match every file entry to the manifest (name and declared size) before a byte is written."""
    listed = {f.path: f for f in manifest.files}
    for rel in listed:
        p = PurePosixPath(rel)
        if p.is_absolute() or ".." in p.parts or rel in ("", ".", MANIFEST_NAME) or "\\" in rel:
            raise InstallError(f"the manifest lists an unsafe path {rel[:120]!r}")
    parents = {
        PurePosixPath(rel).parents[i].as_posix()
        for rel in listed
        for i in range(len(PurePosixPath(rel).parts) - 1)
    }
    plan: list[tuple[tarfile.TarInfo, FileEntry]] = []
    for m in members:
        rel = PurePosixPath(m.name).relative_to(root).as_posix()
        if m.isdir():
            if rel != "." and rel not in parents:
                raise InstallError(f"archive folder {rel[:120]!r} holds no file the manifest lists")
            continue
        if rel == MANIFEST_NAME:
            continue
        entry = listed.get(rel)
        if entry is None:
            raise InstallError(f"archive entry {rel[:120]!r} is not listed in the manifest")
        if m.size != entry.size:
            raise InstallError(
                f"archive entry {rel[:120]!r} is {m.size} bytes, the manifest says {entry.size}; refusing to unpack"
            )
        plan.append((m, entry))
    missing = sorted(set(listed) - {e.path for _, e in plan})
    if missing:
        raise InstallError(f"the archive lacks file(s) the manifest lists: {', '.join(missing[:5])}")
    total = sum(e.size for _, e in plan)
    if total > MAX_UNPACKED_BYTES:
        raise InstallError(
            f"the bundle would unpack to {total} bytes, over the {MAX_UNPACKED_BYTES}-byte limit"
        )
    existing = next(p for p in (vdir, *vdir.parents) if p.exists())
    free = shutil.disk_usage(existing).free
    if total > free:
        raise InstallError(
            f"the bundle needs {total} bytes and {vdir} has {free} free; free some space first"
        )
    return plan


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, entry: FileEntry, dest: Path) -> None:
    """Copy one entry, never more than its declared size, hashing as it goes; stop at a mismatch."""
    src = tar.extractfile(member)
    if src is None:
        raise InstallError(f"archive entry {entry.path!r} has no data")
    digest = hashlib.sha256()
    written = 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    with src, open(dest, "xb") as out:
        while written < entry.size:
            chunk = src.read(min(_COPY_CHUNK, entry.size - written))
            if not chunk:
                raise InstallError(f"archive entry {entry.path!r} is truncated")
            digest.update(chunk)
            out.write(chunk)
            written += len(chunk)
        out.flush()
        os.fsync(out.fileno())
    if digest.hexdigest() != entry.sha256:
        raise InstallError(
            f"the bundle in the archive does not verify: {entry.path} does not match its sha256 in the manifest"
        )


def install(
    archive: Path,
    bundles: Path,
    *,
    sums: Path | None = None,
    lock: Path | None = None,
    verify_sums: bool = True,
    refresh: bool = True,
) -> Installed:
    """Verify and install one release archive; see the module docstring. ``refresh``: bring the
    routing index up to date now (False: the caller calls ``refresh_routing`` once after installing
    several; at 10,000 libraries that takes seconds)."""
    if verify_sums:
        check_sums(archive, sums)
    try:
        installed = _install(archive, bundles, sums, lock)
    except (tarfile.TarError, EOFError, zlib.error, UnicodeError) as exc:
        raise InstallError(f"{archive.name} is damaged or not a bundle archive: {exc}") from exc
    if refresh:
        refresh_routing(bundles)
    return installed


def refresh_routing(bundles: Path) -> None:
    """Bring ``bundles``'s routing index up to date after installs (logged, never failing)."""
    refresh_index(bundles)


def _scan(archive: Path) -> None:
    """Refuse an archive whose headers would make ``tarfile`` hold more than a small bound in memory."""
    try:
        with gzip.open(archive, "rb") as raw:
            scan_tar_headers(raw, max_members=MAX_MEMBERS)
    except (BundleFormatError, OSError, EOFError, zlib.error) as exc:
        raise InstallError(f"{archive.name} is damaged or not a bundle archive (.tar.gz): {exc}") from exc


def _install(archive: Path, bundles: Path, sums: Path | None, lock: Path | None) -> Installed:
    _scan(archive)
    try:
        tar = tarfile.open(archive, "r:gz")  # noqa: SIM115 - closed by the with block below
    except (OSError, tarfile.TarError) as exc:
        raise InstallError(f"{archive.name} is damaged or not a bundle archive (.tar.gz): {exc}") from exc
    with tar:
        members = _read_members(tar)
        lib, version, build_id = _prefix(members)
        root = f"{lib}/{version}/{build_id}"
        manifest_member = next((m for m in members if m.name.rstrip("/") == f"{root}/{MANIFEST_NAME}"), None)
        manifest, manifest_data = _read_manifest(tar, manifest_member)
        named = (manifest.library.id, manifest.version.name, manifest.build.build_id)
        if named != (lib, version, build_id):
            raise InstallError(f"the manifest describes {'/'.join(named)}, but the archive puts it at {root}")
        lock_path = find_lock(bundles, lock)
        if lock_path is not None:
            pin = LockFile.load(lock_path).pins.get((lib, version))
            if pin is None or pin.content_hash != manifest.build.content_hash:
                raise InstallError(
                    f"{lock_path} does not pin content hash {manifest.build.content_hash} for {lib}@{version}; "
                    "update the lock file first if this bundle is wanted"
                )
            if pin.manifest_sha256 and pin.manifest_sha256 != hashlib.sha256(manifest_data).hexdigest():
                raise InstallError(f"{lock_path} pins another manifest sha256 for {lib}@{version}")
        vdir = bundles / lib / version
        plan = _plan(members, root, manifest, vdir)
        try:
            # The same protocol as a build: under the version lock, so a build of this version can
            # neither sweep this install's temporary folder nor publish in the middle of it.
            with layout.version_lock(vdir):
                layout.remove_stale_temps(vdir)
                final, present = _unpack(tar, plan, manifest_data, vdir, build_id)
        except VersionLockedError as exc:
            raise InstallError(str(exc)) from exc
        except BundleError as exc:
            raise InstallError(f"the bundle in {archive.name} does not verify: {exc}") from exc
    return Installed(lib, version, build_id, manifest.build.content_hash, final, present)


def _unpack(
    tar: tarfile.TarFile,
    plan: list[tuple[tarfile.TarInfo, FileEntry]],
    manifest_data: bytes,
    vdir: Path,
    build_id: str,
) -> tuple[Path, bool]:
    """Write the planned files into a temporary folder, check them, then publish (version lock held)."""
    tmp = layout.new_temp_dir(vdir, f"install-{build_id}")
    try:
        (tmp / MANIFEST_NAME).write_bytes(manifest_data)
        for member, entry in plan:
            _extract(tar, member, entry, tmp.joinpath(*PurePosixPath(entry.path).parts))
        check_bundle(tmp)  # files again, then the index's pickles (restricted)
        if (vdir / build_id).exists():
            verify_bundle(vdir / build_id)  # the same build id: keep the copy there if it is intact
        return publish(vdir, tmp, build_id)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
