"""Issue 22, item 2: list_libraries in pages that fit maxTokens (cursor, category and query filters, the
total), resources/list in pages, and item 6's bound on the bundles open at once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import server_cli
from docbundle.server.budget import estimate_tokens
from docbundle.server.catalog import EVICT_AFTER_SECONDS, RETIRE_AFTER_SECONDS, Catalog, CatalogSettings
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from serverkit import call, catalog_over, connect, install_golden

pytestmark = pytest.mark.anyio

COUNT = 45
CATEGORIES = ("web", "data", "cloud")


@pytest.fixture(scope="module")
def many_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """COUNT copies of the golden bundle, each a library with its own name, description and category."""
    root = tmp_path_factory.mktemp("many") / "bundles"
    for i in range(COUNT):
        install_golden(
            root,
            f"lib-{i:03d}",
            name=f"Library {i}",
            description=f"{'parser' if i % 5 == 0 else 'widget'} toolkit number {i}",
            category=CATEGORIES[i % 3],
        )
    return root


@pytest.fixture
def many(many_root: Path) -> Iterator[Catalog]:
    yield from catalog_over(many_root)


async def _walk(catalog: Catalog, **args: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """Every page of a listing with ``args``: the ids in order, and each page's result."""
    ids: list[str] = []
    pages: list[dict[str, Any]] = []
    async with connect(catalog) as c:
        cursor = None
        for _ in range(COUNT + 1):
            page = await call(c, "list_libraries", **args, **({"cursor": cursor} if cursor else {}))
            pages.append(page)
            ids += [lib["id"] for lib in page["libraries"]]
            cursor = page["nextCursor"]
            if cursor is None:
                break
    return ids, pages


async def test_every_library_is_listed_exactly_once_across_pages(many: Catalog) -> None:
    ids, pages = await _walk(many, maxTokens=500)
    assert len(pages) > 3, "500 tokens should not hold 45 libraries"
    assert ids == [f"lib-{i:03d}" for i in range(COUNT)]
    assert {p["total"] for p in pages} == {COUNT}
    assert pages[-1]["nextCursor"] is None


async def test_a_page_fits_max_tokens(many: Catalog) -> None:
    async with connect(many) as c:
        result = await c.call_tool("list_libraries", {"maxTokens": 1000})
    data = result.structured_content or {}
    text = "".join(getattr(part, "text", "") for part in result.content)
    assert 1 < len(data["libraries"]) < COUNT and data["nextCursor"]
    assert estimate_tokens(text) + estimate_tokens(json.dumps(data, separators=(",", ":"))) <= 1000
    assert f"of {COUNT})" in text and data["nextCursor"] in text


async def test_the_default_page_is_small(many: Catalog) -> None:
    async with connect(many) as c:
        result = await c.call_tool("list_libraries", {})
    size = len(json.dumps(result.structured_content)) + sum(
        len(getattr(p, "text", "")) for p in result.content
    )
    assert size <= 16 * 1024, size
    assert (result.structured_content or {})["total"] == COUNT


async def test_category_and_query_filter_and_total_counts_the_matches(many: Catalog) -> None:
    ids, pages = await _walk(many, category="DATA", maxTokens=500)
    assert ids == [f"lib-{i:03d}" for i in range(COUNT) if i % 3 == 1]
    assert {p["total"] for p in pages} == {len(ids)} and pages[0]["category"] == "data"
    ids, pages = await _walk(many, query="Parser toolkit")
    assert ids == [f"lib-{i:03d}" for i in range(0, COUNT, 5)]
    assert pages[0]["total"] == len(ids) and pages[0]["query"] == "Parser toolkit"
    ids, pages = await _walk(many, category="web", query="parser")
    assert ids == [f"lib-{i:03d}" for i in range(0, COUNT, 15)]
    _, pages = await _walk(many, query="no such words")
    assert (
        pages[0]["total"] == 0 and pages[0]["libraries"] == [] and "No library matches" in pages[0]["message"]
    )


@pytest.mark.parametrize("cursor", ["not-a-cursor", "eyJ2IjoyfQ", "x" * 300])
async def test_a_bad_cursor_gets_a_clear_error(many: Catalog, cursor: str) -> None:
    async with connect(many) as c:
        result = await c.call_tool("list_libraries", {"cursor": cursor})
    assert result.is_error
    text = "".join(getattr(part, "text", "") for part in result.content)
    assert "is not one list_libraries returned" in text and "without cursor" in text


async def test_a_cursor_from_another_listing_is_refused(many: Catalog) -> None:
    async with connect(many) as c:
        first = await call(c, "list_libraries", category="web", maxTokens=500)
        result = await c.call_tool("list_libraries", {"category": "data", "cursor": first["nextCursor"]})
    assert result.is_error
    assert "another category or query" in "".join(getattr(part, "text", "") for part in result.content)


async def test_resources_list_comes_in_pages(many_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("docbundle.server.mcp.resources.RESOURCES_PAGE", 10)
    catalog = Catalog.load(many_root)
    try:
        async with connect(catalog) as c:
            uris: list[str] = []
            cursor = None
            for _ in range(10):
                page = await c.list_resources(cursor=cursor, cache_mode="refresh")
                uris += [str(r.uri) for r in page.resources]
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert uris == [f"library://lib-{i:03d}" for i in range(COUNT)]
            with pytest.raises(MCPError) as bad:
                await c.list_resources(cursor="nonsense", cache_mode="refresh")
            assert bad.value.error.code == INVALID_PARAMS
            assert "is not one resources/list returned" in bad.value.error.message
    finally:
        catalog.close()


def test_docbundle_info_lists_every_library(many_root: Path) -> None:
    r = server_cli("info", "--bundles", str(many_root), "--json")
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)
    assert len(listed["libraries"]) == COUNT and listed["total"] == COUNT and listed["nextCursor"] is None


async def test_past_max_open_the_least_recently_used_bundle_is_closed(many_root: Path) -> None:
    catalog = Catalog.load(many_root, settings=CatalogSettings(max_open=2, retire_after=0))
    try:
        async with connect(catalog) as c:
            for lib in ("lib-000", "lib-001", "lib-002", "lib-000", "lib-003"):
                found = await call(c, "search_documents", query="useEffect cleanup", libraryId=lib)
                assert found["hits"], lib
                assert catalog.open_count() <= 2
        assert [catalog.state(catalog.version_entry(f"lib-{i:03d}"))[0] for i in range(4)] == [
            "ready",
            "available",
            "available",
            "ready",
        ]
    finally:
        catalog.close()


async def test_a_bundle_past_max_open_is_closed_within_seconds_not_a_minute(many_root: Path) -> None:
    """A search across a big catalogue opens many bundles: one closed past --max-open must not hold its
    files for the minute a build replaced by a reload is given (thousands of descriptors at scale)."""
    catalog = Catalog.load(many_root, settings=CatalogSettings(max_open=2))  # the server's grace times
    try:
        async with connect(catalog) as c:
            for lib in ("lib-000", "lib-001", "lib-002"):
                assert (await call(c, "search_documents", query="useEffect cleanup", libraryId=lib))["hits"]
        assert catalog.open_count() == 3  # lib-000 retired, open for requests still reading it
        assert catalog.expire(time.monotonic() + EVICT_AFTER_SECONDS + 0.5) == 1
        assert catalog.open_count() == 2 and EVICT_AFTER_SECONDS < RETIRE_AFTER_SECONDS
        assert catalog.state(catalog.version_entry("lib-000"))[0] == "available"  # opened again when asked
    finally:
        catalog.close()


def test_max_open_must_be_at_least_one(many_root: Path) -> None:
    r = server_cli("serve", "--bundles", str(many_root), "--max-open", "0")
    assert r.returncode == 2 and "--max-open" in r.stderr and "give 1 or more" in r.stderr


async def test_the_open_bundles_share_one_search_cache_budget(
    many_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("docbundle.server.catalog.pool.CACHE_BUDGET_BYTES", 6000)
    monkeypatch.setattr("docbundle.server.catalog.pool.CACHE_FLOOR_BYTES", 1000)
    catalog = Catalog.load(many_root)
    try:
        async with connect(catalog) as c:
            for lib in ("lib-000", "lib-001", "lib-002"):
                for query in (
                    "useEffect cleanup",
                    "install configure",
                    "state hooks props",
                    '"effect cleanup"',
                ):
                    await call(c, "search_documents", query=query, libraryId=lib)
        held = [catalog.open(f"lib-{i:03d}").searcher.cache_bytes() for i in range(3)]
        # 6000 bytes shared by three bundles: 2000 each for postings and 2000 for phrase positions.
        assert all(0 < n <= 2 * 2000 for n in held), held
    finally:
        catalog.close()
