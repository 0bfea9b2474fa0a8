"""Posting values: what whoosh's ``Positions`` and ``Frequency`` formats store for a field, computed
straight from the analyzer's terms (the indexer's hot loop), and whoosh's own ``FieldType.index``."""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Iterable, Mapping

from whoosh.fields import Schema
from whoosh.system import pack_uint

__all__ = [
    "FieldPostings",
    "PostingItem",
    "frequency_items",
    "grouped_frequency_items",
    "grouped_positions_items",
    "index_field",
    "positions_items",
]

#: One posting as whoosh's writer pool takes it: ``(term bytes, frequency, weight, encoded value)``.
PostingItem = tuple[bytes, int, float, bytes]
#: A field's postings for one document, and the field's length in terms.
FieldPostings = tuple[list[PostingItem], int]


# -- posting values (the indexer's analysis) --------------------------------------------------------


def positions_items(terms: Iterable[tuple[str, int, int, int]]) -> FieldPostings:
    """Exactly what whoosh's ``Positions`` format + ``FieldType.index`` yield for these analysed terms.

    ``terms`` are ``(term, position, startchar, endchar)`` as ``analysis.iter_terms`` yields them.
    """
    poses: dict[str, list[int]] = {}
    for term, pos, _, _ in terms:
        found = poses.get(term)
        if found is None:
            poses[term] = [pos]
        else:
            found.append(pos)
    return grouped_positions_items(poses)


# The pickled position list of a term found once, by its position: most terms of a chunk occur once.
# Each value is a new bytes object (the prefix + the cached pickle): whoosh pickles a block's values
# together, and pickle would write a shared object once and refer to it after, changing the bytes.
_ONCE: dict[int, bytes] = {}
_ONCE_MAX = 100_000
_ONE = pack_uint(1)


def grouped_positions_items(poses: Mapping[str, list[int]]) -> FieldPostings:
    """``positions_items`` of terms already grouped: each term's positions, terms in first-seen order."""
    items = []
    length = 0
    once = _ONCE
    for term, poslist in poses.items():
        n = len(poslist)
        length += n
        if n == 1:
            pos = poslist[0]
            pickled = once.get(pos)
            if pickled is None:
                if len(once) >= _ONCE_MAX:
                    once.clear()
                pickled = once[pos] = pickle.dumps([pos], 2)
            items.append((term.encode("utf-8"), 1, 1.0, _ONE + pickled))
            continue
        deltas = [poslist[0], *[b - a for a, b in itertools.pairwise(poslist)]]
        items.append((term.encode("utf-8"), n, float(n), pack_uint(n) + pickle.dumps(deltas, 2)))
    return items, length


def frequency_items(terms: Iterable[tuple[str, int, int, int]]) -> FieldPostings:
    """Exactly what whoosh's ``Frequency`` format + ``FieldType.index`` yield for these analysed terms."""
    freqs: dict[str, int] = {}
    for term, _, _, _ in terms:
        freqs[term] = freqs.get(term, 0) + 1
    items = [(term.encode("utf-8"), n, float(n), pack_uint(n)) for term, n in freqs.items()]
    return items, sum(freqs.values())


def grouped_frequency_items(poses: Mapping[str, list[int]]) -> FieldPostings:
    """``frequency_items`` of terms already grouped (their positions are only counted)."""
    items = [(term.encode("utf-8"), len(p), float(len(p)), pack_uint(len(p))) for term, p in poses.items()]
    return items, sum(len(p) for p in poses.values())


def index_field(schema: Schema, name: str, value: str) -> FieldPostings:
    """Field ``name``'s postings for ``value`` through whoosh's own analysis (``FieldType.index``)."""
    field = schema[name]
    items = list(field.index(value))
    length = sum(freq for _, freq, _, _ in items) if field.scorable else 0
    return items, length
