"""The streamable HTTP transport of ``docbundle serve --transport http``.

``app`` (``HttpApp``: the ASGI app, the order of checks, the access log) · ``exchange`` (one request's
state and the refusals this layer writes) · ``policy`` (allowed ``Host`` / ``Origin``) · ``ratelimit``
(requests per key, key checks per client) · ``serve`` (socket and uvicorn). JSON-RPC peeking is shared
with the stdio transport: ``docbundle.server.jsonrpc``.
"""
