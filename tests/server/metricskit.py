"""Requests and scrapes for the metrics tests: JSON-RPC bodies for a known mix of tool calls, and the
``/metrics`` text read with prometheus-client's own parser into ``{(name, labels): value}``."""

from __future__ import annotations

import json
from typing import Any

from httpkit import MCP_HEADERS, request
from prometheus_client.parser import text_string_to_metric_families

# A slow worker answers a scrape in seconds; a hung one fails the test after this long.
METRICS_TIMEOUT = 60

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def tool_call(request_id: int, tool: str, **arguments: Any) -> bytes:
    """A ``tools/call`` request body."""
    params = {"name": tool, "arguments": arguments}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


def parse(text: str) -> Samples:
    """Every sample of a scrape by name and labels."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when the series does not exist yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def label_values(samples: Samples, label: str) -> set[str]:
    """Every value a label takes in a scrape."""
    return {v for _, labels in samples for k, v in labels if k == label}


def post(port: int, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """POST ``body`` to /mcp on a new connection (so the kernel spreads them over the workers)."""
    r = request(
        "POST", port, content=body, headers={**MCP_HEADERS, **(headers or {})}, timeout=METRICS_TIMEOUT
    )
    return r.status_code, json.loads(r.content) if r.content else {}


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
    """GET ``path``: status, content type and body."""
    r = request("GET", port, path=path, headers=headers, timeout=METRICS_TIMEOUT)
    return r.status_code, r.headers.get("content-type", ""), r.text
