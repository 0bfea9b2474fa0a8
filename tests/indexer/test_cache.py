"""The on-disk crawl cache: round trips, corrupt entries read as absent, atomic replacement."""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path

import msgspec
import pytest
from docbundle.indexer.pipeline.cache import CrawlCache
from hypothesis import given, settings
from hypothesis import strategies as st

URL = "https://docs.example.org/guide/intro.md"


def test_a_stored_entry_is_found_with_its_validators(tmp_path: Path) -> None:
    cache = CrawlCache(tmp_path)
    stored = cache.store(
        URL,
        b"# Intro\n",
        etag='W/"abc"',
        last_modified="Sat, 01 Nov 2025 10:00:00 GMT",
        content_type="text/markdown",
    )
    entry = cache.lookup(URL)
    assert entry == stored
    assert entry.body == b"# Intro\n" and entry.etag == 'W/"abc"'
    assert entry.last_modified == "Sat, 01 Nov 2025 10:00:00 GMT" and entry.content_type == "text/markdown"
    assert entry.sha256 == hashlib.sha256(b"# Intro\n").hexdigest() and entry.fetched_at > 0
    assert cache.lookup(URL + "?other") is None


@settings(max_examples=40, deadline=None)
@given(url=st.text(min_size=1, max_size=200), body=st.binary(max_size=4096))
def test_any_url_and_body_round_trip(url: str, body: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache = CrawlCache(Path(tmp))
        cache.store(url, body, etag='"e"')
        entry = cache.lookup(url)
        assert entry is not None and entry.url == url and entry.body == body


def test_a_missing_root_or_entry_is_absent(tmp_path: Path) -> None:
    assert CrawlCache(tmp_path / "never-created").lookup(URL) is None
    assert CrawlCache(tmp_path).lookup(URL) is None


def test_entries_live_under_the_root_keyed_by_the_url_hash(tmp_path: Path) -> None:
    cache = CrawlCache(tmp_path)
    path = cache.path_for(URL)
    key = hashlib.sha256(URL.encode()).hexdigest()
    assert path == tmp_path / key[:2] / f"{key}.msgpack"
    cache.store(URL, b"x", etag='"1"')
    assert path.is_file()
    assert cache.path_for(URL + "/") != path


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncated", "empty", "directory", "body-flipped", "other-url", "future-format"],
)
def test_a_corrupt_entry_is_treated_as_absent(tmp_path: Path, damage: str) -> None:
    cache = CrawlCache(tmp_path)
    cache.store(URL, b"# Intro\n\nSome text.\n", etag='"1"')
    path = cache.path_for(URL)
    raw = path.read_bytes()
    record = msgspec.msgpack.decode(raw)
    if damage == "garbage":
        path.write_bytes(b"\x00\xffnot msgpack at all")
    elif damage == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "directory":
        path.unlink()
        path.mkdir()
    elif damage == "body-flipped":
        record["entry"]["body"] = b"# Intro\n\nSome texT.\n"
        path.write_bytes(msgspec.msgpack.encode(record))
    elif damage == "other-url":
        record["entry"]["url"] = URL + "#collision"
        path.write_bytes(msgspec.msgpack.encode(record))
    elif damage == "future-format":
        record["format"] = 99
        path.write_bytes(msgspec.msgpack.encode(record))
    assert cache.lookup(URL) is None
    if damage != "directory":
        # A damaged entry is simply overwritten by the next good download.
        cache.store(URL, b"fresh", etag='"2"')
        assert cache.lookup(URL) is not None


def test_store_replaces_the_entry_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    cache = CrawlCache(tmp_path)
    cache.store(URL, b"version 1", etag='"1"')
    cache.store(URL, b"version 2", etag='"2"')
    entry = cache.lookup(URL)
    assert entry is not None and entry.body == b"version 2" and entry.etag == '"2"'
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [cache.path_for(URL).name]


def test_a_failed_write_keeps_the_previous_entry_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = CrawlCache(tmp_path)
    cache.store(URL, b"good", etag='"1"')

    def full_disk(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        cache.store(URL, b"never published", etag='"2"')
    monkeypatch.undo()
    entry = cache.lookup(URL)
    assert entry is not None and entry.body == b"good"
    assert len([p for p in tmp_path.rglob("*") if p.is_file()]) == 1


def test_readers_never_see_a_half_written_entry(tmp_path: Path) -> None:
    # Large bodies make a torn (non-atomic) write likely to be observed if it could happen.
    cache = CrawlCache(tmp_path)
    bodies = [bytes([65 + i]) * 512 * 1024 for i in range(4)]
    cache.store(URL, bodies[0], etag='"0"')
    stop = threading.Event()
    seen: list[bytes | None] = []

    def read() -> None:
        while not stop.is_set():
            entry = cache.lookup(URL)
            seen.append(entry.body if entry is not None else None)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for round_ in range(20):
            cache.store(URL, bodies[round_ % len(bodies)], etag=f'"{round_}"')
    finally:
        stop.set()
        reader.join(10)
    assert seen, "the reader never ran"
    assert all(body in bodies for body in seen)


def test_an_unusable_root_reads_as_empty_and_fails_loudly_on_write(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = CrawlCache(blocker)
    assert cache.lookup(URL) is None
    with pytest.raises(OSError):
        cache.store(URL, b"x", etag='"1"')


def test_discard_removes_an_entry_and_ignores_a_missing_one(tmp_path: Path) -> None:
    cache = CrawlCache(tmp_path)
    cache.store(URL, b"x", etag='"1"')
    cache.discard(URL)
    assert cache.lookup(URL) is None
    cache.discard(URL)
