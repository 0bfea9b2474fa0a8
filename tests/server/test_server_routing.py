"""A search across libraries routes (issue 22): the route index picks the K libraries most likely to
answer, the answer says which and how, a stale index is rebuilt, a bundle without a routing record is
derived, and without routing the search takes the libraries in turn within its budget and says so.
Through the MCP SDK client in memory."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import msgspec
import pytest
from docbundle.bundle.layout import current_bundle
from docbundle.bundle.routeindex import ROUTING_INDEX, RouteIndex, load_index, update_index
from docbundle.bundle.routing import ROUTING_FILE, read_record
from docbundle.server import docs as docs_module
from docbundle.server import routing as routing_module
from docbundle.server.catalog import Catalog, CatalogSettings
from docbundle.server.mcp.server import create_server
from mcp import Client
from routekit import SUBJECTS, subject_pages, subjects_tree
from serverkit import install_golden, private_copy, search_text
from treekit import build, write_site

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def many_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight libraries built with routing records, plus two copies of the golden bundle (built before
    routing records existed)."""
    base = tmp_path_factory.mktemp("many")
    root = build(base / "sites" / "libraries.toml", base / "bundles", subjects_tree()).root
    install_golden(root, "golden")
    install_golden(root, "oldgolden")
    return root


@pytest.fixture
def root(many_root: Path, tmp_path: Path) -> Path:
    """A private copy of the catalogue (tests write its route index)."""
    return private_copy(many_root, tmp_path)


@asynccontextmanager
async def serve(root: Path, k: int = 3) -> AsyncIterator[tuple[Client, Catalog]]:
    """An in-memory client on a server over ``root`` routing to ``k`` libraries; time-boxed."""
    catalog = Catalog.load(root, settings=CatalogSettings.serving(route_libraries=k))  # as serve does
    try:
        with anyio.fail_after(60):
            async with Client(create_server(catalog)) as client:
                yield client, catalog
    finally:
        catalog.close()


search = search_text


async def test_routing_picks_the_library_that_holds_the_answer_among_many(root: Path) -> None:
    async with serve(root, k=3) as (client, catalog):
        for lib_id, words in SUBJECTS.items():
            data, _text = await search(client, query=f"how do I tune {words[0]} and {words[3]}?")
            routing = data["routing"]
            assert routing["method"] == "routed", routing
            assert routing["libraries"] == len(SUBJECTS) + 2
            assert routing["chosen"][0] == lib_id, (lib_id, routing)
            assert 1 <= routing["searched"] <= 3
            assert data["hits"] and data["hits"][0]["libraryId"] == lib_id
    async with serve(root, k=3) as (client, catalog):
        data, _ = await search(client, query="daemonset cordon")
        # Only the chosen libraries were opened.
        opened = {e.library_id for e in catalog.entries() if catalog.state(e)[0] == "ready"}
        assert opened == {s["libraryId"] for s in data["searched"]}
        assert len(opened) <= 3 and "kubeops" in opened


async def test_the_answer_names_the_libraries_searched_and_how_they_were_chosen(root: Path) -> None:
    async with serve(root, k=3) as (client, _):
        data, text = await search(client, query="kubelet taints tolerations")
        routing = data["routing"]
        assert routing["chosen"][0] == "kubeops"
        assert "routing records best match the question's words" in routing["reason"]
        head = text.splitlines()[1]
        assert head.startswith(f"Searched {routing['searched']} of {len(SUBJECTS) + 2} libraries (kubeops")
        assert "chosen by the routing index" in head
        # Not every id: the libraries left out of the search are not listed.
        assert "geotiles" not in text and "pgvac" not in text
        assert len(data["searched"]) == routing["searched"]


async def test_a_question_no_library_holds_says_so(root: Path) -> None:
    async with serve(root, k=3) as (client, _):
        data, _text = await search(client, query="xylophone zeppelin")
        assert data["routing"]["searched"] == 0 and data["hits"] == []
        assert "No library holds any word" in data["message"]
        data, _text = await search(client, query="the of and")
        assert data["hits"] == [] and "Nothing to search for" in data["message"]
        assert "no word to route by" in data["routing"]["reason"]


async def test_the_server_writes_the_routing_index_and_rebuilds_a_stale_one(root: Path) -> None:
    assert not (root / ROUTING_INDEX).exists()
    async with serve(root) as (client, _):
        data, _ = await search(client, query="rebase reflog")
        assert data["routing"]["chosen"][0] == "gitflow"
    written = load_index(root)
    assert written is not None and len(written.libraries) == len(SUBJECTS) + 2
    # Make the file lie: it claims another build for gitflow and holds none of gitflow's words.
    parts = written.split()
    gitflow_entry, _ = parts.pop(("gitflow", "latest"))
    _, pgvac_postings = parts[("pgvac", "latest")]
    liar = msgspec.structs.replace(gitflow_entry, build_id="20200101-000000000000")
    stale = RouteIndex.from_hashed([*parts.values(), (liar, pgvac_postings)])
    (root / ROUTING_INDEX).write_bytes(stale.encode())
    async with serve(root) as (client, _):
        data, _ = await search(client, query="rebase reflog")
        assert data["routing"]["method"] == "routed"
        assert data["routing"]["chosen"][0] == "gitflow"  # the lie was not trusted
    rebuilt = load_index(root)
    assert rebuilt is not None
    gitflow = current_bundle(root / "gitflow" / "latest").name
    assert rebuilt.builds()[("gitflow", "latest")] == gitflow


def _rebuild_library(root: Path, work: Path, lib_id: str, extra: str) -> None:
    """Build ``lib_id`` again with one more word (``extra``): a new build its CURRENT names."""
    words = [*SUBJECTS[lib_id], extra]
    site = work / "sites2" / lib_id
    pages = subject_pages(words)
    write_site(site, pages, f"# {lib_id}\n\n## Docs\n\n" + "".join(f"- [{n}]({n})\n" for n in pages))
    config = (
        f'[[library]]\nid = "{lib_id}"\nllms_txt = "{site}/llms.txt"\n[library.chunking]\nmin_words = 5\n'
    )
    build(work / f"{lib_id}.toml", root, config)


async def test_while_a_stale_index_is_rebuilt_the_search_routes_by_its_unchanged_entries(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild that outlasts the wait (seconds, at thousands of libraries) does not turn the search
    into a pass over the catalogue in order: the server's previous index routes, its changed entries
    left out."""
    release = threading.Event()
    hold = threading.Event()  # set: the next rebuild waits for ``release``
    real = routing_module.build_index

    def held(*args: Any, **kwargs: Any) -> Any:
        if hold.is_set():
            release.wait(30)  # bounded: the test releases it after its searches
        return real(*args, **kwargs)

    monkeypatch.setattr(routing_module, "build_index", held)
    monkeypatch.setattr(routing_module, "ROUTE_INDEX_WAIT_SECONDS", 0.2)
    try:
        async with serve(root) as (client, catalog):
            data, _ = await search(client, query="rebase reflog")
            assert data["routing"]["chosen"][0] == "gitflow"
            # gitflow is built again (the indexer runs its own event loop: in a worker thread) and
            # the server reloads: its index now describes an old gitflow.
            await anyio.to_thread.run_sync(_rebuild_library, root, tmp_path, "gitflow", "zanzibar")
            await anyio.to_thread.run_sync(catalog.reload)
            hold.set()
            data, _ = await search(client, query="autovacuum bloat")
            assert data["routing"]["method"] == "routed", data["routing"]
            assert data["routing"]["chosen"][0] == "pgvac"
            assert "the previous one was used" in data["routing"]["reason"]
            assert "1 without a current routing record could not be chosen" in data["routing"]["reason"]
            data, _ = await search(client, query="zanzibar")
            assert "gitflow" not in data["routing"]["chosen"]  # its entry names another build
            release.set()
            gitflow = current_bundle(root / "gitflow" / "latest").name
            with anyio.fail_after(30):  # the rebuild writes the fresh index
                while (got := load_index(root)) is None or got.builds()[("gitflow", "latest")] != gitflow:
                    await anyio.sleep(0.05)
            data, _ = await search(client, query="zanzibar")
            assert data["routing"]["chosen"][0] == "gitflow"
            assert "previous one" not in data["routing"]["reason"]
    finally:
        release.set()


async def test_a_new_build_makes_the_index_stale_and_the_server_follows_it(
    root: Path, tmp_path: Path
) -> None:
    update_index(root)  # as the indexer leaves it after a build
    words = [*SUBJECTS["geotiles"], "zanzibar"]
    site = tmp_path / "sites2" / "geotiles"
    pages = subject_pages(words)
    write_site(site, pages, "# geotiles\n\n## Docs\n\n" + "".join(f"- [{n}]({n})\n" for n in pages))
    config = (
        f'[[library]]\nid = "geotiles"\nllms_txt = "{site}/llms.txt"\n[library.chunking]\nmin_words = 5\n'
    )
    # The indexer runs its own event loop: in a worker thread.
    await anyio.to_thread.run_sync(lambda: build(tmp_path / "geo.toml", root, config))
    async with serve(root) as (client, _):
        data, _ = await search(client, query="zanzibar")
        assert data["routing"]["chosen"] == ["geotiles"]
        assert data["hits"]


async def test_a_bundle_without_a_routing_record_still_serves_and_routes(root: Path) -> None:
    golden = current_bundle(root / "oldgolden" / "latest")
    assert not (golden / ROUTING_FILE).exists()
    async with serve(root, k=2) as (client, catalog):
        entry = catalog.version_entry("oldgolden")
        manifest = entry.read_manifest()
        assert manifest is not None and read_record(golden, manifest) is None
        single, _ = await search(client, query="sap.m.Table rows", libraryId="oldgolden")
        assert single["hits"]
        data, _ = await search(client, query="sap.m.Table column header template")
        assert set(data["routing"]["chosen"]) == {"golden", "oldgolden"}, data["routing"]
    index = load_index(root)
    assert index is not None
    derived = {lib.library_id: lib.derived for lib in index.libraries}
    assert derived["oldgolden"] is True and derived["pgvac"] is False


async def test_without_routing_the_search_takes_every_library_within_its_budget_and_says_so(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve(root, k=0) as (client, _):
        data, text = await search(client, query="autovacuum")
        assert data["routing"]["method"] == "unrouted"
        assert "routing is off" in data["routing"]["reason"]
        assert data["routing"]["searched"] == len(SUBJECTS) + 2
        assert "in catalogue order, without routing" in text
        # A budget that runs out at once: the libraries not reached are counted, not listed, and the
        # message blames the catalogue's size, not the question.
        monkeypatch.setattr(docs_module, "SEARCH_TIME_BUDGET", 0.0)
        data, text = await search(client, query="autovacuum")
        assert data["stopped"] is True
        assert data["routing"]["notReached"] == len(SUBJECTS) + 2
        assert data["skipped"] == []
        assert "the size of the catalogue, not the question" in data["message"]
        assert "Fewer, more specific words" not in text


async def test_a_small_catalogue_is_searched_whole(root: Path) -> None:
    async with serve(root, k=10) as (client, _):
        data, _ = await search(client, query="autovacuum")
        assert data["routing"]["method"] == "all"
        assert data["routing"]["searched"] == len(SUBJECTS) + 2
        assert not (root / ROUTING_INDEX).exists()  # no index needed to search everything


def test_the_indexer_build_command_writes_the_routing_index(tmp_path: Path) -> None:
    from clikit import index_cli

    subjects = {k: SUBJECTS[k] for k in ("pgvac", "gitflow")}
    config = []
    for lib_id, words in subjects.items():
        pages = subject_pages(words)
        write_site(
            tmp_path / lib_id, pages, f"# {lib_id}\n\n## Docs\n\n" + "".join(f"- [{n}]({n})\n" for n in pages)
        )
        config.append(f'[[library]]\nid = "{lib_id}"\nllms_txt = "{tmp_path / lib_id}/llms.txt"\n')
    (tmp_path / "libraries.toml").write_text("\n".join(config), encoding="utf-8")
    out = tmp_path / "bundles"
    done = index_cli("build", "--config", str(tmp_path / "libraries.toml"), "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    index = load_index(out)
    assert index is not None
    assert index.builds() == {
        (lib_id, "latest"): current_bundle(out / lib_id / "latest").name for lib_id in subjects
    }
    assert [c.library.library_id for c in index.score([("reflog",)])] == ["gitflow"]


async def test_a_routed_search_out_of_time_says_which_libraries_it_did_not_reach(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve(root, k=3) as (client, _):
        monkeypatch.setattr(docs_module, "SEARCH_TIME_BUDGET", 0.0)
        data, _text = await search(client, query="autovacuum bloat")
        assert data["routing"]["method"] == "routed" and data["routing"]["notReached"] >= 1
        assert data["stopped"] is True
        assert "of the libraries chosen were searched" in data["message"]
        assert "size of the catalogue" not in data["message"]


async def test_a_routing_index_that_cannot_be_written_is_kept_in_memory(root: Path) -> None:
    # A folder where the index would go: it can be neither read nor replaced (as on a read-only mount,
    # which a test running as root cannot make).
    (root / ROUTING_INDEX).mkdir()
    async with serve(root, k=3) as (client, _):
        for lib_id, words in (("mqbroker", ["prefetch", "deadletter"]), ("rustown", ["borrowck", "refcell"])):
            data, _text = await search(client, query=" ".join(words))
            assert data["routing"]["method"] == "routed" and data["routing"]["chosen"][0] == lib_id
    assert (root / ROUTING_INDEX).is_dir() and not list(root.glob(f".{ROUTING_INDEX}.tmp-*"))
