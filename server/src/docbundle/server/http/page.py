"""The operator's page in HTTP mode: ``GET /`` lists the libraries, shows what the server answers and how
fast, and searches the way the model does.

Four static files (``page/index.html``, ``page.js``, ``page.css``, ``icon.svg``, in the package: no build step, no
external asset) and two JSON endpoints:

- ``/`` and the ``/ui/`` assets hold no data and are served to any client that passes the
  ``Host``/``Origin`` checks, without a key (like ``/healthz``), so that the page can ask for one.
  ``index.html`` is rendered once per process from the bounds it shows (the modes, ``limit``'s range,
  the lengths of the filter and the question, the refresh periods), so the form cannot drift from the
  tool it calls;
- ``GET /ui/libraries`` (key required, like ``/mcp``, and rate-limited the same way) lists at most
  ``MAX_LIBRARY_ROWS`` libraries, filtered by ``?q=`` (at most ``MAX_FILTER_CHARS`` characters, matched
  by ``list_libraries``' rule: every word in the id, name, category or description). Each library it
  shows is checked first, as a page of ``list_libraries`` checks its libraries (its ``CURRENT`` and its
  build's own manifest read, once per process): every field of a row comes from that manifest, never
  from what ``catalog.json`` claims, whichever worker answers. ``health`` is ``serving`` or ``failed``
  (with the ``reason``): never the answering process's own ``available``/``ready`` (whether *it* has
  opened the bundle yet), which with ``--workers N`` changed with the worker that answered (issue 35);
- ``GET /ui/requests`` (key required) summarises the server's own request metrics, read from the same
  scrape as ``/metrics`` (``Metrics.scrape``: every worker's counters): per ``tool`` (and any other
  label of ``docbundle_requests_total`` but ``outcome``), requests, server and client errors since the
  server started, and the p50 and p99 latency estimated from ``docbundle_request_duration_seconds``'s
  buckets the way Prometheus' ``histogram_quantile`` does. The page turns two successive answers into a
  request rate;
- the page's search form posts ``tools/call search_documents`` to ``/mcp`` itself (library or all of
  them, version, mode, limit), so what it shows is the tool's answer, through every check a client's
  call goes through: the text the model reads, and the structured result (mode and why, terms, scores).

Every page response carries a strict Content-Security-Policy (scripts, styles and fetches from this
origin only; no inline script, no frames, no forms posting elsewhere), ``nosniff``, ``no-referrer`` and
``no-store``. The key the page asks for stays in a JavaScript variable of the tab: never in a URL, a
cookie or web storage; "Forget key" drops it. Bundle text reaches the DOM through ``textContent`` only.
"""

from __future__ import annotations

import math
import time
from html import escape
from importlib import resources
from string import Template
from typing import Any
from urllib.parse import parse_qs

from docbundle.bundle.query import MAX_QUERY_CHARS, SEARCH_MODES
from prometheus_client.parser import text_string_to_metric_families

from ..bounds import DEFAULT_LIMIT, MAX_LIMIT
from ..catalog import Catalog
from ..catalog.projection import holds, words
from ..errors import clip

PAGE_PATHS = {
    "/": ("index.html", b"text/html; charset=utf-8"),
    "/ui/page.js": ("page.js", b"text/javascript; charset=utf-8"),
    "/ui/page.css": ("page.css", b"text/css; charset=utf-8"),
    "/ui/icon.svg": ("icon.svg", b"image/svg+xml"),
}
LIBRARIES_PATH = "/ui/libraries"
REQUESTS_PATH = "/ui/requests"
MAX_LIBRARY_ROWS = 500  # rows of one /ui/libraries answer; the page says how many matched in all
MAX_FILTER_CHARS = 200
MAX_SHOWN_NAME_CHARS = 200  # a name as the summary writes it (clipped there; a forged one is clipped here)
# The auto-refresh periods the page offers (seconds; 0 is off), and the one it starts with: often enough
# to see a reload or a failure within a scrape interval, rarely enough that an open tab costs nothing.
REFRESH_CHOICES = (0, 5, 15, 60)
DEFAULT_REFRESH_SECONDS = 15
# The quantiles of the request table (what an SLO is written against).
QUANTILES = (0.5, 0.99)
# The series of the request table: at most this many rows (tools are a fixed set, plus ``_none``,
# ``_other``, ``_unknown`` and whatever other label a later version adds: never request text).
MAX_REQUEST_ROWS = 64
_REQUESTS_SAMPLE = "docbundle_requests_total"
_BUCKET_SAMPLE = "docbundle_request_duration_seconds_bucket"
# The outcomes (``metrics.OUTCOMES``) counted as the server's own errors and as the client's mistakes.
_SERVER_ERRORS = frozenset({"error"})
_CLIENT_ERRORS = frozenset({"client_error"})

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
]  # and Cache-Control: no-store, which every answer of Exchange.respond_bytes carries

_files: dict[str, bytes] = {}


def page_file(path: str) -> tuple[bytes, bytes]:
    """The body and content type of one of ``PAGE_PATHS`` (read from the package, and ``index.html``
    rendered, once)."""
    name, content_type = PAGE_PATHS[path]
    if name not in _files:
        data = resources.files(__package__).joinpath("page", name).read_bytes()
        _files[name] = render_index(data.decode("utf-8")).encode("utf-8") if name == "index.html" else data
    return _files[name], content_type


def _options(choices: list[tuple[str, str]], chosen: str) -> str:
    return "".join(
        f'<option value="{escape(value)}"{" selected" if value == chosen else ""}>{escape(label)}</option>'
        for value, label in choices
    )


def render_index(template: str) -> str:
    """``index.html`` with the bounds of what the page sends filled in: the tool's modes and its
    ``limit`` range, the lengths the server accepts, the refresh periods (no inline script or style:
    only attributes and options)."""
    modes = [("", "default")] + [(m, m) for m in SEARCH_MODES]
    refresh = [(str(s), f"every {s} s" if s else "off") for s in REFRESH_CHOICES]
    return Template(template).substitute(
        mode_options=_options(modes, ""),
        refresh_options=_options(refresh, str(DEFAULT_REFRESH_SECONDS)),
        default_limit=DEFAULT_LIMIT,
        max_limit=MAX_LIMIT,
        max_filter_chars=MAX_FILTER_CHARS,
        max_query_chars=MAX_QUERY_CHARS,
    )


def library_rows(catalog: Catalog, query_string: bytes, now: float | None = None) -> dict[str, Any]:
    """What ``GET /ui/libraries`` answers: the libraries matching ``?q=`` (every word in the id, name,
    category or description, ignoring case: ``list_libraries``' rule), at most ``MAX_LIBRARY_ROWS`` of
    them, each checked (its manifest read once per process, as ``list_libraries`` does), and how many
    matched and exist in all. Runs in a lookup thread: a first answer reads up to ``MAX_LIBRARY_ROWS``
    manifests (about 0.1 ms each)."""
    params = parse_qs(query_string.decode("latin-1"), max_num_fields=4)
    terms = words((params.get("q") or [""])[0].strip()[:MAX_FILTER_CHARS])
    now = time.time() if now is None else now
    libraries = catalog.libraries()
    matched = [lib for lib in libraries if not terms or holds(lib, terms)]
    rows = []
    with catalog.summary_batch():  # the libraries checked for this answer: one rewrite of a stale summary
        for summarised in matched[:MAX_LIBRARY_ROWS]:
            # Checked, so that the row is the manifest's in every worker (a row of one worker's
            # unchecked claims beside another's checked facts made the table change with the worker).
            lib = catalog.check(summarised)
            view = catalog.version_view(lib.default)
            age = view.age(now)
            rows.append(
                {
                    "id": lib.id,
                    "name": clip(lib.name, MAX_SHOWN_NAME_CHARS),
                    "version": lib.default_version,
                    "versions": list(lib.versions),
                    "checked": view.checked,
                    "buildId": view.shaped_build_id,
                    "ageSeconds": round(age, 1) if age is not None else None,
                    "documents": view.documents,
                    "vectors": view.vectors,
                    "health": "failed" if view.state == "failed" else "serving",
                    "reason": view.reason,
                }
            )
    return {"libraries": rows, "shown": len(rows), "matched": len(matched), "total": len(libraries)}


def request_figures(scraped: bytes) -> dict[str, Any]:
    """What ``GET /ui/requests`` answers, from the text of a scrape (``Metrics.scrape``): one row per
    series of ``docbundle_requests_total`` but its ``outcome`` (a ``tool``, with any other label), with
    its requests, server errors and client errors since the server started and its latency quantiles
    (seconds; None before its first request). Only the two request families' lines are parsed."""
    wanted = (_REQUESTS_SAMPLE + "{", _BUCKET_SAMPLE + "{")
    lines = [line for line in scraped.decode("utf-8", "replace").splitlines() if line.startswith(wanted)]
    counts: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
    buckets: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
    for family in text_string_to_metric_families("\n".join(lines) + "\n"):
        for sample in family.samples:
            labels = dict(sample.labels)
            outcome = labels.pop("outcome", "")
            le = labels.pop("le", None)
            key = tuple(sorted(labels.items()))
            if sample.name == _REQUESTS_SAMPLE:
                row = counts.setdefault(key, {})
                row[outcome] = row.get(outcome, 0.0) + sample.value
            elif sample.name == _BUCKET_SAMPLE and le is not None:
                bound = math.inf if le == "+Inf" else float(le)
                series = buckets.setdefault(key, {})
                series[bound] = series.get(bound, 0.0) + sample.value  # the outcomes added up
    rows = []
    for key in sorted(counts)[:MAX_REQUEST_ROWS]:
        outcomes = counts[key]
        cumulative = sorted(buckets.get(key, {}).items())
        rows.append(
            {
                "labels": dict(key),
                "requests": int(sum(outcomes.values())),
                "errors": int(sum(v for k, v in outcomes.items() if k in _SERVER_ERRORS)),
                "clientErrors": int(sum(v for k, v in outcomes.items() if k in _CLIENT_ERRORS)),
                "outcomes": {k: int(v) for k, v in sorted(outcomes.items())},
                **{f"p{round(q * 100)}": quantile(q, cumulative) for q in QUANTILES},
            }
        )
    return {"tools": rows, "quantiles": [f"p{round(q * 100)}" for q in QUANTILES]}


def quantile(q: float, cumulative: list[tuple[float, float]]) -> float | None:
    """The ``q`` quantile of a histogram's cumulative buckets (upper bound, count), as Prometheus'
    ``histogram_quantile`` estimates it: linear within the bucket it falls in; the highest finite bound
    when it falls in ``+Inf``; None with no observation."""
    if not cumulative or cumulative[-1][1] <= 0:
        return None
    rank = q * cumulative[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in cumulative:
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower
