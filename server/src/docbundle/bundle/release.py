"""The release format: one archive per bundle, ``SHA256SUMS`` and a catalogue ``index.json``.

``index.json`` itself (its entries, versions and bounds) is ``docbundle.bundle.releaseindex``; ``merge``
writes a release folder of at most ``MAX_ARCHIVES_PER_RELEASE`` archives, stamped with its release tag,
and ``roll`` the release index of the well-known release ``bundles-latest`` that names the release of
every library version's newest archive (docs/releases.md).

The writer (``package``, used by ``docbundle-index package``) and the reader's pieces
(``read_sums``, ``scan_tar_headers``; the other checks are in ``docbundle.server.install``) share this
one home.

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
import os
import tarfile
from pathlib import Path
from typing import Protocol, TypedDict

import msgspec

from .errors import BundleFormatError, BundleIntegrityError
from .layout import write_atomically
from .manifest import Manifest, manifest_bytes
from .reader import verify_bundle
from .releaseindex import (
    ATTESTATION,
    MAX_ARCHIVES_PER_RELEASE,
    MAX_ASSETS_PER_RELEASE,
    MAX_INDEX_ENTRIES,
    MAX_TEXT_CHARS,
    RELEASE_TAG_RE,
    decode_index,
    encode_index,
)
from .releaseindex import (
    INDEX as INDEX,  # re-exported: the release folder's names are this module's
)
from .releaseindex import (
    PackagedBundle as PackagedBundle,
)

SUMS = "SHA256SUMS"
# An extended header (PAX ``x``, GNU long name ``L`` or long link ``K``) is read whole into memory by
# tarfile, and kept with its member: each is bounded, and so is their sum over the archive.
MAX_EXTENDED_HEADER_BYTES = 64 * 1024
MAX_EXTENDED_TOTAL_BYTES = 1024 * 1024
_BLOCK = 512
_SKIP_CHUNK = 1024 * 1024
_EXTENDED = {b"x": "PAX", b"X": "PAX", b"L": "GNU long-name", b"K": "GNU long-link"}
# Members whose data follows their header (tarfile skips data only for these and unknown types).
_NO_DATA = {b"1", b"2", b"3", b"4", b"5", b"6"}


class ManifestHeader(TypedDict):
    """The manifest fields that name a build: in ``index.json`` and in the indexer's reports (audit, diff)."""

    library: str
    version: str
    build_id: str
    content_hash: str
    built_at: str


def manifest_header(manifest: Manifest) -> ManifestHeader:
    """Library id, version, buildId, content hash and build time of ``manifest``."""
    return ManifestHeader(
        library=manifest.library.id,
        version=manifest.version.name,
        build_id=manifest.build.build_id,
        content_hash=manifest.build.content_hash,
        built_at=manifest.build.built_at,
    )


def bundle_label(manifest: Manifest) -> str:
    """``<libraryId>/<version>/<buildId>``: the bundle's name in exports and reports, and its archive's root."""
    return f"{manifest.library.id}/{manifest.version.name}/{manifest.build.build_id}"


def archive_name(manifest: Manifest) -> str:
    """``<libraryId>-<version>-<buildId>.tar.gz``."""
    return f"{manifest.library.id}-{manifest.version.name}-{manifest.build.build_id}.tar.gz"


def _mtime() -> int:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    return int(epoch) if epoch.isdigit() else 0


def pack_bundle(bundle: Path, out_dir: Path) -> PackagedBundle:
    """Verify ``bundle`` and write its deterministic archive into ``out_dir``."""
    manifest = verify_bundle(bundle)
    prefix = bundle_label(manifest)
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
        **manifest_header(manifest),
        name=manifest.library.name,
        description=manifest.library.description[:MAX_TEXT_CHARS],
        status=manifest.version.status,
        latest=manifest.version.latest,
        manifest_sha256=hashlib.sha256(manifest_bytes(bundle)).hexdigest(),
        documents=manifest.counts.documents,
        archive=name,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
    )


def package(bundles: list[Path], out_dir: Path) -> list[PackagedBundle]:
    """Pack every bundle and write ``SHA256SUMS`` and ``index.json`` beside the archives."""
    entries = [pack_bundle(b, out_dir) for b in bundles]
    write_release_files(out_dir, entries)
    return entries


def write_release_files(out_dir: Path, entries: list[PackagedBundle]) -> None:
    """``SHA256SUMS`` and ``index.json`` for the archives ``entries`` in ``out_dir``, each replaced
    atomically: the nightly job rewrites them after every library it packs, and a job cut at its time
    limit must leave a folder whose files agree (``merge`` reads every archive its ``index.json``
    names)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(out_dir / SUMS, render_sums({e.archive: e.sha256 for e in entries}).encode("ascii"))
    write_atomically(out_dir / INDEX, encode_index(entries))


def _read_index(path: Path) -> list[PackagedBundle]:
    return decode_index(path.read_bytes(), str(path))


def merge(dists: list[Path], out_dir: Path, *, release: str = "") -> list[PackagedBundle]:
    """Merge shard outputs of ``package`` into one release folder, checking every archive's sha256.

    ``release``: the tag this folder is published as; every entry names it, so the release index of
    ``roll`` can point at it, and names the release's attestation (``ATTESTATION``), which the nightly
    job signs and publishes beside the archives (an older docbundle ignores the field).
    """
    if release and not RELEASE_TAG_RE.fullmatch(release):
        raise BundleFormatError(f"{release[:120]!r} is not a release tag (letters, digits, '.', '_', '-')")
    out_dir.mkdir(parents=True, exist_ok=True)
    entries: list[PackagedBundle] = []
    for dist in dists:
        for entry in _read_index(dist / INDEX):
            data = (dist / entry.archive).read_bytes()
            if hashlib.sha256(data).hexdigest() != entry.sha256:
                raise BundleIntegrityError(
                    f"{dist / entry.archive} does not match the sha256 in {dist / INDEX}"
                )
            (out_dir / entry.archive).write_bytes(data)
            stamped = msgspec.structs.replace(entry, release=release, attestation=ATTESTATION)
            entries.append(stamped if release else entry)
    entries.sort(key=lambda e: e.archive)
    if len(entries) > MAX_ARCHIVES_PER_RELEASE:
        raise BundleFormatError(
            f"{len(entries)} archives do not fit one release ({MAX_ARCHIVES_PER_RELEASE} archives, "
            f"{MAX_ASSETS_PER_RELEASE} assets with SHA256SUMS, {INDEX} and {ATTESTATION}); "
            "the nightly plan splits them"
        )
    write_release_files(out_dir, entries)
    return entries


def roll(previous_index: Path | None, releases: list[Path], out_dir: Path) -> list[PackagedBundle]:
    """The release index of the well-known release ``bundles-latest``: every library version's newest
    published bundle, and the release that holds it.

    ``previous_index`` is the catalogue's last ``index.json`` (None or a missing file on the first run);
    ``releases`` are tonight's release folders (written by ``merge`` with their tag). Tonight's entries
    replace the previous ones of the same library version; the others are kept, still naming the release
    that holds them (``""``, the catalogue's own folder, for archives published there before the catalogue
    was spread over releases). Writes ``index.json`` only into ``out_dir``: no archive is copied.
    """
    kept: dict[tuple[str, str], PackagedBundle] = {}
    if previous_index is not None and previous_index.is_file():
        for entry in _read_index(previous_index):
            kept[(entry.library, entry.version)] = entry
    for folder in releases:
        for entry in _read_index(folder / INDEX):
            if not entry.release:
                raise BundleFormatError(f"{folder / INDEX} names no release: merge it with a release tag")
            kept[(entry.library, entry.version)] = entry
    entries = sorted(kept.values(), key=lambda e: (e.library, e.version))
    if len(entries) > MAX_INDEX_ENTRIES:
        raise BundleFormatError(f"the catalogue would list {len(entries)} bundles, over {MAX_INDEX_ENTRIES}")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / INDEX).write_bytes(encode_index(entries))
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


class Readable(Protocol):
    """A stream of bytes (a file, a ``GzipFile``, a ``BytesIO``)."""

    def read(self, size: int = -1, /) -> bytes:
        """At most ``size`` bytes; empty at the end."""
        ...


def _number(field: bytes) -> int:
    """A tar header number: octal text, or GNU base-256 (first byte 0x80 or 0xff)."""
    if field[:1] in (b"\x80", b"\xff"):
        value = int.from_bytes(field[1:], "big")
        return value - (256 ** (len(field) - 1)) if field[:1] == b"\xff" else value
    text = field.split(b"\0", 1)[0].strip()
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        raise BundleFormatError(f"a tar header holds a malformed number {text[:20]!r}") from None


def _checksum_ok(block: bytes) -> bool:
    """tarfile's test: the stored checksum is the unsigned or signed byte sum, checksum field as spaces."""
    try:
        stored = _number(block[148:156])
    except BundleFormatError:
        return False
    rest = block[:148] + block[156:]
    unsigned = sum(rest) + 8 * 0x20
    signed = sum(b - 256 if b > 127 else b for b in rest) + 8 * 0x20
    return stored in (unsigned, signed)


def _read_exact(stream: Readable, size: int) -> bytes:
    parts: list[bytes] = []
    while size > 0:
        chunk = stream.read(min(size, _SKIP_CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def _skip(stream: Readable, size: int) -> None:
    while size > 0:
        chunk = stream.read(min(size, _SKIP_CHUNK))
        if not chunk:
            raise BundleFormatError("the archive is truncated: a member's data ends early")
        size -= len(chunk)


def _pax_size(data: bytes) -> int | None:
    """The ``size`` record of a PAX header, if any; refuses malformed records and sparse files."""
    size: int | None = None
    pos = 0
    while pos < len(data) and data[pos] != 0:
        space = data.find(b" ", pos, pos + 21)
        length_text = data[pos:space] if space > 0 else b""
        if not length_text.isdigit() or int(length_text) < 5:
            raise BundleFormatError("a PAX header of the archive is malformed")
        record = data[space + 1 : pos + int(length_text)]
        if pos + int(length_text) > len(data) or not record.endswith(b"\n") or b"=" not in record:
            raise BundleFormatError("a PAX header of the archive is malformed")
        key, _, value = record[:-1].partition(b"=")
        if key.startswith(b"GNU.sparse."):
            raise BundleFormatError("the archive holds a sparse file; a bundle archive has none")
        if key == b"size":
            if not value.isdigit():
                raise BundleFormatError("a PAX header of the archive gives a malformed size")
            size = int(value)
        pos += int(length_text)
    return size


def scan_tar_headers(stream: Readable, *, max_members: int) -> int:
    """Walk the raw 512-byte headers of an uncompressed tar ``stream``, before ``tarfile`` reads it.

    ``tarfile`` reads a whole extended header (PAX ``x``, GNU long name ``L`` or long link ``K``) into
    memory before anything else can look at it, and keeps it with its member; a 1 MB archive can declare
    a gigabyte of header. This reads the stream in bounded pieces and refuses, with ``BundleFormatError``:
    an extended header over ``MAX_EXTENDED_HEADER_BYTES``, extended headers summing to more than
    ``MAX_EXTENDED_TOTAL_BYTES``, two of one kind before one member (a chain tarfile would follow
    recursively), global PAX headers (``g``, merged into every later member) and sparse files (``S``
    or ``GNU.sparse.*``, whose maps tarfile reads whole), more than ``max_members`` members, a bad
    header checksum and a truncated stream. Nothing of the stream is kept. Returns the member count.
    """
    members = extended_total = 0
    pending: set[bytes] = set()
    pax_size: int | None = None
    while True:
        block = _read_exact(stream, _BLOCK)
        if not block or block == bytes(_BLOCK):
            return members  # the end (tarfile stops at the first zero block too)
        if len(block) < _BLOCK:
            raise BundleFormatError("the archive is truncated in the middle of a header")
        if not _checksum_ok(block):
            raise BundleFormatError("a tar header of the archive has a bad checksum")
        kind, size = block[156:157], _number(block[124:136])
        if size < 0:
            raise BundleFormatError("a tar header of the archive declares a negative size")
        if kind in _EXTENDED:
            label = _EXTENDED[kind]
            if size > MAX_EXTENDED_HEADER_BYTES:
                raise BundleFormatError(
                    f"the archive holds a {size}-byte {label} header, over the "
                    f"{MAX_EXTENDED_HEADER_BYTES}-byte limit; docbundle archives never need one that large"
                )
            extended_total += size
            if extended_total > MAX_EXTENDED_TOTAL_BYTES:
                raise BundleFormatError(
                    f"the archive's extended headers add up to over {MAX_EXTENDED_TOTAL_BYTES} bytes"
                )
            if kind.upper() in pending:
                raise BundleFormatError(f"the archive chains two {label} headers before one member")
            pending.add(kind.upper())
            data = _read_exact(stream, size)
            if len(data) < size:
                raise BundleFormatError(f"the archive is truncated inside a {label} header")
            _skip(stream, -size % _BLOCK)
            if kind.upper() == b"X":
                pax_size = _pax_size(data)
            continue
        if kind == b"g":
            raise BundleFormatError("the archive holds a global PAX header; a bundle archive has none")
        if kind == b"S":
            raise BundleFormatError("the archive holds a sparse file; a bundle archive has none")
        members += 1
        if members > max_members:
            raise BundleFormatError(
                f"the archive has more than {max_members} entries; a bundle has far fewer"
            )
        if pax_size is not None:
            size = pax_size
        pending, pax_size = set(), None
        if kind not in _NO_DATA:
            _skip(stream, size + (-size % _BLOCK))
