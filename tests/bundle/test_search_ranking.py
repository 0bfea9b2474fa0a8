"""Search over one bundle: query text is data, identifiers and CJK match, ranking rules hold."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from docbundle.bundle.reader import Bundle, open_bundle
from docbundle.bundle.search import MAX_WORDS, BundleSearcher
from hypothesis import given, settings
from hypothesis import strategies as st
from treekit import build

PAGES = {
    "guides/effects.md": "# Effects\n\nSynchronise with the outside world using the useEffect hook.\n\n"
    "## Cleanup\n\nReturn a cleanup function so the effect can unsubscribe.\n",
    "guides/state.md": "# State\n\nKeep values between renders with the useState hook.\n\n"
    "## Updating state\n\nCall the setter with the next state.\n",
    "guides/tables.md": "# Tables\n\nThe sap.m.Table control renders rows bound to a JSON model.\n\n"
    "## Growing\n\nSet growing to load rows in pages.\n",
    "guides/routing.md": "# Routing\n\nNavigation between views uses the router and its routes.\n\n"
    "## Targets\n\nA target names the view to display.\n",
    "guides/long.md": "# Long page\n\n"
    + "\n\n".join(f"## Part {i}\n\nThe routing table part {i}." for i in range(8)),
    "ko/widget.md": "# 결제위젯 연동하기\n\n결제위젯을 연동하는 방법을 알아봅니다.\n\n## 결제 요청\n\n승인 과정을 거칩니다.\n",
    "zh/database.md": "# 数据库\n\n如何配置数据库连接。\n",
    "ja/widget.md": "# 決済ウィジェット\n\n決済ウィジェットを連携する方法。\n",
    "extra/appendix.md": "# Appendix\n\nThe useEffect hook appendix, repeated: useEffect useEffect.\n",
    "guides/controls.md": "# Controls\n\nFind a control by its id with byId in the controller.\n",
    "guides/cast.md": "# Cast\n\nThe actor's role, the actor's line, the stage's cue, the crew's mark.\n",
    "zh/hooks.md": "# 副作用\n\n清理函数会在组件卸载时执行，也会在依赖变化后重新执行之前执行。\n",
}
LLMS = (
    "# Search fixture\n\n## Guides\n\n"
    + "".join(f"- [{p}]({p})\n" for p in PAGES if not p.startswith("extra/"))
    + "\n## Optional\n\n- [Appendix](extra/appendix.md)\n"
)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bundle]:
    root = tmp_path_factory.mktemp("search")
    site = root / "site"
    for rel, text in PAGES.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text, encoding="utf-8")
    (site / "llms.txt").write_text(LLMS, encoding="utf-8")
    built = build(
        root / "libraries.toml",
        root / "bundles",
        '[[library]]\nid = "fixture"\nllms_txt = "site/llms.txt"\nsynonyms = [["navigation", "routing"]]\n'
        "[library.chunking]\nmin_words = 3\n",
    ).bundle
    opened = open_bundle(built, use_mmap=False)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def searcher(bundle: Bundle) -> BundleSearcher:
    return BundleSearcher(bundle)


def _ids(bundle: Bundle, searcher: BundleSearcher, query: str, **kw: object) -> list[str]:
    return [bundle.store.get(h.doc).id for h in searcher.search(query, **kw).hits]  # type: ignore[arg-type]


def test_identifier_matches_whole_and_by_its_parts(bundle: Bundle, searcher: BundleSearcher) -> None:
    assert _ids(bundle, searcher, "useEffect")[0] == "guides/effects.md"
    assert _ids(bundle, searcher, "effect")[0] == "guides/effects.md"
    assert _ids(bundle, searcher, "sap.m.Table")[0] == "guides/tables.md"
    assert "guides/tables.md" in _ids(bundle, searcher, "Table")


def test_a_dotted_call_finds_the_page_naming_its_member(bundle: Bundle, searcher: BundleSearcher) -> None:
    # oView.byId: the page writes byId alone; the dotted form's parts (o, view, id; "by" is a stop word)
    # never meet in one chunk, so only the member's whole form can find it.
    assert _ids(bundle, searcher, "oView.byId")[:1] == ["guides/controls.md"]


def test_possessives_and_negations_leave_no_stray_letters(bundle: Bundle, searcher: BundleSearcher) -> None:
    # "user's settings" is about users and settings: the 's must not match every possessive.
    assert "guides/cast.md" not in _ids(bundle, searcher, "the user's settings", mode="broad")
    assert "guides/cast.md" not in _ids(bundle, searcher, "why doesn't it work", mode="broad")
    outcome = searcher.search("the actor's line isn't shown")
    assert "s" not in outcome.terms and "t" not in outcome.terms
    assert _ids(bundle, searcher, "the actor's line isn't shown")[:1] == ["guides/cast.md"]


def test_a_chinese_question_finds_its_page_without_every_bigram(
    bundle: Bundle, searcher: BundleSearcher
) -> None:
    # A whole clause is one CJK run; the page shares most of its bigrams, not all of them.
    assert _ids(bundle, searcher, "组件卸载的时候清理函数什么时候执行")[:1] == ["zh/hooks.md"]


@pytest.mark.parametrize(
    ("query", "page"),
    [
        ("결제위젯", "ko/widget.md"),
        ("위젯 연동", "ko/widget.md"),
        ("数据库", "zh/database.md"),
        ("ウィジェット", "ja/widget.md"),
    ],
)
def test_cjk_queries_find_their_pages(
    bundle: Bundle, searcher: BundleSearcher, query: str, page: str
) -> None:
    assert _ids(bundle, searcher, query)[0] == page


def test_english_stemming_matches_other_forms(bundle: Bundle, searcher: BundleSearcher) -> None:
    assert _ids(bundle, searcher, "renders")[0] in {"guides/state.md", "guides/tables.md"}
    assert "guides/tables.md" in _ids(bundle, searcher, "binding rows")


@pytest.mark.parametrize(
    ("query", "terms", "found", "absent"),
    [
        # A wildcard is no word: it matches nothing (a parser would match every term), and beside a
        # word it changes nothing; "p*" is the letter p, not every word starting with it ("part").
        ("*", [], [], ["guides/long.md", "guides/routing.md"]),
        ("routing *", ["rout"], ["guides/routing.md", "guides/long.md"], []),
        ("p*", ["p"], [], ["guides/long.md", "guides/tables.md"]),
        # A range is two words, not every term between them.
        ("[a TO z]", ["z"], [], ["guides/routing.md"]),
        # Brackets group nothing and break nothing.
        ("(", [], [], ["guides/routing.md"]),
        ("( routing", ["rout"], ["guides/routing.md"], []),
        ("routing (", ["rout"], ["guides/routing.md"], []),
        # Boolean words are (stop) words: NOT excludes nothing, AND requires nothing.
        ("NOT AND OR", [], [], ["guides/routing.md"]),
        ("NOT routing", ["rout"], ["guides/routing.md"], []),
        ("routing NOT tables", ["rout", "tabl"], ["guides/routing.md", "guides/tables.md"], []),
        ("routing AND tables", ["rout", "tabl"], ["guides/routing.md", "guides/tables.md"], []),
        # Field syntax is the word "title": "routing" is found in bodies too (long.md's only mention).
        ("title:routing", ["titl", "rout"], ["guides/long.md", "guides/routing.md"], []),
        # Fuzzy and boost marks are separators: "2" and "3" are words of their own.
        ("rout~2", ["rout", "2"], ["guides/routing.md"], []),
        ("^3", ["3"], ["guides/long.md"], []),
        # An unbalanced quote is a word, not an unterminated phrase.
        ('"unbalanced', ["unbalanc"], [], []),
    ],
)
def test_query_syntax_is_treated_as_text(
    bundle: Bundle,
    searcher: BundleSearcher,
    query: str,
    terms: list[str],
    found: list[str],
    absent: list[str],
) -> None:
    out = searcher.search(query, limit=20, per_doc=1)
    assert out.terms == terms
    ids = [bundle.store.get(h.doc).id for h in out.hits]
    assert set(found) <= set(ids), ids
    assert not set(absent) & set(ids), ids
    if not terms:
        assert ids == []


def test_field_syntax_does_not_restrict_the_field(bundle: Bundle, searcher: BundleSearcher) -> None:
    # "title:" is just the word "title"; the query still finds "tables" wherever it is.
    assert "guides/tables.md" in _ids(bundle, searcher, "title:tables")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_a_valid_query(searcher: BundleSearcher, text: str) -> None:
    out = searcher.search(text, limit=3)
    assert len(out.hits) <= 3


def test_no_document_takes_more_than_per_doc_hits(bundle: Bundle, searcher: BundleSearcher) -> None:
    ids = _ids(bundle, searcher, "routing table part", limit=10)
    assert ids.count("guides/long.md") == 2
    assert _ids(bundle, searcher, "routing table part", limit=10, per_doc=1).count("guides/long.md") == 1


def test_optional_section_ranks_below_an_equal_match(bundle: Bundle, searcher: BundleSearcher) -> None:
    ids = _ids(bundle, searcher, "useEffect hook")
    assert ids.index("guides/effects.md") < ids.index("extra/appendix.md")


def test_modes_differ_in_how_many_words_must_match(bundle: Bundle, searcher: BundleSearcher) -> None:
    precise = _ids(bundle, searcher, "useState growing", mode="precise")
    broad = _ids(bundle, searcher, "useState growing", mode="broad")
    assert precise == []
    assert {"guides/state.md", "guides/tables.md"} <= set(broad)


def test_quoted_phrase_requires_the_words_in_order(bundle: Bundle, searcher: BundleSearcher) -> None:
    assert _ids(bundle, searcher, '"cleanup function"')[0] == "guides/effects.md"
    assert _ids(bundle, searcher, '"function cleanup"') == []


def test_long_questions_are_pruned_and_say_what_was_dropped(searcher: BundleSearcher) -> None:
    question = "how do I make the router show a view when the user clicks " + " ".join(
        f"w{i}" for i in range(30)
    )
    out = searcher.search(question)
    assert len({t for t in out.terms}) <= MAX_WORDS * 3
    assert "how" in out.dropped
    assert len(out.dropped) >= 30 - MAX_WORDS


def test_synonyms_from_the_config_widen_a_word(bundle: Bundle, searcher: BundleSearcher) -> None:
    assert "guides/routing.md" in _ids(bundle, searcher, "navigation")
    assert _ids(bundle, searcher, "navigation", mode="precise")


def test_keywords_work_like_a_query(bundle: Bundle, searcher: BundleSearcher) -> None:
    out = searcher.search(keywords=["useState", "setter"])
    assert bundle.store.get(out.hits[0].doc).id == "guides/state.md"


def test_concurrent_searches_agree_with_serial_ones(searcher: BundleSearcher, tmp_path: Path) -> None:
    queries = ["useEffect", "routing", "결제위젯", '"cleanup function"', "sap.m.Table rows", "state"] * 10
    serial = [searcher.search(q) for q in queries]
    with ThreadPoolExecutor(8) as pool:
        parallel = list(pool.map(searcher.search, queries))
    assert parallel == serial


def test_a_fresh_searcher_over_a_copied_bundle_ranks_the_same(bundle: Bundle, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(bundle.path, copy)
    other = open_bundle(copy, use_mmap=False)
    try:
        assert BundleSearcher(other).search("routing table") == BundleSearcher(bundle).search("routing table")
    finally:
        other.close()


def test_warming_caches_the_commonest_terms_and_changes_no_answer(bundle: Bundle) -> None:
    import threading

    cold, warmed = BundleSearcher(bundle), BundleSearcher(bundle)
    assert warmed.warm(5) == 5 and len(warmed._cache) == 5
    for query in ("routing table", "useEffect cleanup", "결제위젯 연동", "sap.m.Table rows"):
        assert warmed.search(query, limit=10).hits == cold.search(query, limit=10).hits
    stop = threading.Event()
    stop.set()
    assert BundleSearcher(bundle).warm(5, stop) == 0  # a closing bundle stops the warm-up at once
