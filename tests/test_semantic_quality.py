"""benchmarks/semantic_quality.py's switch of passage recipe (issue 36, item 4): ``DOCBUNDLE_PLAIN_SCRIPTS``
chooses the scripts whose sections are embedded without markup, and each variant keeps its passage texts
in its own memo file, so neither reads the other's.

No model: a stand-in embedder (an identity and a word count for tokens) over a bundle built from a local
site of one English and one Chinese page written with the React docs' markup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchkit import load_benchmark
from docbundle.bundle.embed import RECIPES, EmbedderIdentity
from treekit import build, write_site

quality = load_benchmark("semantic_quality")

PAGES = {
    "hooks.md": "# Hooks {/*hooks*/}\n\n<Intro>\n\nHooks let you use state in a component.\n\n</Intro>\n",
    "state.md": "# 状态 {/*state*/}\n\n<Intro>\n\n组件需要根据交互更改屏幕上的内容。\n\n```js\nuseState(0);\n```\n",
}


class StandIn:
    """What ``load_corpus`` asks of an embedder: its identity and a token count."""

    identity = EmbedderIdentity("stand-in", "words", "1", 8, "0" * 64)

    def token_count(self, text: str, query: bool = False) -> int:
        return len(text.split()) + 3


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    llms = "# Demo\n\n> Two pages.\n\n## Docs\n\n- [Hooks](hooks.md)\n- [状态](state.md)\n"
    write_site(tmp_path / "site", PAGES, llms)
    config = tmp_path / "libraries.toml"
    config.write_text('[[library]]\nid = "demo"\nllms_txt = "site/llms.txt"\n', encoding="utf-8")
    return Path(build(config, tmp_path / "out").outcome.bundle or "")


@pytest.mark.parametrize(
    ("value", "scripts", "tag"),
    [
        (None, RECIPES[2], "-r2"),  # the build's own recipe
        ("hangul,han,kana", RECIPES[3], "-r3"),
        (" Kana, HAN ,hangul ", RECIPES[3], "-r3"),
        ("none", RECIPES[1], ""),  # recipe 1's memo files had no recipe in their name
        ("han", frozenset({"han"}), "-plain-han"),
    ],
)
def test_the_switch_names_a_recipe(
    monkeypatch: pytest.MonkeyPatch, value: str | None, scripts: frozenset[str], tag: str
) -> None:
    if value is None:
        monkeypatch.delenv(quality.ENV_PLAIN_SCRIPTS, raising=False)
    else:
        monkeypatch.setenv(quality.ENV_PLAIN_SCRIPTS, value)
    assert quality.passage_recipe() == (scripts, tag)


def test_an_unknown_script_stops_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(quality.ENV_PLAIN_SCRIPTS, "hangul,cyrillic")
    with pytest.raises(SystemExit, match="no script cyrillic; known: hangul, han, kana"):
        quality.passage_recipe()


def test_each_variant_embeds_its_own_passages_from_its_own_memo(
    tmp_path: Path, bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quality, "_CACHE_ROOT", [tmp_path / "cache"])
    embedder = StandIn()
    monkeypatch.delenv(quality.ENV_PLAIN_SCRIPTS, raising=False)
    default = quality.load_corpus("demo", bundle, embedder)
    monkeypatch.setenv(quality.ENV_PLAIN_SCRIPTS, "hangul,han,kana")
    cjk = quality.load_corpus("demo", bundle, embedder)
    memos = sorted(p.name for p in quality.cache_dir_of(embedder).glob("passages-*.json"))
    assert len(memos) == 2 and [m.split("-")[2] for m in memos] == ["r2", "r3"]

    # Page 1 is English, page 2 Chinese (title, heading path, text).
    assert len(default.passages) == len(cjk.passages) == 2
    assert default.passages[0] == cjk.passages[0]  # English: as written either way
    assert "{/*hooks*/}" in cjk.passages[0] and "<Intro>" in cjk.passages[0]
    assert "{/*state*/}" in default.passages[1] and "useState" in default.passages[1]  # recipe 2: as written
    assert cjk.passages[1] == "状态\n状态\n状态\n\n组件需要根据交互更改屏幕上的内容。"  # recipe 3: no markup
    assert cjk.keys[1] != default.keys[1] and cjk.recipe == "-r3" and default.recipe == "-r2"

    # Read again, each variant takes its texts from its own memo file.
    for memo in quality.cache_dir_of(embedder).glob("passages-*.json"):
        data = json.loads(memo.read_text(encoding="utf-8"))
        assert data["passages"] == (cjk.passages if "-r3-" in memo.name else default.passages)
    assert quality.load_corpus("demo", bundle, embedder).passages == cjk.passages
    monkeypatch.delenv(quality.ENV_PLAIN_SCRIPTS)
    assert quality.load_corpus("demo", bundle, embedder).passages == default.passages
