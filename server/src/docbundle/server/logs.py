"""JSON-lines logging on stderr for the HTTP server: one object per line, ready for a log shipper.

Every line has ``ts`` (UTC, milliseconds), ``level``, ``logger`` and ``msg``; a record logged with
``extra={"fields": {...}}`` adds those fields (the access log's request id, key id, tool, latency ...).
Exceptions add ``exc`` (the formatted traceback). Nothing here sends logs anywhere but the stream.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import msgspec

LEVELS = ("debug", "info", "warning", "error")
# enc_hook=str: a stray non-JSON value in a field must not lose the whole line.
_encoder = msgspec.json.Encoder(enc_hook=str)
# Loggers whose INFO lines repeat what the access log already says once per request.
_CHATTY = ("mcp", "httpx2", "uvicorn.access")


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object on one line."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line (without the newline)."""
        ts = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        line: dict[str, Any] = {
            "ts": ts.replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        return _encoder.encode(line).decode("utf-8")


def configure(level: str, stream: TextIO | None = None) -> logging.Handler:
    """Send every log record at ``level`` or above to ``stream`` (stderr) as JSON lines."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    numeric = getattr(logging, level.upper())
    root.setLevel(numeric)
    for name in _CHATTY:
        logging.getLogger(name).setLevel(max(numeric, logging.WARNING))
    return handler
