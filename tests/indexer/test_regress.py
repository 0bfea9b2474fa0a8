"""Search regression checks: metrics, expectations with tolerances, a worse bundle failing, baselines."""

from __future__ import annotations

from pathlib import Path

import pytest
from buildkit import golden_query, golden_toml
from docbundle.indexer.errors import ConfigError
from docbundle.indexer.release.metrics import mrr, ndcg, recall
from docbundle.indexer.release.regress import load_golden, regress, render_regress
from treekit import build

PAGES = {
    "install.md": "# Installation\n\nInstall the package with pip and set the API key in the environment.\n",
    "webhooks.md": "# Webhooks\n\nRegister a webhook endpoint; every event is signed with the signing secret.\n",
    "retries.md": "# Retries\n\nFailed requests are retried with exponential backoff up to max_retry_after.\n",
    "tables.md": "# Tables\n\nThe sap.m.Table control renders rows bound to a JSON model.\n",
}
TITLE_MATCH = {"ndcg10": {"value": 1.0, "tolerance": 0.0, "reason": "title match"}}
QUERIES = [
    golden_query("install", "how do I install the package", "install.md"),
    golden_query("signing", "webhook signing secret", "webhooks.md"),
    golden_query("backoff", "exponential backoff", "retries.md"),
    golden_query("table", "sap.m.Table rows", "tables.md"),
]
GOLDEN = golden_toml(
    [{**QUERIES[0], "expect": TITLE_MATCH}, *QUERIES[1:]],
    library="golden",
    expect={
        "ndcg10": {"value": 0.95, "tolerance": 0.05, "reason": "every query names its page"},
        "mrr10": {"value": 1.0, "tolerance": 0.0, "reason": "the answer ranks first"},
    },
)


def _build(root: Path, pages: dict[str, str], out: Path) -> Path:
    site = root / "site"
    site.mkdir(parents=True, exist_ok=True)
    for old in site.glob("*.md"):
        old.unlink()
    for name, text in pages.items():
        (site / name).write_text(text, encoding="utf-8")
    listing = "# Golden\n\n## Docs\n\n" + "".join(f"- [Page {i}]({n})\n" for i, n in enumerate(pages))
    (site / "llms.txt").write_text(listing, encoding="utf-8")
    return build(
        root / "libraries.toml", out, '[[library]]\nid = "golden"\nllms_txt = "site/llms.txt"\n'
    ).bundle


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    path = tmp_path / "golden.toml"
    path.write_text(GOLDEN, encoding="utf-8")
    return path


def test_metrics_follow_their_definitions() -> None:
    rel = {"a": 2, "b": 1}
    assert ndcg(["a", "b"], rel) == pytest.approx(1.0)
    assert ndcg(["b", "a"], rel) == pytest.approx((1 + 3 / 1.5849625) / (3 + 1 / 1.5849625))
    assert ndcg(["x"], rel) == 0.0
    assert mrr(["x", "b", "a"], rel) == pytest.approx(0.5)
    assert recall(["a", "x"], rel) == 0.5


def test_a_good_bundle_passes_every_expectation(tmp_path: Path, golden: Path) -> None:
    bundle = _build(tmp_path, PAGES, tmp_path / "out")
    report = regress(bundle, load_golden(golden))
    text = render_regress(report)
    assert report.failed == [], text
    assert text.count("[OK]") == 3 and "[FAIL]" not in text
    assert report.overall["mrr10"] == 1.0


def test_a_worse_bundle_fails_and_the_baseline_shows_what_changed(tmp_path: Path, golden: Path) -> None:
    good = _build(tmp_path, PAGES, tmp_path / "good")
    worse_pages = dict(PAGES)
    worse_pages["install.md"] = "# Setup notes\n\nSee the webhooks page for the signing secret.\n"
    worse_pages["retries.md"] = "# Retries\n\nNothing to see here.\n"
    worse = _build(tmp_path / "w", worse_pages, tmp_path / "worse")
    report = regress(worse, load_golden(golden), baseline=good)
    text = render_regress(report)
    assert report.failed, text
    assert "[FAIL] overall ndcg10" in text and "[FAIL] install ndcg10" in text
    assert {c["id"] for c in report.changed} >= {"backoff"}
    assert "changed their top results against the baseline" in text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[query]]\nid = "a"\ntext = "x"\nrelevant = {}\n', "needs a relevant page graded 1 or more"),
        ('[[query]]\nid = "a"\ntext = "x"\nrelevant = { "p.md" = 2 }\ntypo = 1\n', "unknown field"),
        ('[[query]]\nid = "a"\ntext = "x"\nrelevant = { "p.md" = 2 }\n' * 2, "unique"),
    ],
)
def test_malformed_golden_files_are_config_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "g.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_golden(path)


# Per query: kind, need, split; the one query expectation sits on a dev query.
LABELS = {
    "install": {"kind": "question", "need": "how-to", "split": "dev"},
    "signing": {"need": "concept", "split": "test"},
    "backoff": {"need": "config", "split": "dev", "expect": TITLE_MATCH},
    "table": {"need": "identifier", "split": "test"},
}


def _labelled(**changed: dict[str, object]) -> str:
    """The golden file with ``LABELS`` on its queries (``changed``: label updates by query id)."""
    queries = [{**q, **LABELS[str(q["id"])], **changed.get(str(q["id"]), {})} for q in QUERIES]
    expect = {"ndcg10": {"value": 1.0, "tolerance": 0.0, "reason": "set for every query"}}
    return golden_toml(queries, library="golden", expect=expect)


def test_need_and_split_give_means_per_half_and_select_one(tmp_path: Path) -> None:
    path = tmp_path / "labelled.toml"
    path.write_text(_labelled(), encoding="utf-8")
    golden = load_golden(path)
    bundle = _build(tmp_path, PAGES, tmp_path / "out")
    report = regress(bundle, golden)
    assert list(report.groups["split"]) == ["dev", "test", "all"]
    assert report.groups["split"]["dev"]["n"] == 2 and report.groups["need"]["how-to"]["n"] == 1
    text = render_regress(report)
    assert "split dev (n=2)" in text and "split test (n=2)" in text and "need identifier (n=1)" in text
    assert "[OK]   overall ndcg10" in text
    dev = regress(bundle, golden, split="dev")
    assert [r.id for r in dev.queries] == ["install", "backoff"]
    # Only the half's own expectations: the file-wide [expect] was set for every query.
    assert [(c.scope, c.metric) for c in dev.checks] == [("backoff", "ndcg10")]
    assert "dev half (2 queries)" in render_regress(dev)
    assert [r.id for r in regress(bundle, golden, split="test").queries] == ["signing", "table"]


@pytest.mark.parametrize(
    ("query", "label", "message"),
    [
        ("backoff", {"need": "configuration"}, "query 'backoff': unknown need 'configuration'"),
        ("table", {"split": "holdout"}, "query 'table': unknown split 'holdout'"),
    ],
)
def test_unknown_need_or_split_is_a_config_error(
    tmp_path: Path, query: str, label: dict[str, object], message: str
) -> None:
    path = tmp_path / "g.toml"
    path.write_text(_labelled(**{query: label}), encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_golden(path)


def test_the_baseline_comparison_carries_a_paired_test(tmp_path: Path, golden: Path) -> None:
    good = _build(tmp_path, PAGES, tmp_path / "good")
    same = regress(good, load_golden(golden), baseline=good)
    assert same.comparison["all"]["mean_diff"] == 0.0 and same.comparison["all"]["p"] == 1.0
    assert "against the baseline (all, 4 queries): nDCG@10 +0.0000, p = 1.0000" in render_regress(same)
    worse_pages = dict(PAGES)
    worse_pages["retries.md"] = "# Retries\n\nNothing to see here.\n"
    worse = _build(tmp_path / "w", worse_pages, tmp_path / "worse")
    report = regress(worse, load_golden(golden), baseline=good)
    c = report.comparison["all"]
    assert c["mean_diff"] < 0 and c["worse"] >= 1 and c["n"] == 4
    assert c["p"] > 0.05  # one query of four cannot be significant
    assert regress(worse, load_golden(golden), baseline=good).comparison == report.comparison  # fixed seed
