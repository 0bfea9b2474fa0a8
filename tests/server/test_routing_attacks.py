"""Hostile routing files (issue 31, items 2, 3, 7 and 8): a route index or routing record that is a
FIFO, a link to ``/dev/zero``, a sparse file of 1.5 GB, nested 3,000 deep or forged, and a library that
cannot be indexed. Each attacks the real entry point: ``docbundle serve`` over stdio (a subprocess whose
address space is capped, so a file read whole fails it rather than the machine), the server in memory
through the MCP SDK client, or ``docbundle-index build``. A cross-library search must answer, routed by
an index rebuilt from the bundles' own verified records, and no second search may wait behind the
first."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from clikit import index_cli
from docbundle.bundle.layout import current_bundle
from docbundle.bundle.manifest import MANIFEST_NAME, decode_manifest, encode_manifest
from docbundle.bundle.routeindex import ROUTING_INDEX, RouteIndex, load_index, update_index
from docbundle.bundle.routing import ROUTING_FILE
from docbundle.bundle.summary import SUMMARY_NAME
from docbundle.server.catalog import Catalog, CatalogSettings
from docbundle.server.lockfile import LOCK_FILE_NAME
from docbundle.server.mcp.server import create_server
from mcp import Client, StdioServerParameters
from routekit import SUBJECTS, subject_pages, subjects_tree
from serverkit import private_copy, search_text
from treekit import build, write_site

pytestmark = pytest.mark.anyio

HANG_GUARD_SECONDS = 90  # a server that blocks on a file never answers: the guard ends the test
# The server's address space: this catalogue is served in 225 MB of it (VmPeak, 7 threads, with the two
# malloc arenas set below; 600 MB with glibc's default arenas, which grow with the threads); a file read
# whole (1.5 GB, or /dev/zero without end) fails at this cap instead of taking the machine's memory.
ADDRESS_SPACE_BYTES = 1280 * 1024**2
SPARSE_BYTES = 1_500_000_000
NESTING = 3_000  # msgspec gives up with RecursionError near 2,000 levels
# A route index of one unknown key whose value is an array nested NESTING deep.
NESTED_INDEX = b"\x82\xa6format\x01\xa1x" + b"\x91" * NESTING + b"\x01"
K = 3  # --route-libraries: fewer than the eight libraries, so searches route


@pytest.fixture(scope="module")
def subjects_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight libraries, each about its own words, built with routing records (``routekit``), and the
    route index the indexer leaves."""
    base = tmp_path_factory.mktemp("subjects")
    return build(base / "sites" / "libraries.toml", base / "bundles", subjects_tree(route_index=True)).root


@pytest.fixture
def root(subjects_root: Path, tmp_path: Path) -> Path:
    """A private copy, with the route index the indexer left."""
    return private_copy(subjects_root, tmp_path)


def _bundle(root: Path, library_id: str) -> Path:
    return current_bundle(root / library_id / "latest")


def _question(library_id: str) -> str:
    words = SUBJECTS[library_id]
    return f"{words[0]} {words[2]}"


@asynccontextmanager
async def _stdio(root: Path) -> AsyncIterator[Client]:
    """``docbundle serve`` over stdio, its address space capped (limits survive ``exec``)."""
    start = (
        "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE_BYTES}, {ADDRESS_SPACE_BYTES})); "
        "os.execv(sys.executable, [sys.executable, '-m', 'docbundle.server', *sys.argv[1:]])"
    )
    args = ["-c", start, "serve", "--bundles", str(root), "--reload-interval", "0"]
    # The SDK passes a server only a few variables of the environment: the interpreter's path is kept so
    # the server runs the code under test.
    env = {"MALLOC_ARENA_MAX": "2", **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}}
    params = StdioServerParameters(command=sys.executable, args=[*args, "--route-libraries", str(K)], env=env)
    with anyio.fail_after(HANG_GUARD_SECONDS):
        async with Client(params) as client:
            yield client


@asynccontextmanager
async def _in_memory(root: Path, lock: Path | None = None) -> AsyncIterator[tuple[Client, Catalog]]:
    catalog = Catalog.load(root, lock=lock, settings=CatalogSettings(route_libraries=K))
    try:
        with anyio.fail_after(HANG_GUARD_SECONDS):
            async with Client(create_server(catalog)) as client:
                yield client, catalog
    finally:
        catalog.close()


async def _search(client: Client, query: str) -> dict[str, Any]:
    result = await client.call_tool("search_documents", {"query": query})
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def _two_at_once(client: Client, first: str, second: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two cross-library searches sent together: neither may wait for ever behind the other."""
    got: dict[str, dict[str, Any]] = {}

    async def one(lib: str) -> None:
        got[lib] = await _search(client, _question(lib))

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, first)
        tg.start_soon(one, second)
    return got[first], got[second]


def _assert_routed_to(data: dict[str, Any], library_id: str) -> None:
    assert data["routing"]["method"] == "routed", data["routing"]
    assert data["routing"]["chosen"][0] == library_id, data["routing"]
    assert data["hits"] and data["hits"][0]["libraryId"] == library_id


def _plant(path: Path, kind: str) -> None:
    """Replace ``path`` with a hostile file of ``kind``."""
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "sparse":
        with open(path, "wb") as fh:
            fh.truncate(SPARSE_BYTES)
    else:
        assert kind == "nested"
        path.write_bytes(NESTED_INDEX)


# -- item 2 and 3: routing.idx ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse", "nested"])
async def test_a_hostile_routing_index_is_rebuilt_and_two_searches_at_once_both_route(
    root: Path, kind: str
) -> None:
    """routing.idx as a FIFO blocked the first search inside the router's lock (and every later one
    behind it); as /dev/zero or 1.5 GB it was read whole; nested, it failed every search. Now it is
    refused from what it is, and both searches route by an index rebuilt from the records."""
    _plant(root / ROUTING_INDEX, kind)
    async with _stdio(root) as client:
        first, second = await _two_at_once(client, "pgvac", "gitflow")
        _assert_routed_to(first, "pgvac")
        _assert_routed_to(second, "gitflow")
        _assert_routed_to(await _search(client, _question("rustown")), "rustown")
    rebuilt = load_index(root)  # the hostile file was replaced by a fresh index
    assert rebuilt is not None and len(rebuilt.libraries) == len(SUBJECTS)


# -- item 2: routing.bin -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse"])
async def test_a_hostile_routing_record_leaves_one_library_out_and_the_others_route(
    root: Path, kind: str
) -> None:
    """A routing.bin that is a FIFO or /dev/zero (its manifest rewritten to list 0 bytes, the summary
    removed so the server reads that manifest) hung or ran the index rebuild out of memory, so every
    search fell back to catalogue order; a sparse 1.5 GB one is refused from its size. Now the one
    library is left out of the index and the others route."""
    bundle = _bundle(root, "kubeops")
    manifest = decode_manifest((bundle / MANIFEST_NAME).read_bytes())
    size = SPARSE_BYTES if kind == "sparse" else 0
    files = [
        msgspec.structs.replace(f, size=size, sha256=hashlib.sha256(b"").hexdigest())
        if f.path == ROUTING_FILE
        else f
        for f in manifest.files
    ]
    (bundle / MANIFEST_NAME).write_bytes(encode_manifest(msgspec.structs.replace(manifest, files=files)))
    (root / SUMMARY_NAME).unlink()
    (root / ROUTING_INDEX).unlink()
    _plant(bundle / ROUTING_FILE, kind)
    async with _stdio(root) as client:
        first, second = await _two_at_once(client, "pgvac", "tlsguide")
        _assert_routed_to(first, "pgvac")
        _assert_routed_to(second, "tlsguide")
        again = await _search(client, _question("kubeops"))
        assert again["routing"]["method"] == "routed", again["routing"]
        assert "kubeops" not in again["routing"]["chosen"]
    index = load_index(root)
    assert index is not None and not index.has(("kubeops", "latest")) and index.has(("pgvac", "latest"))


# -- item 7: a forged route index ----------------------------------------------------------------------


def _forge(root: Path) -> None:
    """Move pgvac's postings to gitflow (and gitflow's to pgvac), every build id left as it was: a word
    only pgvac holds now routes to gitflow, which does not hold it."""
    index = load_index(root)
    assert index is not None
    parts = index.split()
    pgvac, pg_postings = parts[("pgvac", "latest")]
    gitflow, git_postings = parts[("gitflow", "latest")]
    parts[("pgvac", "latest")] = (pgvac, git_postings)
    parts[("gitflow", "latest")] = (gitflow, pg_postings)
    (root / ROUTING_INDEX).write_bytes(RouteIndex.from_hashed(list(parts.values())).encode())
    forged = load_index(root)
    assert forged is not None and forged.score([("autovacuum",)])[0].library.library_id == "gitflow"


def _lock_everything(root: Path) -> Path:
    """A lock file pinning every library's content hash and manifest sha256 (as `docbundle` users do)."""
    lines = []
    for lib_id in SUBJECTS:
        data = (_bundle(root, lib_id) / MANIFEST_NAME).read_bytes()
        content = decode_manifest(data).build.content_hash
        sha = hashlib.sha256(data).hexdigest()
        lines.append(
            f'[libraries.{lib_id}]\nlatest = {{ content_hash = "{content}", manifest_sha256 = "{sha}" }}\n'
        )
    path = root.parent / LOCK_FILE_NAME
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("locked", [False, True], ids=["no-lock-file", "lock-file"])
async def test_a_forged_routing_index_does_not_hide_a_library(root: Path, locked: bool) -> None:
    """Only build ids were checked, so postings moved between libraries made "autovacuum" (pgvac's
    alone) answer that no library holds it, even with bundles.lock pinning every manifest. The index
    is now trusted only as far as it matches each library's verified record: pgvac is found."""
    lock = _lock_everything(root) if locked else None
    _forge(root)
    async with _in_memory(root, lock) as (client, _):
        data, _text = await search_text(client, query="autovacuum wraparound")
        _assert_routed_to(data, "pgvac")
        data, _text = await search_text(client, query="rebase reflog")
        _assert_routed_to(data, "gitflow")
    repaired = load_index(root)
    assert repaired is not None
    assert repaired.score([("autovacuum",)])[0].library.library_id == "pgvac"


# -- item 8: a library that cannot be indexed ------------------------------------------------------------


async def test_a_library_that_cannot_be_indexed_is_left_out_once_not_at_every_search(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """kubeops's manifest is gone while the summary still lists it: each search rebuilt, rewrote and
    re-logged routing.idx (two rebuilds a search). Now it is rebuilt once, kubeops left out and logged
    once, and the file is not rewritten by later searches."""
    (_bundle(root, "kubeops") / MANIFEST_NAME).unlink()
    index, _ = update_index(root)  # as the indexer's next build or install leaves it
    assert not index.has(("kubeops", "latest"))
    caplog.set_level(logging.INFO, logger="docbundle")
    searches = ["pgvac", "gitflow", "rustown", "tlsguide", "mqbroker", "geotiles"]
    async with _in_memory(root) as (client, _):
        data, _text = await search_text(client, query=_question(searches[0]))
        _assert_routed_to(data, searches[0])
        written = (root / ROUTING_INDEX).stat().st_ino
        for lib_id in searches[1:]:
            data, _text = await search_text(client, query=_question(lib_id))
            _assert_routed_to(data, lib_id)
    messages = [r.getMessage() for r in caplog.records]
    assert sum(m.startswith("route index built") for m in messages) == 1, messages
    left_out = [m for m in messages if m.startswith("left out of the route index")]
    assert len(left_out) == 1 and "kubeops/latest" in left_out[0], left_out
    assert (root / ROUTING_INDEX).stat().st_ino == written


async def test_a_server_builds_its_routing_index_once_it_has_answered(root: Path) -> None:
    """Building from verified records reads every record (5 s at 10,000 libraries, past the 5 s a search
    waits): ``docbundle serve`` starts it after its first answer, before any search across libraries."""
    (root / ROUTING_INDEX).unlink()
    async with _stdio(root) as client:
        listed = await client.call_tool("list_libraries", {})
        assert not listed.is_error, listed.content
        while (index := load_index(root)) is None:  # bounded by the hang guard
            await anyio.sleep(0.05)
        assert len(index.libraries) == len(SUBJECTS)


# -- the indexer ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "nested"])
def test_the_indexer_replaces_a_hostile_routing_index(tmp_path: Path, kind: str) -> None:
    """``docbundle-index build`` read routing.idx whole to reuse its entries: a FIFO hung it for ever and
    a nested one ended it with a traceback. It now says why it cannot reuse it and writes a fresh one."""
    out = tmp_path / "bundles"
    out.mkdir()
    _plant(out / ROUTING_INDEX, kind)
    site = tmp_path / "pgvac"
    pages = subject_pages(SUBJECTS["pgvac"])
    write_site(site, pages, "# pgvac\n\n## Docs\n\n" + "".join(f"- [{n}]({n})\n" for n in pages))
    (tmp_path / "libraries.toml").write_text(
        f'[[library]]\nid = "pgvac"\nllms_txt = "{site}/llms.txt"\n', encoding="utf-8"
    )
    done = index_cli(
        "build", "--config", str(tmp_path / "libraries.toml"), "--out", str(out), "--quiet",
        timeout=HANG_GUARD_SECONDS,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert ROUTING_INDEX in done.stderr  # it says the old file could not be used
    index = load_index(out)
    assert index is not None and [lib.library_id for lib in index.libraries] == ["pgvac"]
