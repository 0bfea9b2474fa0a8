"""The docbundle MCP server: a catalogue of verified bundles, the operations over it, and two transports.

Modules, in the order a request meets them: ``cli`` (the ``docbundle`` command) · ``catalog`` (start-up
manifests, verified lazy opening) and ``lockfile`` (``bundles.lock``) · ``stdio`` and ``http/`` (the
transports) with ``jsonrpc`` (what both peek at) · ``mcp/`` (the MCP server: tools, resources, prompts)
· ``docs`` (the operations behind them, MCP-free) · ``models`` (their results) · ``render`` (the markdown
of each result) · ``budget`` (token estimates) · ``errors`` (the exception tree and the input bounds)
· ``keys`` and ``logs`` (API keys and JSON logs for HTTP) · ``observe`` (spans around the steps of a
request, a no-op until HTTP mode installs a tracer) · ``install`` (``docbundle install``).

Nothing is imported here, so ``docbundle.server.cli`` starts without loading the MCP SDK or whoosh.
"""
