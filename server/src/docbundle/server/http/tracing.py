"""OpenTelemetry traces of the HTTP server, exported over OTLP/HTTP: the optional ``otel`` extra.

``start_tracing`` does nothing (and imports nothing) unless an OTLP endpoint is named by the standard
variables ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (and
``OTEL_SDK_DISABLED`` is not ``true``). Then, with the extra installed, it sets up the SDK's tracer
provider with a batch processor and the OTLP/HTTP exporter, which read the other ``OTEL_*`` variables
themselves (headers, timeout, compression, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``), and
installs it as ``observe``'s tracer: each MCP request gets a span (``HttpApp``), and inside it the
steps that ``observe.span`` marks (``bundle.open``: verify and open; ``search``; ``render``). Without
the extra it logs one warning and serving goes on untraced.

The export is the only connection the server makes that is not an answer, and only when the
operator names the collector. Each serving process (every ``--workers`` process) starts its own
exporter thread, after the fork.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from .. import observe

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
EXTRA_HINT = "pip install 'docbundle-server[otel]'"

log = logging.getLogger(__name__)


def wanted() -> bool:
    """Whether the environment asks for traces (an OTLP endpoint is set and the SDK not disabled)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(os.environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def start_tracing(version: str) -> Callable[[], None] | None:
    """Export spans over OTLP when the environment asks for it; the function that flushes and stops
    the export, or None when nothing was started."""
    if not wanted():
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        log.warning(
            "%s is set but the OpenTelemetry packages are missing (%s): serving without traces; %s",
            next(name for name in ENDPOINT_VARIABLES if os.environ.get(name, "").strip()),
            exc.name,
            EXTRA_HINT,
        )
        return None
    attributes = {"service.version": version}
    if not os.environ.get("OTEL_SERVICE_NAME", "").strip():
        attributes["service.name"] = "docbundle"
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    tracer = provider.get_tracer("docbundle.server")

    def opened(name: str, attributes: dict[str, str]) -> Any:
        return tracer.start_as_current_span(name, attributes=attributes)

    observe.install_tracer(opened)

    def stop() -> None:
        observe.install_tracer(None)
        provider.shutdown()  # exports what is left

    return stop
