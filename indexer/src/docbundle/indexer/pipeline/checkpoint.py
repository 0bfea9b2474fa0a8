"""Embedded rows kept across an interrupted build: the embedding checkpoint of one library version.

Embedding a large site takes minutes to hours on a laptop, and an interrupt (Ctrl-C, SIGTERM, a crash,
a failure later in the build) used to throw every embedded row away. A build that embeds now writes the
rows it has embedded so far into a checkpoint, every ``CHECKPOINT_SECONDS`` and when it is interrupted;
the next build of that version takes every row whose passage it still has to embed from there, and
embeds only the rest. The checkpoint is removed once the bundle holding those rows is published (that
bundle is then the cache, ``semantic.make_vectors``).

Where: ``<bundles>/.embed-checkpoints/<library>/<version>.bin``, beside the crawl cache and outside the
version folder, so a first build interrupted before anything was published leaves no version folder
for readers to list. It is written and read under the version lock.

Layout: a complete vector file (``docbundle.bundle.vectors``: header naming the embedder, int8 rows and
their scales), then one 32-byte key per row (the raw sha256 ``embed.text_key`` of the embedder identity
and the passage text), then a trailer: ``CHECKPOINT_MAGIC``, the vector file's size (u64) and the sha256
of everything before the trailer. A row is found by its key, so the rows' order and the bundle's chunk
numbers play no part, and a row is only ever given to the passage it was embedded from.

Trust: the file is read as untrusted (a regular file, no link, bounded); its trailer's sha256, the vector
file's header against the sizes, the embedder key, the row type, the dimensions and every row's scale
(``vectors.check_values``, as for ``vectors.bin``) are checked. A checkpoint that fails any check is
ignored with a log line, and the build embeds those rows again: never trusted blindly, never fatal.
Writing is atomic (``layout.write_atomically``): a crash leaves the old checkpoint or the new one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import time
from pathlib import Path
from typing import TYPE_CHECKING

from docbundle.bundle.errors import BundleError, BundleFormatError
from docbundle.bundle.layout import write_atomically
from docbundle.bundle.untrusted import open_regular
from docbundle.bundle.vectors import HEADER_SIZE, Quantized, check_values, encode_quantized, parse_header

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)

#: The checkpoints' folder inside a bundles folder (beside the crawl cache, ``cache.CACHE_DIR``).
CHECKPOINT_DIR = ".embed-checkpoints"
CHECKPOINT_MAGIC = b"DBEMBCK1"
_TRAILER = struct.Struct("<8sQ32s")
KEY_BYTES = 32
#: How often rows are written while embedding goes on: at most this many seconds of embedding (about
#: 15 to 60 passages on two cores) are lost to a SIGKILL or a power cut; a Ctrl-C or SIGTERM loses none
#: (the rows are written on the way out). Rewriting the whole file each time costs milliseconds: large-en's
#: 5,544 rows are 2.3 MB.
CHECKPOINT_SECONDS = 10.0
#: ``DOCBUNDLE_EMBED_CHECKPOINT_SECONDS`` overrides it (0: after every batch; the resume test uses it).
ENV_CHECKPOINT_SECONDS = "DOCBUNDLE_EMBED_CHECKPOINT_SECONDS"


def checkpoint_path(bundles: Path, library: str, version: str) -> Path:
    """Where the checkpoint of ``library``/``version`` lives in the bundles folder ``bundles``."""
    return bundles / CHECKPOINT_DIR / library / f"{version}.bin"


def _interval() -> float:
    raw = os.environ.get(ENV_CHECKPOINT_SECONDS, "")
    try:
        return max(0.0, float(raw)) if raw.strip() else CHECKPOINT_SECONDS
    except ValueError:
        log.warning("ignoring %s=%r: not a number of seconds", ENV_CHECKPOINT_SECONDS, raw)
        return CHECKPOINT_SECONDS


class Checkpoint:
    """The rows of one library version embedded so far, by passage key; ``save`` writes them atomically."""

    def __init__(self, path: Path, embedder_key: str, dims: int) -> None:
        self.path = path
        self.key = embedder_key
        self.dims = dims
        self.rows: dict[bytes, tuple[bytes, bytes]] = {}  # key -> (int8 values, float32 scale), as stored
        self.loaded = 0
        self._unsaved = 0
        self._saved_at = time.monotonic()
        self._interval = _interval()

    @classmethod
    def open(cls, path: Path, embedder_key: str, dims: int) -> Checkpoint:
        """The checkpoint at ``path`` with the rows it holds (none when there is no file, or when the file
        fails a check: logged, then ignored)."""
        ck = cls(path, embedder_key, dims)
        try:
            ck._read()
        except FileNotFoundError:
            pass
        except (BundleError, OSError, ValueError) as exc:
            ck.rows.clear()
            log.warning("ignoring the embedding checkpoint %s: %s; its rows are embedded again", path, exc)
        ck.loaded = len(ck.rows)
        return ck

    def _read(self) -> None:
        fd = open_regular(self.path)
        try:
            size = os.fstat(fd).st_size
            if size < HEADER_SIZE + _TRAILER.size:
                raise BundleFormatError(f"it is truncated ({size} bytes)")
            magic, vsize, digest = _TRAILER.unpack(os.pread(fd, _TRAILER.size, size - _TRAILER.size))
            if magic != CHECKPOINT_MAGIC:
                raise BundleFormatError("it does not end with the checkpoint magic")
            header = parse_header(os.pread(fd, HEADER_SIZE, 0), vsize)
            if vsize + KEY_BYTES * header.rows + _TRAILER.size != size:
                raise BundleFormatError(f"it holds {size} bytes, not what its {header.rows} rows need")
            if header.embedder_key != self.key:
                raise BundleFormatError(f"its rows were made by embedder {header.embedder_key[:12]}")
            if header.dtype != "int8" or header.dims != self.dims:
                raise BundleFormatError(
                    f"its rows are {header.dims} {header.dtype} values, not {self.dims} int8"
                )
            data = os.pread(fd, size - _TRAILER.size, 0)
            if len(data) != size - _TRAILER.size or hashlib.sha256(data).digest() != digest:
                raise BundleFormatError("its sha256 does not match (a torn or altered file)")
            check_values(fd, header)  # every row's scale finite and in range, as vectors.bin's
        finally:
            os.close(fd)
        n, dims = header.rows, header.dims
        scales_at = HEADER_SIZE + n * dims
        keys_at = scales_at + 4 * n
        for r in range(n):
            k = data[keys_at + KEY_BYTES * r : keys_at + KEY_BYTES * (r + 1)]
            row = HEADER_SIZE + r * dims
            self.rows[k] = (data[row : row + dims], data[scales_at + 4 * r : scales_at + 4 * r + 4])

    def get(self, key: bytes) -> tuple[bytes, bytes] | None:
        """The stored (int8 values, float32 scale) of the passage ``key``, or None."""
        return self.rows.get(key)

    def add(self, keys: list[bytes], values: npt.NDArray[np.int8], scales: npt.NDArray[np.float32]) -> None:
        """Record freshly embedded rows (as ``vectors.quantize`` stores them) under their passage keys,
        and write the checkpoint when ``CHECKPOINT_SECONDS`` have passed since the last write."""
        for i, k in enumerate(keys):
            self.rows[k] = (values[i].astype("<i1").tobytes(), scales[i : i + 1].astype("<f4").tobytes())
        self._unsaved += len(keys)
        if time.monotonic() - self._saved_at >= self._interval:
            self.save()

    def save(self) -> None:
        """Write every row atomically (nothing when no row was added since the last write)."""
        if not self._unsaved:
            return
        import numpy as np

        keys = sorted(self.rows)  # a function of the rows alone
        n = len(keys)
        values = np.frombuffer(b"".join(self.rows[k][0] for k in keys), dtype="<i1").reshape(n, self.dims)
        scales = np.frombuffer(b"".join(self.rows[k][1] for k in keys), dtype="<f4")
        body = encode_quantized(Quantized(values, scales), self.key) + b"".join(keys)
        trailer = _TRAILER.pack(CHECKPOINT_MAGIC, len(body) - KEY_BYTES * n, hashlib.sha256(body).digest())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, body + trailer)
        self._unsaved = 0
        self._saved_at = time.monotonic()


def remove_checkpoint(path: Path) -> None:
    """Delete the checkpoint at ``path`` (its rows are in a published bundle now), and its folders when
    they are left empty."""
    path.unlink(missing_ok=True)
    for folder in (path.parent, path.parent.parent):
        try:
            folder.rmdir()
        except OSError:
            break
