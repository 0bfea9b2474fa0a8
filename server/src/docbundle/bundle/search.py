"""Search one bundle: query text in, ranked (document, chunk) hits out.

Query text is data. It never reaches whoosh's query parser: words are cut out with the same analyzer the
index was built with, and the query tree (``Term``, ``And``, ``Or``, ``Phrase``) is built here, so no
wildcard, regex, fuzzy, range, field or boost syntax can be expressed, whatever the user types.

How a query is built:

- ``"quoted text"`` is a phrase; everything else is words.
- Each word is analysed: an English word gives one stem; an identifier (``useEffect``, ``sap.m.Table``)
  gives its whole form (boosted) OR all of its parts; a CJK word gives bigrams that are ORed, each
  chunk's score scaled by the share of the word's bigrams it holds (``balanced`` and ``precise``; plain
  OR in ``broad``); each bigram counts 1/n of a Korean word of n bigrams, 1/sqrt(n) of a Chinese or
  Japanese run (``CJK_SHARE``: a run there is a clause, not a word).
- Stop words are already gone (the analyzer drops them); question words ("how", "what", "should" ...)
  are dropped too when other words remain. At most ``MAX_WORDS`` words are searched, the rarest first
  (rarity comes from the term dictionary, not from reading posting lists), so a pasted paragraph
  cannot make whoosh score every posting in the index; at most ``MAX_PHRASES`` quoted phrases.
- Each word is searched in title, headings, body and code at once and scored with BM25F (field
  weights applied to length-normalised term frequencies before one saturation; ``FIELD_WEIGHTS``,
  ``FIELD_B``, ``K1``), plus a title bonus (``TITLE_BONUS``: the word's idf among page titles when the
  chunk's page title holds it).
- Words combine by ``mode``: ``balanced`` ORs them with a bonus for matching more of them
  (``COORDINATION``), ``broad`` ORs them plainly, ``precise`` requires every word.
- Scores are computed here from whoosh's posting lists rather than by whoosh's Python matcher tree:
  each term's posting lists (one per field, read through ``whooshio.PostingReader``) are read once,
  merged into per-chunk BM25F impacts, and cached, so a warm query only adds up cached numbers. Quoted
  phrases need positions, read on demand.
- Scores are multiplied by the document's section weight (the llms.txt ``Optional`` section counts half
  unless the library's config says otherwise), and no document takes more than ``per_doc`` of the hits.

Bounds (input sizes are refused earlier, in ``server.docs``; these hold whoever calls the engine):

- Query analysis, deduplication and ranking are linear in the query (sets and dicts, no list scans).
- A ``Deadline`` is checked between units of work (each posting list read, each word, field and
  phrase, and every few thousand postings inside the loops): when cancelled the search raises
  ``Cancelled``; when its time budget is spent the search stops and answers with the words it
  finished scoring, ``SearchOutcome.stopped`` set (in ``precise`` mode, where a missing word would
  widen the result, with no hits).
- The posting cache is bounded by entries and by estimated bytes (``POSTINGS_CACHE_MAX_ENTRIES``,
  ``POSTINGS_CACHE_MAX_BYTES``), the positions cache likewise (``POSITIONS_CACHE_MAX_ENTRIES``,
  ``POSITIONS_CACHE_MAX_BYTES``); the oldest entries go first, unknown terms count like any other,
  and a list too big for the cache is used once and not kept.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import math
import re
import threading
import time
from array import array
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from .analysis import iter_terms
from .query import MAX_KEYWORD_CHARS, MAX_QUERY_CHARS, MODES, Deadline, Mode, OutOfTime, WordMatch, rank_pool
from .reader import Bundle
from .whooshio import PositionLists, PostingReader

K = TypeVar("K")
V = TypeVar("V")

# Ranking knobs; docs/ranking.md says what each does and how they were set (on dev halves only).
# BM25F: a field's term frequencies are length-normalised (FIELD_B) and weighted (FIELD_WEIGHTS), then
# saturated once per chunk (K1), with one idf from the chunks holding the term in any field.
FIELD_WEIGHTS = {"title": 8.0, "headings": 3.0, "body": 1.0, "code": 1.2}
FIELD_B = {"title": 0.5, "headings": 0.5, "body": 0.75, "code": 0.75}
K1 = 3.0
# Plus TITLE_BONUS times the term's idf among page titles when the chunk's page title holds it: a word
# that names few pages' subject points at those pages (BM25F alone lets common title words fade).
TITLE_BONUS = 1.0
# A Chinese or Japanese run's bigrams each score 1 / n**CJK_SHARE of the word (n bigrams); a Korean
# word (spaces between words, so a real word) scores the mean (1 / n).
CJK_SHARE = 0.5
# A hit is about the question when it holds words carrying this share of the question's weight (words
# weighted by idf), so a hit holding only the common word of an out-of-domain question does not count.
MATCH_COVERAGE = 0.5
COORDINATION = 0.9  # balanced mode: a chunk matching every word scores (1 + this) times their sum
PHRASE_FIELDS = ("title", "headings", "body")  # code is indexed without positions
MAX_WORDS = 10  # words searched per query (the rarest); the others are reported as dropped
MAX_PHRASES = 4  # quoted phrases searched per query; the others are reported as dropped
# Terms of one query word: an identifier's parts, a CJK run's bigrams (a longer run is split in words).
MAX_WORD_TERMS = 32
# Cache bounds per bundle. Sizes are estimates: 8 bytes a posting plus _ENTRY_BYTES per entry; for
# positions (``PositionLists``: flat arrays), their arrays' bytes plus _ENTRY_BYTES.
POSTINGS_CACHE_MAX_ENTRIES = 20_000
POSTINGS_CACHE_MAX_BYTES = 8 * 1024 * 1024
POSITIONS_CACHE_MAX_ENTRIES = 2_000
POSITIONS_CACHE_MAX_BYTES = 16 * 1024 * 1024
_ENTRY_BYTES = 400
DEFAULT_SECTION_WEIGHTS = {"optional": 0.5}
# Words that frame a question rather than say what it is about (stemmed, as the analyzer emits them).
QUESTION_WORDS = frozenset(
    [
        "how",
        "what",
        "why",
        "whi",  # why, as the stemmer leaves it
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "do",
        "doe",
        "did",
        "i",
        "me",
        "my",
        "it",
        "can",
        "could",
        "should",
        "would",
        "shall",
        "is",
        "am",
        "was",
        "were",
        "been",
        "want",
        "need",
        "tell",
        "show",
        "explain",
        "pleas",
        "know",
        "look",
        "one",
        "anoth",
    ]
)
_PHRASE_RE = re.compile(r'"([^"]+)"')
_WHOLE_BOOST = 1.5
_MEMBER_SPLIT = re.compile(r"\.|::|\(|\)")
MEMBER_BOOST = 1.0
_PART_BOOST = 0.5  # parts of an identifier: useEffect must not pull in every use* and *Effect page


@dataclass(frozen=True)
class Hit:
    """One ranked search unit: record ``doc`` of the store, chunk ``chunk`` of that record."""

    doc: int
    chunk: int
    score: float
    # The share of the query's informative words and phrases (those scored) this chunk holds, each
    # weighted by its idf, so a word no chunk holds weighs the most: 1.0 holds them all, 0.0 none.
    coverage: float = 0.0


@dataclass(frozen=True)
class SearchOutcome:
    """The hits (best first), the terms searched, the words left out, and whether time ran out."""

    hits: list[Hit]
    terms: list[str]
    dropped: list[str]
    stopped: bool = False  # the time budget ran out: the hits come from the words scored by then
    # The words and quoted phrases searched that say what the question is about (not question words).
    informative: list[str] = dataclasses.field(default_factory=list)

    @property
    def word_match(self) -> WordMatch:
        """Whether any hit holds the query's informative words (``WordMatch``)."""
        if not self.informative:
            return "no_topic"
        return "matched" if any(h.coverage >= MATCH_COVERAGE for h in self.hits) else "weak"


class _BoundedCache(Generic[K, V]):
    """A dict bounded by entries and by estimated bytes; the oldest entries are evicted first."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._data: dict[K, tuple[V, int]] = {}

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: K) -> V | None:
        found = self._data.get(key)
        return None if found is None else found[0]

    def put(self, key: K, value: V, size: int) -> None:
        """Keep ``value`` (``size`` estimated bytes) unless it alone exceeds the byte bound."""
        if size > self.max_bytes:
            return
        old = self._data.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        while self._data and (len(self._data) >= self.max_entries or self.bytes + size > self.max_bytes):
            _, dropped = self._data.pop(next(iter(self._data)))
            self.bytes -= dropped
        self._data[key] = (value, size)
        self.bytes += size

    def resize(self, max_bytes: int) -> None:
        """Bound the cache to ``max_bytes`` from now on, dropping its oldest entries past it now."""
        self.max_bytes = max_bytes
        while self._data and self.bytes > max_bytes:
            _, dropped = self._data.pop(next(iter(self._data)))
            self.bytes -= dropped


@dataclass(frozen=True)
class _Word:
    text: str
    terms: tuple[str, ...]  # whole form first for identifiers; bigrams in order for CJK
    kind: Literal["plain", "ident", "cjk"]
    # A dotted identifier's member names that are identifiers themselves (this.byId -> byid): the docs
    # often write them alone, and the whole dotted form's parts lost their stop words (by).
    members: tuple[str, ...] = ()


def _words(text: str) -> list[_Word]:
    """Analyse free text into query words (stop words already gone)."""
    words: list[_Word] = []
    current_pos = None
    current: dict[str, None] = {}  # an ordered set: the terms at one position, whole form first
    start = end = 0
    cjk_run: list[str] = []
    cjk_end = -1

    def flush() -> None:
        if current:
            terms = tuple(current)[:MAX_WORD_TERMS]
            kind: Literal["plain", "ident"] = "ident" if len(terms) > 1 else "plain"
            raw = text[start:end]
            members = _members(raw, terms) if kind == "ident" else ()
            words.append(_Word(raw, terms, kind, members))

    def flush_cjk() -> None:
        # A long run (a whole Chinese sentence is one) becomes words of at most MAX_WORD_TERMS bigrams.
        for i in range(0, len(cjk_run), MAX_WORD_TERMS):
            part = cjk_run[i : i + MAX_WORD_TERMS]
            words.append(_Word("".join(_unbigram(part)), tuple(part), "cjk"))

    for term, pos, sc, ec in iter_terms(text):
        is_cjk = len(term) <= 2 and not term.isascii() and ec - sc <= 2 and _is_cjk(term)
        if is_cjk:
            if current:
                flush()
                current, current_pos = {}, None
            if cjk_run and sc <= cjk_end - 1:
                cjk_run.append(term)  # the next bigram of the same run overlaps the previous one
            else:
                flush_cjk()
                cjk_run = [term]
            cjk_end = ec
            continue
        if cjk_run:
            flush_cjk()
            cjk_run = []
        if pos != current_pos:
            flush()
            current, current_pos, start = {}, pos, sc
        end = ec
        current.setdefault(term, None)
    flush()
    flush_cjk()
    return words


_CANT_RE = re.compile(r"\b(ca|wo|sha)n['\u2019]t\b", re.IGNORECASE)
_NOT_RE = re.compile(r"n['\u2019]t\b", re.IGNORECASE)
_CLITIC_RE = re.compile(r"(?<=\w)['\u2019](?:s|d|ll|re|ve|m)\b", re.IGNORECASE)


def _contractions(text: str) -> str:
    """English contractions without their residue: item's -> item, doesn't -> does not (the analyzer
    would leave the words s and t, which match every chunk that has a possessive)."""
    if "'" not in text and "\u2019" not in text:
        return text
    text = _CANT_RE.sub(
        lambda m: {"ca": "can", "wo": "will", "sha": "shall"}[m.group(1).lower()] + " not", text
    )
    return _CLITIC_RE.sub("", _NOT_RE.sub(" not", text))


def _members(raw: str, terms: tuple[str, ...]) -> tuple[str, ...]:
    """The whole forms of a dotted identifier's members that have parts of their own (not yet in terms)."""
    if "." not in raw and "::" not in raw:
        return ()
    out: dict[str, None] = {}
    for segment in _MEMBER_SPLIT.split(raw):
        found = [t for t, _, _, _ in iter_terms(segment)]
        if len(found) > 1 and found[0] not in terms:  # a compound member: its whole form comes first
            out.setdefault(found[0], None)
    return tuple(out)[:MAX_WORD_TERMS]


def _unbigram(bigrams: list[str]) -> list[str]:
    return [bigrams[0], *(b[-1] for b in bigrams[1:])]


def _is_hangul(term: str) -> bool:
    return (
        "\uac00" <= term[0] <= "\ud7af" or "\u1100" <= term[0] <= "\u11ff" or "\u3130" <= term[0] <= "\u318f"
    )


def _is_cjk(term: str) -> bool:
    return any(
        "\u1100" <= c <= "\u11ff"
        or "\u3040" <= c <= "\u30ff"
        or "\u3130" <= c <= "\u318f"
        or "\u3400" <= c <= "\u9fff"
        or "\uac00" <= c <= "\ud7af"
        or "\uf900" <= c <= "\ufaff"
        or "\uff66" <= c <= "\uff9f"
        or c >= "\U00020000"
        for c in term
    )


Postings = tuple["array[int]", "array[float]"]  # chunk numbers, BM25 impacts


class BundleSearcher:
    """Ranked search over one opened bundle; safe to call from many threads at once."""

    def __init__(self, bundle: Bundle) -> None:
        self._bundle = bundle
        self._ix = bundle.index
        manifest = bundle.manifest
        settings = manifest.build.search
        weights = {**DEFAULT_SECTION_WEIGHTS, **{k.lower(): v for k, v in settings.section_weights.items()}}
        # whoosh document numbers run chunk by chunk through the store's records, in order, so the
        # manifest's chunk counts map them back without reading stored fields.
        indexed = [d for d in manifest.documents if d.chunks > 0 and not d.error]
        self._starts: list[int] = []
        self._doc_weight: list[float] = []
        total = 0
        for d in indexed:
            self._starts.append(total)
            total += d.chunks
            w = weights.get(d.section.lower(), 1.0)
            if d.optional:
                w = min(w, weights.get("optional", 1.0))
            self._doc_weight.append(w)
        self._chunk_count = total
        # Each chunk's document weight, or None when every document weighs 1 (the usual case).
        self._chunk_weight: array[float] | None = None
        if any(w != 1.0 for w in self._doc_weight):
            self._chunk_weight = array("d", bytes(8 * total))
            ends = [*self._starts[1:], total]
            for start, end, dw in zip(self._starts, ends, self._doc_weight, strict=True):
                self._chunk_weight[start:end] = array("d", [dw]) * (end - start)
        self._synonyms: dict[str, list[tuple[str, ...]]] = {}
        for group in settings.synonyms:
            forms = [tuple(t for t, _, _, _ in iter_terms(s)) for s in group]
            forms = [f for f in forms if f]
            for f in forms:
                if len(f) == 1:
                    self._synonyms.setdefault(f[0], []).extend(o for o in forms if o != f)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._lengths: dict[str, tuple[array[int], float]] = {}
        self._cache: _BoundedCache[str, Postings] = _BoundedCache(
            POSTINGS_CACHE_MAX_ENTRIES, POSTINGS_CACHE_MAX_BYTES
        )
        self._pos_cache: _BoundedCache[tuple[str, str], PositionLists] = _BoundedCache(
            POSITIONS_CACHE_MAX_ENTRIES, POSITIONS_CACHE_MAX_BYTES
        )
        self._deadline = threading.local()

    @property
    def starts(self) -> list[int]:
        """The first chunk number of each store record (the rows of a vector file line up with them)."""
        return self._starts

    @property
    def chunk_count(self) -> int:
        """How many chunks (search units) the bundle holds."""
        return self._chunk_count

    def locate(self, docnum: int) -> tuple[int, int]:
        """A chunk number as (store record, chunk of that record)."""
        return self._locate(docnum)

    # -- postings ------------------------------------------------------------------------------

    def _reader(self) -> PostingReader:
        """This thread's index reader for the current search, opened on its first cache miss."""
        reader: PostingReader | None = getattr(self._local, "reader", None)
        if reader is None:
            reader = self._local.reader = PostingReader(self._ix)
        return reader

    def _close_reader(self) -> None:
        reader = getattr(self._local, "reader", None)
        if reader is not None:
            self._local.reader = None
            reader.close()

    def _check(self) -> None:
        """Check this thread's current deadline (raises Cancelled or OutOfTime)."""
        deadline: Deadline | None = getattr(self._deadline, "current", None)
        if deadline is not None:
            deadline.check()

    def _field_lengths(self, reader: PostingReader, field: str) -> tuple[array[int], float]:
        found = self._lengths.get(field)
        if found is None:
            lengths = reader.field_lengths(field, self._chunk_count)
            avg = (sum(lengths) / len(lengths)) if lengths else 1.0
            found = self._lengths[field] = (lengths, avg or 1.0)
        return found

    def _postings(self, term: str) -> Postings:
        """Chunk numbers and BM25F impacts of ``term`` over every field (read once, then cached).

        True BM25F: each field's term frequency is length-normalised (``FIELD_B``) and weighted
        (``FIELD_WEIGHTS``) before one saturation (``K1``) per chunk, so a word in the title and in
        the body counts once, more than either alone but never as two separate matches. The idf
        comes from the chunks holding the term in any field.
        """
        found = self._cache.get(term)
        if found is not None:
            return found
        self._check()
        with self._lock:
            found = self._cache.get(term)
            if found is not None:
                return found
            reader = self._reader()
            acc: dict[int, float] = {}
            title: tuple[array[int], array[float]] | None = None
            for field, weight in FIELD_WEIGHTS.items():
                read = reader.postings(field, term, self._check)
                if read is None:
                    continue
                ids, tfs = read
                if field == "title":
                    title = (ids, tfs)
                lengths, avg = self._field_lengths(reader, field)
                b = FIELD_B[field]
                base = (1.0 - b) / weight
                slope = b / (avg * weight)
                get = acc.get
                for i, tf in zip(ids, tfs, strict=True):
                    acc[i] = get(i, 0.0) + tf / (base + slope * lengths[i])
            n = max(self._chunk_count, 1)
            df = len(acc)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            top = idf * (K1 + 1.0)
            order = sorted(acc)
            chunk_ids = array("I", order)
            final = {i: top * x / (x + K1) for i, x in acc.items()}
            if title is not None and TITLE_BONUS:
                tdf = len(title[0])
                tidf = TITLE_BONUS * math.log(1.0 + (n - tdf + 0.5) / (tdf + 0.5))
                for i in title[0]:
                    final[i] += tidf
            impacts = array("f", [final[i] for i in order])
            found = (chunk_ids, impacts)
            self._cache.put(term, found, _ENTRY_BYTES + 8 * df + 2 * len(term))
        return found

    def limit_caches(self, postings_bytes: int, positions_bytes: int) -> None:
        """Bound the postings and positions caches (estimated bytes; never above their defaults): a
        server shares one budget among the bundles it holds open."""
        with self._lock:
            self._cache.resize(min(postings_bytes, POSTINGS_CACHE_MAX_BYTES))
            self._pos_cache.resize(min(positions_bytes, POSITIONS_CACHE_MAX_BYTES))

    def cache_bytes(self) -> int:
        """Estimated bytes held by the postings and positions caches."""
        return self._cache.bytes + self._pos_cache.bytes

    def warm(
        self, terms: int, stop: threading.Event | None = None, pause: float = 0.0, share: float = 1.0
    ) -> int:
        """Read and cache the postings of the ``terms`` most frequent body terms; returns how many.

        A question's first sight of its words costs whoosh's posting-block decoding, which the common
        words dominate (large-en, 8-9 word questions: p50 14 ms CPU cold, 2-3 ms once the 500-2,000
        commonest terms are cached). The server calls this in its warm-up thread for the bundles it
        serves (``server.catalog.warmup``); ``stop`` ends it early (the bundle left the server's pool),
        and between two terms it waits ``pause`` seconds, or longer to use at most ``share`` of a core
        (the CPU a term cost, measured with ``time.thread_time``, times ``1 / share - 1``): the searches
        running meanwhile keep the interpreter. The cache's bounds still hold.
        """
        reader = PostingReader(self._ix)
        try:
            top = reader.most_frequent_terms("body", terms)
        finally:
            reader.close()
        done = 0
        idle = 1.0 / share - 1.0 if 0.0 < share < 1.0 else 0.0
        wait = 0.0
        try:
            for term in top:
                if stop is not None and (stop.wait(wait) if wait > 0 else stop.is_set()):
                    break
                if stop is None and wait > 0:
                    time.sleep(wait)
                spent = time.thread_time()
                self._postings(term)
                wait = max(pause, (time.thread_time() - spent) * idle)
                done += 1
        finally:
            self._close_reader()
        return done

    def _doc_frequency(self, field: str, term: str) -> int:
        """How many chunks hold ``term`` in ``field``, from the term dictionary (no posting list read)."""
        cached = self._cache.get(term)
        if cached is not None:
            return len(cached[0])
        self._check()
        with self._lock:
            return self._reader().doc_frequency(field, term)

    # -- scoring -------------------------------------------------------------------------------

    def _score_all(self, terms: tuple[str, ...], weight: float, out: dict[int, float]) -> None:
        """Add to ``out`` ``weight`` times the summed impacts of chunks holding every one of ``terms``."""
        lists = [self._postings(t) for t in terms]
        self._check()
        get = out.get
        if len(lists) == 1:
            ids, imps = lists[0]
            for i, v in zip(ids, imps, strict=True):
                out[i] = get(i, 0.0) + weight * v
            return
        lists.sort(key=lambda p: len(p[0]))
        common: dict[int, float] = dict(zip(*lists[0], strict=True))
        for ids, imps in lists[1:]:
            common = {i: common[i] + v for i, v in zip(ids, imps, strict=True) if i in common}
            if not common:
                return
        for i, v in common.items():
            out[i] = get(i, 0.0) + weight * v

    def _cjk_scores(self, word: _Word, coordinate: bool) -> dict[int, float]:
        """A CJK run's bigrams ORed, each scoring its share of the word (the mean of the bigrams).

        With ``coordinate`` (``balanced`` and ``precise``) each chunk's sum is scaled by the share of
        the run's bigrams it holds. Chinese and Japanese questions have no spaces, so a "word" is often
        a whole clause (median 5 and 8 bigrams): requiring every bigram in one chunk matched nothing
        for most of them. This is Lucene-classic coordination with exponent 1, chosen before measuring.
        The mean keeps a long common run (컴포넌트: 3 bigrams) from outweighing a short rare one (지연).
        """
        n = len(word.terms)
        out: dict[int, float] = {}
        held: dict[int, int] = {}
        share = 1.0 / (n if _is_hangul(word.terms[0]) else n**CJK_SHARE)
        for term in word.terms:
            ids, imps = self._postings(term)
            self._check()
            get = out.get
            hget = held.get
            for i, v in zip(ids, imps, strict=True):
                out[i] = get(i, 0.0) + share * v
                held[i] = hget(i, 0) + 1
        if not coordinate:
            return out
        return {i: v * held[i] / n for i, v in out.items()}

    def _word_scores(self, word: _Word, mode: Mode) -> dict[int, float]:
        if word.kind == "cjk":
            return self._cjk_scores(word, coordinate=mode != "broad")
        out: dict[int, float] = {}
        if word.kind == "plain":
            synonyms = self._synonyms.get(word.terms[0], [])
            if not synonyms and len(word.terms) == 1:
                return dict(zip(*self._postings(word.terms[0]), strict=True))  # the common case, at C speed
            self._score_all(word.terms, 1.0, out)
            for syn in synonyms:
                self._score_all(syn, 1.0, out)
        else:
            self._score_all(word.terms[:1], _WHOLE_BOOST, out)
            for member in word.members:
                self._score_all((member,), MEMBER_BOOST, out)
            self._score_all(word.terms[1:], _PART_BOOST, out)
        return out

    def _positions(self, field: str, term: str) -> PositionLists:
        """Positions of ``term`` in each chunk holding it in ``field`` (read on demand, cached)."""
        key = (field, term)
        found = self._pos_cache.get(key)
        if found is not None:
            return found
        self._check()
        with self._lock:
            out = self._reader().positions(field, term, self._check)
            self._pos_cache.put(key, out, _ENTRY_BYTES + out.nbytes())
        return out

    def _phrase_scores(self, text: str) -> dict[int, float]:
        """Chunks holding the words of ``text`` in order (stop words may sit between them)."""
        by_pos: dict[int, str] = {}
        for term, pos, _, _ in iter_terms(text):
            by_pos.setdefault(pos, term)  # the whole form of an identifier comes first
        if not by_pos:
            return {}
        positions = sorted(by_pos)
        terms = tuple(by_pos[p] for p in positions)
        if len(terms) == 1:
            return self._word_scores(_Word(text, terms, "plain"), "balanced")
        gaps = [b - a for a, b in itertools.pairwise(positions)]
        matched: set[int] = set()
        for field in PHRASE_FIELDS:
            lists = [self._positions(field, t) for t in terms]
            if any(not p.docs for p in lists):
                continue
            # The chunks holding every word, by a set intersection in C, before any position is read.
            both = set(lists[0].docs).intersection(*(p.docs for p in lists[1:]))
            tried = 0
            for docnum in sorted(both - matched):
                rest = [p.of(docnum) for p in lists[1:]]
                for start in lists[0].of(docnum):
                    tried += 1
                    if tried % 256 == 0:  # a start can cost a step per phrase word
                        self._check()
                    if _follows(start, rest, gaps):
                        matched.add(docnum)
                        break
        if not matched:
            return {}
        out = dict.fromkeys(matched, 0.0)
        for t in terms:
            for i, v in zip(*self._postings(t), strict=True):
                if i in out:
                    out[i] += v
        return out

    def _locate(self, docnum: int) -> tuple[int, int]:
        doc = bisect.bisect_right(self._starts, docnum) - 1
        return doc, docnum - self._starts[doc]

    def _rank_words(self, words: list[_Word]) -> tuple[list[_Word], list[str]]:
        """Drop question words (when others remain) and keep the rarest MAX_WORDS words."""
        first: dict[tuple[str, ...], _Word] = {}
        for w in words:
            first.setdefault(w.terms, w)
        unique = list(first.values())
        content = [w for w in unique if not _is_question_word(w)]
        dropped: list[str] = []
        if content and len(content) < len(unique):
            dropped += [w.text for w in unique if _is_question_word(w)]
            unique = content
        if len(unique) > MAX_WORDS:
            freq: dict[tuple[str, ...], int] = {}
            for w in unique:
                freq[w.terms] = min(self._doc_frequency("body", t) for t in w.terms)
            order = sorted(range(len(unique)), key=lambda k: freq[unique[k].terms])
            keep = set(order[:MAX_WORDS])
            dropped += [w.text for k, w in enumerate(unique) if k not in keep]
            unique = [w for k, w in enumerate(unique) if k in keep]
        return unique, dropped

    def plan(
        self, query: str | None = None, keywords: list[str] | None = None
    ) -> tuple[list[_Word], list[str], list[str]]:
        """The words and quoted phrases a query searches, and the words it drops."""
        text = (query or "")[:MAX_QUERY_CHARS]
        phrases = [p for p in _PHRASE_RE.findall(text) if p.strip()]
        dropped = [f'"{p}"' for p in phrases[MAX_PHRASES:]]
        phrases = phrases[:MAX_PHRASES]
        words = _words(_contractions(_PHRASE_RE.sub(" ", text)))
        for kw in keywords or []:
            words.extend(_words(_contractions(kw[:MAX_KEYWORD_CHARS])))
        words, ranked_out = self._rank_words(words)
        return words, phrases, ranked_out + dropped

    def search(
        self,
        query: str | None = None,
        *,
        keywords: list[str] | None = None,
        mode: Mode = "balanced",
        limit: int = 5,
        per_doc: int = 2,
        deadline: Deadline | None = None,
    ) -> SearchOutcome:
        """Rank the bundle's chunks for ``query`` / ``keywords``; at most ``per_doc`` hits per document.

        ``deadline`` bounds the call: cancelled, it raises ``Cancelled``; out of time, the
        outcome holds what the words scored so far found, with ``stopped`` set.
        """
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self._deadline.current = deadline
        words: list[_Word] = []
        phrases: list[str] = []
        dropped: list[str] = []
        clauses: list[dict[int, float]] = []
        stopped = False
        try:
            words, phrases, dropped = self.plan(query, keywords)
            for w in words:
                clauses.append(self._word_scores(w, mode))
            for p in phrases:
                clauses.append(self._phrase_scores(p))
        except OutOfTime:
            stopped = True
        finally:
            self._deadline.current = None
            self._close_reader()
        terms = [t for w in words for t in w.terms] + [f'"{p}"' for p in phrases]
        # What a hit must hold to be about the question: its words other than question words (all of
        # them are question words only when nothing else was asked), and its phrases.
        asks = [not _is_question_word(w) for w in words] + [True] * len(phrases)
        informative = [w.text for w in words if not _is_question_word(w)] + [f'"{p}"' for p in phrases]
        telling = [c for c, a in zip(clauses, asks, strict=False) if a]  # fewer clauses when time ran out
        n_chunks = max(self._chunk_count, 1)
        weights = [math.log(1.0 + (n_chunks - len(c) + 0.5) / (len(c) + 0.5)) for c in telling]
        total_weight = sum(weights) or 1.0
        expected = len(words) + len(phrases)
        if mode == "precise" and (stopped or len(clauses) < expected):
            clauses = []  # a word left unscored would let through chunks that lack it
        clauses = [c for c in clauses if c] if mode != "precise" else clauses
        if not clauses or limit < 1:
            return SearchOutcome([], terms, dropped, stopped, informative)
        n = len(clauses)
        total = dict(clauses[0])
        if n > 1:
            matched = dict.fromkeys(total, 1)
            for c in clauses[1:]:
                tget = total.get
                mget = matched.get
                for i, v in c.items():
                    total[i] = tget(i, 0.0) + v
                    matched[i] = mget(i, 0) + 1
            if mode == "precise":
                total = {i: v for i, v in total.items() if matched[i] == n}
            elif mode == "balanced":
                # Reward chunks that match more of the words (whoosh's OrGroup.factory(0.9) in spirit).
                factor = [1.0 + COORDINATION * (m - 1) / (n - 1) for m in range(n + 1)]
                total = {i: v * factor[matched[i]] for i, v in total.items()}
        weight = self._chunk_weight
        if weight is not None:
            total = {i: v * weight[i] for i, v in total.items()}
        # The best rank_pool(limit) chunks, best first, ties by chunk order: a threshold from the
        # scores alone, then a sort of the few above it (not a sort key for every candidate).
        size = rank_pool(limit)
        if len(total) > size:
            floor = heapq.nlargest(size, total.values())[-1]
            best = [(-v, i) for i, v in total.items() if v >= floor]
        else:
            best = [(-v, i) for i, v in total.items()]
        best.sort()
        pool = [(-v, i, *self._locate(i)) for v, i in best[:size]]
        hits: list[Hit] = []
        per: dict[int, int] = {}
        for score, docnum, doc, chunk in pool:
            if per.get(doc, 0) >= per_doc:
                continue
            per[doc] = per.get(doc, 0) + 1
            held = sum(w for c, w in zip(telling, weights, strict=False) if docnum in c)
            hits.append(Hit(doc, chunk, round(score, 6), round(held / total_weight, 4)))
            if len(hits) >= limit:
                break
        return SearchOutcome(hits, terms, dropped, stopped, informative)


def query_words(
    query: str | None, keywords: list[str] | None = None, limit: int = 32
) -> list[tuple[str, ...]]:
    """The terms of each word a query searches, as ``BundleSearcher.plan`` analyses them (quoted phrases'
    words included, repeats once, question words dropped: they say nothing of the subject), at most
    ``limit``: what a route index is asked about (``routeindex``)."""
    text = (query or "")[:MAX_QUERY_CHARS].replace('"', " ")
    words = _words(_contractions(text))
    for kw in keywords or []:
        words.extend(_words(_contractions(kw[:MAX_KEYWORD_CHARS])))
    first: dict[tuple[str, ...], _Word] = {}
    for w in words:
        first.setdefault(w.terms, w)
    unique = list(first.values())
    return [w.terms for w in unique if not _is_question_word(w)][:limit]


def _is_question_word(w: _Word) -> bool:
    """A word that frames a question rather than says what it is about ("how", "should")."""
    return w.kind == "plain" and w.terms[0] in QUESTION_WORDS


def _follows(start: int, rest: list[array[int]], gaps: list[int]) -> bool:
    """Whether each next phrase word sits exactly ``gap`` positions after the previous one (``rest``:
    the positions of each next word in the chunk)."""
    at = start
    for positions, gap in zip(rest, gaps, strict=True):
        at += gap
        if at not in positions:  # a scan in C: a chunk holds a word a few times, as a rule
            return False
    return True
