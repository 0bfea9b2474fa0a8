"""The metrics docs/deployment.md documents are the metrics the server emits (issue 35, finding 2).

The test reads the two tables of the docs' Metrics section (every metric with its labels, every label
with its values), runs ``docbundle serve`` over real HTTP with two workers (so the multiprocess folder
is what is scraped), sends a scripted set of requests that touches every metric, and checks the scrape
against the docs: the same metric names, each with exactly its documented labels, and every label value
one the docs list. It also pins what the finding was about: the operator page's requests carry their
own ``route`` (they were counted as ``tool="_unknown"``, which the docs define as an unreadable MCP
request), a path nobody serves is one ``_other`` route, and an unknown tool or a bad ``mode`` is
``client_error``, never the server's ``error``.
"""

from __future__ import annotations

import re
from pathlib import Path

from docbundle.server.http.app import COUNTED_ROUTES
from docbundle.server.http.metrics import OUTCOMES
from docbundle.server.http.page import PAGE_PATHS
from docbundle.server.keys import create_key
from docbundle.server.mcp.tools import TOOLS
from metricskit import Samples, get, parse, post, tool_call, value
from prometheus_client.parser import text_string_to_metric_families
from serverkit import HttpServerProcess, flip_byte, install_golden

DOC = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"
PREFIX = "docbundle_"
REQUESTS = "docbundle_requests_total"
QUERY = "useEffect cleanup"
TOOL_NAMES = {make.__name__.removesuffix("_tool") for make in TOOLS}
# The token bucket of ``--burst``: enough for the scripted requests of one key, so that a second key
# sending one more than this is refused (429) on its last request.
BURST = 30
# The page's files, each fetched once without a key (they hold no data).
PAGE_FILES = tuple(PAGE_PATHS)


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _table(section: str, header: str) -> list[list[str]]:
    """The rows (cells as text) of the markdown table whose header line starts with ``header``."""
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def documented() -> tuple[dict[str, frozenset[str]], dict[str, set[str]]]:
    """From the docs: each metric's full name with its label names, and each label's listed values."""
    section = _section(DOC.read_text(encoding="utf-8"), "## Metrics")
    metrics = {}
    for names, labels, _ in _table(section, "| metric | labels |"):
        for name in _ticked(names):
            metrics[PREFIX + name] = frozenset(_ticked(labels))
    values = {
        _ticked(label)[0]: set(_ticked(listed)) for label, listed in _table(section, "| label | values |")
    }
    return metrics, values


def emitted(text: str) -> dict[str, frozenset[str]]:
    """From a scrape: each metric family's documented name (counters with ``_total``, info metrics with
    ``_info``) with the label names its samples carry (a histogram's ``le`` is its buckets, not a label)."""
    suffix = {"counter": "_total", "info": "_info"}
    found: dict[str, frozenset[str]] = {}
    for family in text_string_to_metric_families(text):
        name = family.name + suffix.get(family.type, "")
        labels = {key for sample in family.samples for key in sample.labels if key != "le"}
        found[name] = found.get(name, frozenset()) | labels
    return found


def requests(samples: Samples) -> dict[tuple[str, str, str], float]:
    """``requests_total`` by (route, tool, outcome)."""
    counted = {}
    for (name, labels), v in samples.items():
        if name == REQUESTS:
            by = dict(labels)
            counted[by["route"], by["tool"], by["outcome"]] = v
    return counted


def test_the_server_emits_exactly_the_documented_metrics_labels_and_values(tmp_path: Path) -> None:
    root = tmp_path / "bundles"
    install_golden(root)
    damaged = install_golden(root, "damaged")  # a bundle that fails its check: bundle_failures_total
    flip_byte(next(p for p in sorted(damaged.iterdir()) if p.name != "manifest.json"))
    keys = tmp_path / "keys.toml"
    _, key = create_key(keys, "client")
    _, scraper = create_key(keys, "prometheus")
    _, flooder = create_key(keys, "flooder")
    auth = {"X-API-Key": key}
    with HttpServerProcess(
        root, "--keys", str(keys), "--workers", "2", "--rate", "1/h", "--burst", str(BURST)
    ) as server:
        port = server.port
        for path in PAGE_FILES:
            assert get(port, path)[0] == 200
        assert get(port, "/ui/libraries")[0] == 401  # no key: refused, and counted on its route
        assert get(port, "/ui/libraries", auth)[0] == 200
        assert get(port, "/favicon.ico", auth)[0] == 404  # no such route: one `_other` for every path
        assert get(port, "/no/such/path", auth)[0] == 404
        sent = [
            (tool_call(1, "search_documents", query=QUERY, libraryId="golden"), 200),
            (tool_call(2, "search_documents", query=QUERY, libraryId="golden", mode="fastest"), 200),
            (tool_call(3, "no_such_tool"), 200),
            (tool_call(4, "list_libraries"), 200),
            (tool_call(5, "search_documents", query=QUERY, libraryId="damaged"), 200),
            (b"{nope", 400),
        ]
        for body, status in sent:
            assert post(port, body, auth)[0] == status
        assert post(port, tool_call(6, "list_libraries"))[0] == 401  # no key, before its body was read
        statuses = [get(port, "/ui/libraries", {"X-API-Key": flooder})[0] for _ in range(BURST + 1)]
        assert statuses == [200] * BURST + [429]
        status, _, text = get(port, "/metrics", {"X-API-Key": scraper})
    assert status == 200 and server.returncode == 0
    samples = parse(text)
    metrics, values = documented()

    assert emitted(text) == metrics  # every documented metric, with exactly its labels, and nothing else

    # Every value of every label is one the docs list; a label's list is the code's own set.
    assert values["outcome"] == set(OUTCOMES)
    assert values["route"] == {*COUNTED_ROUTES, "_other"}  # a route added to the server needs its row
    allowed = {
        **values,
        "tool": values["tool"] | TOOL_NAMES,
        "library": values["library"] | {"golden", "damaged"},
    }
    for _, labels in samples:
        for label, got in labels:
            if label in allowed:
                assert got in allowed[label], (label, got, sorted(allowed[label]))

    # The page and its table are counted on their routes, not as unreadable MCP requests.
    counted = requests(samples)
    for path in PAGE_FILES:
        assert counted[path, "_none", "ok"] == 1
    assert counted["/ui/libraries", "_none", "ok"] == 1 + BURST
    assert counted["/ui/libraries", "_none", "refused"] == 1
    assert counted["/ui/libraries", "_none", "rate_limited"] == 1
    assert counted["_other", "_none", "refused"] == 2
    # On /mcp: a bad mode and an unknown tool are the client's mistakes; a bundle gone bad is an error.
    assert counted["/mcp", "search_documents", "ok"] == 1
    assert counted["/mcp", "search_documents", "client_error"] == 1
    assert counted["/mcp", "_other", "client_error"] == 1
    assert counted["/mcp", "list_libraries", "ok"] == 1
    assert counted["/mcp", "search_documents", "error"] == 1
    assert counted["/mcp", "_unknown", "refused"] == 2  # not JSON; no key (refused before its body)
    assert {tool for route, tool, _ in counted if route != "/mcp"} == {"_none"}
    assert sum(counted.values()) == len(PAGE_FILES) + 2 + BURST + 1 + 2 + len(sent) + 1
    assert value(samples, "docbundle_rate_limited_total", limit="requests") == 1
    assert value(samples, "docbundle_auth_failures_total", reason="no_key") == 2
    assert value(samples, "docbundle_bundle_failures_total", library="damaged") == 1
