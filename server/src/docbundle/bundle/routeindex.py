"""The route index: every served bundle's routing record, inverted, in one file.

``<bundles-dir>/routing.idx`` maps each term (a 64-bit hash of it: blake2b, 8 bytes) to the libraries
whose routing record (``routing``) holds it, with the term's document frequency there. It is keyed by
the build each entry was made from (library id, version, build id, and the sha256 of the manifest that
listed its record): whoever reads it compares those with the builds ``CURRENT`` names now and uses it
only when they agree (``stale``); a missing, unreadable or stale file is rebuilt (``build_index``),
reusing the entries whose build and manifest did not change. It is written atomically (temporary file,
fsync, rename), by the indexer's ``build``, by ``docbundle install``/``pull``, and by a server.

Anyone who can write the bundles folder can write this file, and matching build ids prove nothing about
the postings (moved from one library to another, they hide a library silently). So a server routes
only by entries it made itself from records checked against manifests it verified (``Served``; the
server's ``routing`` module): it takes from the file only what it cannot check cheaply, the derived
entries of bundles built before records existed, and those only without a lock file.

The file is read through ``untrusted`` (a FIFO, a device or a link refused without blocking, at most
``MAX_INDEX_BYTES`` read) and decoded by it (nesting is a format error), so a bad file is rebuilt.

Layout: one msgpack map (``_IndexFile``): ``format`` (2; 1 had no manifest sha256 and is rebuilt);
``libraries`` (one ``IndexedLibrary`` per bundle: ids, build, sections, vocabulary, cutoff, whether its
record was derived from the index, the sha256 of its manifest);
``hashes`` (sorted unique term hashes, u64 little-endian), ``offsets`` (u32, one more than hashes:
term ``i``'s postings are ``offsets[i]:offsets[i+1]``), ``libs`` and ``dfs`` (u32 each: a posting's
library number and document frequency). Loading is four ``array.frombytes``; looking a term up is one
binary search.

Ranking (``score``) is CORI (Callan, Lu and Croft 1995), the classic rule for choosing collections:
for each query term a library holding it gets ``T * I`` with ``T = df / (df + 50 + 150 * v / avg_v)``
(``v``: the library's vocabulary, so a big library does not win on size alone) and
``I = log((C + 0.5) / cf) / log(C + 1)`` (``C`` libraries, ``cf`` of them holding the term: a term every
library holds routes nowhere). A query word's terms (an identifier's parts, a CJK run's bigrams) share
the word's weight.

Bounds: a file over ``MAX_INDEX_BYTES`` is refused (rebuilt); arrays whose lengths disagree, unsorted
hashes or postings naming a library that is not listed are refused.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import logging
import math
import operator
import sys
from array import array
from bisect import bisect_left
from collections import defaultdict, deque
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import msgspec

from .errors import BundleError, BundleFormatError, BundleIntegrityError
from .layout import current_bundle, write_atomically
from .manifest import MANIFEST_NAME, MAX_MANIFEST_BYTES, Manifest, decode_manifest
from .routing import RoutingRecord, decode_versioned, derive_record, read_record
from .untrusted import decode, read_regular

log = logging.getLogger(__name__)

ROUTING_INDEX = "routing.idx"
INDEX_FORMAT = 2
# Real catalogues make tens of MB (the routing benchmark's 10,005 libraries: 20.7 MB); only thousands of
# libraries at the 32,768-term cap come near it. A bigger file is refused from its size, unread.
MAX_INDEX_BYTES = 1024 * 1024 * 1024
# CORI's constants (df + 50 + 150 * v / avg_v), as published.
_CORI_DF = 50.0
_CORI_V = 150.0


class IndexedLibrary(msgspec.Struct, frozen=True, array_like=True):
    """One bundle in the route index: what it was made from, and its record's counts."""

    library_id: str
    version: str
    build_id: str
    chunks: int
    vocabulary: int
    cutoff: int
    derived: bool  # the bundle had no record: it was derived from its search index
    # The sha256 of the manifest that listed the record (or, derived, of the bundle's manifest): an entry
    # is reused only for the very manifest it was made from. Empty in entries made before format 2.
    manifest_sha256: str = ""

    @property
    def key(self) -> tuple[str, str]:
        """(library id, version)."""
        return (self.library_id, self.version)


class _IndexFile(msgspec.Struct, frozen=True, kw_only=True):
    format: int
    libraries: list[IndexedLibrary]
    hashes: bytes
    offsets: bytes
    libs: bytes
    dfs: bytes


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_IndexFile)


def term_hash(term: str) -> int:
    """The 64-bit hash a term is indexed under."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")


def _u(code: str, data: bytes = b"") -> array[int]:
    a: array[int] = array(code)
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def _le(a: array[int]) -> bytes:
    if sys.byteorder != "little":
        a = array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


def _each(calls: Iterable[object]) -> None:
    """Run an iterator of calls to the end (``map`` of an append, at C speed: no Python loop)."""
    deque(calls, maxlen=0)


# One library's postings, hashed: term hashes (sorted) and their document frequencies.
Hashed = tuple["array[int]", "array[int]"]


def hash_record(record: RoutingRecord, known: dict[str, int] | None = None) -> Hashed:
    """A record's terms as sorted hashes with their frequencies. ``known``: the hashes of terms met
    before (filled as it goes), so a term many libraries hold is hashed once per index build."""
    memo: dict[str, int] = {} if known is None else known
    new = set(record.terms).difference(memo)
    memo.update(zip(new, map(term_hash, new), strict=True))
    hashes = list(map(memo.__getitem__, record.terms))
    order = sorted(range(len(hashes)), key=hashes.__getitem__)
    return (
        _u("Q") + array("Q", map(hashes.__getitem__, order)),
        _u("I") + array("I", map(record.dfs.__getitem__, order)),
    )


@dataclass(frozen=True)
class Candidate:
    """A library the route index proposes, with its score."""

    number: int  # the library's number in the index
    library: IndexedLibrary
    score: float
    matched: int  # query words it holds


class RouteIndex:
    """The route index in memory: look terms up, score libraries, rebuild with changed entries."""

    def __init__(
        self,
        libraries: list[IndexedLibrary],
        hashes: array[int],
        offsets: array[int],
        libs: array[int],
        dfs: array[int],
    ) -> None:
        self.libraries = libraries
        self.hashes, self.offsets, self.libs, self.dfs = hashes, offsets, libs, dfs
        self._where = {lib.key: i for i, lib in enumerate(libraries)}
        avg = sum(max(lib.vocabulary, 1) for lib in libraries) / max(len(libraries), 1)
        # CORI's damping of each library's document frequencies: 50 + 150 * vocabulary / mean vocabulary.
        self._damp = [_CORI_DF + _CORI_V * max(lib.vocabulary, 1) / avg for lib in libraries]

    # -- building ------------------------------------------------------------------------------------

    @classmethod
    def from_hashed(cls, entries: Sequence[tuple[IndexedLibrary, Hashed]]) -> RouteIndex:
        """Invert per-library hashed records into one index."""
        # One int per posting, library number above the frequency, appended to its term's list; the
        # lists are then split into the two arrays by map (no Python loop per posting there).
        postings: defaultdict[int, list[int]] = defaultdict(list)
        for number, (_, (hashes, dfs)) in enumerate(entries):
            _each(map(list.append, map(postings.__getitem__, hashes), map((number << 32).__or__, dfs)))
        order = sorted(postings)
        offsets = _u("I") + array(
            "I", itertools.accumulate(map(len, map(postings.__getitem__, order)), initial=0)
        )
        packed = list(itertools.chain.from_iterable(map(postings.__getitem__, order)))
        libs = _u("I") + array("I", map((32).__rrshift__, packed))
        dfs_out = _u("I") + array("I", map(0xFFFFFFFF.__and__, packed))
        return cls([lib for lib, _ in entries], _u("Q") + array("Q", order), offsets, libs, dfs_out)

    def split(self) -> dict[tuple[str, str], tuple[IndexedLibrary, Hashed]]:
        """Every library's entry and postings (one pass over the index)."""
        hashes: list[list[int]] = [[] for _ in self.libraries]
        dfs: list[list[int]] = [[] for _ in self.libraries]
        # Each posting's term hash, repeated by map over the offsets rather than a loop per term.
        counts = map(operator.sub, itertools.islice(self.offsets, 1, None), self.offsets)
        terms = itertools.chain.from_iterable(map(itertools.repeat, self.hashes, counts))
        _each(map(list.append, map(hashes.__getitem__, self.libs), terms))
        _each(map(list.append, map(dfs.__getitem__, self.libs), self.dfs))
        return {
            lib.key: (lib, (_u("Q") + array("Q", hashes[n]), _u("I") + array("I", dfs[n])))
            for n, lib in enumerate(self.libraries)
        }

    # -- reading and writing ---------------------------------------------------------------------------

    def encode(self) -> bytes:
        """The bytes of ``routing.idx``."""
        return _encoder.encode(
            _IndexFile(
                format=INDEX_FORMAT,
                libraries=self.libraries,
                hashes=_le(self.hashes),
                offsets=_le(self.offsets),
                libs=_le(self.libs),
                dfs=_le(self.dfs),
            )
        )

    @classmethod
    def decode(cls, data: bytes) -> RouteIndex:
        """Decode and check the bytes of ``routing.idx``; ``BundleFormatError`` when they are wrong."""
        f = decode_versioned(data, _decoder, ROUTING_INDEX, MAX_INDEX_BYTES, INDEX_FORMAT)
        if len(f.hashes) % 8 or len(f.offsets) % 4 or len(f.libs) % 4 or len(f.dfs) % 4:
            raise BundleFormatError(f"{ROUTING_INDEX}: an array of partial items")
        hashes, offsets, libs, dfs = _u("Q", f.hashes), _u("I", f.offsets), _u("I", f.libs), _u("I", f.dfs)
        if (
            len(offsets) != len(hashes) + 1
            or offsets[0] != 0
            or offsets[-1] != len(libs)
            or len(libs) != len(dfs)
        ):
            raise BundleFormatError(f"{ROUTING_INDEX}: its arrays disagree in length")
        if any(a > b for a, b in itertools.pairwise(offsets)) or any(
            a >= b for a, b in itertools.pairwise(hashes)
        ):
            raise BundleFormatError(f"{ROUTING_INDEX}: offsets or hashes out of order")
        if libs and max(libs) >= len(f.libraries):
            raise BundleFormatError(f"{ROUTING_INDEX}: a posting names a library it does not list")
        return cls(f.libraries, hashes, offsets, libs, dfs)

    # -- routing --------------------------------------------------------------------------------------

    def builds(self) -> dict[tuple[str, str], str]:
        """(library id, version) -> the build id each entry was made from."""
        return {lib.key: lib.build_id for lib in self.libraries}

    def has(self, key: tuple[str, str]) -> bool:
        """Whether the index describes this (library id, version)."""
        return key in self._where

    def stale(self, current: dict[tuple[str, str], str]) -> list[tuple[str, str]]:
        """The library versions of ``current`` (key -> build id served now) this index does not describe."""
        have = self.builds()
        return [key for key, build in current.items() if have.get(key) != build]

    def _postings(self, term: str) -> range:
        h = term_hash(term)
        i = bisect_left(self.hashes, h)
        if i < len(self.hashes) and self.hashes[i] == h:
            return range(self.offsets[i], self.offsets[i + 1])
        return range(0)

    def number(self, key: tuple[str, str]) -> int | None:
        """The library number of (library id, version) in this index, or None."""
        return self._where.get(key)

    def score(
        self, words: Iterable[Sequence[str]], allowed: Container[int] | None = None, limit: int | None = None
    ) -> list[Candidate]:
        """The libraries holding the query's words, best first (CORI; see the module docstring), at most
        ``limit``.

        ``words``: each query word's terms, as the search analyses them. ``allowed``: the library numbers
        that may be chosen (the versions a search would use); the statistics count every listed library.
        """
        total = len(self.libraries)
        scores: dict[int, float] = {}
        matched: dict[int, int] = {}
        norm = math.log(total + 1.0)
        libs, dfs, damp = self.libs, self.dfs, self._damp
        for terms in words:
            if not terms:
                continue
            share = 1.0 / len(terms)
            holders: dict[int, float] = {}
            for term in terms:
                postings = self._postings(term)
                cf = len(postings)
                if cf == 0:
                    continue
                weight = math.log((total + 0.5) / cf) / norm * share
                for p in postings:
                    n = libs[p]
                    df = dfs[p]
                    holders[n] = holders.get(n, 0.0) + df / (df + damp[n]) * weight
            for n, belief in holders.items():
                scores[n] = scores.get(n, 0.0) + belief
                matched[n] = matched.get(n, 0) + 1
        numbers = [n for n in scores if allowed is None or n in allowed]
        ranked = heapq.nsmallest(
            limit or len(numbers),
            numbers,
            key=lambda n: (-scores[n], self.libraries[n].library_id, self.libraries[n].version),
        )
        return [Candidate(n, self.libraries[n], scores[n], matched[n]) for n in ranked]


# -- the file on disk ---------------------------------------------------------------------------------


def read_index(root: Path) -> tuple[RouteIndex | None, str | None]:
    """The route index of a bundles directory and the sha256 of its bytes; (None, None) when there is
    none or it cannot be used (logged: a FIFO, a device or a link, over ``MAX_INDEX_BYTES``, malformed,
    nested too deeply, of another format)."""
    try:
        data = read_regular(root / ROUTING_INDEX, MAX_INDEX_BYTES)
    except FileNotFoundError:
        return None, None
    except BundleFormatError as exc:  # untrusted's refusals name the file and why
        log.warning("%s; it will be rebuilt", exc)
        return None, None
    try:
        return RouteIndex.decode(data), hashlib.sha256(data).hexdigest()
    except BundleFormatError as exc:
        log.warning("%s; it will be rebuilt", exc)
        return None, hashlib.sha256(data).hexdigest()


def load_index(root: Path) -> RouteIndex | None:
    """The route index of a bundles directory; None when there is none or it cannot be read (logged)."""
    return read_index(root)[0]


def write_index(root: Path, index: RouteIndex) -> None:
    """Write ``routing.idx`` atomically (temporary file, fsync, rename, fsync the folder); OSError when
    the folder is read-only."""
    write_atomically(root / ROUTING_INDEX, index.encode())


@dataclass(frozen=True)
class Served:
    """A bundle the route index should describe: where it is, its build, the sha256 of its manifest,
    and how to read that manifest (read only when its entry cannot be kept; ``read_manifest`` checks
    the bytes against ``manifest_sha256``)."""

    library_id: str
    version: str
    bundle: Path
    build_id: str
    manifest_sha256: str
    read_manifest: Callable[[], Manifest | None]


def read_manifest_checked(bundle: Path, sha256: str | None = None) -> tuple[Manifest, str]:
    """``bundle``'s manifest and the sha256 of its bytes, read through ``untrusted`` (a regular file of
    at most ``MAX_MANIFEST_BYTES``, nesting a format error). With ``sha256``, bytes that differ are
    ``BundleIntegrityError``: the manifest is then not the one the catalogue verified (or pinned)."""
    name = f"{bundle.name}/{MANIFEST_NAME}"
    data = read_regular(bundle / MANIFEST_NAME, MAX_MANIFEST_BYTES)
    digest = hashlib.sha256(data).hexdigest()
    if sha256 is not None and digest != sha256:
        raise BundleIntegrityError(f"{name} is not the manifest the catalogue read (its sha256 differs)")
    return decode(decode_manifest, data, name), digest


Reusable = Callable[[IndexedLibrary], bool]


def build_index(
    served: Iterable[Served],
    previous: RouteIndex | None,
    *,
    derive: bool = True,
    reusable: Reusable | None = None,
) -> tuple[RouteIndex, dict[tuple[str, str], str]]:
    """A route index of ``served``, reusing ``previous``'s entries whose build and manifest are
    unchanged (and, given ``reusable``, that it accepts: a server accepts only entries it verified).

    Each other bundle's record is read (checked against its manifest), or derived from its search index
    when it has none (``derive``); a bundle whose record cannot be had is left out and named in the
    second value (``(library id, version) -> why``), so it is searched only when a search names it.
    """
    kept = previous.split() if previous is not None else {}
    entries: list[tuple[IndexedLibrary, Hashed]] = []
    known: dict[str, int] = {}  # term -> hash, for this build
    problems: dict[tuple[str, str], str] = {}
    for s in served:
        build, key = s.build_id, (s.library_id, s.version)
        old = kept.get(key)
        if (
            old is not None
            and old[0].build_id == build
            and old[0].manifest_sha256 == s.manifest_sha256
            and (reusable is None or reusable(old[0]))
        ):
            entries.append(old)
            continue
        try:
            manifest = s.read_manifest()
            if manifest is None or manifest.build.build_id != build:
                problems[key] = "its manifest cannot be read"
                continue
            record = read_record(s.bundle, manifest)
            derived = record is None
            if record is None:
                if not derive:
                    problems[key] = "no routing record"
                    continue
                record = derive_record(s.bundle)
        except (BundleError, OSError) as exc:
            problems[key] = str(exc)
            continue
        lib = IndexedLibrary(
            s.library_id,
            s.version,
            build,
            record.chunks,
            record.vocabulary,
            record.cutoff,
            derived,
            s.manifest_sha256,
        )
        entries.append((lib, hash_record(record, known)))
    return RouteIndex.from_hashed(entries), problems


def _same(manifest: Manifest) -> Manifest:
    return manifest


def served_bundles(root: Path) -> list[Served]:
    """Every bundle a ``CURRENT`` names under ``root``, with its manifest (unreadable ones left out)."""
    out: list[Served] = []
    for cur in sorted(root.glob("*/*/CURRENT")):
        vdir = cur.parent
        try:
            bundle = current_bundle(vdir)
            manifest, sha = read_manifest_checked(bundle)
        except (BundleError, OSError):
            continue
        out.append(
            Served(
                vdir.parent.name, vdir.name, bundle, manifest.build.build_id, sha, partial(_same, manifest)
            )
        )
    return out


def update_index(root: Path) -> tuple[RouteIndex, dict[tuple[str, str], str]]:
    """Bring ``root``'s ``routing.idx`` up to date with every ``CURRENT`` (the indexer's and installs'
    step after publishing); returns the index and the bundles left out. OSError when it cannot be written."""
    index, problems = build_index(served_bundles(root), load_index(root))
    write_index(root, index)
    return index, problems


def refresh_index(root: Path) -> None:
    """``update_index`` after a publish, logging instead of failing: a server rebuilds what is missing."""
    try:
        index, left_out = update_index(root)
    except (OSError, BundleError) as exc:
        log.warning(
            "the route index of %s was not updated (%s); a server rebuilds it when it needs it", root, exc
        )
        return
    for (library_id, version), why in left_out.items():
        log.warning("left out of the route index: %s/%s: %s", library_id, version, why)
    log.info("route index updated: %d library versions", len(index.libraries))
