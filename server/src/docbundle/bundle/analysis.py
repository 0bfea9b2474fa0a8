"""The text analyzer shared by the indexer (writing) and the server (querying).

One fused tokenizer does everything in a single pass, because whoosh runs analysis in pure Python and
a chain of generator filters costs more than the work itself:

- Unicode: each non-ASCII token is NFKC-normalised (full-width letters, compatibility forms), so
  character offsets still point into the original text (highlighting needs them).
- English: lowercase, English stop words dropped, porter2 stemming (whoosh's default porter stemmer is
  buggy: ``running`` -> ``runn``). Stems are cached: documentation vocabularies are small.
- Code identifiers: ``useEffect``, ``sap.m.Table``, ``snake_case``, ``std::vector``, ``built-in`` are
  indexed whole (lowercased, unstemmed) *and* as their parts at the same position, so a query for the
  whole name or for one part both match.
- CJK: runs of Han, Hiragana, Katakana and Hangul become overlapping bigrams (a one-character run stays
  a unigram); Latin words inside the same text are left as words. Fields using this analyzer should set
  ``multitoken_query="and"`` so one query word's bigrams must all match.

The class lives in this importable module on purpose: whoosh pickles the schema, and the pickle names
the analyzer by import path. Moving or renaming it breaks every bundle built before; change
``ANALYZER_ID`` (and the bundle format version) when its output changes.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from .whooshio import STOP_WORDS, Token, Tokenizer
from .whooshio import porter2_stem as _porter2

#: Identity of the analyzer's output; part of every bundle's content hash.
ANALYZER_ID = "docbundle-analyzer/1 (nfkc-token, lowercase, en-stop, porter2, ident-split, cjk-bigram)"

_CJK = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo extended A
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width Katakana
    "\U00020000-\U0002fa1f"  # CJK extensions B-F and compatibility supplement
)
# A word character that is not CJK: CJK runs are matched by their own alternative.
_W = rf"[^\W{_CJK}]"
_TOKEN_RE = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>{_W}+(?:(?:\.|::|-|/){_W}+)*)")
# In text without a CJK character, ``_W`` is ``\w``, and _TOKEN_RE finds exactly this pattern's words;
# in ASCII text ``\w`` is ``[0-9A-Z_a-z]``, which the regex engine tests faster.
_PLAIN_WORD_RE = re.compile(r"\w+(?:(?:\.|::|-|/)\w+)*")
_ASCII_WORD_RE = re.compile(r"[0-9A-Z_a-z]+(?:(?:\.|::|-|/)[0-9A-Z_a-z]+)*")
_HAS_CJK = re.compile(f"[{_CJK}]")
# Where an identifier breaks into parts: separators, camelCase humps, digit runs.
_PART_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^\W_0-9A-Za-z]+")
_JOINERS = frozenset(".:-/_")

_STOP = frozenset(STOP_WORDS)
_STEM_CACHE: dict[str, str] = {}
_STEM_CACHE_MAX = 500_000


def stem(word: str) -> str:
    """Porter2-stem a lowercase word, through a cache."""
    s = _STEM_CACHE.get(word)
    if s is None:
        if len(_STEM_CACHE) >= _STEM_CACHE_MAX:
            _STEM_CACHE.clear()
        s = _STEM_CACHE[word] = _porter2(word) if word.isalpha() else word
    return s


def _identifier_parts(raw: str) -> list[str]:
    """Split an identifier-like token into its lowercase parts (empty when it has only one part)."""
    plain = not any(c in _JOINERS for c in raw) and (raw.islower() or raw.isupper() or raw[1:].islower())
    if plain and (raw.isdigit() or not any(c.isdigit() for c in raw)):
        # A plain word ("Hello", "HTTP", "install") or number: no parts.
        return []
    parts = [p.lower() for p in _PART_RE.findall(raw)]
    return parts if len(parts) > 1 else []


def _word_terms(raw: str) -> tuple[str, ...]:
    """The terms one word-like token is indexed under, all at its position (none for a stop word)."""
    if raw.isascii() and raw.isalpha() and (raw.islower() or raw.isupper() or raw[1:].islower()):
        low = raw.lower()
        return () if low in _STOP else (stem(low),)
    if not raw.isascii():
        raw = unicodedata.normalize("NFKC", raw)
    low = raw.lower()
    parts = _identifier_parts(raw)
    if not parts:
        return () if low in _STOP else (stem(low),)
    terms = [low]
    for p in parts:
        if p not in _STOP:
            term = stem(p)
            if term not in terms:
                terms.append(term)
    return tuple(terms)


# The terms of each distinct token seen (a build meets each word of its vocabulary thousands of times;
# large-en has about 43,000 distinct tokens). Bounded apart from the stems: the server's highlighting
# fills it too, and an entry (token, tuple) weighs about 150 bytes.
_TERMS_CACHE: dict[str, tuple[str, ...]] = {}
_TERMS_CACHE_MAX = 200_000


def _cached_terms(raw: str) -> tuple[str, ...]:
    if len(_TERMS_CACHE) >= _TERMS_CACHE_MAX:
        _TERMS_CACHE.clear()
    terms = _TERMS_CACHE[raw] = _word_terms(raw)
    return terms


def _bigrams(run: str) -> list[str]:
    """A CJK run's terms, one position each: overlapping bigrams, or the run itself when one character."""
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def iter_terms(text: str) -> Iterator[tuple[str, int, int, int]]:
    """Yield ``(term, position, startchar, endchar)`` for every indexed term of ``text``.

    Stop words are skipped but still consume a position, so phrase queries keep their gaps.
    """
    pos = -1
    cache = _TERMS_CACHE
    for m in _TOKEN_RE.finditer(text):
        raw = m.group()
        if m.lastgroup == "cjk":
            start = m.start()
            for i, gram in enumerate(_bigrams(raw)):
                pos += 1
                yield gram, pos, start + i, start + i + len(gram)
            continue
        pos += 1
        terms = cache.get(raw)
        if terms is None:
            terms = _cached_terms(raw)
        start, end = m.span()
        for term in terms:
            yield term, pos, start, end


def term_positions(text: str) -> dict[str, list[int]]:
    """Each indexed term of ``text`` with its positions, terms in order of first occurrence: exactly
    ``iter_terms`` grouped by term, without its character offsets (the indexer's hot loop).

    Text without CJK (nearly all of an English page) has only word tokens, one position each, found by
    ``_ASCII_WORD_RE`` or ``_PLAIN_WORD_RE`` as plain strings (cheaper than ``_TOKEN_RE``'s pairs).
    """
    if text.isascii():
        words = _ASCII_WORD_RE.findall(text)
    elif _HAS_CJK.search(text) is None:
        words = _PLAIN_WORD_RE.findall(text)
    else:
        return _term_positions_cjk(text)
    poses: dict[str, list[int]] = {}
    get = poses.get
    cache = _TERMS_CACHE
    for pos, word in enumerate(words):
        terms = cache.get(word)
        if terms is None:
            terms = _cached_terms(word)
        for term in terms:
            found = get(term)
            if found is None:
                poses[term] = [pos]
            else:
                found.append(pos)
    return poses


def _term_positions_cjk(text: str) -> dict[str, list[int]]:
    """``term_positions`` of text with CJK runs, whose bigrams take a position each."""
    poses: defaultdict[str, list[int]] = defaultdict(list)
    cache = _TERMS_CACHE
    pos = -1
    for cjk, word in _TOKEN_RE.findall(text):
        if word:
            pos += 1
            terms = cache.get(word)
            if terms is None:
                terms = _cached_terms(word)
            for term in terms:
                poses[term].append(pos)
        else:
            for gram in _bigrams(cjk):
                pos += 1
                poses[gram].append(pos)
    return poses


class DocTokenizer(Tokenizer):  # type: ignore[misc]
    """The whoosh analyzer of every docbundle text field (see the module docstring)."""

    def __eq__(self, other: object) -> bool:
        return other.__class__ is self.__class__

    def __hash__(self) -> int:
        return hash(self.__class__.__name__)

    def __call__(
        self,
        value: str,
        positions: bool = False,
        chars: bool = False,
        keeporiginal: bool = False,
        removestops: bool = True,
        start_pos: int = 0,
        start_char: int = 0,
        tokenize: bool = True,
        mode: str = "",
        **kwargs: Any,
    ) -> Iterator[Token]:
        t = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        t.boost = 1.0
        t.stopped = False
        if not tokenize:
            t.original = t.text = value
            t.pos = start_pos
            t.startchar, t.endchar = start_char, start_char + len(value)
            yield t
            return
        for term, pos, sc, ec in iter_terms(value):
            t.text = term
            if keeporiginal:
                t.original = value[sc:ec]
            if positions:
                t.pos = start_pos + pos
            if chars:
                t.startchar = start_char + sc
                t.endchar = start_char + ec
            yield t


def analyze(text: str) -> list[str]:
    """The terms ``text`` is indexed under, in order (a debugging and testing aid)."""
    return [term for term, _, _, _ in iter_terms(text)]
