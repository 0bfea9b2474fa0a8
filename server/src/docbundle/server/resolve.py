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

In a big catalogue a word that reaches more than ``COMMON_SHARE`` of the libraries (and more than
``COMMON_MATCHES``) is common, like a stop word: the "lib" every generated id holds, "toolkit" in
every name. While the query has another word, a common one still adds to the score of the libraries
the others reach, but makes no library a match on its own ("lib-00123" answers lib-00123, not it and
9,999 libraries holding "lib"). A query of common words alone is ranked from the libraries its rarest
word reaches when no other library can score above the last of the top ``limit`` (its count is then
a lower bound, and the answer says "or more"), else from all of them.

Cost: the catalogue's words are indexed once per (re)load (per field, each distinct word with the
libraries holding it, the words sorted so a word's prefix extensions are one slice, counted by running
sums without visiting them; padded bigrams per word length that find a typo's candidates), so a query
costs what its words' near words hold, not a comparison with every library; a word's matches are
taken best first and stop once every library it can reach has its best; only the scores that can be
among the top are rounded and sorted. The languages come from the catalogue summary, computed from the
page titles once per build.

Bounds (issue 31: a 2,000-character query of words with few distinct letter pairs, ``abababab
acacacac ...``, scanned the whole vocabulary per word, 16.6 s at 10,000 libraries): at most
``MAX_RESOLVE_WORDS`` distinct words of a query are scored (the answer says when more were left out);
a word is compared letter by letter with at most ``MAX_TYPO_CANDIDATES`` of the catalogue's words, those
sharing the most padded letter pairs with it first; only words of at most ``MAX_TYPO_LETTERS`` letters
get typos; the words joined are compared only up to ``MAX_JOINED_CHARS``. So a query costs at most a
fixed number of words' lookups whatever its length, and cutting it into words is linear.
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain

from docbundle.bundle.summary import title_languages

from .catalog import Catalog, LibraryEntry, Snapshot
from .catalog.projection import words

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
# A query word whose matches reach more than this share of the libraries, and more than
# COMMON_MATCHES of them, is common: like a stop word, it makes no library a match on its own
# (``_Index.matches``). The floor keeps a catalogue of a few hundred libraries ranked in full.
COMMON_SHARE = 0.05
COMMON_MATCHES = 200
# The most distinct words of one query that are scored: a library's name is a few words ("react docs in
# korean" is two after the filler), and each word costs a lookup of the vocabulary (issue 31).
MAX_RESOLVE_WORDS = 10
# The most catalogue words one query word is compared with letter by letter for typos (an edit distance
# each), those sharing the most padded letter pairs first: a real typo shares all but 3 per edit, so it
# is among the first; a word of few distinct pairs ("abababab") no longer compares with every word.
MAX_TYPO_CANDIDATES = 100
# Longer words get no typos (their edit distance costs the square of the length; nobody types a 33-letter
# word expecting it to be corrected). Prefixes and exact matches still apply.
MAX_TYPO_LETTERS = 32
# The query's words joined ("sap ui5" -> "sapui5") are compared with ids and names up to this length
# (library ids are at most 100 characters and, typed, a few words).
MAX_JOINED_CHARS = 100


@dataclass(frozen=True)
class Match:
    """A library that matches a query, how well (0-1) and why."""

    library: LibraryEntry
    score: float
    why: str
    languages: tuple[str, ...]


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


def _prefixed(tokens: list[str], word: str) -> tuple[int, int]:
    """The range of the sorted ``tokens`` that start with ``word`` (``word`` itself included)."""
    return bisect.bisect_left(tokens, word), bisect.bisect_left(tokens, word + "\U0010ffff")


class _Vocabulary:
    """Every distinct word of the catalogue, with what finds the ones close to a query word without
    comparing it to each: a sorted list (prefixes) and, per padded bigram and word length, the words
    holding it (typos)."""

    def __init__(self, tokens: Iterable[str]) -> None:
        self.sorted = sorted(set(tokens))
        self.known = set(self.sorted)
        self.longest = max(map(len, self.sorted), default=0)
        grams: dict[tuple[str, int], list[int]] = defaultdict(list)
        for i, t in enumerate(self.sorted):
            for g in _bigrams(t):
                grams[g, len(t)].append(i)
        self.grams = {key: array("I", ids) for key, ids in grams.items()}

    def prefixes(self, word: str) -> list[str]:
        """The words of at least 3 letters that ``word`` (of at least 3) strictly extends, shortest first."""
        return [p for k in range(3, min(len(word), self.longest + 1)) if (p := word[:k]) in self.known]

    def typos(self, word: str) -> list[tuple[str, float]]:
        """The words within ``word``'s allowed edits that are neither it nor a prefix or extension of it,
        with their ``_closeness``; none for a word the catalogue holds as such ("lib-00123" is not also a
        typo of its 700 neighbours).

        Candidates share at least all but 3 per allowed edit of its padded bigrams (an edit changes at
        most 3: a swap of neighbours), and at least one in any case (of a word's ``n + 1`` padded pairs
        at most ``3 n / 4`` change), are within the allowed edits in length, and have letter counts that
        differ by at most 2 per allowed edit, which every word within the allowed edits does. Of those,
        the ``MAX_TYPO_CANDIDATES`` sharing the most pairs (ties in word order) are compared letter by
        letter; a word over ``MAX_TYPO_LETTERS`` letters gets none.
        """
        allowed = len(word) // 4
        if not allowed or len(word) > MAX_TYPO_LETTERS or word in self.known:
            return []
        grams = _bigrams(word)
        need = max(len(grams) - 3 * allowed, 1)
        lengths = range(max(len(word) - allowed, 1), len(word) + allowed + 1)
        counts = Counter(chain.from_iterable(self.grams.get((g, n), ()) for g in grams for n in lengths))
        shared = [(-n, i) for i, n in counts.items() if n >= need]
        if len(shared) > MAX_TYPO_CANDIDATES:
            shared = heapq.nsmallest(MAX_TYPO_CANDIDATES, shared)
        near = [self.sorted[i] for _, i in sorted(shared, key=lambda x: x[1])]
        letters = dict(Counter(word))
        out = []
        for t in near:
            if len(word) >= 3 and len(t) >= 3 and (t.startswith(word) or word.startswith(t)):
                continue  # scored as a prefix
            # an edit changes the letter counts by at most 2 (a swap of neighbours by none)
            if _letter_distance(letters, t) <= 2 * allowed and (c := _closeness(word, t)) > 0:
                out.append((t, c))
        return out

    def close(self, word: str) -> list[tuple[str, float]]:
        """The words ``_closeness`` scores above 0 against ``word`` (typos only of a word no library
        holds as such), with that score."""
        found = [(word, 1.0)] if word in self.known else []
        if len(word) >= 3:
            lo, hi = _prefixed(self.sorted, word)
            found += [(t, 0.8) for t in self.sorted[lo:hi] if t != word]
            found += [(p, 0.8) for p in self.prefixes(word)]
        return found + self.typos(word)


def _letter_distance(a: dict[str, int], b: str) -> int:
    """How many letters the letter counts ``a`` and the letters of ``b`` differ by (L1 distance)."""
    counts = dict(a)
    for ch in b:
        counts[ch] = counts.get(ch, 0) - 1
    return sum(abs(n) for n in counts.values())


# A group of one word's matches (``_Index._groups``): (score, field, the field's tokens scoring it, in
# order, and how many library matches they hold).
_Group = tuple[float, int, list[str], int]


class _Index:
    """The catalogue's words and, per field and word, the libraries holding it; built once per catalogue.

    Each field keeps its words sorted, so a word's prefix extensions in that field are one slice and
    the libraries they reach one difference of running counts (``_reach``) without visiting them.
    """

    def __init__(self, libs: list[LibraryEntry]) -> None:
        self.libs = libs
        self.rank = [0] * len(libs)  # each library's place in id order (ties of a score go by id)
        for place, i in enumerate(sorted(range(len(libs)), key=lambda i: libs[i].id)):
            self.rank[i] = place
        self.langs = [library_languages(lib) for lib in libs]
        by_field: list[dict[str, list[int]]] = [defaultdict(list) for _ in FIELDS]
        whole: dict[str, list[int]] = defaultdict(list)
        for i, lib in enumerate(libs):
            for f, tokens in enumerate(_fields(lib, self.langs[i])):
                for t in dict.fromkeys(tokens):
                    by_field[f][t].append(i)
            for x in dict.fromkeys(_compact(x) for x in (lib.id, lib.name) if x):
                whole[x].append(i)
        self.words = _Vocabulary(chain.from_iterable(by_field))
        self.postings = [{t: array("I", ids) for t, ids in field.items()} for field in by_field]
        self.sorted = [sorted(field) for field in by_field]
        self.reached: list[array[int]] = []  # per field: libraries reached by its words before each
        for f, tokens in enumerate(self.sorted):
            running = array("I", [0])
            for t in tokens:
                running.append(running[-1] + len(self.postings[f][t]))
            self.reached.append(running)
        self.wholes = _Vocabulary(whole)
        self.whole_postings = {t: array("I", v) for t, v in whole.items()}

    def _groups(self, word: str) -> list[_Group]:
        """``word``'s matches, best first: (weighted score, field, the field's tokens scoring that, how
        many library matches they hold), ties by field; the tokens of a group in order (the first one a
        library holds is named as its reason). A field's prefix extensions are one slice of its sorted
        words, counted by the running counts without visiting them."""
        groups: list[_Group] = []
        typos = self.words.typos(word)
        prefixes = self.words.prefixes(word) if len(word) >= 3 else []
        for f, name in enumerate(FIELDS):
            weight, postings = WEIGHTS[name], self.postings[f]
            if word in postings:
                groups.append((weight, f, [word], len(postings[word])))
            if len(word) >= 3:
                tokens = self.sorted[f]
                lo, hi = _prefixed(tokens, word)
                lo += lo < hi and tokens[lo] == word
                shorter = [p for p in prefixes if p in postings]
                if shorter or lo < hi:
                    held = sum(len(postings[p]) for p in shorter) + self.reached[f][hi] - self.reached[f][lo]
                    groups.append((0.8 * weight, f, shorter + tokens[lo:hi], held))
            groups.extend((c * weight, f, [t], len(postings[t])) for t, c in typos if t in postings)
        groups.sort(key=lambda g: (-g[0], g[1]))
        return groups

    def _best(
        self, groups: list[_Group], within: set[int] | None = None
    ) -> dict[int, tuple[float, int, str]]:
        """Each library's best match in ``groups`` (``within`` these libraries only, when given): (score,
        field, token); the first group and token on a tie. Stops once every library has its best."""
        found: dict[int, tuple[float, int, str]] = {}
        everyone = len(self.libs) if within is None else len(within)
        for score, f, tokens, _ in groups:
            if len(found) >= everyone:
                break
            postings = self.postings[f]
            for token in tokens:
                ids = postings[token]
                new = (within.intersection(ids) if within is not None else set(ids)).difference(found)
                if new:
                    found.update(dict.fromkeys(new, (score, f, token)))
        return found

    def matches(self, wanted: list[str], limit: int | None = None) -> tuple[list[Match], int, bool]:
        """The libraries scoring at least ``MIN_SCORE`` for ``wanted``, best first (ties by id), at most
        ``limit`` of them (None: all), how many match, and whether that count is exact.

        A word that reaches more than ``COMMON_SHARE`` of a big catalogue (and ``COMMON_MATCHES``) is
        common: while the query has another word, the common ones add to the score of the libraries
        the others reach but make no library a match on their own. A query of common words alone is
        ranked from its rarest word's libraries when that settles the top ``limit`` (no other library
        can score above the last of them; the count is then a lower bound), else from all of them.
        """
        if not wanted:
            return [], 0, True
        groups = {w: self._groups(w) for w in dict.fromkeys(wanted)}
        reach = {w: sum(g[3] for g in gs) for w, gs in groups.items()}
        common_at = max(COMMON_MATCHES, COMMON_SHARE * len(self.libs))
        rare = [w for w in groups if reach[w] <= common_at]
        if not rare and len(groups) > 1 and limit is not None:
            found, total, settled = self._rank(wanted, groups, [min(groups, key=reach.__getitem__)], limit)
            if settled:
                return found, total, False
        found, total, _ = self._rank(wanted, groups, rare or list(groups), limit)
        return found, total, True

    def _rank(
        self, wanted: list[str], groups: dict[str, list[_Group]], drivers: list[str], limit: int | None
    ) -> tuple[list[Match], int, bool]:
        """``matches`` over the libraries the ``drivers`` words reach (the other words scored on those
        alone): the top, their count, and whether no other library can rank among the top ``limit``."""
        best: dict[str, dict[int, tuple[float, int, str]]] = {w: self._best(groups[w]) for w in drivers}
        if len(drivers) < len(groups):
            reached = set(chain.from_iterable(best.values()))
            best.update((w, self._best(g, reached)) for w, g in groups.items() if w not in best)
        per_word = [best[w] for w in wanted]
        if len(per_word) == 1:
            scores = {i: hit[0] for i, hit in per_word[0].items()}
        else:
            totals: Counter[int] = Counter()
            for b in per_word:
                totals.update({i: hit[0] for i, hit in b.items()})
            scores = {i: q / len(wanted) for i, q in totals.items()}
        joined: dict[int, tuple[float, str]] = {}
        compact = _compact(" ".join(wanted))
        if len(wanted) > 1 and len(compact) <= MAX_JOINED_CHARS:  # "sap ui5" against "sapui5"
            for token, c in self.wholes.close(compact):
                for i in self.whole_postings[token]:
                    if c * 0.95 > max(scores.get(i, 0.0), joined.get(i, (0.0, ""))[0]):
                        joined[i] = (c * 0.95, token)
            scores.update((i, q) for i, (q, _) in joined.items())
        top, count = self._top(scores, limit)
        # A library the drivers do not reach scores at most the other words' best over the query's words.
        ceiling = sum(groups[w][0][0] for w in wanted if w not in drivers and groups[w]) / len(wanted)
        settled = len(drivers) == len(groups) or (
            limit is not None and len(top) == limit and top[-1][0] > round(ceiling, 3)
        )
        out = []
        for score, i in top:
            lib, langs = self.libs[i], self.langs[i]
            if i in joined:
                shown = next(x for x in (lib.id, lib.name) if x and _compact(x) == joined[i][1])
                why = f"{compact!r} (the words joined) ~ {shown!r}"
            else:
                why = "; ".join(
                    _reason(w, FIELDS[b[i][1]], b[i][2], langs)
                    for w, b in zip(wanted, per_word, strict=True)
                    if i in b
                )
            out.append(Match(lib, score, why, langs))
        return out, count, settled

    def _top(self, scores: dict[int, float], limit: int | None) -> tuple[list[tuple[float, int]], int]:
        """The best ``limit`` (None: all) of ``scores`` at least ``MIN_SCORE`` (rounded to 3 places, ties
        by id) and how many are. Only the scores that can be among them are rounded and sorted."""
        values = sorted(scores.values())
        count = len(values) - bisect.bisect_left(values, MIN_SCORE, key=_rounded)
        if not count:
            return [], 0
        floor = MIN_SCORE if limit is None or limit >= count else _rounded(values[-limit])
        lowest = values[bisect.bisect_left(values, floor, key=_rounded)]
        rank = self.rank
        pool = [(-_rounded(q), rank[i], i) for i, q in scores.items() if q >= lowest]
        best = sorted(pool) if limit is None else heapq.nsmallest(limit, pool)
        return [(-q, i) for q, _, i in best], count


def _rounded(score: float) -> float:
    """A score as answers show it and ranks use it: at most 1, rounded to 3 places."""
    return round(min(score, 1.0), 3)


def library_languages(lib: LibraryEntry) -> tuple[str, ...]:
    """The languages of a library's default version (the catalogue summary's, from its page titles)."""
    m = lib.default.meta
    return tuple(m.languages) if m is not None else tuple(title_languages([lib.name, lib.description]))


class Resolver:
    """Scores a catalogue's libraries against what a person calls them (see the module docstring)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def index(self) -> _Index:
        """The word index of the catalogue as it is now: a view of its snapshot, made once per snapshot
        (a reload, or a check that corrected an entry, serves a new one)."""
        return self.catalog.snapshot().view("resolve.words", _word_index)

    def resolve(self, query: str, limit: int | None = None) -> tuple[list[Match], int, bool]:
        """The libraries matching ``query``, best first (ties by id), at most ``limit`` (None: all), how
        many match in all, and whether that count is exact (else it is a lower bound)."""
        return self.index().matches(scored_words(query)[0], limit)


def _word_index(snapshot: Snapshot) -> _Index:
    return _Index(snapshot.libraries())


def scored_words(query: str) -> tuple[list[str], bool]:
    """The words of ``query`` that are scored (filler dropped unless it is all there is), at most
    ``MAX_RESOLVE_WORDS`` distinct ones in their order, and whether others were left out."""
    raw = words(query)
    wanted = [w for w in raw if w not in FILLER] or raw
    distinct = list(dict.fromkeys(wanted))
    if len(distinct) <= MAX_RESOLVE_WORDS:
        return wanted, False
    kept = set(distinct[:MAX_RESOLVE_WORDS])
    return [w for w in wanted if w in kept], True


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
    d = _edits(word, token, allowed)
    return 0.6 * (1 - d / max(len(word), len(token))) if d <= allowed else 0.0


def _edits(a: str, b: str, cap: int | None = None) -> int:
    """Edits (insert, delete, replace, swap two neighbours) that turn ``a`` into ``b``; past ``cap`` (when
    given) some number above it, found as soon as two rows in a row are all above it (a swap reaches
    back two rows)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, prev2[j - 2] + 1)
            row.append(cost)
        if cap is not None and min(row) > cap and min(prev) > cap:
            return cap + 1
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
