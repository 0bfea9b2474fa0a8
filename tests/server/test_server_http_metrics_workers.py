"""``GET /metrics`` over real HTTP on 127.0.0.1 from ``docbundle serve`` with 1 and 2 worker processes
(issue 24): one scrape, answered by whichever worker, counts every request sent to any of them,
exactly; the per-library figures are not multiplied by the workers; the metrics folder of the
multiprocess mode is private and gone once the server exits; and ``/metrics`` needs a key.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from docbundle.server.catalog import Catalog
from docbundle.server.keys import create_key
from metricskit import get, label_values, parse, post, tool_call, value
from serverkit import HttpServerProcess

QUERY = "useEffect cleanup"


@pytest.mark.parametrize("workers", [1, 2])
def test_one_scrape_counts_the_requests_of_every_worker(
    bundles_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # where the server makes its metrics folder
    keys = tmp_path / "keys.toml"
    _, key = create_key(keys, "scraper")
    auth = {"X-API-Key": key}
    mix = {"search_documents": 14, "list_libraries": 9, "get_document": 5, "_other": 3}
    with HttpServerProcess(
        bundles_root, "--keys", str(keys), "--workers", str(workers), "--rate", "off"
    ) as server:
        folders = list(temp.glob("docbundle-metrics-*"))
        assert len(folders) == (1 if workers > 1 else 0)
        n = 0
        for tool, count in mix.items():
            for _ in range(count):
                n += 1
                if tool == "search_documents":
                    body = tool_call(n, tool, query=QUERY, libraryId="golden")
                elif tool == "get_document":
                    body = tool_call(n, tool, libraryId="golden", id="no/such/page")
                else:
                    body = tool_call(n, tool if tool != "_other" else "no_such_tool")
                status, _ = post(server.port, body, {**auth, "X-Request-Id": f"mix-{n:03d}"})
                assert status == 200
        assert get(server.port, "/metrics")[0] == 401
        assert get(server.port, "/metrics", {"X-API-Key": key[:-1] + "x"})[0] == 401
        server.wait_for(lambda line: f'"requestId":"mix-{n:03d}"' in line)
        served_by = Counter(
            json.loads(line).get("worker") for line in server.lines() if '"requestId":"mix-' in line
        )
        assert sum(served_by.values()) == n
        if workers > 1:
            assert set(served_by) == {0, 1}, served_by  # both workers answered some
        scrapes = []
        for _ in range(4):  # each scrape may land on either worker: every one sees it all
            status, kind, text = get(server.port, "/metrics", {"Authorization": f"Bearer {key}"})
            assert status == 200 and kind.startswith("text/plain")
            scrapes.append(parse(text))
    assert server.returncode == 0
    assert list(temp.glob("docbundle-metrics-*")) == []  # the multiprocess folder went with the server
    catalog = Catalog.load(bundles_root)
    try:
        for samples in scrapes:
            for tool, count in mix.items():
                # no such page, no such tool: the client's own mistakes (issue 31)
                outcome = "ok" if tool in ("search_documents", "list_libraries") else "client_error"
                assert (
                    value(samples, "docbundle_requests_total", route="/mcp", tool=tool, outcome=outcome)
                    == count
                )
            total = sum(v for (name, _), v in samples.items() if name == "docbundle_requests_total")
            assert total == n
            assert value(samples, "docbundle_auth_failures_total", reason="no_key") == 1
            assert value(samples, "docbundle_auth_failures_total", reason="invalid_key") == 1
            assert value(samples, "docbundle_searches_total", mode="balanced", kind="keyword") == 14
            # Per library: once, whatever the number of workers.
            assert value(samples, "docbundle_libraries") == len(catalog.library_ids())
            for entry in catalog.entries():
                assert entry.meta is not None
                where = {"library": entry.library_id, "version": entry.version}
                documents = value(samples, "docbundle_library_documents", **where)
                assert documents == entry.meta.counts.documents
            assert label_values(samples, "tool") <= {
                "search_documents",
                "list_libraries",
                "get_document",
                "_other",
            }
    finally:
        catalog.close()
