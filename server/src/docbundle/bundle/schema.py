"""The whoosh schema of a bundle's index: one whoosh document per chunk."""

from __future__ import annotations

from whoosh.fields import ID, STORED, TEXT, Schema

from . import safepickle
from .analysis import DocTokenizer

# Any process that builds or reads a docbundle index unpickles whoosh's data through the restricted
# unpickler only (see safepickle): installed as soon as the schema is in use.
safepickle.install()

#: Identity of the schema; part of every bundle's content hash.
SCHEMA_ID = "docbundle-schema/1 (title headings body code: text; section: id; doc chunk: stored)"
INDEX_DIR = "index"
INDEX_NAME = "MAIN"


def make_schema() -> Schema:
    """Build the schema. Readers pass it to whoosh instead of unpickling the stored one."""
    analyzer = DocTokenizer()
    # multitoken_query="and": one query word that analyses to several terms (CJK bigrams, the parts
    # of an identifier) must match all of them, not any one.
    return Schema(
        title=TEXT(analyzer=analyzer, multitoken_query="and"),
        headings=TEXT(analyzer=analyzer, multitoken_query="and"),
        body=TEXT(analyzer=analyzer, multitoken_query="and"),
        code=TEXT(analyzer=analyzer, multitoken_query="and", phrase=False),
        section=ID(),
        doc=STORED(),
        chunk=STORED(),
    )
