"""The MCP server: seven tools, the libraries as resources, two resource templates, two prompts,
completions and logging, over a ``Catalog``.

``server`` (``DocbundleMCP`` and ``create_server``: the wiring, capabilities and logging) · ``tools``
(one function per tool; each runs its work in a worker thread) · ``schemas`` (the published tool
schemas made tight) · ``resources`` · ``prompts`` · ``completions`` · ``args`` (argument types, the
aliases models invent for them, and the checks that run before any work). The transports that carry
the server are ``docbundle.server.stdio`` and ``docbundle.server.http``.
"""
