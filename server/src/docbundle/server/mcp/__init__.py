"""The MCP server: six tools, two resource templates and two prompts over a ``Catalog``.

``server`` (``DocbundleMCP`` and ``create_server``, the wiring) · ``tools`` (one function per tool;
each runs its work in a worker thread) · ``resources`` · ``prompts`` · ``args`` (argument types, the
aliases models invent for them, and the checks that run before any work). The transports that carry
the server are ``docbundle.server.stdio`` and ``docbundle.server.http``.
"""
