"""Finding a library by what a person calls it: ``resolve_library`` and the libraryId completions.

Only the catalogue's manifests are read (no bundle is opened). Each library is described by the
words of its id, name, category and description, and by the languages its documentation is written
in (the script of each page title: Hangul is Korean, kana Japanese, Han without kana Chinese, Latin
letters English; a language of at least a fifth of the titles counts). A query such as "sapui5", "React docs in Korean" or "payments" is split into
words; filler words ("docs", "in", "the") are dropped, and each remaining word is scored against
each library's words:

    the same word 1.0 · a prefix of at least 3 letters 0.8 · a typo (d edits, neighbours swapped
    counting one; at most one edit per 4 letters; only of a word that no library holds as such)
    0.6 (1 - d / length) — weighted by where it
    matched: id and name 1.0, language 0.9, category 0.7, description 0.5

A library's score is the mean of its words' best scores (a word it does not match counts 0), so a
library that matches every word of the query ranks above one that matches some. The query written
without spaces or dashes is also compared with the id and name the same way ("sap ui5" finds
"sapui5"). Every match says why in one line.

Cost: the catalogue's words are indexed once per (re)load (each distinct word with the libraries and
field holding it, a sorted list for prefixes, padded bigrams that find a typo's candidates), so a
query costs what its words' near words hold, not a comparison with every library. The languages come
from the catalogue summary, computed from the page titles once per build.
"""

from __future__ import annotations

import bisect
import heapq
import re
import threading
import unicodedata
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain

from docbundle.bundle.summary import title_languages

from .catalog import Catalog, LibraryEntry

# Words that say nothing about which library is meant.
FILLER = frozenset(
    [
        "a",
        "an",
        "and",
        "api",
        "apis",
        "about",
        "docs",
        "doc",
        "documentation",
        "documents",
        "for",
        "from",
        "guide",
        "guides",
        "how",
        "i",
        "in",
        "is",
        "library",
        "libraries",
        "me",
        "manual",
        "of",
        "on",
        "please",
        "reference",
        "show",
        "sdk",
        "the",
        "to",
        "with",
    ]
)
# Language codes and the words people use for them.
LANGUAGES = {
    "en": ("english",),
    "ko": ("korean", "한국어", "korea"),
    "ja": ("japanese", "日本語", "japan"),
    "zh": ("chinese", "中文", "mandarin", "简体中文", "繁體中文"),
}
WEIGHTS = {"id": 1.0, "name": 1.0, "language": 0.9, "category": 0.7, "description": 0.5}
MIN_SCORE = 0.25  # below this a library is not offered as a match
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Match:
    """A library that matches a query, how well (0-1) and why."""

    library: LibraryEntry
    score: float
    why: str
    languages: tuple[str, ...]


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (Unicode-normalized; ``_`` and ``-`` separate words)."""
    return [w for w in _WORD.findall(unicodedata.normalize("NFKC", text).lower().replace("_", " ")) if w]


def _compact(text: str) -> str:
    return "".join(words(text))


FIELDS: tuple[str, ...] = tuple(WEIGHTS)  # postings store a field as its position here


def _fields(lib: LibraryEntry, langs: tuple[str, ...]) -> list[list[str]]:
    """A library's words per field, in ``FIELDS`` order."""
    return [
        [lib.id, *words(lib.id.replace("-", " "))],
        words(lib.name),
        [x for code in langs for x in (code, *LANGUAGES.get(code, ()))],
        words(lib.category),
        words(lib.description),
    ]


def _bigrams(token: str) -> set[str]:
    padded = f"\x02{token}\x03"
    return {padded[i : i + 2] for i in range(len(padded) - 1)}


class _Vocabulary:
    """Every distinct word of the catalogue, with what finds the ones close to a query word without
    comparing it to each: a sorted list (prefixes) and the words of each padded bigram (typos)."""

    def __init__(self, tokens: Iterable[str]) -> None:
        self.sorted = sorted(set(tokens))
        self.known = set(self.sorted)
        grams: dict[str, list[int]] = defaultdict(list)
        for i, t in enumerate(self.sorted):
            for g in _bigrams(t):
                grams[g].append(i)
        self.grams = {g: array("I", ids) for g, ids in grams.items()}

    def close(self, word: str) -> list[tuple[str, float]]:
        """The words ``_closeness`` scores above 0 against ``word``, with that score.

        Candidates: the word itself, the words it prefixes or that prefix it, and for typos (only of a
        word no library holds as such: "lib-00123" is not also a typo of its 700 neighbours) the words
        sharing at least all but 3 per allowed edit of its padded bigrams (an edit changes at most 3:
        a swap of neighbours) and whose letter counts differ by at most 2 per allowed edit, which every
        word within the allowed edits does; only those are compared letter by letter.
        """
        found = {word} & self.known
        if len(word) >= 3:
            at = bisect.bisect_left(self.sorted, word)
            while at < len(self.sorted) and self.sorted[at].startswith(word):
                found.add(self.sorted[at])
                at += 1
            found.update(p for k in range(3, len(word)) if (p := word[:k]) in self.known)
        allowed = len(word) // 4
        if allowed and word not in self.known:  # a word the catalogue holds as such is no typo
            grams = _bigrams(word)
            need = len(grams) - 3 * allowed
            if need > 0:
                counts = Counter(chain.from_iterable(self.grams.get(g, ()) for g in grams))
                near: Iterable[str] = (self.sorted[i] for i, n in counts.items() if n >= need)
            else:
                near = self.sorted
            letters = Counter(word)
            found.update(
                t
                for t in near
                if abs(len(t) - len(word)) <= allowed
                # an edit changes the letter counts by at most 2 (a swap of neighbours by none)
                and _letter_distance(letters, Counter(t)) <= 2 * allowed
            )
        scored = ((t, _closeness(word, t)) for t in found)
        return [(t, c) for t, c in scored if c > 0]


def _letter_distance(a: Counter[str], b: Counter[str]) -> int:
    """How many letters the two words' letter counts differ by (L1 distance of the counts)."""
    return sum(((a - b) + (b - a)).values())


class _Index:
    """The catalogue's words and, per word and field, the libraries holding it; built once per catalogue."""

    def __init__(self, libs: list[LibraryEntry]) -> None:
        self.libs = libs
        self.langs = [library_languages(lib) for lib in libs]
        postings: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
        whole: dict[str, list[int]] = defaultdict(list)
        for i, lib in enumerate(libs):
            for f, tokens in enumerate(_fields(lib, self.langs[i])):
                for t in dict.fromkeys(tokens):
                    postings[t][f].append(i)
            for x in dict.fromkeys(_compact(x) for x in (lib.id, lib.name) if x):
                whole[x].append(i)
        self.words = _Vocabulary(postings)
        self.postings = {t: {f: array("I", ids) for f, ids in by.items()} for t, by in postings.items()}
        self.wholes = _Vocabulary(whole)
        self.whole_postings = {t: array("I", v) for t, v in whole.items()}

    def _best(self, word: str) -> dict[int, tuple[float, int, str]]:
        """Each library's best match of ``word``: (score, field, token); the first field and token on a tie."""
        hits = sorted(
            (-c * WEIGHTS[FIELDS[f]], f, token)
            for token, c in self.words.close(word)
            for f in self.postings[token]
        )
        found: dict[int, tuple[float, int, str]] = {}
        for q, f, token in hits:
            new = set(self.postings[token][f]).difference(found)
            if new:
                found.update(dict.fromkeys(new, (-q, f, token)))
        return found

    def matches(self, wanted: list[str], limit: int | None = None) -> tuple[list[Match], int]:
        """The libraries scoring at least ``MIN_SCORE`` for ``wanted``, best first (ties by id), at most
        ``limit`` of them (None: all), and how many there are."""
        if not wanted:
            return [], 0
        best = [self._best(w) for w in wanted]
        if len(best) == 1:
            scores = {i: hit[0] for i, hit in best[0].items()}
        else:
            totals: Counter[int] = Counter()
            for b in best:
                totals.update({i: hit[0] for i, hit in b.items()})
            scores = {i: q / len(wanted) for i, q in totals.items()}
        joined: dict[int, tuple[float, str]] = {}
        compact = _compact(" ".join(wanted))
        if len(wanted) > 1:  # "sap ui5" against "sapui5"
            for token, c in self.wholes.close(compact):
                for i in self.whole_postings[token]:
                    if c * 0.95 > max(scores.get(i, 0.0), joined.get(i, (0.0, ""))[0]):
                        joined[i] = (c * 0.95, token)
            scores.update((i, q) for i, (q, _) in joined.items())
        ranked = [(round(min(q, 1.0), 3), i) for i, q in scores.items()]
        ranked = [(q, i) for q, i in ranked if q >= MIN_SCORE]
        key = lambda item: (-item[0], self.libs[item[1]].id)  # noqa: E731 - one sort key, used twice
        top = sorted(ranked, key=key) if limit is None else heapq.nsmallest(limit, ranked, key=key)
        out = []
        for score, i in top:
            lib, langs = self.libs[i], self.langs[i]
            if i in joined:
                shown = next(x for x in (lib.id, lib.name) if x and _compact(x) == joined[i][1])
                why = f"{compact!r} (the words joined) ~ {shown!r}"
            else:
                why = "; ".join(
                    _reason(w, FIELDS[b[i][1]], b[i][2], langs)
                    for w, b in zip(wanted, best, strict=True)
                    if i in b
                )
            out.append(Match(lib, score, why, langs))
        return out, len(ranked)


def library_languages(lib: LibraryEntry) -> tuple[str, ...]:
    """The languages of a library's default version (the catalogue summary's, from its page titles)."""
    m = lib.default.meta
    return tuple(m.languages) if m is not None else tuple(title_languages([lib.name, lib.description]))


class Resolver:
    """Scores a catalogue's libraries against what a person calls them (see the module docstring)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._index: tuple[int, _Index] | None = None
        self._lock = threading.Lock()

    def index(self) -> _Index:
        """The word index of the catalogue as it is now (built again after a reload changed it)."""
        with self._lock:
            generation = self.catalog.generation
            if self._index is None or self._index[0] != generation:
                self._index = (generation, _Index(self.catalog.libraries()))
            return self._index[1]

    def resolve(self, query: str, limit: int | None = None) -> tuple[list[Match], int]:
        """The libraries matching ``query``, best first (ties by id), at most ``limit`` (None: all), and
        how many match in all."""
        raw = words(query)
        wanted = [w for w in raw if w not in FILLER] or raw
        return self.index().matches(wanted, limit)


def _closeness(word: str, token: str) -> float:
    if not word or not token:
        return 0.0
    if word == token:
        return 1.0
    if len(word) >= 3 and len(token) >= 3 and (token.startswith(word) or word.startswith(token)):
        return 0.8
    allowed = len(word) // 4  # typos: 1 in a word of 4-7 letters, 2 from 8
    if not allowed or abs(len(word) - len(token)) > allowed:
        return 0.0
    d = _edits(word, token)
    return 0.6 * (1 - d / max(len(word), len(token))) if d <= allowed else 0.0


def _edits(a: str, b: str) -> int:
    """Edits (insert, delete, replace, swap two neighbours) that turn ``a`` into ``b``."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, prev2[j - 2] + 1)
            row.append(cost)
        prev2, prev = prev, row
    return prev[-1]


def _reason(word: str, where: str, token: str, langs: tuple[str, ...]) -> str:
    if where == "language":
        code = next((c for c in langs if token == c or token in LANGUAGES.get(c, ())), token)
        return f"{word!r}: written in {code}"
    if word == token:
        return f"{word!r} is in its {where}"
    how = "prefix" if token.startswith(word) or word.startswith(token) else "spelling"
    return f"{word!r} ~ {where} word {token!r} ({how})"


def complete_ids(resolver: Resolver, partial: str) -> list[str]:
    """Library ids for a partly typed id: prefix matches, then ids containing it, then close ones."""
    ids = resolver.catalog.library_ids()
    typed = partial.strip().lower()
    if not typed:
        return ids
    first = [i for i in ids if i.startswith(typed)]
    inside = [i for i in ids if typed in i and i not in first]
    fuzzy = [m.library.id for m in resolver.resolve(partial)[0] if m.library.id not in first + inside]
    return first + inside + fuzzy
