"""benchmarks/fusion.py (issue 36, items 2-3): which questions tune and which test, how a question's type is
read from its text, and that its fusion of two page lists is the server's (``docbundle.bundle.hybrid``).

No ../shared: the query sets are the committed ones; the rankings are made-up page lists."""

from __future__ import annotations

from benchkit import load_benchmark
from docbundle.bundle import hybrid


def test_test_is_the_fresh_sets_test_halves_and_every_other_question_tunes() -> None:
    fusion = load_benchmark("fusion")
    quality = load_benchmark("quality")
    for corpus in fusion.CORPORA:
        dev = fusion.questions_of(corpus, "dev")
        test = fusion.questions_of(corpus, "test")
        dev_ids, test_ids = {q.id for q in dev}, {q.id for q in test}
        assert not dev_ids & test_ids, corpus  # a question never tunes and tests
        fresh = quality.load_queries(quality.QUERIES_DIR / f"{corpus}{fusion.TEST_SETS}.toml")
        assert test_ids == {q.id for q in fresh if q.split == "test"} and test_ids, corpus
        # The -more and -fresh36 sets' test halves and the -r3 sets, each scored once by issue 36, tune now.
        for retired in ("-more", "-fresh36", "-r3"):
            seen = quality.load_queries(quality.QUERIES_DIR / f"{corpus}{retired}.toml")
            assert {q.id for q in seen} <= dev_ids, (corpus, retired)
        # Every question of the corpus's sets is in one of the two.
        every = {
            q.id
            for p in quality.QUERIES_DIR.glob("*.toml")
            if quality.set_corpus(p.stem) == corpus
            for q in quality.load_queries(p)
        }
        assert dev_ids | test_ids == every, corpus
        # `test --with-seen r3`: an unchanged ranking's tests as one, the -r3 set with the -r4 set
        both = {q.id for q in fusion.questions_of(corpus, "test", ("-r3",))}
        r3 = quality.load_queries(quality.QUERIES_DIR / f"{corpus}-r3.toml")
        assert both == test_ids | {q.id for q in r3}, corpus


def test_a_question_type_is_read_from_its_text_as_a_server_could() -> None:
    fusion = load_benchmark("fusion")
    for ident in (
        "useState initial value",
        "sap.m.Table growing",
        "os.path.join trailing slash",
        "call super().__init__",
        "my_var is undefined",
        "--force flag",
        "Vec<T> capacity",
        "std::mem::take",
    ):
        assert fusion.query_type(ident) == "identifier", ident
    for question in (
        "how do I split a string",
        "why is my list empty?",
        "如何添加元素",
        "どうやって使う",
        "어떻게 하나요",
    ):
        assert fusion.query_type(question) == "question", question
    for keyword in ("split string into array", "reclaim disk space after delete"):
        assert fusion.query_type(keyword) == "keyword", keyword


def test_the_benchmark_fuses_as_the_server_does() -> None:
    # fusion.py's script groups are the server's, and its served setting is hybrid's constants.
    fusion = load_benchmark("fusion")
    for text in ("배열 추가", "数组", "配列", "array", ""):
        assert fusion.script_of(text) == hybrid.script_of(text)
    served = fusion.served_setting()
    assert (served.depth, served.k, served.convex) == (hybrid.DEPTH, hybrid.K, True)  # fused by score
    assert served.alpha == {"latin": hybrid.ALPHA, "ko": hybrid.KOREAN_ALPHA, "cjk": hybrid.CJK_ALPHA}
