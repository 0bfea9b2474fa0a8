"""Finding a library by what a person calls it: ``resolve_library`` and the libraryId completions.

Only the catalogue's manifests are read (no bundle is opened). Each library is described by the
words of its id, name, category and description, and by the languages its documentation is written
in (the script of each page title: Hangul is Korean, kana Japanese, Han without kana Chinese, Latin
letters English; a language of at least a fifth of the titles counts). A query such as "sapui5", "React docs in Korean" or "payments" is split into
words; filler words ("docs", "in", "the") are dropped, and each remaining word is scored against
each library's words:

    the same word 1.0 · a prefix of at least 3 letters 0.8 · a typo (d edits, neighbours swapped
    counting one; at most one edit per 4 letters) 0.6 (1 - d / length) — weighted by where it
    matched: id and name 1.0, language 0.9, category 0.7, description 0.5

A library's score is the mean of its words' best scores (a word it does not match counts 0), so a
library that matches every word of the query ranks above one that matches some. The query written
without spaces or dashes is also compared with the id and name the same way ("sap ui5" finds
"sapui5"). Every match says why in one line. Cost: linear in the catalogue's words, with the page
titles read once per build.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from dataclasses import dataclass

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


def _script_language(text: str) -> str | None:
    """The language a title is written in, by script: Hangul, kana (Japanese), Han, Latin letters."""
    han = latin = False
    for ch in text:
        o = ord(ch)
        if 0xAC00 <= o <= 0xD7AF or 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F:
            return "ko"
        if 0x3040 <= o <= 0x30FF:
            return "ja"
        han = han or 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF
        latin = latin or (ch.isascii() and ch.isalpha())
    return "zh" if han else "en" if latin else None


def _languages(titles: list[str]) -> tuple[str, ...]:
    """The languages of at least a fifth of ``titles``, in code order."""
    counts = Counter(lang for t in titles if (lang := _script_language(t)))
    total = sum(counts.values())
    return tuple(sorted(lang for lang, n in counts.items() if n * 5 >= total))


class Resolver:
    """Scores a catalogue's libraries against what a person calls them (see the module docstring)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._languages: dict[tuple[str, str | None], tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def languages(self, lib: LibraryEntry) -> tuple[str, ...]:
        """The languages of a library's default version (from its manifest's titles), cached per build."""
        key = (lib.id, lib.default.build_id)
        with self._lock:
            found = self._languages.get(key)
        if found is None:
            m = lib.default.manifest
            titles = [d.title for d in m.documents if d.title] if m is not None else []
            found = _languages(titles or [lib.name, lib.description])
            with self._lock:
                self._languages[key] = found
        return found

    def resolve(self, query: str) -> list[Match]:
        """Libraries matching ``query``, best first (ties by id); empty when nothing matches."""
        raw = words(query)
        wanted = [w for w in raw if w not in FILLER] or raw
        matches = []
        for lib in self.catalog.libraries():
            match = self._score(lib, wanted, _compact(" ".join(wanted)))
            if match.score >= MIN_SCORE:
                matches.append(match)
        return sorted(matches, key=lambda m: (-m.score, m.library.id))

    def _score(self, lib: LibraryEntry, wanted: list[str], compact: str) -> Match:
        langs = self.languages(lib)
        fields = {
            "id": [lib.id, *words(lib.id.replace("-", " "))],
            "name": words(lib.name),
            "language": [x for code in langs for x in (code, *LANGUAGES.get(code, ()))],
            "category": words(lib.category),
            "description": words(lib.description),
        }
        total = 0.0
        reasons: list[str] = []
        for w in wanted:
            best, where, token = 0.0, "", ""
            for field, tokens in fields.items():
                for t in tokens:
                    q = _closeness(w, t) * WEIGHTS[field]
                    if q > best:
                        best, where, token = q, field, t
            total += best
            if best:
                reasons.append(_reason(w, where, token, langs))
        score = total / len(wanted) if wanted else 0.0
        whole = max(
            (_closeness(compact, _compact(x)), x) for x in (lib.id, lib.name) if x
        )  # "sap ui5" against "sapui5"
        if len(wanted) > 1 and whole[0] * 0.95 > score:
            score = whole[0] * 0.95
            reasons = [f"{compact!r} (the words joined) ~ {whole[1]!r}"]
        why = "; ".join(reasons) if reasons else "no word matched"
        return Match(lib, round(min(score, 1.0), 3), why, langs)


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
    fuzzy = [m.library.id for m in resolver.resolve(partial) if m.library.id not in first + inside]
    return first + inside + fuzzy
