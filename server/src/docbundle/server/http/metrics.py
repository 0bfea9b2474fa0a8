"""Prometheus metrics of the HTTP server (``GET /metrics``, behind a key like ``/mcp``), written by
prometheus-client in its text format.

Imported by ``http.app`` only, so the stdio server never loads prometheus-client. What is measured,
every name under ``docbundle_``:

- ``requests_total`` and ``request_duration_seconds`` (a histogram) by ``route``, ``tool`` and
  ``outcome``: every request but the public endpoints and ``/metrics`` itself;
- ``library_requests_total`` by ``library``: requests that name a library;
- ``searches_total`` by ``mode`` (the mode that ran, as the search answer says) and ``kind``
  (``keyword``: balanced, broad or precise; ``hybrid``; ``vector``: semantic);
- ``auth_failures_total`` by ``reason`` and ``rate_limited_total`` by ``limit`` (``requests``: the
  token bucket; ``key_checks``: the budget of scrypts for keys not proven yet);
- ``open_bundles`` and ``open_bundle_bytes`` (summed over the serving processes),
  ``bundle_opens_total``, ``bundle_failures_total`` by ``library`` (failed to verify or open, or
  stopped serving) and ``reloads_total`` (reloads that changed what is served);
- per library version, read from the catalogue at scrape time: ``library_build_info`` (the build id and
  content hash as labels), ``library_build_age_seconds``, ``library_documents``, ``library_chunks``,
  ``library_has_vectors``, ``library_up``, and ``libraries``. All but ``library_up`` only for a version
  checked (on its first use: its ``CURRENT`` and its build's manifest read, the values the manifest's),
  as before that they are what ``catalog.json`` claims; a build label only in its shape (a build id; 64 hex digits), else left out.

Label values come from fixed sets, never from request text: ``route`` is the path asked for when it is
one of the routes ``HttpApp`` counts (``app.COUNTED_ROUTES``: ``/mcp``, the operator page's files and
``/ui/libraries``), else ``_other`` (issue 35: the page's requests were counted as unreadable MCP
requests); ``tool``, on ``/mcp``, is the name of a registered tool, ``_none`` (an MCP request that calls
no tool: initialize, tools/list ...), ``_other`` (a tools/call naming no registered tool) or ``_unknown``
(no JSON-RPC request could be read: refused before its body was read, or not JSON), and ``_none`` on
every other route; ``library`` is a catalogue id or ``_other``; ``outcome`` one of
``OUTCOMES``; ``mode`` one of the modes a search runs. ``client_error`` is a request the client got
wrong (an unknown tool or method, invalid params such as a ``mode`` outside its enum, an unknown
library or a bad cursor: the access log's ``clientError``), so ``error`` counts only the server's own
failures and an error-rate alert is not set off by one client's mistakes (issue 31).

Worker processes (``--workers N``) use prometheus-client's multiprocess mode: the supervisor makes a
private folder and names it in ``PROMETHEUS_MULTIPROC_DIR`` before anything imports prometheus-client
(``serve.metrics_folder``), every process writes its counters there, and a scrape, answered by any
worker, adds them up. The per-library figures are no process's counters: the answering worker reads
them from its catalogue when scraped (``_Libraries``), so N workers do not multiply them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any, get_args

from docbundle.bundle.query import RanMode
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from ..catalog import Catalog, Event, VersionEntry, VersionView
from ..jsonrpc import ReplyFacts
from .serve import MULTIPROC_ENV

__all__ = ["CONTENT_TYPE_LATEST", "MCP_ROUTE", "OUTCOMES", "Metrics"]

OUTCOMES = ("ok", "error", "client_error", "refused", "rate_limited", "stopped")
NO_TOOL, OTHER, UNKNOWN = "_none", "_other", "_unknown"
MCP_ROUTE = "/mcp"  # the one route whose requests name a tool
RAN_MODES: frozenset[str] = frozenset(get_args(RanMode))
# The ``kind`` label of ``searches_total``: one word for each way of searching, the same in the code,
# the docs and the benchmarks: ``keyword`` (balanced, broad, precise), ``vector`` (semantic), ``hybrid``.
SEARCH_KINDS: dict[str, str] = {"hybrid": "hybrid", "semantic": "vector"}
# Access-log outcomes (``HttpApp``) that count as rate_limited (by the limit that refused) and as error;
# ok stays ok (or stopped), and every other one is a refusal.
_RATE_LIMITED = {"rate_limited": "requests", "auth_throttled": "key_checks"}
_ERRORS = {"tool_error", "rpc_error", "client_disconnected", "keys_unavailable", "error"}
_AUTH_FAILURES = {"no_key", "invalid_key", "key_revoked", "key_expired", "keys_unavailable"}
# Latency buckets (seconds): a warm search answers in a few milliseconds, a first one opens a bundle.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The counters of one HTTP server (all its worker processes) and its ``/metrics`` page."""

    def __init__(self, catalog: Catalog, routes: Iterable[str] = (MCP_ROUTE,)) -> None:
        """``routes``: the paths counted by name (the ``route`` label); any other path counts as ``_other``,
        so no client can grow the number of series by asking for made-up paths."""
        self.catalog = catalog
        self.routes = frozenset(routes)
        # The registered tools' names, set once the server has started (``HttpApp``'s lifespan).
        self.tools: frozenset[str] = frozenset()
        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        # In multiprocess mode the values live in files; a registry is made per scrape.
        own = None if self.multiprocess else CollectorRegistry()
        self._registry = own
        self._libraries = _Libraries(catalog)
        if own is not None:
            own.register(self._libraries)
        self.requests = Counter(
            "docbundle_requests",
            "HTTP requests by route, tool and outcome",
            ("route", "tool", "outcome"),
            registry=own,
        )
        self.latency = Histogram(
            "docbundle_request_duration_seconds",
            "Time to answer a request, by route, tool and outcome",
            ("route", "tool", "outcome"),
            buckets=_BUCKETS,
            registry=own,
        )
        self.library_requests = Counter(
            "docbundle_library_requests", "Requests naming a library, by library", ("library",), registry=own
        )
        self.searches = Counter(
            "docbundle_searches", "Searches answered, by the mode that ran", ("mode", "kind"), registry=own
        )
        self.auth_failures = Counter(
            "docbundle_auth_failures", "Requests refused by the API key check", ("reason",), registry=own
        )
        self.rate_limited = Counter(
            "docbundle_rate_limited", "Requests refused by a rate limit (429)", ("limit",), registry=own
        )
        self.open_bundles = Gauge(
            "docbundle_open_bundles", "Bundles held open", registry=own, multiprocess_mode="livesum"
        )
        self.open_bytes = Gauge(
            "docbundle_open_bundle_bytes",
            "Bytes of the bundles held open",
            registry=own,
            multiprocess_mode="livesum",
        )
        self.opens = Counter("docbundle_bundle_opens", "Bundles verified and opened", registry=own)
        self.failures = Counter(
            "docbundle_bundle_failures",
            "Bundles that failed to verify or open, or stopped serving",
            ("library",),
            registry=own,
        )
        self.reloads = Counter(
            "docbundle_reloads", "Reloads of the bundles folder that changed what is served", registry=own
        )
        # (route, tool, outcome) -> its request counter and latency histogram; bounded like the labels.
        self._series: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}
        catalog.listeners.append(self._catalog_event)

    def _catalog_event(self, event: Event, entry: VersionEntry | None) -> None:
        if event == "opened":
            self.opens.inc()
        elif event == "failed" and entry is not None:
            self.failures.labels(self._library(entry.library_id)).inc()
        elif event == "reloaded":
            self.reloads.inc()
        if event != "failed":
            self.held()

    def held(self) -> None:
        """Set the open-bundle gauges from the catalogue (this process's share)."""
        count, size = self.catalog.held()
        self.open_bundles.set(count)
        self.open_bytes.set(size)

    def _library(self, library_id: Any) -> str:
        return library_id if isinstance(library_id, str) and self.catalog.knows(library_id) else OTHER

    def record(
        self, path: str, fields: dict[str, Any], seconds: float, facts: ReplyFacts | None, *, scrape: bool
    ) -> None:
        """Count one finished request for ``path`` from its access-log ``fields`` and the reply's ``facts``;
        a request for ``/metrics`` (``scrape``) counts only as a key-check failure or rate-limit refusal."""
        logged = str(fields.get("outcome", "error"))
        limit = _RATE_LIMITED.get(logged)
        if limit is not None:
            self.rate_limited.labels(limit).inc()
        if logged in _AUTH_FAILURES:
            self.auth_failures.labels(logged).inc()
        if scrape:
            return
        if limit is not None:
            outcome = "rate_limited"
        elif logged in ("ok", "preflight"):
            outcome = "stopped" if facts is not None and facts.stopped else "ok"
        elif fields.get("clientError") is True:
            outcome = "client_error"  # an unknown tool, a bad mode, invalid params: not the server's fault
        elif logged in _ERRORS or logged.startswith("http_5"):
            outcome = "error"
        else:
            outcome = "refused"
        route = path if path in self.routes else OTHER
        tool = self._tool(fields) if route == MCP_ROUTE else NO_TOOL
        series = self._series.get((route, tool, outcome))
        if series is None:  # label lookups cost more than the counting: each triple is looked up once
            series = self._series[route, tool, outcome] = (
                self.requests.labels(route, tool, outcome),
                self.latency.labels(route, tool, outcome),
            )
        series[0].inc()
        series[1].observe(seconds)
        if "libraryId" in fields:
            self.library_requests.labels(self._library(fields["libraryId"])).inc()
        if facts is not None and tool == "search_documents" and facts.mode in RAN_MODES:
            kind = SEARCH_KINDS.get(facts.mode, "keyword")
            self.searches.labels(facts.mode, kind).inc()

    def _tool(self, fields: dict[str, Any]) -> str:
        """The ``tool`` label of a request to ``/mcp``: what its JSON-RPC body named, if it could be read."""
        method = fields.get("rpcMethod")
        if method is None:
            return UNKNOWN
        if method == "tools/call":
            named = fields.get("tool")
            return named if isinstance(named, str) and named in self.tools else OTHER
        return NO_TOOL

    def scrape(self) -> bytes:
        """The text of ``/metrics``: every worker's counters, and this worker's view of the libraries."""
        self.held()
        registry = self._registry
        if registry is None:
            registry = CollectorRegistry()
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # (untyped upstream)
            registry.register(self._libraries)
        return generate_latest(registry)


class _Libraries(Collector):
    """Per library version, from the catalogue when scraped: build, age, counts, vectors, health."""

    def __init__(self, catalog: Catalog, routes: Iterable[str] = (MCP_ROUTE,)) -> None:
        """``routes``: the paths counted by name (the ``route`` label); any other path counts as ``_other``,
        so no client can grow the number of series by asking for made-up paths."""
        self.catalog = catalog
        self.routes = frozenset(routes)

    def collect(self) -> Iterable[Metric]:
        """The per-library metric families."""
        labels = ("library", "version")
        build = InfoMetricFamily("docbundle_library_build", "Build served per library version", labels=labels)
        age = GaugeMetricFamily(
            "docbundle_library_build_age_seconds", "Seconds since the served build was built", labels=labels
        )
        documents = GaugeMetricFamily("docbundle_library_documents", "Documents indexed", labels=labels)
        chunks = GaugeMetricFamily("docbundle_library_chunks", "Sections (chunks) indexed", labels=labels)
        vectors = GaugeMetricFamily(
            "docbundle_library_has_vectors", "1 when the build has semantic vectors", labels=labels
        )
        up = GaugeMetricFamily(
            "docbundle_library_up", "1 unless the version failed (see /readyz)", labels=labels
        )
        now = time.time()
        for entry in self.catalog.entries():
            view = self.catalog.version_view(entry)
            values = [view.library_id, view.version]
            up.add_metric(values, 0 if view.state == "failed" else 1)
            if view.documents is None or view.chunks is None:
                continue  # before its check, the build and counts are only what catalog.json claims
            build.add_metric(values, _build_labels(view))
            built = view.age(now)
            if built is not None:
                age.add_metric(values, built)
            documents.add_metric(values, view.documents)
            chunks.add_metric(values, view.chunks)
            vectors.add_metric(values, 1 if view.vectors else 0)
        total = GaugeMetricFamily("docbundle_libraries", "Libraries served")
        total.add_metric([], len(self.catalog.library_ids()))
        return [build, age, documents, chunks, vectors, up, total]


def _build_labels(view: VersionView) -> dict[str, str]:
    """The build labels of ``library_build_info``, each only in its one shape (a build id, 64 hex digits):
    a value made up in ``catalog.json`` (a 2 MB "hash") is left out, never a label (issue 31)."""
    labels = {}
    if view.shaped_build_id is not None:
        labels["build_id"] = view.shaped_build_id
    if view.shaped_content_hash is not None:
        labels["content_hash"] = view.shaped_content_hash
    return labels
