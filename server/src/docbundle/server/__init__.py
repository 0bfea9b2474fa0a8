"""The docbundle MCP server: a catalogue of verified bundles, search, and the MCP tools over them.

Modules: ``catalog`` (start-up manifests, verified lazy opening), ``search`` (query building and
ranking), ``service`` (the operations behind the tools, MCP-free), ``budget`` (token estimates),
``app`` (the MCP tools, resources, prompts and the HTTP app), ``cli`` (the ``docbundle`` command).
Nothing is imported here, so ``docbundle.server.cli`` starts without loading the MCP SDK or whoosh.
"""
