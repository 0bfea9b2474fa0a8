"""The release format: one archive per bundle, ``SHA256SUMS`` and a catalogue ``index.json``.

The writer (``package``, used by ``docbundle-index package``) and the reader's pieces
(``read_sums``; the checks themselves are in ``docbundle.server.install``) share this one home.

An archive ``<libraryId>-<version>-<buildId>.tar.gz`` holds ``<libraryId>/<version>/<buildId>/...``, so
unpacking it into a bundles directory puts the bundle where the server looks (the installer then points
``CURRENT`` at it). Archives are deterministic: entries sorted, owner 0, mode 0644/0755, mtimes from
``SOURCE_DATE_EPOCH`` (else 0), and no timestamp in the gzip header, so the same bundle always packs to
the same bytes and the same checksum.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import msgspec

from .errors import BundleIntegrityError
from .manifest import MANIFEST_NAME, Manifest
from .reader import verify_bundle

SUMS = "SHA256SUMS"
INDEX = "index.json"


class PackagedBundle(msgspec.Struct, kw_only=True):
    """One entry of ``index.json``."""

    library: str
    name: str
    version: str
    status: str
    latest: bool
    build_id: str
    content_hash: str
    manifest_sha256: str  # pin it in bundles.lock: it covers every file, the index included
    built_at: str
    documents: int
    archive: str
    sha256: str
    size: int


def archive_name(manifest: Manifest) -> str:
    """``<libraryId>-<version>-<buildId>.tar.gz``."""
    return f"{manifest.library.id}-{manifest.version.name}-{manifest.build.build_id}.tar.gz"


def _mtime() -> int:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    return int(epoch) if epoch.isdigit() else 0


def pack_bundle(bundle: Path, out_dir: Path) -> PackagedBundle:
    """Verify ``bundle`` and write its deterministic archive into ``out_dir``."""
    manifest = verify_bundle(bundle)
    prefix = f"{manifest.library.id}/{manifest.version.name}/{manifest.build.build_id}"
    mtime = _mtime()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({p.relative_to(bundle) for p in bundle.rglob("*") if p.is_dir()})
        for rel in [Path("."), *dirs]:
            info = tarfile.TarInfo(prefix if rel == Path(".") else f"{prefix}/{rel.as_posix()}")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, mtime
            tar.addfile(info)
        for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
            info = tarfile.TarInfo(f"{prefix}/{path.relative_to(bundle).as_posix()}")
            info.size, info.mode, info.mtime = path.stat().st_size, 0o644, mtime
            with open(path, "rb") as src:
                tar.addfile(info, src)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = archive_name(manifest)
    tmp = out_dir / f".{name}.tmp"
    with open(tmp, "wb") as dst, gzip.GzipFile(filename="", mode="wb", fileobj=dst, mtime=0) as gz:
        gz.write(raw.getvalue())
    os.replace(tmp, out_dir / name)
    data = (out_dir / name).read_bytes()
    return PackagedBundle(
        library=manifest.library.id,
        name=manifest.library.name,
        version=manifest.version.name,
        status=manifest.version.status,
        latest=manifest.version.latest,
        build_id=manifest.build.build_id,
        content_hash=manifest.build.content_hash,
        manifest_sha256=hashlib.sha256((bundle / MANIFEST_NAME).read_bytes()).hexdigest(),
        built_at=manifest.build.built_at,
        documents=manifest.counts.documents,
        archive=name,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
    )


def package(bundles: list[Path], out_dir: Path) -> list[PackagedBundle]:
    """Pack every bundle and write ``SHA256SUMS`` and ``index.json`` beside the archives."""
    entries = [pack_bundle(b, out_dir) for b in bundles]
    _write_catalogue(out_dir, entries)
    return entries


def _write_catalogue(out_dir: Path, entries: list[PackagedBundle]) -> None:
    """``SHA256SUMS`` and ``index.json`` for the archives in ``out_dir``."""
    (out_dir / SUMS).write_text(render_sums({e.archive: e.sha256 for e in entries}), encoding="ascii")
    index = {"format": "docbundle-release-index", "version": 1, "bundles": msgspec.to_builtins(entries)}
    (out_dir / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def merge(dists: list[Path], out_dir: Path) -> list[PackagedBundle]:
    """Merge shard outputs of ``package`` into one release folder, checking every archive's sha256."""
    out_dir.mkdir(parents=True, exist_ok=True)
    entries: list[PackagedBundle] = []
    for dist in dists:
        index = json.loads((dist / INDEX).read_text(encoding="utf-8"))
        for raw in index["bundles"]:
            entry = msgspec.convert(raw, PackagedBundle)
            data = (dist / entry.archive).read_bytes()
            if hashlib.sha256(data).hexdigest() != entry.sha256:
                raise BundleIntegrityError(
                    f"{dist / entry.archive} does not match the sha256 in {dist / INDEX}"
                )
            (out_dir / entry.archive).write_bytes(data)
            entries.append(entry)
    entries.sort(key=lambda e: e.archive)
    _write_catalogue(out_dir, entries)
    return entries


def roll(previous_index: Path | None, new_dir: Path, out_dir: Path) -> list[PackagedBundle]:
    """The rolling release (``bundles-latest``): the newest published bundle of every library version.

    ``previous_index`` is the rolling release's ``index.json`` (None or a missing file on the first run),
    ``new_dir`` tonight's release folder (written by ``package`` or ``merge``). Its entries replace the
    previous ones of the same library version; its archives are copied into ``out_dir``, each checked
    against its sha256, and ``SHA256SUMS`` and ``index.json`` there list every entry, the ones kept from
    before included (their archives are already in the rolling release and are not copied).
    """
    kept: dict[tuple[str, str], PackagedBundle] = {}
    if previous_index is not None and previous_index.is_file():
        index = json.loads(previous_index.read_text(encoding="utf-8"))
        for raw in index["bundles"]:
            entry = msgspec.convert(raw, PackagedBundle)
            kept[(entry.library, entry.version)] = entry
    new = merge([new_dir], out_dir)
    for entry in new:
        kept[(entry.library, entry.version)] = entry
    entries = sorted(kept.values(), key=lambda e: e.archive)
    _write_catalogue(out_dir, entries)
    return entries


def render_sums(digests: dict[str, str]) -> str:
    """``SHA256SUMS`` text (``sha256sum`` format: ``<hex>  <name>``), sorted by name."""
    return "".join(f"{digests[name]}  {name}\n" for name in sorted(digests))


def read_sums(text: str) -> dict[str, str]:
    """Parse ``SHA256SUMS`` text: ``{name: lowercase hex}`` (``*name`` binary markers accepted)."""
    listed: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.strip().split()
        if len(parts) == 2:
            listed[parts[1].lstrip("*")] = parts[0].lower()
    return listed
