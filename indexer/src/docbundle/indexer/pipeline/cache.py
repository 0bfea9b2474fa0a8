"""On-disk crawl cache: the last good body of each URL plus the validators needed to revalidate it.

The cache is only a bandwidth optimisation. It lets the crawler send ``If-None-Match`` /
``If-Modified-Since`` and reuse the stored body when the server answers ``304 Not Modified``.
Nothing else depends on it: deleting the whole directory (or any file in it) at any time is always
safe, the next crawl simply downloads everything again.

Layout: one msgpack file per URL at ``<root>/<key[:2]>/<key>.msgpack`` where ``key`` is the hex
sha256 of the URL. Meta and body live in the same file so that a single ``os.replace`` publishes
both together; a reader can never pair the body of one version with the validators of another.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from pathlib import Path

import msgspec

__all__ = ["CACHE_DIR", "CacheEntry", "CrawlCache"]

#: The crawl cache's folder inside a bundles folder, unless one is given.
CACHE_DIR = ".crawl-cache"

# Bumped whenever the record layout changes; entries of another version are treated as absent.
_FORMAT = 1


class CacheEntry(msgspec.Struct, frozen=True):
    """One cached page: validators, metadata and the body bytes exactly as received."""

    url: str
    sha256: str
    body: bytes
    etag: str | None = None
    last_modified: str | None = None
    content_type: str | None = None
    fetched_at: float = 0.0  # unix time of the download that produced the body


class _Record(msgspec.Struct, frozen=True):
    format: int
    entry: CacheEntry


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_Record)


class CrawlCache:
    """A directory of cached pages keyed by sha256(url); reads never raise, writes are atomic."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        # Shard directories known to exist: saves a mkdir syscall per store (the crawler stores
        # from worker threads; a lost race only costs a redundant mkdir).
        self._shards: set[Path] = set()

    def __repr__(self) -> str:
        return f"CrawlCache({str(self.root)!r})"

    def path_for(self, url: str) -> Path:
        """Return the file that holds (or would hold) the entry for ``url``."""
        key = hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()
        return self.root / key[:2] / f"{key}.msgpack"

    def lookup(self, url: str) -> CacheEntry | None:
        """Return the entry for ``url``, or None when it is missing, unreadable or corrupt."""
        try:
            raw = self.path_for(url).read_bytes()
            record = _decoder.decode(raw)
        except (OSError, msgspec.DecodeError):
            return None
        entry = record.entry
        if record.format != _FORMAT or entry.url != url:
            return None
        # A torn or bit-flipped body must not be served as if the server had confirmed it.
        if hashlib.sha256(entry.body).hexdigest() != entry.sha256:
            return None
        return entry

    def store(
        self,
        url: str,
        body: bytes,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        content_type: str | None = None,
    ) -> CacheEntry:
        """Atomically write the entry for ``url`` (replacing any previous one) and return it."""
        entry = CacheEntry(
            url=url,
            sha256=hashlib.sha256(body).hexdigest(),
            body=bytes(body),
            etag=etag,
            last_modified=last_modified,
            content_type=content_type,
            fetched_at=time.time(),
        )
        target = self.path_for(url)
        if target.parent not in self._shards:
            target.parent.mkdir(parents=True, exist_ok=True)
            self._shards.add(target.parent)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".msgpack")
        try:
            # No fsync: after a crash a truncated file fails to decode or fails the sha256 check and
            # is treated as absent, which costs one re-download; an fsync per page would not.
            with os.fdopen(fd, "wb") as fh:
                fh.write(_encoder.encode(_Record(format=_FORMAT, entry=entry)))
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return entry

    def discard(self, url: str) -> None:
        """Remove the entry for ``url`` if there is one."""
        with contextlib.suppress(OSError):
            self.path_for(url).unlink()
