"""Spans around the steps of a request, for tracing: a no-op until a serving process installs a tracer.

The steps call ``span("bundle.open", ...)`` and friends; with no tracer installed that costs a function
call and opens nothing. ``docbundle serve --transport http`` installs one (``http.tracing``) only when
the ``otel`` extra is installed and an ``OTEL_EXPORTER_OTLP_*`` endpoint is set. This module imports
nothing, so the stdio server and the one-shot commands pay nothing for it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

#: Opens a span named by its first argument, with its attributes; the span is current inside it.
Tracer = Callable[[str, dict[str, str]], AbstractContextManager[object]]

_NO_SPAN: AbstractContextManager[object] = nullcontext()
_tracer: Tracer | None = None


def span(name: str, **attributes: str | None) -> AbstractContextManager[object]:
    """A span around one step (attributes that are None are left out); nothing without a tracer."""
    tracer = _tracer
    if tracer is None:
        return _NO_SPAN
    return tracer(name, {f"docbundle.{k}": v for k, v in attributes.items() if v is not None})


def install_tracer(tracer: Tracer | None) -> None:
    """Make ``span`` open spans with ``tracer`` in this process (None: stop tracing)."""
    global _tracer
    _tracer = tracer
