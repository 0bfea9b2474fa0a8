"""``GET /metrics`` and ``GET /info`` (issue 24), in process through the ASGI app (the multi-worker scrape
over real HTTP: test_server_http_metrics_workers.py).

Every count is checked against the requests this test sent, exactly: per tool and outcome, the
search modes, key-check failures and rate-limit refusals, bundles opened and failed, reloads, and the
per-library figures against the manifests. Label values must stay in fixed sets whatever clients send.
"""

from __future__ import annotations

import json
import random
import string
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx2
import pytest
from asgikit import FakeClock, serving
from docbundle.server import docs
from docbundle.server.catalog import Catalog
from docbundle.server.http.metrics import OUTCOMES
from docbundle.server.http.options import HttpOptions
from docbundle.server.keys import KeyStore, create_key, revoke_key
from docbundle.server.mcp.tools import TOOLS
from httpkit import MCP_HEADERS, client
from metricskit import Samples, label_values, parse, tool_call, value
from serverkit import catalog_over, flip_byte, install_golden

pytestmark = pytest.mark.anyio

OPTIONS = HttpOptions(host="127.0.0.1", rate=None, reload_interval=0)
QUERY = "useEffect cleanup"
REQUESTS = "docbundle_requests_total"
TOOL_NAMES = {make.__name__.removesuffix("_tool") for make in TOOLS}


@pytest.fixture
def golden_catalog(golden_root: Path) -> Iterator[Catalog]:
    yield from catalog_over(golden_root)


async def rpc(
    http: httpx2.AsyncClient, body: bytes, headers: dict[str, str] | None = None
) -> httpx2.Response:
    return await http.post("/mcp", content=body, headers={**MCP_HEADERS, **(headers or {})})


async def scrape(http: httpx2.AsyncClient, headers: dict[str, str] | None = None) -> Samples:
    response = await http.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")  # the text format
    return parse(response.text)


async def test_a_known_mix_of_requests_is_counted_exactly(golden_catalog: Catalog) -> None:
    async with serving(golden_catalog, OPTIONS) as app, client(app) as http:
        sent = {
            ("search_documents", "ok"): 5,
            ("list_libraries", "ok"): 3,
            ("get_document", "client_error"): 2,  # no such document: the client's mistake
            ("_other", "client_error"): 1,  # no such tool (-32602)
            ("_none", "ok"): 2,  # initialize
            ("_unknown", "refused"): 1,  # not JSON
        }
        for n in range(5):
            r = await rpc(http, tool_call(n, "search_documents", query=QUERY, libraryId="golden"))
            assert r.json()["result"]["isError"] is False
        for n in range(3):
            await rpc(http, tool_call(n, "list_libraries"))
        for n in range(2):
            r = await rpc(http, tool_call(n, "get_document", libraryId="golden", id="no/such/page"))
            assert r.json()["result"]["isError"] is True
        assert "error" in (await rpc(http, tool_call(1, "no_such_tool"))).json()
        for n in range(2):
            init = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            }
            body = {"jsonrpc": "2.0", "id": n, "method": "initialize", "params": init}
            assert (await rpc(http, json.dumps(body).encode())).status_code == 200
        assert (await rpc(http, b"{nope")).status_code == 400
        for _ in range(2):  # scrapes, health and info are not counted as requests
            await http.get("/healthz")
            await http.get("/info")
            samples = await scrape(http)
            counted = {
                (dict(labels)["tool"], dict(labels)["outcome"]): v
                for (name, labels), v in samples.items()
                if name == REQUESTS
            }
            assert counted == sent
            for (tool, outcome), n in sent.items():
                seconds = "docbundle_request_duration_seconds_count"
                assert value(samples, seconds, route="/mcp", tool=tool, outcome=outcome) == n
        assert value(samples, "docbundle_searches_total", mode="balanced", kind="keyword") == 5
        assert value(samples, "docbundle_library_requests_total", library="golden") == 7
        assert value(samples, "docbundle_bundle_opens_total") == 1
        assert value(samples, "docbundle_open_bundles") == 1
        manifest = golden_catalog.version_entry("golden").read_manifest()
        assert manifest is not None
        assert value(samples, "docbundle_open_bundle_bytes") == sum(f.size for f in manifest.files)
        assert value(samples, "docbundle_bundle_failures_total", library="golden") == 0


async def test_client_mistakes_count_as_client_error_and_server_failures_as_error(golden_root: Path) -> None:
    """Issue 31: an unknown tool, a ``mode`` outside its enum, an argument over its bound, an unknown
    library or a bad cursor is the client's mistake (``client_error``); a library whose bundle went bad is
    the server's failure (``error``), which an error-rate alert is about."""
    bundle = install_golden(golden_root, "damaged")
    flip_byte(next(p for p in sorted(bundle.iterdir()) if p.name != "manifest.json"))
    catalog = Catalog.load(golden_root)
    try:
        async with serving(catalog, OPTIONS) as app, client(app) as http:
            mistakes = [
                tool_call(1, "no_such_tool"),
                tool_call(2, "search_documents", query=QUERY, libraryId="golden", mode="fastest"),
                tool_call(3, "search_documents", query="x" * 3_000, libraryId="golden"),
                tool_call(4, "search_documents", query=QUERY, libraryId="no-such-library"),
                tool_call(5, "list_libraries", cursor="not-a-cursor"),
            ]
            for body in mistakes:
                reply = (await rpc(http, body)).json()
                assert "error" in reply or reply["result"]["isError"] is True, reply
            failed = (
                await rpc(http, tool_call(6, "search_documents", query=QUERY, libraryId="damaged"))
            ).json()
            assert failed["result"]["isError"] is True, failed
            samples = await scrape(http)
    finally:
        catalog.close()
    assert value(samples, REQUESTS, route="/mcp", tool="_other", outcome="client_error") == 1
    assert value(samples, REQUESTS, route="/mcp", tool="search_documents", outcome="client_error") == 3
    assert value(samples, REQUESTS, route="/mcp", tool="list_libraries", outcome="client_error") == 1
    assert value(samples, REQUESTS, route="/mcp", tool="search_documents", outcome="error") == 1
    assert value(samples, REQUESTS, route="/mcp", tool="_other", outcome="error") == 0


async def test_a_search_stopped_at_its_time_budget_counts_as_stopped(
    golden_catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docs, "SEARCH_TIME_BUDGET", 0.0)
    async with serving(golden_catalog, OPTIONS) as app, client(app) as http:
        r = await rpc(http, tool_call(1, "search_documents", query=QUERY, libraryId="golden"))
        assert r.json()["result"]["structuredContent"]["stopped"] is True
        samples = await scrape(http)
    assert value(samples, REQUESTS, route="/mcp", tool="search_documents", outcome="stopped") == 1
    assert value(samples, REQUESTS, route="/mcp", tool="search_documents", outcome="ok") == 0


async def test_metrics_need_a_key_when_keys_are_on(golden_catalog: Catalog, tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    record, key = create_key(path, "scraper")
    revoked, revoked_key = create_key(path, "old")
    revoke_key(path, revoked.id)
    async with serving(golden_catalog, OPTIONS, keys=KeyStore(path)) as app, client(app) as http:
        refused = [
            await http.get("/metrics"),
            await http.get("/metrics", headers={"X-API-Key": f"{record.id}.{'W' * 43}"}),
            await http.get("/metrics", headers={"Authorization": f"Bearer {revoked_key}"}),
        ]
        assert [r.status_code for r in refused] == [401, 401, 403]
        assert all("docbundle_" not in r.text for r in refused)
        samples = await scrape(http, {"Authorization": f"Bearer {key}"})
        assert (await http.get("/metrics", headers={"X-API-Key": key})).status_code == 200
    assert value(samples, "docbundle_auth_failures_total", reason="no_key") == 1
    assert value(samples, "docbundle_auth_failures_total", reason="invalid_key") == 1
    assert value(samples, "docbundle_auth_failures_total", reason="key_revoked") == 1
    assert not any(name == REQUESTS for name, _ in samples)  # scrapes are not requests


async def test_metrics_without_a_key_with_no_auth(golden_catalog: Catalog) -> None:
    async with serving(golden_catalog, OPTIONS) as app, client(app) as http:
        assert (await http.get("/metrics")).status_code == 200
        assert (await http.post("/metrics")).status_code == 405
        foreign = await http.get("/metrics", headers={"Host": "evil.example"})
        assert foreign.status_code == 421  # the Host check of /mcp applies


async def test_rate_limit_refusals_are_counted(golden_catalog: Catalog) -> None:
    options = HttpOptions(host="127.0.0.1", rate=1.0, burst=2, limit_loopback=True, reload_interval=0)
    async with serving(golden_catalog, options, clock=FakeClock()) as app, client(app) as http:
        statuses = [(await rpc(http, tool_call(n, "list_libraries"))).status_code for n in range(5)]
        assert statuses == [200, 200, 429, 429, 429]
        assert (await http.get("/metrics")).status_code == 429  # the scrape is limited too
        app.limiter = None
        samples = await scrape(http)
    assert value(samples, "docbundle_rate_limited_total", limit="requests") == 4
    assert value(samples, REQUESTS, route="/mcp", tool="_unknown", outcome="rate_limited") == 3
    assert value(samples, REQUESTS, route="/mcp", tool="list_libraries", outcome="ok") == 2


async def test_label_values_stay_bounded_whatever_clients_send(catalog: Catalog) -> None:
    rng = random.Random(24)
    alphabet = string.ascii_letters + string.digits + "_-./ é中\n"

    def junk() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80)))

    async def calls(n: int) -> None:
        for i in range(n):
            match i % 4:
                case 0:
                    body = tool_call(i, junk(), libraryId=junk())
                case 1:
                    body = tool_call(i, "search_documents", query="hooks", libraryId=junk())
                case 2:
                    body = tool_call(i, rng.choice(sorted(TOOL_NAMES)), libraryId=junk(), id=junk())
                case _:
                    params = {"uri": f"docs://{junk()}/latest/x"}
                    body = json.dumps(
                        {"jsonrpc": "2.0", "id": i, "method": "resources/read", "params": params}
                    )
                    body = body.encode()
            await rpc(http, body)

    async with serving(catalog, OPTIONS) as app, client(app) as http:
        for n, tool in enumerate(sorted(TOOL_NAMES)):  # every registered tool, an unknown library
            await rpc(http, tool_call(n, tool, libraryId="no-such-library"))
        await calls(4)
        first = await scrape(http)
        await calls(1000)
        for _ in range(50):  # made-up paths: one route, `_other`
            await http.get("/x-" + "".join(c for c in junk() if c.isalnum()))
        after = await scrape(http)
    for label in ("tool", "library"):  # 1,000 more calls: not one new label value
        assert label_values(after, label) == label_values(first, label)
    assert label_values(after, "tool") == TOOL_NAMES | {"_other", "_none"}
    assert label_values(after, "library") == {*catalog.library_ids(), "_other"}  # the gauges name each
    assert label_values(after, "outcome") <= set(OUTCOMES)
    assert label_values(after, "route") == {"/mcp", "_other"}
    assert sum(v for (name, _), v in after.items() if name == REQUESTS) == len(TOOL_NAMES) + 1004 + 50


async def test_per_library_figures_come_from_the_catalogue(catalog: Catalog) -> None:
    async with serving(catalog, OPTIONS) as app, client(app) as http:
        await rpc(http, tool_call(1, "list_libraries"))  # every library checked against its CURRENT
        samples = await scrape(http)
    assert value(samples, "docbundle_libraries") == len(catalog.library_ids())
    for entry in catalog.entries():
        manifest = entry.meta  # the catalogue summary's entry: what the manifest says
        assert manifest is not None
        where = {"library": entry.library_id, "version": entry.version}
        build = {**where, "build_id": manifest.build_id, "content_hash": manifest.content_hash}
        assert value(samples, "docbundle_library_build_info", **build) == 1
        assert value(samples, "docbundle_library_documents", **where) == manifest.counts.documents
        assert value(samples, "docbundle_library_chunks", **where) == manifest.counts.chunks
        assert value(samples, "docbundle_library_has_vectors", **where) == 0
        assert value(samples, "docbundle_library_up", **where) == 1
        built = datetime.fromisoformat(manifest.built_at).timestamp()
        age = value(samples, "docbundle_library_build_age_seconds", **where)
        assert built < time.time() - age + 60 and age > 0  # the build's age when scraped


async def test_failed_bundles_and_reloads_are_counted(broken_root: Path, tmp_path: Path) -> None:
    cat = Catalog.load(broken_root)
    try:
        async with serving(cat, OPTIONS) as app, client(app) as http:
            r = await rpc(http, tool_call(1, "search_documents", query=QUERY, libraryId="flipped"))
            assert r.json()["result"]["isError"] is True
            samples = await scrape(http)
    finally:
        cat.close()
    assert value(samples, "docbundle_bundle_failures_total", library="flipped") == 1
    assert value(samples, "docbundle_library_up", library="flipped", version="latest") == 0
    assert value(samples, "docbundle_library_up", library="golden", version="latest") == 1
    assert value(samples, "docbundle_bundle_opens_total") == 0

    root = tmp_path / "bundles"
    install_golden(root)
    cat = Catalog.load(root)
    try:
        async with serving(cat, OPTIONS) as app, client(app) as http:
            install_golden(root, "second")
            assert cat.refresh()
            samples = await scrape(http)
    finally:
        cat.close()
    assert value(samples, "docbundle_reloads_total") == 1
    assert value(samples, "docbundle_libraries") == 2
    assert value(samples, "docbundle_library_up", library="second", version="latest") == 1


async def test_info_is_public_and_tells_no_paths_keys_or_ids(golden_catalog: Catalog, tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    record, key = create_key(path, "app")
    async with serving(golden_catalog, OPTIONS, keys=KeyStore(path)) as app, client(app) as http:
        response = await http.get("/info")
        assert (await http.post("/info")).status_code == 405
    assert response.status_code == 200
    info = response.json()
    assert set(info) == {"name", "version", "formatVersions", "libraries"}
    assert info["formatVersions"] == [1] and info["libraries"] == 1 and info["version"]
    text = response.text
    for secret in (str(golden_catalog.root), str(tmp_path), "/", record.id, key, "golden"):
        assert secret not in text
