"""``scan_tar_headers``: the raw walk of a release archive's headers before ``tarfile`` reads them.

It must agree with ``tarfile`` on every archive ``tarfile`` writes (long and non-ASCII names, PAX
sizes), and refuse the header shapes that make ``tarfile`` hold unbounded memory (issue 19, item 5).
"""

from __future__ import annotations

import io
import tarfile

import pytest
from docbundle.bundle.errors import BundleFormatError
from docbundle.bundle.release import MAX_EXTENDED_HEADER_BYTES, scan_tar_headers
from hypothesis import given, settings
from hypothesis import strategies as st

_names = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\0/"), min_size=1, max_size=150
)


def _tar(entries: list[tuple[str, bytes | None]], fmt: int, **kwargs: object) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt, **kwargs) as tar:  # type: ignore[call-overload]
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
            else:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


@settings(max_examples=60, deadline=None)
@given(
    entries=st.lists(
        st.tuples(st.lists(_names, min_size=1, max_size=3), st.one_of(st.none(), st.binary(max_size=1500))),
        max_size=8,
    ),
    fmt=st.sampled_from([tarfile.PAX_FORMAT, tarfile.GNU_FORMAT]),
)
def test_it_counts_what_tarfile_reads_in_archives_tarfile_writes(
    entries: list[tuple[list[str], bytes | None]], fmt: int
) -> None:
    """Long names (PAX ``x`` or GNU ``L``), non-ASCII names and data of every size stay in step."""
    flat = [("/".join(parts), data) for parts, data in entries]
    raw = _tar(flat, fmt)
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        expected = len(tar.getmembers())
    assert scan_tar_headers(io.BytesIO(raw), max_members=100) == expected


def _header(kind: bytes, size: int, name: str = "x") -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(tarfile.USTAR_FORMAT)


def _pax(records: dict[str, str]) -> bytes:
    body = b""
    for key, value in records.items():
        text = f" {key}={value}\n".encode()
        n = len(text) + 1
        while n != len(text) + len(str(n)):  # the length counts its own digits
            n = len(text) + len(str(n))
        body += str(n).encode() + text
    return _header(tarfile.XHDTYPE, len(body)) + body + bytes(-len(body) % 512)


def _file(name: str, data: bytes) -> bytes:
    return _header(tarfile.REGTYPE, len(data), name) + data + bytes(-len(data) % 512)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_header(tarfile.XHDTYPE, MAX_EXTENDED_HEADER_BYTES + 1), "PAX header, over the 65536-byte limit"),
        (_header(tarfile.GNUTYPE_LONGNAME, 10**9), "1000000000-byte GNU long-name header"),
        (_header(tarfile.GNUTYPE_LONGLINK, 10**9), "GNU long-link header, over"),
        (_pax({"comment": "a"}) + _pax({"comment": "b"}) + _file("f", b"x"), "chains two PAX headers"),
        (_header(tarfile.XGLTYPE, 10), "global PAX header"),
        (_header(tarfile.GNUTYPE_SPARSE, 10), "sparse file"),
        (_pax({"GNU.sparse.major": "1"}) + _file("f", b"x"), "sparse file"),
        (_pax({"size": "nope"}) + _file("f", b"x"), "malformed size"),
        (_file("f", b"abc")[:-100], "truncated"),
        (b"\x01" * 512, "bad checksum"),
        (_file("a", b"") * 5, "more than 3 entries"),
    ],
)
def test_it_refuses_headers_tarfile_would_hold_in_memory(raw: bytes, message: str) -> None:
    with pytest.raises(BundleFormatError, match=message):
        scan_tar_headers(io.BytesIO(raw), max_members=3)


def test_a_pax_size_moves_the_next_header_as_it_does_for_tarfile() -> None:
    """A PAX ``size`` overrides the header's: a header hidden in what the ustar size calls data is seen."""
    hidden = _header(tarfile.XHDTYPE, 10**8)
    raw = _pax({"size": "0"}) + _header(tarfile.REGTYPE, 512, "f") + hidden
    with pytest.raises(BundleFormatError, match="100000000-byte PAX header"):
        scan_tar_headers(io.BytesIO(raw), max_members=10)
