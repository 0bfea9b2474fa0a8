"""Leaves shared by the server and the indexer, free of the rest of docbundle (issue 33).

What lives here is used by both ``docbundle.server`` and ``docbundle.indexer`` (and by ``docbundle.bundle``
where noted in each module) and imports nothing of theirs, so neither side reaches into the other's
package for it. Nothing is imported here: each leaf is imported by its own name.
"""
