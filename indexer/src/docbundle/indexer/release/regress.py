"""Search regression checks: golden queries with graded relevance, run against a bundle.

A golden file (TOML) holds queries, each with the documents that answer it graded 2 (the answer) or 1
(helps), 0 for a page judged not relevant (or, with ``scale = "0-3"``, 3 = answers, 2 = answers partly,
1 = related: ``metrics.SCALES``), and the metric values the search is expected to reach, each with a tolerance and the reason
for the number::

    library = "docbundle"

    [expect]
    ndcg10 = { value = 0.91, tolerance = 0.02, reason = "baseline of 2026-11-21" }

    [[query]]
    id = "content-hash"
    text = "what makes two builds the same bundle"
    relevant = { "bundle-format.md" = 2, "indexer.md" = 1 }
    expect = { ndcg10 = { value = 1.0, tolerance = 0.0, reason = "the page is titled for it" } }

Metrics are document-level over the top 10 distinct documents (one hit per document): nDCG@10 with
gains 2^grade - 1, MRR@10 (first document with grade >= 1), Recall@10 (share of graded documents found),
as defined in ``release/metrics.py``.

A query may also carry ``need`` (how-to | concept | api | error | config | identifier) and ``split``
(dev | test); unknown values are refused. When queries carry ``kind``, ``need`` or ``split``, the report
adds means per value (per split: dev, test and all). ``split`` selects one half (``all`` by default);
with a half selected, only that half's queries and their own expectations are checked (the file-wide
``[expect]`` was set for every query, so it is checked only with ``all``).

``regress`` prints ``[OK]`` / ``[FAIL]`` per expectation and fails on any FAIL; with a baseline bundle it
also lists the queries whose top results changed and tests the per-query nDCG@10 differences with a
paired randomization test (``metrics.paired_test``: 10,000 sign flips, fixed seed, two-sided p).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

import msgspec
from docbundle.bundle.reader import open_bundle
from docbundle.bundle.search import BundleSearcher

from ..errors import ConfigError
from .metrics import (
    DEFAULT_SCALE,
    DEPTH,
    check_grades,
    check_labels,
    group_means,
    in_split,
    mrr,
    ndcg,
    paired_test,
    recall,
)

Metric = Literal["ndcg10", "mrr10", "recall10"]
METRICS: tuple[Metric, ...] = ("ndcg10", "mrr10", "recall10")


class Expectation(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A metric value a query (or the whole set) must reach, give or take ``tolerance``."""

    value: float
    tolerance: float = 0.0
    reason: str = ""


class GoldenQuery(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One golden query and its graded relevant documents."""

    id: str
    text: str
    relevant: dict[str, int]
    kind: str = ""
    need: str = ""
    split: str = ""
    mode: Literal["balanced", "broad", "precise"] = "balanced"
    expect: dict[Metric, Expectation] = {}


class GoldenSet(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A golden file."""

    library: str = ""
    scale: str = DEFAULT_SCALE  # the grades' scale: "1-2" or "0-3" (metrics.SCALES)
    expect: dict[Metric, Expectation] = {}
    query: list[GoldenQuery] = []


class QueryResult(msgspec.Struct):
    """What one golden query got."""

    id: str
    text: str
    ranked: list[str]
    ndcg10: float
    mrr10: float
    recall10: float


class Check(msgspec.Struct):
    """One expectation checked: ``[OK]`` or ``[FAIL]``."""

    scope: str  # "overall" or a query id
    metric: str
    value: float
    expected: float
    tolerance: float
    reason: str
    ok: bool


class RegressReport(msgspec.Struct, kw_only=True):
    """The outcome of a regression run."""

    bundle: str
    library: str
    build_id: str
    content_hash: str
    queries: list[QueryResult]
    overall: dict[str, float]
    checks: list[Check]
    changed: list[dict[str, object]] = []
    split: str = "all"
    groups: dict[str, dict[str, dict[str, float]]] = {}
    comparison: dict[str, dict[str, float]] = {}

    @property
    def failed(self) -> list[Check]:
        """The checks that failed."""
        return [c for c in self.checks if not c.ok]


def load_golden(path: Path) -> GoldenSet:
    """Read a golden file; ConfigError names what is wrong."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        golden = msgspec.convert(raw, GoldenSet)
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: golden file not found") from exc
    except (tomllib.TOMLDecodeError, msgspec.ValidationError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    ids = [q.id for q in golden.query]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{path}: query ids must be unique")
    for q in golden.query:
        try:
            check_grades(q.id, q.relevant, golden.scale)
            check_labels(q.id, q.need, q.split)
        except ValueError as exc:
            raise ConfigError(f"{path}: {exc}") from exc
    return golden


def run_queries(bundle_path: Path, golden: GoldenSet) -> tuple[list[QueryResult], dict[str, str]]:
    """Run every golden query; returns the results and the bundle's identity."""
    bundle = open_bundle(bundle_path, use_mmap=False)
    try:
        searcher = BundleSearcher(bundle)
        results = []
        for q in golden.query:
            hits = searcher.search(q.text, mode=q.mode, limit=DEPTH, per_doc=1).hits
            ranked = [bundle.store.get(h.doc).id for h in hits]
            results.append(
                QueryResult(
                    q.id,
                    q.text,
                    ranked,
                    round(ndcg(ranked, q.relevant), 4),
                    round(mrr(ranked, q.relevant), 4),
                    round(recall(ranked, q.relevant), 4),
                )
            )
        m = bundle.manifest
        ident = {"library": m.library.id, "build_id": m.build.build_id, "content_hash": m.build.content_hash}
        return results, ident
    finally:
        bundle.close()


def _check(scope: str, metric: str, value: float, exp: Expectation) -> Check:
    ok = value >= exp.value - exp.tolerance - 1e-9
    return Check(scope, metric, value, exp.value, exp.tolerance, exp.reason, ok)


def regress(
    bundle: Path, golden: GoldenSet, *, baseline: Path | None = None, split: str = "all"
) -> RegressReport:
    """Run the golden queries (of one ``split``, or all) against ``bundle`` and check every expectation."""
    if split != "all":
        golden = msgspec.structs.replace(golden, query=[q for q in golden.query if in_split(q.split, split)])
    results, ident = run_queries(bundle, golden)
    n = max(len(results), 1)
    overall: dict[str, float] = {m: round(sum(getattr(r, m) for r in results) / n, 4) for m in METRICS}
    checks = [_check("overall", m, overall[m], e) for m, e in golden.expect.items()] if split == "all" else []
    labels = [{"kind": q.kind, "need": q.need, "split": q.split} for q in golden.query]
    groups = group_means(
        [(lab, {m: getattr(r, m) for m in METRICS}) for lab, r in zip(labels, results, strict=True)]
    )
    by_id = {r.id: r for r in results}
    for q in golden.query:
        checks += [_check(q.id, m, getattr(by_id[q.id], m), e) for m, e in q.expect.items()]
    changed: list[dict[str, object]] = []
    comparison: dict[str, dict[str, float]] = {}
    if baseline is not None:
        before, _ = run_queries(baseline, golden)
        halves = ["all", *sorted({q.split for q in golden.query if q.split})] if split == "all" else [split]
        for half in halves:
            pairs = [
                (o.ndcg10, r.ndcg10)
                for o, r, q in zip(before, results, golden.query, strict=True)
                if in_split(q.split, half)
            ]
            c = paired_test([a for a, _ in pairs], [b for _, b in pairs])
            comparison[half] = {
                "n": c.n,
                "mean_diff": c.mean_diff,
                "p": c.p,
                "better": c.better,
                "worse": c.worse,
                "permutations": c.permutations,
                "seed": c.seed,
            }
        for old, new in zip(before, results, strict=True):
            if old.ranked != new.ranked:
                changed.append(
                    {
                        "id": new.id,
                        "text": new.text,
                        "before": old.ranked[:5],
                        "after": new.ranked[:5],
                        "ndcg10": [old.ndcg10, new.ndcg10],
                    }
                )
    return RegressReport(
        bundle=str(bundle),
        library=ident["library"],
        build_id=ident["build_id"],
        content_hash=ident["content_hash"],
        queries=results,
        overall=overall,
        checks=checks,
        changed=changed,
        split=split,
        groups=groups,
        comparison=comparison,
    )


def render_regress(report: RegressReport, *, per_query: bool = True) -> str:
    """The readable report: metrics per query and overall, then one [OK]/[FAIL] line per expectation."""
    lines = [f"{report.library} build {report.build_id} (content {report.content_hash[:12]})"]
    if per_query:
        lines.append(f"  {'query':<32} {'nDCG@10':>8} {'MRR@10':>7} {'R@10':>6}")
        for r in report.queries:
            lines.append(f"  {r.id[:32]:<32} {r.ndcg10:8.3f} {r.mrr10:7.3f} {r.recall10:6.3f}")
    o = report.overall
    scope = "overall" if report.split == "all" else f"{report.split} half"
    lines.append(
        f"  {scope + ' (' + str(len(report.queries)) + ' queries)':<32} {o['ndcg10']:8.3f} {o['mrr10']:7.3f} "
        f"{o['recall10']:6.3f}"
    )
    if per_query:
        for key, groups in report.groups.items():
            for value, means in groups.items():
                label = f"{key} {value} (n={int(means['n'])})"
                lines.append(
                    f"  {label[:32]:<32} {means['ndcg10']:8.3f} {means['mrr10']:7.3f} {means['recall10']:6.3f}"
                )
    for c in report.checks:
        mark = "[OK]  " if c.ok else "[FAIL]"
        why = f" ({c.reason})" if c.reason else ""
        lines.append(
            f"{mark} {c.scope} {c.metric} = {c.value:.4f}, expected >= {c.expected:.4f} - {c.tolerance:.4f}{why}"
        )
    if report.changed:
        lines.append(f"{len(report.changed)} query(ies) changed their top results against the baseline:")
        for ch in report.changed:
            lines.append(f"  {ch['id']}: {ch['before']} -> {ch['after']} (nDCG@10 {ch['ndcg10']})")
    for half, cmp in report.comparison.items():
        lines.append(
            f"against the baseline ({half}, {int(cmp['n'])} queries): nDCG@10 {cmp['mean_diff']:+.4f}, "
            f"p = {cmp['p']:.4f} ({int(cmp['better'])} better, {int(cmp['worse'])} worse; paired randomization test, "
            f"{int(cmp['permutations'])} permutations, seed {int(cmp['seed'])})"
        )
    return "\n".join(lines)
