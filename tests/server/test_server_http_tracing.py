"""OpenTelemetry traces (issue 24, the ``otel`` extra): ``docbundle serve --transport http`` as a
subprocess exports its spans over OTLP/HTTP to a receiver this test runs on 127.0.0.1, which decodes
the protobuf. A search must arrive as a request span with the tool name and library id, and spans for
its steps (open and verify the bundle, search, render) inside the same trace. Without the extra the
server says so once and serves untraced; without an endpoint it imports neither the OpenTelemetry SDK
nor an exporter (test_server_transports.py audits the imports).
"""

from __future__ import annotations

import gzip
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from metricskit import post, tool_call
from serverkit import HttpServerProcess

trace_service = pytest.importorskip(
    "opentelemetry.proto.collector.trace.v1.trace_service_pb2", reason="the otel extra is not installed"
)

QUERY = "useEffect cleanup"
STEPS = ("mcp tools/call", "bundle.open", "search", "render")
WAIT = 30  # seconds the spans may take to arrive (the batch processor sends every 100 ms here)


class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: every span it was sent, decoded."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.resources: list[dict[str, str]] = []
        self.paths: list[str] = []
        self._cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = trace_service.ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.add(self.path, request)
                reply = trace_service.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                for name, value in (
                    ("Content-Type", "application/x-protobuf"),
                    ("Content-Length", len(reply)),
                ):
                    self.send_header(name, str(value))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def add(self, path: str, request: Any) -> None:
        with self._cond:
            self.paths.append(path)
            for resource_spans in request.resource_spans:
                attrs = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
                self.resources.append(attrs)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            {
                                "name": span.name,
                                "trace": span.trace_id.hex(),
                                "id": span.span_id.hex(),
                                "parent": span.parent_span_id.hex(),
                                "attributes": {kv.key: kv.value.string_value for kv in span.attributes},
                            }
                        )
            self._cond.notify_all()

    def wait_for(self, names: tuple[str, ...]) -> list[dict[str, Any]]:
        """The spans once one of each name has arrived (bounded)."""
        deadline = time.monotonic() + WAIT
        with self._cond:
            while not set(names) <= {s["name"] for s in self.spans}:
                left = deadline - time.monotonic()
                assert left > 0, f"spans that arrived: {[s['name'] for s in self.spans]}"
                self._cond.wait(left)
            return list(self.spans)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.thread.start()
    yield r
    r.server.shutdown()
    r.server.server_close()


def test_spans_arrive_at_the_otlp_receiver_with_tool_and_library(
    golden_root: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    with HttpServerProcess(golden_root, "--no-auth") as server:
        status, reply = post(server.port, tool_call(1, "search_documents", query=QUERY, libraryId="golden"))
        assert status == 200 and reply["result"]["isError"] is False
        spans = receiver.wait_for(STEPS)
    assert server.returncode == 0
    assert set(receiver.paths) == {"/v1/traces"}
    assert receiver.resources[0]["service.name"] == "docbundle"
    by_name = {s["name"]: s for s in spans}
    request = by_name["mcp tools/call"]
    assert request["attributes"]["docbundle.tool"] == "search_documents"
    assert request["attributes"]["docbundle.library"] == "golden"
    assert request["parent"] == ""  # the root of its trace
    assert by_name["bundle.open"]["attributes"]["docbundle.library"] == "golden"
    assert by_name["search"]["attributes"]["docbundle.library"] == "golden"
    ids = {s["id"]: s for s in spans}
    for step in STEPS[1:]:  # each step is inside the request's trace, below its span
        span = by_name[step]
        assert span["trace"] == request["trace"]
        while span["parent"] and span["id"] != request["id"]:
            span = ids[span["parent"]]
        assert span["id"] == request["id"], step


# Runs the CLI with the extra's packages made uninstalled (None in sys.modules: importing fails). The
# OpenTelemetry API itself stays: the MCP SDK depends on it.
WITHOUT_OTEL = """
import sys
for name in ("opentelemetry.sdk", "opentelemetry.exporter"):
    sys.modules[name] = None
from docbundle.server.cli import main
code = main(sys.argv[1:])
sys.exit(code)
"""


def test_without_the_extra_the_server_warns_once_and_serves(
    golden_root: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    server = HttpServerProcess(golden_root, "--no-auth")
    server.cmd = [sys.executable, "-c", WITHOUT_OTEL, *server.cmd[3:]]
    with server:
        status, reply = post(server.port, tool_call(1, "search_documents", query=QUERY, libraryId="golden"))
        assert status == 200 and reply["result"]["isError"] is False
        warning = server.wait_for(lambda line: "docbundle-server[otel]" in line)
    assert server.returncode == 0
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in warning and '"level":"warning"' in warning
    assert sum("docbundle-server[otel]" in line for line in server.lines()) == 1
    assert receiver.spans == []
