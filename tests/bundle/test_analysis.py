"""The analyzer: English stemming, code identifiers, CJK bigrams, Unicode normalisation."""

from __future__ import annotations

import pickle

from docbundle.bundle.analysis import DocTokenizer, analyze, iter_terms, term_positions
from docbundle.bundle.schema import make_schema
from hypothesis import given, settings
from hypothesis import strategies as st
from whoosh.fields import Schema


def test_english_uses_porter2_not_the_buggy_porter() -> None:
    assert analyze("running hopping sitting payments") == ["run", "hop", "sit", "payment"]


def test_stop_words_are_dropped() -> None:
    assert analyze("the guide to a config") == ["guid", "config"]


def test_camel_case_identifier_is_kept_whole_and_split() -> None:
    assert analyze("useEffect") == ["useeffect", "use", "effect"]


def test_dotted_name_is_kept_whole_and_split() -> None:
    terms = analyze("sap.m.Table")
    assert terms[0] == "sap.m.table"
    assert {"sap", "m", "tabl"} <= set(terms)


def test_snake_case_and_acronyms_split() -> None:
    assert analyze("max_retry_after") == ["max_retry_after", "max", "retri", "after"]
    assert analyze("HTTPServer")[:3] == ["httpserver", "http", "server"]


def test_korean_chinese_japanese_become_bigrams() -> None:
    assert analyze("결제위젯을 연동") == ["결제", "제위", "위젯", "젯을", "연동"]
    assert analyze("数据库") == ["数据", "据库"]
    assert analyze("ウィジェット")[:2] == ["ウィ", "ィジ"]


def test_single_cjk_character_is_a_unigram_and_latin_inside_stays_a_word() -> None:
    assert analyze("SDK로 webhooks") == ["sdk", "로", "webhook"]


def test_full_width_letters_are_normalised() -> None:
    assert analyze("ＡＰＩ") == ["api"]


def test_positions_and_offsets_point_into_the_original_text() -> None:
    text = "Call useEffect now"
    toks = [(t.text, t.pos, t.startchar, t.endchar) for t in DocTokenizer()(text, positions=True, chars=True)]
    assert ("useeffect", 1, 5, 14) in toks
    assert ("use", 1, 5, 14) in toks  # parts share the whole identifier's position
    assert toks[-1] == ("now", 2, 15, 18)


def test_schema_pickles_by_import_path() -> None:
    # whoosh pickles the schema: the analyzer must resolve from its module, not __main__.
    data = pickle.dumps(make_schema())
    assert b"docbundle.bundle.analysis" in data
    assert isinstance(pickle.loads(data), Schema)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_analysis_never_raises_and_yields_no_empty_terms(text: str) -> None:
    terms = analyze(text)
    assert all(terms)
    toks = list(DocTokenizer()(text, positions=True, chars=True))
    assert all(0 <= t.startchar <= t.endchar <= len(text) for t in toks)


_WORDS = st.sampled_from(
    [
        "useEffect",
        "sap.m.Table",
        "the",
        "Running",
        "HTTP",
        "x2",
        "std::vector",
        "결제위젯",
        "中",
        "ＡＢＣ",
        "İstanbul",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_WORDS, st.text(max_size=8)), max_size=30))
def test_term_positions_are_iter_terms_grouped_by_term(words: list[str]) -> None:
    # The indexer's grouped fast path and the tokenizer the server queries with must agree exactly,
    # including the order in which terms first appear (it orders a chunk's postings).
    text = " ".join(words)
    grouped: dict[str, list[int]] = {}
    for term, pos, _, _ in iter_terms(text):
        grouped.setdefault(term, []).append(pos)
    positions = term_positions(text)
    assert list(positions.items()) == list(grouped.items())


_LATIN = st.sampled_from(
    [
        "run",
        "Running",
        "runs",
        "useEffect",
        "use",
        "effect",
        "use_effect",
        "sap.m.Table",
        "table",
        "std::vector",
        "built-in",
        "a/b",
        "x2",
        "2x",
        "the",
        "HTTP",
        "ＡＢＣ",
        "İstanbul",
        "café",
        "naïve",
        "ß",
        "\u00b2",
        "\u0661\u0662",
        "_",
        "--",
        "::",
        ".",
        "¶",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(_LATIN, st.text(max_size=6)), st.sampled_from([" ", "", ".", "-", "\n", "::", "/"])
        ),
        max_size=40,
    ).map(lambda parts: "".join(word + sep for word, sep in parts))
)
def test_term_positions_without_cjk_are_the_token_by_token_pass(text: str) -> None:
    # Text without CJK takes the word-only pass (issue 22): the same terms, positions and order as
    # the pass that reads every token through the CJK-aware pattern, and as iter_terms.
    from docbundle.bundle import analysis

    grouped: dict[str, list[int]] = {}
    for term, pos, _, _ in iter_terms(text):
        grouped.setdefault(term, []).append(pos)
    positions = term_positions(text)
    assert list(positions.items()) == list(analysis._term_positions_cjk(text).items())
    assert list(positions.items()) == list(grouped.items())
