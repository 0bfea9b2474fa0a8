"""The one way to read a file of the bundles folder and to decode untrusted bytes (issue 31).

Each case is a file someone with write access to the bundles folder can plant: a FIFO (an ordinary
``open`` blocks for ever), a symbolic link to ``/dev/zero`` (``stat`` says 0 bytes, ``read`` never ends),
a sparse file far over its bound, a folder, and JSON/msgpack nested 2,000 deep.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import msgspec
import pytest
from docbundle.bundle.errors import BundleFormatError
from docbundle.bundle.untrusted import UnsafeFileError, decode, read_regular
from hypothesis import given
from hypothesis import strategies as st


def _read_in_thread(path: Path, limit: int) -> BaseException | bytes:
    """Read ``path`` in a daemon thread and give up after 10 s, so a regression fails instead of hanging."""
    out: list[BaseException | bytes] = []

    def run() -> None:
        try:
            out.append(read_regular(path, limit))
        except BaseException as exc:
            out.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(10)
    assert out, f"reading {path} did not return within 10 s"
    return out[0]


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "catalog.json"
    os.mkfifo(fifo)
    got = _read_in_thread(fifo, 1024)
    assert isinstance(got, UnsafeFileError)
    assert str(fifo) in str(got) and "FIFO" in str(got)


def test_a_symlink_to_dev_zero_is_refused_before_a_byte_is_read(tmp_path: Path) -> None:
    link = tmp_path / "CURRENT"
    link.symlink_to("/dev/zero")
    got = _read_in_thread(link, 1024)
    assert isinstance(got, UnsafeFileError)
    assert "symbolic link" in str(got) and str(link) in str(got)


def test_a_symlink_to_a_regular_file_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_bytes(b"{}")
    (tmp_path / "manifest.json").symlink_to(tmp_path / "real.json")
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        read_regular(tmp_path / "manifest.json", 1024)


def test_a_sparse_file_over_its_bound_is_refused_from_its_size(tmp_path: Path) -> None:
    big = tmp_path / "routing.idx"
    with open(big, "wb") as fh:
        fh.truncate(1_500_000_000)  # 1.5 GB, sparse: nothing is written
    with pytest.raises(UnsafeFileError, match="1500000000 bytes, over the 1048576-byte limit"):
        read_regular(big, 1024 * 1024)


def test_a_folder_and_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "catalog.json").mkdir()
    with pytest.raises(UnsafeFileError, match="a folder, not a regular file"):
        read_regular(tmp_path / "catalog.json", 1024)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "nothing.json", 1024)


@given(st.binary(max_size=3000), st.integers(min_value=0, max_value=4000))
def test_a_regular_file_is_read_whole_or_refused_by_its_bound(data: bytes, limit: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f"
        path.write_bytes(data)
        if len(data) <= limit:
            assert read_regular(path, limit) == data
        else:
            with pytest.raises(UnsafeFileError, match="over the"):
                read_regular(path, limit)


class _Shape(msgspec.Struct):
    a: list[object]


@pytest.mark.parametrize(
    ("decoder", "data"),
    [
        (msgspec.json.Decoder(_Shape).decode, b'{"a":' + b"[" * 2000 + b"]" * 2000 + b"}"),
        (msgspec.json.Decoder().decode, b"[" * 2000 + b"]" * 2000),
        (msgspec.msgpack.Decoder().decode, b"\x91" * 5000 + b"\xc0"),
    ],
    ids=["json-struct", "json-any", "msgpack"],
)
def test_deep_nesting_becomes_a_format_error_naming_the_file(decoder, data: bytes) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BundleFormatError, match="timings.json is nested too deeply"):
        decode(decoder, data, "timings.json")


def test_malformed_and_misshapen_input_becomes_a_format_error() -> None:
    with pytest.raises(BundleFormatError, match="catalog.json is malformed"):
        decode(msgspec.json.Decoder(_Shape).decode, b'{"a": 3}', "catalog.json")
    with pytest.raises(BundleFormatError, match="catalog.json is malformed"):
        decode(msgspec.json.Decoder(_Shape).decode, b"\xff\xfe", "catalog.json")
    assert decode(msgspec.json.Decoder(_Shape).decode, b'{"a": [1]}', "x").a == [1]
