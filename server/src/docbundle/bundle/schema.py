"""The whoosh schema of a bundle's index: one whoosh document per chunk."""

from __future__ import annotations

from .analysis import DocTokenizer
from .whooshio import Schema, build_schema

#: Identity of the schema; part of every bundle's content hash.
SCHEMA_ID = "docbundle-schema/1 (title headings body code: text; section: id; doc chunk: stored)"
INDEX_DIR = "index"
INDEX_NAME = "MAIN"


def make_schema() -> Schema:
    """Build the schema. Readers pass it to whoosh instead of unpickling the stored one."""
    return build_schema(
        DocTokenizer(),
        positional=("title", "headings", "body"),
        frequency=("code",),
        ids=("section",),
        stored=("doc", "chunk"),
    )
