"""The lock file (``bundles.lock``): which library versions may be served, pinned by hash.

::

    [libraries.react]
    latest = "<content hash>"                                         # pins the content
    "18" = { content_hash = "<content hash>", manifest_sha256 = "<sha256 of manifest.json>" }

When a lock file is in use, only the versions it lists are served. The content hash names *what* the
documents say; ``manifest_sha256`` pins the exact bytes of ``manifest.json``, which lists the sha256 of
every other file, so it pins the whole bundle (the search index included) byte for byte.

The file is the operator's: it may be a symbolic link (to a lock file kept with a deployment's other
files), but what it names must be a regular file of at most ``MAX_LOCK_BYTES``, read through
``docbundle.bundle.untrusted``: a FIFO, a device (``/dev/zero``) or a huge file is a ``LockFileError``
that stops the command, never a hang. A lock file that cannot be read is never skipped: serving without
the pins it holds would serve what it refuses.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from docbundle.bundle.errors import BundleError
from docbundle.bundle.layout import LIBRARY_ID_RE
from docbundle.bundle.untrusted import read_regular

from .errors import LockFileError

LOCK_FILE_NAME = "bundles.lock"
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
# A pin is ~200 bytes: 32 MiB holds ~150,000 library versions, more than any bundles folder serves.
MAX_LOCK_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class Pin:
    """What the lock file requires of one library version."""

    content_hash: str
    manifest_sha256: str | None = None


@dataclass(frozen=True)
class LockFile:
    """A parsed ``bundles.lock``: ``(libraryId, version) -> Pin``."""

    path: Path
    pins: dict[tuple[str, str], Pin]

    @classmethod
    def load(cls, path: Path) -> LockFile:
        """Read and validate a lock file; raises LockFileError naming the offending key."""
        try:
            data = read_regular(os.path.realpath(path), MAX_LOCK_BYTES)
        except FileNotFoundError as exc:
            raise LockFileError(f"lock file {path} not found") from exc
        except BundleError as exc:  # a FIFO, a device, a folder, over the bound: the reason names it
            raise LockFileError(f"lock file {path}: {exc}; it must be a TOML file of pins") from None
        try:
            raw = tomllib.loads(data.decode("utf-8"))
        except RecursionError:
            raise LockFileError(f"lock file {path} is nested too deeply to be a lock file") from None
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise LockFileError(f"lock file {path} is not readable TOML: {exc}") from exc
        unknown = sorted(set(raw) - {"libraries"})
        if unknown:
            raise LockFileError(f"lock file {path}: unknown top-level key(s) {', '.join(unknown)}")
        libraries = raw.get("libraries", {})
        if not isinstance(libraries, dict):
            raise LockFileError(f"lock file {path}: 'libraries' must be a table")
        pins: dict[tuple[str, str], Pin] = {}
        for lib, versions in libraries.items():
            if not LIBRARY_ID_RE.fullmatch(lib) or not isinstance(versions, dict):
                raise LockFileError(
                    f"lock file {path}: [libraries.{lib}] must be a table of a valid library id"
                )
            for version, value in versions.items():
                where = f"lock file {path}: libraries.{lib}.{version}"
                pins[(lib, version)] = _parse_pin(where, value)
        return cls(path, pins)


def _parse_pin(where: str, value: object) -> Pin:
    if isinstance(value, str):
        value = {"content_hash": value}
    if not isinstance(value, dict):
        raise LockFileError(f"{where}: expected a content hash string or a table")
    unknown = sorted(set(value) - {"content_hash", "manifest_sha256"})
    if unknown:
        raise LockFileError(f"{where}: unknown key(s) {', '.join(unknown)}")
    content = value.get("content_hash")
    manifest = value.get("manifest_sha256")
    if not isinstance(content, str) or not _HEX64.fullmatch(content):
        raise LockFileError(f"{where}: content_hash must be 64 lowercase hex digits")
    if manifest is not None and (not isinstance(manifest, str) or not _HEX64.fullmatch(manifest)):
        raise LockFileError(f"{where}: manifest_sha256 must be 64 lowercase hex digits")
    return Pin(content, manifest)


def find_lock(root: Path, explicit: Path | None) -> Path | None:
    """The lock file to use: the one given, else ``<root>/bundles.lock`` when there is anything of that
    name (a FIFO or a folder there is refused by ``LockFile.load``, never taken for "no lock file")."""
    if explicit is not None:
        return explicit
    candidate = root / LOCK_FILE_NAME
    return candidate if os.path.lexists(candidate) else None
