"""Requests and scrapes for the metrics tests: JSON-RPC bodies for a known mix of tool calls, and the
``/metrics`` text read with prometheus-client's own parser into ``{(name, labels): value}``."""

from __future__ import annotations

import http.client
import json
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
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
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/mcp", body=body, headers={**HEADERS, **(headers or {})})
        response = conn.getresponse()
        data = response.read()
        return response.status, json.loads(data) if data else {}
    finally:
        conn.close()


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
    """GET ``path``: status, content type and body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.getheader("content-type", ""), response.read().decode()
    finally:
        conn.close()
