"""The streamable HTTP transport of ``docbundle serve --transport http``.

``app`` (``HttpApp``: the ASGI app, the order of checks, the access log) · ``options`` (``HttpOptions``
and the defaults of its limits) · ``exchange`` (one request's state and the refusals this layer
writes) · ``policy`` (allowed ``Host`` / ``Origin``, CORS headers) ·
``ratelimit`` (requests per key, key checks per client; shared memory for workers) · ``serve`` (socket,
uvicorn, worker processes) · ``metrics`` (``GET /metrics``: prometheus-client, one view of every
worker) · ``tracing`` (OTLP spans with the ``otel`` extra). The JSON-RPC envelope check and peeking are shared with the stdio
transport: ``docbundle.server.jsonrpc``.
"""
