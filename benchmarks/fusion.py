"""Choosing the hybrid ranking on enough questions (issue 36): the fusion's α, K and depth, the α per
question script, and the first-hit levers, on every graded set of each corpus at once.

Usage::

    python benchmarks/fusion.py dev  --corpora DIR --bundles DIR --cache DIR [--corpus large-en ko ...]
    python benchmarks/fusion.py test --corpora DIR --bundles DIR --cache DIR [--corpus ...] [--with-seen fresh36 r3]
    python benchmarks/fusion.py bundles --before DIR --bundles DIR --cache DIR [--split dev|test]

The questions of a corpus are those of every set under ``benchmarks/queries`` that judges it. **test**
holds the test half of its ``TEST_SETS`` set (``<corpus>-r4.toml``, 48 test questions written after the
``-r3`` sets were scored, for the next ranking change; scored once, at the end of that change, with what
the server runs);
**dev** holds every other question. Issue 36 chose on the older sets and the ``-more`` sets' dev halves
(811 questions) and scored the ``-more`` test halves once (267); those are retired to dev now.

Per question, computed once (``semantic_quality``'s bundles and vector cache; an uncached corpus is
embedded first, which takes as long as ``semantic_quality.py embed``):

* the keyword side, today's ``balanced`` ranking of pages, searched ``depth`` pages deep for each depth
  of the grid (as the server asks), and its first 10 pages (``quality.py``'s ``ours``: the baseline);
* the keyword side's sections (``per_doc`` 3, three per page), for fusion at section level;
* the dense side: the query vector against EVERY section of the corpus, through the int8 vector file the
  build writes (the server's scores), never a pool keyword search chose.

``dev`` prints, per corpus, keyword / dense / served hybrid nDCG@10 and the share of questions whose first
page answers them (graded 2: "right page first"), then:

1. **the grid** over depth × K × α, α chosen per question script (Latin, Korean, other CJK), each corpus
   scored as one set (each question counts once); a cell qualifies when no corpus loses to keyword search
   there nor at any α/K neighbour (flat), and the cell with the best mean gain over its neighbourhood
   wins (the shallowest depth within ``NOISE`` of the best). It prints the chosen cell with its
   neighbours' gains, and the paired tests of the chosen setting against keyword search, the served
   one and issue 21's (``ISSUE_21``);
2. **the levers**, each at the chosen depth and K with its own best α: a page's dense score from its best
   two sections (``max + β·second``); score fusion (``convex``); the heading path's match with the
   question (``heading_boost``); fusion at section level (each side's sections ranked, fused, a page
   scored by its best fused section); a different α for identifier-like queries and for questions
   (``query_type``); α + 0.1 when the keyword side's first hit holds every informative word of the
   question (``gate``); each against the chosen page-level fusion with the paired test, per corpus and over
   every question.

``test`` scores the test halves once with the server's own ranking (``docbundle.server.semantic.rank``),
checked against this script's fusion of the same lists, and prints per corpus keyword, dense, issue 21's
setting and the served hybrid nDCG@10, right page first, the paired tests and a 95% bootstrap interval of
the gain. The ``-more`` sets' test halves were scored once on 2026-12-02 for issue 36 (docs/semantic.md,
"Chosen on enough questions"), and the ``-fresh36`` test halves once more, after the score fusion was
chosen, and the ``-r3`` sets (48 a corpus) once after that; all are retired to dev. The ``-r4`` sets
are not scored yet.

It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from quality import QUERIES_DIR, K, Query, default_corpora, load_queries, set_corpus  # noqa: E402
from semantic_quality import (  # noqa: E402  (benchmarks/ is not a package)
    _CACHE_ROOT,
    Corpus,
    VectorCache,
    cache_folder,
    corpora_of,
    embed_missing,
    load_corpus,
    passage_recipe,
    query_vector,
    recipe_line,
    served_lists,
)

CORPORA = ("medium-en", "large-en", "ko", "zh", "ja", "html-python", "html-rustbook", "html-postgres")
DEPTHS = (10, 20, 30, 50)
KS = (1, 2, 5, 10, 20, 40, 60)
ALPHAS = tuple(round(0.2 + 0.05 * i, 2) for i in range(15))  # 0.2 .. 0.9
SECTIONS_PER_PAGE = 3  # the keyword side's sections per page, for fusion at section level
BOOTSTRAP = 5000
K_SHOWN = 2  # score fusion ignores K; the server shows a hit's score as 1 / (K + place)
NOISE = 0.002  # a mean nDCG@10 gain this close to the best counts as equal (a deeper search costs more)

_IDENT = re.compile(r"[a-z][A-Z]|\w[._:/#]\w|\w\(|\w_\w|<\w|`|--\w|@\w|\w\[\]|\w::")
_QUESTION = re.compile(
    r"^(how|what|why|when|where|which|who|can|is|are|does|do|should|could|will)\b|\?$"
    r"|吗|什么|如何|怎么|怎样|为什么|哪|どう|どの|何|なぜ|ですか|ますか|어떻게|무엇|뭐|왜|어디|언제|나요|까요|가요",
    re.IGNORECASE,
)


def script_of(text: str) -> str:
    """The question's script group, as the server reads it (``docbundle.bundle.hybrid.script_of``)."""
    from docbundle.bundle.hybrid import script_of as served_script

    return served_script(text)


def query_type(text: str) -> str:
    """``identifier`` (code-like: camelCase, dotted or scoped names, calls, flags), ``question`` (a
    question word or mark), else ``keyword``: read from the text alone, as a server would have to."""
    if _IDENT.search(text):
        return "identifier"
    return "question" if _QUESTION.search(text.strip()) else "keyword"


# --------------------------------------------------------------------------------------------------
# what each question needs, computed once


@dataclass
class Asked:
    """One question and everything its rankings are made from."""

    q: Query
    corpus: str
    script: str
    qtype: str
    keyword: list[str]  # the baseline: ``ours`` (limit 10, per_doc 1)
    kw_deep: dict[int, list[str]]  # depth -> the keyword side searched that deep (pages)
    kw_scores: dict[int, list[tuple[str, float]]]  # depth -> (page, its best keyword score), best first
    kw_cover: dict[int, float]  # depth -> the coverage of the keyword side's first hit (``search.Hit``)
    kw_rows: list[int]  # the keyword side's sections (rows of the vector file), best first
    scores: Any  # float32 scores of every row (int8 file, as served)
    memo: dict[tuple[Any, ...], list[Any]] = field(default_factory=dict)  # dense lists per (depth, β)


@dataclass
class Pages:
    """Row -> page of one corpus, and each page's row span."""

    doc_ids: list[str]
    starts: Any  # numpy int64, first row of each record with rows
    records: Any  # numpy int64, the record of each such start
    row_record: Any  # numpy int64, record of each row
    heads: list[frozenset[str]] = field(default_factory=list)  # row -> words of its title and heading path

    @classmethod
    def of(cls, corpus: Corpus) -> Pages:
        import numpy as np

        total = len(corpus.keys)
        ends = [*corpus.starts[1:], total]
        recs = [i for i, (a, b) in enumerate(zip(corpus.starts, ends, strict=True)) if b > a]
        row_record = np.zeros(total, dtype=np.int64)
        for i in recs:
            row_record[corpus.starts[i] : ends[i]] = i
        return cls(
            corpus.doc_ids,
            np.asarray([corpus.starts[i] for i in recs], dtype=np.int64),
            np.asarray(recs, dtype=np.int64),
            row_record,
        )

    def dense_pages(self, scores: Any, depth: int, beta: float = 0.0) -> list[str]:
        """Pages by their best section's score (``beta`` > 0: plus ``beta`` × their second best)."""
        import numpy as np

        best = np.maximum.reduceat(scores, self.starts)
        value = best
        if beta:
            # the second best: the best of the page's rows with its best one removed
            masked = scores.copy()
            arg = self._argmax_rows(scores)
            masked[arg] = -np.inf
            second = np.maximum.reduceat(masked, self.starts)
            second = np.where(np.isfinite(second), second, best)  # a one-section page counts it twice
            value = best + beta * second
        order = np.lexsort((self.records, -value))[:depth]
        return [self.doc_ids[int(self.records[j])] for j in order]

    def best_rows(self, a: Asked) -> dict[str, int]:
        """page -> its best row by the dense scores (memoized on the question)."""
        key = ("bestrow",)
        if key not in a.memo:
            arg = self._argmax_rows(a.scores)
            a.memo[key] = [{self.doc_ids[int(r)]: int(i) for r, i in zip(self.records, arg, strict=True)}]
        return a.memo[key][0]

    def dense_scores(self, scores: Any) -> dict[str, float]:
        """Every page's best section score."""
        import numpy as np

        best = np.maximum.reduceat(scores, self.starts)
        return {self.doc_ids[int(r)]: float(v) for r, v in zip(self.records, best, strict=True)}

    def _argmax_rows(self, scores: Any) -> Any:
        import numpy as np

        ends = np.append(self.starts[1:], scores.shape[0])
        return np.asarray([a + int(np.argmax(scores[a:b])) for a, b in zip(self.starts, ends, strict=True)])

    def page_of_row(self, row: int) -> str:
        return self.doc_ids[int(self.row_record[row])]


# The sets whose test halves are the unseen test of the next ranking change; every other question tunes.
# The -r4 sets (issue 36's fourth round) are test questions only; the -r3 sets and the -fresh36 test
# halves, each scored once, tune now.
TEST_SETS = "-r4"


def questions_of(corpus: str, split: str, seen_too: tuple[str, ...] = ()) -> list[Query]:
    """dev: every question of the corpus's sets but the test halves of its ``TEST_SETS`` set (the older
    sets' test halves, the ``-more`` sets' included, were scored once and are retired to dev); test: those
    test halves, and with ``seen_too`` (set suffixes) the test halves of those sets as well (``test
    --with-seen``: for a ranking that has not changed since they were scored, all its tests as one)."""
    out: list[Query] = []
    for path in sorted(QUERIES_DIR.glob("*.toml")):
        if set_corpus(path.stem) != corpus:
            continue
        fresh = path.stem.endswith(TEST_SETS)
        if split == "test":
            if fresh or (seen_too and path.stem.endswith(seen_too)):
                out += load_queries(path, "test")
        else:
            out += load_queries(path, "dev") if fresh else load_queries(path, "all")
    return out


def prepare(
    name: str, corpus: Corpus, queries: list[Query], embedder: Any, cache: VectorCache, vec_dir: Path
) -> tuple[list[Asked], Pages]:
    """Every ranking input of every question of one corpus."""
    import numpy as np
    from docbundle.bundle.reader import open_bundle
    from docbundle.bundle.search import BundleSearcher
    from docbundle.bundle.vectors import VectorFile, write_vectors
    from quality import library_of, ours, page_namer

    missing = [k for k in corpus.keys if k not in cache.vec]
    if missing:
        embed_missing(corpus, embedder, cache)
    f32 = np.stack([cache.vec[k] for k in corpus.keys]).astype(np.float32)
    vec_dir.mkdir(parents=True, exist_ok=True)
    path = vec_dir / f"{corpus.name}{corpus.recipe}.int8.bin"
    write_vectors(path, f32, embedder.identity.key(), "int8")
    pages = Pages.of(corpus)
    rank, close = ours(corpus.bundle, per_doc=1)
    heads_of = open_bundle(corpus.bundle, use_mmap=False)
    try:
        for rec in heads_of.store:
            for c in rec.chunks:
                pages.heads.append(words(" ".join([rec.title, *c.heading_path])))
    finally:
        heads_of.close()
    try:
        baseline = {q.id: rank(q.text) for q in queries}
    finally:
        close()
    bundle = open_bundle(corpus.bundle, use_mmap=False)
    page = page_namer(library_of(corpus.bundle))
    asked: list[Asked] = []
    try:
        searcher = BundleSearcher(bundle)
        with VectorFile(path) as vf:
            vf.check(len(corpus.keys), embedder.identity.key())
            for q in queries:
                deep: dict[int, list[str]] = {}
                kw_scores: dict[int, list[tuple[str, float]]] = {}
                cover: dict[int, float] = {}
                for depth in DEPTHS:
                    hits = searcher.search(q.text, limit=depth, per_doc=1, mode="balanced").hits
                    cover[depth] = hits[0].coverage if hits else 0.0
                    named = [(page(r.id, r.url), h.score) for h in hits for r in (bundle.store.get(h.doc),)]
                    deep[depth] = list(dict.fromkeys(d for d, _ in named))[:depth]
                    best: dict[str, float] = {}
                    for d, score in named:
                        best.setdefault(d, score)
                    kw_scores[depth] = list(best.items())[:depth]
                per = SECTIONS_PER_PAGE
                hits = searcher.search(q.text, limit=max(DEPTHS) * per, per_doc=per, mode="balanced").hits
                rows = [corpus.starts[h.doc] + h.chunk for h in hits]
                scores = np.asarray(vf.scores(query_vector(embedder, cache, q.text)), dtype=np.float32)
                asked.append(
                    Asked(
                        q,
                        name,
                        script_of(q.text),
                        query_type(q.text),
                        baseline[q.id],
                        deep,
                        kw_scores,
                        cover,
                        rows,
                        scores,
                    )
                )
    finally:
        bundle.close()
    return asked, pages


# --------------------------------------------------------------------------------------------------
# rankers and scores


@dataclass(frozen=True)
class Setting:
    """One way to rank: the fusion's depth and K, α per script (and per query type), and the levers."""

    depth: int
    k: int
    alpha: dict[str, float]  # script -> α (keyword weight)
    type_alpha: dict[str, float] = field(default_factory=dict)  # query type -> α, overrides the script's
    beta: float = 0.0  # dense page score: best + beta * second best section
    sections: bool = False  # fuse sections, then pages by their best fused section
    # fuse scores, not ranks: α·kw + (1 − α)·dense, each min-max scaled over its top ``depth``
    convex: bool = False
    # a page's fused score × (1 + heading × the share of the query's words in its best section's title
    # and heading path)
    heading: float = 0.0

    # (coverage, more): α + ``more`` (at most 0.95) when the keyword side's first hit holds at least
    # ``coverage`` of the question's informative words (``search.Hit.coverage``); () = off
    gate: tuple[float, float] = ()

    def alpha_of(self, a: Asked) -> float:
        alpha = self.type_alpha.get(a.qtype, self.alpha[a.script])
        if self.gate and a.kw_cover[self.depth] >= self.gate[0]:
            alpha = min(0.95, alpha + self.gate[1])
        return alpha

    def __hash__(self) -> int:
        return hash(
            (
                self.depth,
                self.k,
                tuple(sorted(self.alpha.items())),
                tuple(sorted(self.type_alpha.items())),
                self.beta,
                self.sections,
                self.convex,
                self.heading,
                self.gate,
            )
        )


def ranked(a: Asked, pages: Pages, s: Setting) -> list[str]:
    """The top 10 pages of one question under one setting."""
    from docbundle.bundle.hybrid import fuse

    alpha = s.alpha_of(a)
    if s.convex:
        return convex(a, pages, s.depth, alpha)
    if not s.sections:
        key = ("pages", s.depth, s.beta)
        if key not in a.memo:
            a.memo[key] = pages.dense_pages(a.scores, s.depth, s.beta)
        fused = fuse(a.kw_deep[s.depth], a.memo[key], alpha, s.k, s.depth)
        if s.heading:
            fused = heading_boost(a, pages, fused, s.heading)
        return [d for d, _ in fused][:K]
    import numpy as np

    n = s.depth * SECTIONS_PER_PAGE
    kw_rows = list(dict.fromkeys(a.kw_rows))[:n]
    key = ("rows", n)
    if key not in a.memo:
        top = np.argpartition(-a.scores, n)[:n] if a.scores.shape[0] > n else np.arange(a.scores.shape[0])
        a.memo[key] = [int(i) for i in sorted(top, key=lambda i: (-a.scores[i], i))]
    dense_rows = a.memo[key]
    best: dict[str, float] = {}
    for row, value in fuse(kw_rows, dense_rows, alpha, s.k, n):
        p = pages.page_of_row(row)
        best.setdefault(p, value)
    return sorted(best, key=lambda p: -best[p])[:K]


_WORD = re.compile(r"[0-9a-z]+|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "to",
        "of",
        "in",
        "on",
        "for",
        "and",
        "or",
        "is",
        "are",
        "be",
        "by",
        "with",
        "how",
        "what",
        "why",
        "when",
        "where",
        "which",
        "who",
        "do",
        "does",
        "can",
        "i",
        "my",
        "me",
        "it",
        "its",
        "this",
        "that",
        "from",
        "as",
        "at",
        "use",
        "using",
        "get",
        "set",
        "not",
        "no",
        "vs",
        "into",
        "your",
        "you",
        "we",
    ]
)


def words(text: str) -> frozenset[str]:
    """Lowercase Latin words (stop words out) and CJK character bigrams of ``text``."""
    out: set[str] = set()
    for w in _WORD.findall(text.lower()):
        if w[0].isascii():
            if w not in _STOP and len(w) > 1:
                out.add(w)
        else:
            out.update(w[i : i + 2] for i in range(max(1, len(w) - 1)))
    return frozenset(out)


def heading_boost(
    a: Asked, pages: Pages, fused: list[tuple[str, float]], gamma: float
) -> list[tuple[str, float]]:
    """Re-order fused pages by fused × (1 + γ × the share of the question's words in the title and
    heading path of the page's best section by the dense scores)."""
    key = ("qwords",)
    if key not in a.memo:
        a.memo[key] = [words(a.q.text)]
    (qw,) = a.memo[key]
    if not qw:
        return fused
    best_row = pages.best_rows(a)
    out = []
    for d, v in fused:
        row = best_row.get(d)
        share = len(qw & pages.heads[row]) / len(qw) if row is not None else 0.0
        out.append((d, v * (1 + gamma * share)))
    return sorted(out, key=lambda dv: -dv[1])


def convex(a: Asked, pages: Pages, depth: int, alpha: float) -> list[str]:
    """Score fusion as the server runs it (``docbundle.bundle.hybrid.fuse_scores``): each side's first
    ``depth`` pages min-max scaled, then α·keyword + (1 − α)·dense."""
    from docbundle.bundle.hybrid import fuse_scores

    key = ("scored", depth)
    if key not in a.memo:
        best = pages.dense_scores(a.scores)
        a.memo[key] = sorted(best.items(), key=lambda kv: -kv[1])[:depth]
    return [d for d, _ in fuse_scores(a.kw_scores[depth], a.memo[key], alpha, depth)][:K]


def ndcg_of(q: Query, pages_: list[str]) -> float:
    from docbundle.indexer.release.metrics import ndcg

    return ndcg(pages_, q.relevant, K)


def right_first(q: Query, pages_: list[str]) -> bool:
    """The first page answers the question (graded 2)."""
    return bool(pages_) and q.relevant.get(pages_[0], 0) >= 2


@dataclass
class Board:
    """Per corpus: its questions and page maps; scores of a setting per question, memoized."""

    asked: dict[str, list[Asked]]
    pages: dict[str, Pages]
    memo: dict[Setting, dict[str, list[float]]] = field(default_factory=dict)

    def per_question(self, s: Setting) -> dict[str, list[float]]:
        if s not in self.memo:
            self.memo[s] = {
                c: [ndcg_of(a.q, ranked(a, self.pages[c], s)) for a in qs] for c, qs in self.asked.items()
            }
        return self.memo[s]

    def keyword(self) -> dict[str, list[float]]:
        return {c: [ndcg_of(a.q, a.keyword) for a in qs] for c, qs in self.asked.items()}

    def gains(self, s: Setting) -> dict[str, float]:
        kw = self.keyword()
        got = self.per_question(s)
        return {c: statistics.mean(got[c]) - statistics.mean(kw[c]) for c in self.asked}

    def scripts(self) -> dict[str, list[str]]:
        """script -> the corpora whose questions are in it (by their first question)."""
        out: dict[str, list[str]] = {}
        for c, qs in self.asked.items():
            out.setdefault(qs[0].script, []).append(c)
        return out


def bootstrap_interval(
    diffs: Sequence[float], rounds: int = BOOTSTRAP, seed: int = 36
) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean of ``diffs``."""
    import numpy as np

    d = np.asarray(diffs, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(rounds, d.size))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def paired(before: Sequence[float], after: Sequence[float]) -> str:
    from docbundle.indexer.release.metrics import paired_test

    t = paired_test(before, after, permutations=2000)
    return f"{t.mean_diff:+.3f} p={t.p:.3f} ({t.better}+/{t.worse}-)"


# --------------------------------------------------------------------------------------------------
# the grid


def neighbours(values: Sequence[Any], v: Any) -> list[Any]:
    i = values.index(v)
    return list(values[max(0, i - 1) : i + 2])


def choose_grid(board: Board) -> tuple[Setting, dict[tuple[int, int, str, float], dict[str, float]]]:
    """Depth, K, and α per script: flat (no corpus loses at the cell nor any α/K neighbour), then the best
    mean gain over the neighbourhood. Each script's α is chosen on its own corpora."""
    scripts = board.scripts()
    table: dict[tuple[int, int, str, float], dict[str, float]] = {}
    for depth in DEPTHS:
        for k in KS:
            for alpha in ALPHAS:
                s = Setting(depth, k, dict.fromkeys(scripts, alpha))
                g = board.gains(s)
                for script, corp in scripts.items():
                    table[(depth, k, script, alpha)] = {c: g[c] for c in corp}
    cells: list[tuple[float, Setting]] = []
    for depth in DEPTHS:
        for k in KS:
            alphas: dict[str, float] = {}
            total = 0.0
            flat_all = True
            for script in scripts:

                def hood(
                    alpha: float, script: str = script, depth: int = depth, k: int = k
                ) -> list[dict[str, float]]:
                    return [
                        table[(depth, kk, script, aa)]
                        for kk in neighbours(KS, k)
                        for aa in neighbours(ALPHAS, alpha)
                    ]

                def flat(alpha: float, hood: Callable[[float], list[dict[str, float]]] = hood) -> bool:
                    return all(min(c.values()) >= 0 for c in hood(alpha))

                def smooth(alpha: float, hood: Callable[[float], list[dict[str, float]]] = hood) -> float:
                    return statistics.mean(statistics.mean(c.values()) for c in hood(alpha))

                ok = [a for a in ALPHAS if flat(a)]
                pick = max(ok or ALPHAS, key=lambda a: (round(smooth(a), 9), a))
                flat_all = flat_all and bool(ok)
                alphas[script] = pick
                total += smooth(pick) * len(scripts[script])
            value = total / sum(len(c) for c in scripts.values()) + (1.0 if flat_all else 0.0)
            cells.append((value, Setting(depth, k, alphas)))
    # A deeper keyword side costs search time: the shallowest depth whose best cell is within NOISE of
    # the best cell of any depth wins (DEPTHS ascend).
    top = max(v for v, _ in cells)
    return next(s for v, s in cells if v >= top - NOISE), table


# --------------------------------------------------------------------------------------------------
# commands


def choose_convex(board: Board) -> Setting:
    """Score fusion (``hybrid.fuse_scores``): the depth and α per script, by the grid's rule (no corpus
    loses at α nor α ± 0.05; the best neighbourhood mean; the shallowest depth within ``NOISE``). Prints
    each depth's α rows and the choice, with its paired tests against the served setting."""
    scripts = board.scripts()
    print(f"\n=== score fusion: {len(DEPTHS)} depths x {len(ALPHAS)} alpha per script ===")
    cells: list[tuple[float, Setting]] = []
    for depth in DEPTHS:
        gains = {
            a: board.gains(Setting(depth, K_SHOWN, dict.fromkeys(scripts, a), convex=True)) for a in ALPHAS
        }
        picks: dict[str, float] = {}
        total = 0.0
        for script, corp in scripts.items():

            def hood(
                a: float, corp: list[str] = corp, gains: dict[float, dict[str, float]] = gains
            ) -> list[list[float]]:
                return [[gains[x][c] for c in corp] for x in neighbours(ALPHAS, a)]

            flat = [a for a in ALPHAS if all(min(g) >= 0 for g in hood(a))]
            smooth = {a: statistics.mean(statistics.mean(g) for g in hood(a)) for a in ALPHAS}
            pick = max(flat or ALPHAS, key=lambda a: (round(smooth[a], 9), a))
            picks[script] = pick
            total += smooth[pick] * len(corp)
            worst = min(min(g) for g in hood(pick))
            print(
                f"depth {depth:>2} {script:<5} "
                + " ".join(f"{a}:{statistics.mean(gains[a][c] for c in corp) * 1000:+.0f}" for a in ALPHAS)
                + f" | flat {flat[0] if flat else '-'}..{flat[-1] if flat else '-'}, pick {pick}, worst {worst:+.3f}"
            )
        cells.append(
            (total / sum(len(c) for c in scripts.values()), Setting(depth, K_SHOWN, picks, convex=True))
        )
    top = max(v for v, _ in cells)
    chosen = next(s for v, s in cells if v >= top - NOISE)
    print(f"score fusion chosen: depth {chosen.depth}, alpha {chosen.alpha}")
    return chosen


def load_board(args: argparse.Namespace, split: str) -> tuple[Board, Any]:
    from docbundle.bundle.embed import load_embedder

    embedder = load_embedder(threads=args.threads)
    cache = VectorCache(cache_folder(args.cache, embedder))
    paths = corpora_of(args, args.corpus)
    asked: dict[str, list[Asked]] = {}
    pages: dict[str, Pages] = {}
    for name in args.corpus:
        if name not in paths:
            print(f"{name}: no bundle (corpus missing); skipped")
            continue
        t0 = time.perf_counter()
        corpus = load_corpus(name, paths[name], embedder)
        qs = questions_of(
            name, split, tuple(f"-{n.lstrip('-')}" for n in getattr(args, "with_seen", None) or ())
        )
        asked[name], pages[name] = prepare(name, corpus, qs, embedder, cache, args.cache / "vectors")
        print(
            f"{name}: {len(qs)} {split} questions, {len(corpus.keys)} sections ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    return Board(asked, pages), (embedder, cache, paths)


# What the server ran before issue 36 chose again (issue 21's choice, on 21-24-question dev halves), and
# issue 36's first round (rank fusion chosen on 811 dev questions; its test halves were scored once).
ISSUE_21 = Setting(10, 5, {"latin": 0.7, "cjk": 0.7, "ko": 0.5})
ROUND_1 = Setting(20, 2, {"latin": 0.65, "cjk": 0.55, "ko": 0.4})


def served_setting() -> Setting:
    from docbundle.bundle import hybrid

    alphas = {"latin": hybrid.ALPHA, "cjk": hybrid.CJK_ALPHA, "ko": hybrid.KOREAN_ALPHA}
    return Setting(hybrid.DEPTH, hybrid.K, alphas, convex=True)  # the server fuses by score


def print_overview(board: Board, settings: dict[str, Setting]) -> None:
    kw = board.keyword()
    head = f"{'corpus':<14} {'n':>4} {'keyword':>8} {'dense':>6}"
    for label in settings:
        head += f" {label:>10}"
    print(head + "   right page first: keyword / " + " / ".join(settings))
    for c, qs in board.asked.items():
        dense = [ndcg_of(a.q, board.pages[c].dense_pages(a.scores, K)) for a in qs]
        line = f"{c:<14} {len(qs):>4} {statistics.mean(kw[c]):8.3f} {statistics.mean(dense):6.3f}"
        firsts = [sum(right_first(a.q, a.keyword) for a in qs)]
        for s in settings.values():
            line += f" {statistics.mean(board.per_question(s)[c]):10.3f}"
            firsts.append(sum(right_first(a.q, ranked(a, board.pages[c], s)) for a in qs))
        print(line + "   " + " / ".join(f"{f}/{len(qs)} ({f / len(qs):.0%})" for f in firsts))


def served_time(args: argparse.Namespace, board: Board, embedder: Any, cache: Any, paths: Any) -> None:
    """The server's own hybrid ranking (``semantic.rank``; query vectors cached, so the encoder is not
    timed) per dev question of each corpus: p50 and p95, one thread, after one warm-up pass."""
    import time as clock

    from docbundle.bundle.query import Deadline
    from docbundle.bundle.reader import open_bundle
    from docbundle.bundle.search import BundleSearcher
    from docbundle.bundle.vectors import VectorFile
    from docbundle.server.semantic import rank

    _, recipe = passage_recipe()
    print("\n=== the served hybrid ranking's time per question (semantic.rank, limit 5, warm) ===")
    for c, qs in board.asked.items():
        bundle = open_bundle(paths[c])
        vf = VectorFile(args.cache / "vectors" / f"{c}{recipe}.int8.bin")
        try:
            lib: Any = SimpleNamespace(
                searcher=BundleSearcher(bundle), bundle=SimpleNamespace(vector_file=lambda vf=vf: vf)
            )
            vectors = [query_vector(embedder, cache, a.q.text) for a in qs]
            ms: list[float] = []
            for timed in (False, True):
                for a, v in zip(qs, vectors, strict=True):
                    t0 = clock.perf_counter()
                    rank(lib, "hybrid", a.q.text, [], 5, 1, Deadline(), lambda _d, v=v: v)
                    if timed:
                        ms.append((clock.perf_counter() - t0) * 1000)
            ms.sort()
            print(
                f"{c:<14} {len(ms)} questions: p50 {ms[len(ms) // 2]:.1f} ms, p95 {ms[int(len(ms) * 0.95)]:.1f} ms"
            )
        finally:
            vf.close()
            bundle.close()


def cmd_dev(args: argparse.Namespace) -> None:
    print(recipe_line())
    board, (embedder, cache, paths) = load_board(args, "dev")
    served = served_setting()
    served_time(args, board, embedder, cache, paths)
    print("\n=== dev: served today ===")
    print_overview(board, {"issue 21": ISSUE_21, "round 1": ROUND_1, "served": served})
    scored = choose_convex(board)
    chosen, table = choose_grid(board)
    print(f"\n=== the grid: {len(DEPTHS)} depths x {len(KS)} K x {len(ALPHAS)} alpha per script ===")
    scripts = board.scripts()
    for script, corp in scripts.items():
        print(
            f"\n{script} ({', '.join(corp)}): mean gain x1000 at depth {chosen.depth}, rows alpha, columns K"
        )
        print("alpha " + " ".join(f"{k:>6}" for k in KS))
        for alpha in ALPHAS:
            cells = [table[(chosen.depth, k, script, alpha)] for k in KS]
            print(
                f"{alpha:5.2f} "
                + " ".join(
                    f"{statistics.mean(c.values()) * 1000:+5.0f}{'!' if min(c.values()) < 0 else ' '}"
                    for c in cells
                )
            )
        print("(! = a corpus loses to keyword search there)")
        for depth in DEPTHS:
            a = chosen.alpha[script]
            c = table[(depth, chosen.k, script, a)]
            print(
                f"  depth {depth:>2} at K {chosen.k}, alpha {a}: "
                + ", ".join(f"{n} {v:+.3f}" for n, v in c.items())
            )
    print(f"\nchosen: depth {chosen.depth}, K {chosen.k}, alpha {chosen.alpha}")
    for script in scripts:
        a = chosen.alpha[script]
        hood = [
            (kk, aa, table[(chosen.depth, kk, script, aa)])
            for kk in neighbours(KS, chosen.k)
            for aa in neighbours(ALPHAS, a)
        ]
        lo = min(min(c.values()) for _, _, c in hood)
        print(
            f"  {script}: neighbourhood (K +-1 step, alpha +-0.05): worst corpus gain {lo:+.3f}; cells: "
            + "; ".join(f"K{kk} a{aa}: " + ",".join(f"{v:+.3f}" for v in c.values()) for kk, aa, c in hood)
        )
    settings = {"issue 21": ISSUE_21, "served": served, "chosen": chosen, "score fusion": scored}
    levers = lever_settings(board, chosen)
    settings.update(levers)
    print("\n=== dev: served, chosen and the levers (each at its best alpha) ===")
    print_overview(board, settings)
    kw = board.keyword()
    base = board.per_question(chosen)
    print("\npaired tests on dev (nDCG@10 per question, 2,000 sign flips)")
    for c in board.asked:
        line = f"  {c:<14} chosen vs keyword {paired(kw[c], base[c])}; chosen vs served {paired(board.per_question(served)[c], base[c])}"
        line += f"; chosen vs issue 21 {paired(board.per_question(ISSUE_21)[c], base[c])}"
        for label, s in levers.items():
            line += f"; {label} vs chosen {paired(base[c], board.per_question(s)[c])}"
        print(line)

    def every(scores: dict[str, list[float]]) -> list[float]:
        return [v for c in board.asked for v in scores[c]]

    line = f"  {'all questions':<14} chosen vs keyword {paired(every(kw), every(base))}; chosen vs served "
    line += paired(every(board.per_question(served)), every(base))
    line += f"; chosen vs issue 21 {paired(every(board.per_question(ISSUE_21)), every(base))}"
    for label, s in levers.items():
        line += f"; {label} vs chosen {paired(every(base), every(board.per_question(s)))}"
    print(line)
    by_type: dict[str, list[tuple[float, float]]] = {}
    for c, qs in board.asked.items():
        for a, k_, h in zip(qs, kw[c], base[c], strict=True):
            by_type.setdefault(a.qtype, []).append((k_, h))
    print(
        "\nby query type (all corpora, dev): "
        + "; ".join(
            f"{t} n={len(v)} keyword {statistics.mean(x for x, _ in v):.3f} chosen {statistics.mean(y for _, y in v):.3f}"
            for t, v in sorted(by_type.items())
        )
    )


def lever_settings(board: Board, chosen: Setting) -> dict[str, Setting]:
    """Each lever at the chosen depth and K, with the α per script that suits it best (mean gain)."""
    out: dict[str, Setting] = {}
    scripts = board.scripts()

    def best_alpha(make: Callable[[float], Setting]) -> Setting:
        alphas = {}
        for script, corp in scripts.items():
            alphas[script] = max(
                ALPHAS, key=lambda a: (round(statistics.mean(board.gains(make(a))[c] for c in corp), 9), a)
            )
        return Setting(**{**make(0.5).__dict__, "alpha": alphas})

    for beta in (0.25, 0.5):
        out[f"top2 b{beta}"] = best_alpha(
            lambda a, beta=beta: Setting(chosen.depth, chosen.k, dict.fromkeys(scripts, a), beta=beta)
        )
    out["convex"] = best_alpha(
        lambda a: Setting(chosen.depth, chosen.k, dict.fromkeys(scripts, a), convex=True)
    )
    for gamma in (0.1, 0.25):
        out[f"heading {gamma}"] = best_alpha(
            lambda a, gamma=gamma: Setting(chosen.depth, chosen.k, dict.fromkeys(scripts, a), heading=gamma)
        )
    out["sections"] = best_alpha(
        lambda a: Setting(chosen.depth, chosen.k, dict.fromkeys(scripts, a), sections=True)
    )
    # α per query type: the chosen α per script, and one α for every question of a type, chosen on all corpora
    typed: dict[str, float] = {}
    for t in ("identifier", "question"):

        def gain(a: float, t: str = t) -> float:
            s = Setting(chosen.depth, chosen.k, chosen.alpha, {**typed, t: a})
            return statistics.mean(board.gains(s).values())

        typed[t] = max(ALPHAS, key=lambda a: (round(gain(a), 9), a))
    out["by type"] = Setting(chosen.depth, chosen.k, chosen.alpha, typed)
    # keyword-strength gate: more keyword weight when its first hit holds every informative word
    out["gate"] = Setting(chosen.depth, chosen.k, chosen.alpha, gate=(1.0, 0.1))
    return out


def cmd_test(args: argparse.Namespace) -> None:
    print(recipe_line())
    board, (embedder, cache, paths) = load_board(args, "test")
    served = served_setting()
    from docbundle.bundle import hybrid

    print(
        f"\n=== test halves, scored once: served hybrid (alpha {hybrid.ALPHA}, Korean {hybrid.KOREAN_ALPHA}, "
        f"Chinese/Japanese {hybrid.CJK_ALPHA}, K {hybrid.K}, depth {hybrid.DEPTH}) ==="
    )
    kw = board.keyword()
    print(
        f"{'corpus':<14} {'n':>4} {'keyword':>8} {'dense':>6} {'is.21':>6} {'hybrid':>7} {'gain':>7} "
        f"{'95% interval':>17}  {'paired vs keyword':<24} {'paired vs issue 21':<24} right page first kw / is.21 / hybrid"
    )
    gains, every_kw, every_h, every_21 = [], [], [], []
    for c, qs in board.asked.items():
        vectors = {a.q.id: query_vector(embedder, cache, a.q.text) for a in qs}
        _, recipe = passage_recipe()
        vec = args.cache / "vectors" / f"{c}{recipe}.int8.bin"
        server = served_lists(paths[c], vec, [a.q for a in qs], vectors)
        mine = {a.q.id: ranked(a, board.pages[c], served) for a in qs}
        differ = sum(server[a.q.id] != mine[a.q.id] for a in qs)
        if differ:
            print(f"  {c}: the server's ranking differs from this script's fusion on {differ} questions")
        hyb = [ndcg_of(a.q, server[a.q.id]) for a in qs]
        old = {a.q.id: ranked(a, board.pages[c], ISSUE_21) for a in qs}
        h21 = [ndcg_of(a.q, old[a.q.id]) for a in qs]
        dense = [ndcg_of(a.q, board.pages[c].dense_pages(a.scores, K)) for a in qs]
        diffs = [h - k_ for h, k_ in zip(hyb, kw[c], strict=True)]
        lo, hi = bootstrap_interval(diffs)
        f_kw = sum(right_first(a.q, a.keyword) for a in qs)
        f_21 = sum(right_first(a.q, old[a.q.id]) for a in qs)
        f_h = sum(right_first(a.q, server[a.q.id]) for a in qs)
        gains.append(statistics.mean(diffs))
        every_kw += kw[c]
        every_h += hyb
        every_21 += h21
        n = len(qs)
        print(
            f"{c:<14} {n:>4} {statistics.mean(kw[c]):8.3f} {statistics.mean(dense):6.3f} {statistics.mean(h21):6.3f} "
            f"{statistics.mean(hyb):7.3f} {statistics.mean(diffs):+7.3f} [{lo:+.3f}, {hi:+.3f}]  "
            f"{paired(kw[c], hyb):<24} {paired(h21, hyb):<24} "
            f"{f_kw}/{n} ({f_kw / n:.0%}) / {f_21}/{n} ({f_21 / n:.0%}) / {f_h}/{n} ({f_h / n:.0%})"
        )
    lo, hi = bootstrap_interval([h - k_ for h, k_ in zip(every_h, every_kw, strict=True)])
    print(
        f"mean gain over corpora {statistics.mean(gains):+.3f}; all {len(every_h)} questions: hybrid vs keyword "
        f"{paired(every_kw, every_h)} [{lo:+.3f}, {hi:+.3f}], hybrid vs issue 21 {paired(every_21, every_h)}"
    )


def cmd_bundles(args: argparse.Namespace) -> None:
    """A change to what the bundles hold (the chunker's rules): the same questions on the bundles built
    before it (``--before``) and after it (``--bundles``), each ranked the way the server ranks today."""
    import copy

    print(recipe_line())
    served = served_setting()
    boards: dict[str, Board] = {}
    for label, folder in (("before", args.before), ("after", args.bundles)):
        print(f"--- {label}: {folder.name}")
        one = copy.copy(args)
        one.bundles = folder
        boards[label], _ = load_board(one, args.split)
    before, after = boards["before"], boards["after"]
    print(
        f"\n=== {args.split}: bundles before / after, ranked as the server ranks (nDCG@10, paired tests) ==="
    )
    print(
        f"{'corpus':<14} {'n':>4}  {'keyword':<13} {'paired':<26} {'dense':<13} {'hybrid':<13} {'paired':<26} "
        "right page first (hybrid)"
    )
    every: dict[str, list[float]] = {"kb": [], "ka": [], "hb": [], "ha": []}
    for c in after.asked:
        if c not in before.asked:
            continue
        qb, qa = before.asked[c], after.asked[c]
        assert [a.q.id for a in qb] == [a.q.id for a in qa], c
        kb, ka = before.keyword()[c], after.keyword()[c]
        hb, ha = before.per_question(served)[c], after.per_question(served)[c]
        db = [ndcg_of(a.q, before.pages[c].dense_pages(a.scores, K)) for a in qb]
        da = [ndcg_of(a.q, after.pages[c].dense_pages(a.scores, K)) for a in qa]
        fb = sum(right_first(a.q, ranked(a, before.pages[c], served)) for a in qb)
        fa = sum(right_first(a.q, ranked(a, after.pages[c], served)) for a in qa)
        for key, vals in (("kb", kb), ("ka", ka), ("hb", hb), ("ha", ha)):
            every[key] += vals
        mean = statistics.mean
        print(
            f"{c:<14} {len(qa):>4}  {mean(kb):.3f}/{mean(ka):.3f}   {paired(kb, ka):<26} "
            f"{mean(db):.3f}/{mean(da):.3f}   {mean(hb):.3f}/{mean(ha):.3f}   {paired(hb, ha):<26} {fb} / {fa}"
        )
    print(
        f"all {len(every['ha'])} questions: keyword {paired(every['kb'], every['ka'])}, "
        f"hybrid {paired(every['hb'], every['ha'])}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for cmd in ("dev", "test", "bundles"):
        p = sub.add_parser(cmd)
        p.add_argument("--corpora", type=Path, default=default_corpora())
        p.add_argument("--bundles", type=Path, required=True)
        p.add_argument("--cache", type=Path, required=True)
        p.add_argument("--corpus", nargs="+", default=list(CORPORA))
        p.add_argument("--threads", type=int, default=None)
        if cmd == "test":
            p.add_argument(
                "--with-seen",
                nargs="+",
                metavar="ROUND",
                help="also score the test halves of the sets of these rounds (fresh36 r3: the <corpus>-fresh36 "
                "and <corpus>-r3 sets), already scored once on the same ranking: every test of an unchanged "
                "ranking as one",
            )
        if cmd == "bundles":
            p.add_argument("--before", type=Path, required=True, help="the bundles built before the change")
            p.add_argument("--split", choices=("dev", "test"), default="dev")
    args = ap.parse_args()
    if args.corpora is None:
        ap.error("no corpora: pass --corpora (../shared/corpora)")
    _CACHE_ROOT.append(args.cache)
    {"dev": cmd_dev, "test": cmd_test, "bundles": cmd_bundles}[args.cmd](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
