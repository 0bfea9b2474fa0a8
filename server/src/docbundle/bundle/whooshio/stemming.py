"""whoosh's text analysis as docbundle uses it: the analyzer's base classes and stop words, and
porter2 stemming (``porter2_stem``, whoosh's stemmer with steps 2 to 4 skipped where they cannot apply)."""

from __future__ import annotations

from whoosh.analysis import Token, Tokenizer
from whoosh.analysis.filters import STOP_WORDS
from whoosh.lang import porter2 as _porter2

__all__ = ["STOP_WORDS", "Token", "Tokenizer", "porter2_stem"]

# -- stemming ----------------------------------------------------------------------------------------

# The suffixes steps 2, 3 and 4 of whoosh's porter2 look for: a word ending in none of a step's is left
# as it is by that step, which then reads every suffix of its list through a helper call.
_STEP2_ENDS = tuple(end for end, _, _ in _porter2.s2_triples)
_STEP3_ENDS = tuple(end for end, _, _ in _porter2.s3_triples)
_STEP4_ENDS = (*_porter2.s4_delete_list, "sion", "tion")


def porter2_stem(word: str) -> str:
    """whoosh's ``porter2.stem``, step for step, except that steps 2 to 4 run only on a word ending in
    one of their suffixes (about half the time it took; ``tests/bundle/test_whoosh_door.py`` holds it
    equal to whoosh's)."""
    p = _porter2
    if len(word) <= 2:
        return word
    word = p.remove_initial_apostrophe(word)
    exceptional: str | None = p.exceptional_forms.get(word)
    if exceptional is not None:
        return exceptional
    word = p.capitalize_consonant_ys(word)
    r1 = p.get_r1(word)
    r2 = p.get_r2(word)
    word = p.step_0(word)
    word = p.step_1a(word)
    if word in p.exceptional_early_exit_post_1a:
        return word
    word = p.step_1b(word, r1)
    word = p.step_1c(word)
    if word.endswith(_STEP2_ENDS):
        word = p.step_2(word, r1)
    if word.endswith(_STEP3_ENDS):
        word = p.step_3(word, r1, r2)
    if word.endswith(_STEP4_ENDS):
        word = p.step_4(word, r2)
    word = p.step_5(word, r1, r2)
    return str(p.normalize_ys(word))
