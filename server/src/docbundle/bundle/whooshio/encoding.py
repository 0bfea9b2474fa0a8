"""Encoding posting blocks: each term's W3 blocks and term info, the bytes whoosh's postings writer
writes, in this process or, with enough postings and one thread, half of them in a forked child."""

from __future__ import annotations

import contextlib
import logging
import operator
import os
import pickle
import signal
import struct
import tempfile
import threading
import zlib
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

import whoosh.codec.whoosh3 as _w3
from docbundle.common.process import exit_forked_child
from whoosh.system import pack_int
from whoosh.util.numeric import length_to_byte

__all__ = ["PARALLEL_MIN_POSTINGS"]

log = logging.getLogger(__name__)

#: One posting of a term, as the analysed writer keeps it: ``(docnum, weight, value, field length)``.
_Posting = tuple[int, float, bytes, int]
#: One term to encode: its field format's fixed value size, and its postings in document order.
_TermJob = tuple[int | None, list[_Posting]]
#: One encoded term: where its postings start in the encoded bytes, their length, and its W3 term info
#: without the extent (``W3TermInfo.to_bytes`` minus the offset and length, which depend on the file).
_Encoded = tuple[int, int, bytes]

_TERMINFO = _w3.W3TermInfo._struct
_SPILL_HEAD = struct.Struct("!qq")  # a forked encoder's result: bytes of postings, number of terms
_SPILL_TERM = struct.Struct(f"!qi{_TERMINFO.size}s")  # and per term: start, length, term info

#: Postings from which a segment's blocks are encoded in two processes (below it the whole encoding
#: takes under about 0.2 s, and a fork of a 300 MB indexer took 20 ms, plus copy-on-write faults).
PARALLEL_MIN_POSTINGS = 50_000
_TERM_COST = 8  # a term's encoding cost beyond its postings', in postings (fitted on large-en)
_OWN_SHARE = 0.45  # the share of the encoding this process keeps when it forks


class _LengthBytes(dict[int | None, int]):
    """``length_to_byte`` as a lookup (a dictionary read costs less than its Python call)."""

    def __missing__(self, length: int | None) -> int:
        byte = self[length] = length_to_byte(length)
        return int(byte)


def _encode_terms(
    jobs: Sequence[_TermJob], blocklimit: int, compression: int
) -> tuple[bytes, list[_Encoded]]:
    """The W3 posting blocks of consecutive terms, as whoosh's ``W3PostingsWriter`` writes them.

    Per block the same two pickles (protocol 2) and the same ``zlib.compress`` call as its
    ``_write_block``, on the same objects (pickle shares a repeated object, so identity matters too);
    the block and term statistics as its ``W3TermInfo.add_block`` accumulates them, in the same order
    (floating-point sums depend on it). ``tests/indexer/test_write.py`` compares the bytes with
    whoosh's own ``add_document``. whoosh inlines no posting list under the codec's ``inlinelimit`` of 1.
    """
    out = bytearray()
    encoded: list[_Encoded] = []
    dumps = pickle.dumps
    compress = zlib.compress
    l2b = _LengthBytes()
    magic = _w3.WHOOSH3_HEADER_MAGIC
    for fixedsize, postings in jobs:
        start = len(out)
        out += magic
        n = len(postings)
        if n == 1:  # half the terms of a corpus: the general loop below, unrolled for one posting
            docnum, weight0, value, length = postings[0]
            f32 = array("f", (weight0,))[0]
            if fixedsize is None or fixedsize < 0:
                one_values: Any = (value,) if value else ()
            elif fixedsize == 0:
                one_values = None
            else:
                one_values = b"".join((value,) if value else ())
            data = dumps(((docnum,), None if f32 == 1.0 else f32, one_values), 2)
            if compression:
                data = compress(data, compression)
            bweight0 = weight0 if weight0 > 0 else 0
            lbyte = l2b[length or None]
            info = dumps((1, docnum, bweight0, compression, lbyte, lbyte), 2)
            out += pack_int(-(len(info) + len(data)))
            out += info
            out += data
            packed = _TERMINFO.pack(False, 0 + f32, 1, lbyte, lbyte, max(0, bweight0), docnum, docnum)
            encoded.append((start, len(out) - start, packed))
            continue
        weight: float = 0
        df = 0
        minlength: int | None = None
        maxlength = 0
        maxweight: float = 0
        minid = -1
        for lo in range(0, n, blocklimit):
            ids, weights, values, all_lengths = zip(
                *(postings if n <= blocklimit else postings[lo : lo + blocklimit]), strict=True
            )
            stored = array("f", weights).tolist()  # what the block's float array gives back
            lengths = list(filter(None, all_lengths))
            bmin = min(lengths) if lengths else None
            bmax = max(lengths) if lengths else 0
            top = max(weights)
            bweight = top if top > 0 else 0
            # W3TermInfo.add_block
            weight += sum(stored)
            df += len(ids)
            minlength = bmin if minlength is None else min(minlength, bmin)  # type: ignore[type-var]
            maxlength = max(maxlength, bmax)
            maxweight = max(maxweight, bweight)
            if minid < 0:
                minid = ids[0]
            # W3PostingsWriter._write_block (_mini_ids, _mini_weights, _mini_values)
            first = stored[0]
            if stored.count(first) == len(stored):
                mini_weights: Any = None if first == 1.0 else first
            else:
                mini_weights = tuple(stored)
            vals = list(filter(None, values))
            if fixedsize is None or fixedsize < 0:
                mini_values: Any = tuple(vals)
            elif fixedsize == 0:
                mini_values = None
            else:
                mini_values = b"".join(vals)
            deltas = tuple(map(operator.sub, ids, (0, *ids[:-1])))
            data = dumps((deltas, mini_weights, mini_values), 2)
            if compression:
                data = compress(data, compression)
            info = dumps((len(ids), ids[-1], bweight, compression, l2b[bmin], l2b[bmax]), 2)
            size = len(info) + len(data)
            out += pack_int(-size if lo + blocklimit >= n else size)
            out += info
            out += data
        maxid = postings[-1][0]
        minbyte = 0 if minlength is None else l2b[minlength]
        packed = _TERMINFO.pack(False, weight, df, minbyte, l2b[maxlength], maxweight, minid, maxid)
        encoded.append((start, len(out) - start, packed))
    return bytes(out), encoded


def _single_threaded() -> bool:
    """True when this process runs one thread (forking a threaded process can deadlock its child)."""
    if threading.active_count() != 1:
        log.debug(
            "the segment is encoded in one process: threads %s", [t.name for t in threading.enumerate()]
        )
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1  # threads Python did not start count too
    except OSError:
        return True


#: What ``_encode_terms`` returns: a run of terms' posting bytes and each term's place in them.
_EncodedRun = tuple[bytes, list[_Encoded]]


def _encode_forked(
    jobs: Sequence[_TermJob], split: int, blocklimit: int, compression: int
) -> Iterator[_EncodedRun]:
    """``_encode_terms`` of ``jobs[:split]`` here and of ``jobs[split:]`` in a forked child, at once.

    The first run is yielded while the child still works, so the caller writes it meanwhile. The
    child inherits the postings (nothing is pickled across), writes its bytes and term infos to an
    unlinked temporary file and leaves with ``exit_forked_child`` (no atexit handler, no inherited buffer
    flushed twice). Called only when the process is single-threaded. A child that fails, or that is
    killed, costs only time: its half is then encoded here. A caller that stops early kills it.
    """
    first, second = jobs[:split], jobs[split:]
    with tempfile.TemporaryFile() as spill:
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                block, encoded = _encode_terms(second, blocklimit, compression)
                spill.write(_SPILL_HEAD.pack(len(block), len(encoded)))
                spill.write(block)
                spill.write(b"".join(_SPILL_TERM.pack(*e) for e in encoded))
                spill.flush()
                code = 0
            finally:
                exit_forked_child(code)
        status: int | None = None
        try:
            yield _encode_terms(first, blocklimit, compression)
            _, status = os.waitpid(pid, 0)
        finally:
            if status is None:  # this side failed, or its caller stopped: the child's work is moot
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        theirs: _EncodedRun | None = None
        if os.waitstatus_to_exitcode(status) == 0:
            spill.seek(0)
            raw = spill.read()
            if len(raw) >= _SPILL_HEAD.size:
                size, count = _SPILL_HEAD.unpack_from(raw)
                body = _SPILL_HEAD.size + size
                if len(raw) == body + count * _SPILL_TERM.size and count == len(second):
                    theirs = (raw[_SPILL_HEAD.size : body], list(_SPILL_TERM.iter_unpack(raw[body:])))
    if theirs is None:
        log.warning("the forked block encoder failed (wait status %d): encoding its half here", status)
        theirs = _encode_terms(second, blocklimit, compression)
    yield theirs


def _encode_all(jobs: Sequence[_TermJob], blocklimit: int, compression: int) -> Iterator[_EncodedRun]:
    """Every term's encoded blocks, in runs of consecutive terms: in two processes when there is enough
    to share and forking is safe, else in one."""
    total = sum(len(postings) for _, postings in jobs)
    if total < max(PARALLEL_MIN_POSTINGS, 1) or not hasattr(os, "fork") or not _single_threaded():
        yield _encode_terms(jobs, blocklimit, compression)
        return
    # The work grows with the postings (their values are pickled one by one), plus a little per term.
    # This process takes a little less than half: it writes its run while the child works, and it
    # writes the child's run after.
    half = (total + _TERM_COST * len(jobs)) * _OWN_SHARE
    done = 0
    split = 0
    for split, (_, postings) in enumerate(jobs):  # noqa: B007 (split is used after the loop)
        done += len(postings) + _TERM_COST
        if done >= half:
            break
    if split + 1 >= len(jobs):  # one term holds most of the work: nothing to share
        yield _encode_terms(jobs, blocklimit, compression)
        return
    yield from _encode_forked(jobs, split + 1, blocklimit, compression)
