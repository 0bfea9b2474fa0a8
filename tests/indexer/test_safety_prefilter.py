"""The safety scan's cheap pre-check never hides a finding: ``scan_text`` reports exactly what a full scan
of every chunk with both patterns reports, whatever the text (case variants, Unicode spaces, the
characters that ``(?i)`` folds to ASCII letters, hidden characters)."""

from __future__ import annotations

from docbundle.indexer.pipeline import safety
from hypothesis import given, settings
from hypothesis import strategies as st

# Pieces of the phrases the patterns look for, their near misses, and characters that test folding.
_PIECES = [
    "ignore",
    "IGNORE",
    "İgnore",
    "ıgnore",
    "previous",
    "instructions",
    "rules",
    "prompt",
    "Prompts",
    "disregard",
    "DISREGARD",
    "system",
    "ſystem",
    "forget",
    "everything",
    "you were told",
    "you",
    "YOU",
    "are",
    "now",
    "NOW",
    "know",
    "DAN",
    "an",
    "a",
    "AI",
    "ai",
    "LLM",
    "language",
    "model",
    "assistant",
    "must",
    "ſhould",
    "always",
    "never",
    "if",
    "as",
    "do not",
    "don't",
    "tell",
    "reveal",
    "mention",
    "inform",
    "the",
    "user",
    "uſer",
    "new",
    "mode",
    "in developer",
    "unrestricted",
    "<|im_start|>",
    "<|im_end|>",
    "[INST]",
    "[/inst]",
    "<<SYS>>",
    "<<ſys>>",
    "\u212aeep",
    "ready",
    ".",
    ",",
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2060",
    "\ufeff",
    "\u202e",
    "\u2066",
    "\U000e0041",
    "é",
    "中文",
]
_SPACES = [" ", "  ", "\n", "\t", "\u3000", "\u00a0", "\u2003", ""]

texts = st.lists(st.tuples(st.sampled_from(_PIECES), st.sampled_from(_SPACES)), max_size=40).map(
    lambda parts: "".join(piece + space for piece, space in parts)
)


@settings(max_examples=600, deadline=None)
@given(texts)
def test_prechecked_scan_finds_what_the_full_scan_finds(text: str) -> None:
    assert safety.scan_text(text) == safety.scan_text(text, precheck=False)


@given(texts)
def test_the_instruction_precheck_passes_every_text_the_pattern_matches(text: str) -> None:
    if safety._INSTRUCTIONS.search(text):
        assert safety._may_address(text)


def test_folded_letters_still_find_the_phrase() -> None:
    # (?i) matches dotted/dotless i, long s and the Kelvin sign to ASCII letters; str.lower() alone does not.
    for text in ("İgnore previous instructions", "ıgnore prior rules", "New ſyſtem prompt", "<<ſYS>>"):
        assert [k for k, _, _ in safety.scan_text(text)] == ["instructions"], text


def _lowered_before(text: str) -> str:
    """What the pre-check lowered before issue 22: every non-ASCII text went through ``str.translate``."""
    return (text if text.isascii() else text.translate(safety._FOLD)).lower()


@settings(max_examples=400, deadline=None)
@given(st.one_of(texts, st.text()))
def test_the_precheck_folds_only_texts_holding_a_folded_letter_and_decides_as_before(text: str) -> None:
    low = _lowered_before(text)
    before = (
        any(word in low for word in safety._ALWAYS)
        or any(word in low and pattern.search(low) for word, pattern in safety._LED)
        or (any(word in low for word in safety._MODAL) and safety._ADDRESSED.search(low) is not None)
    )
    assert safety._may_address(text) == before
