"""A restricted unpickler for whoosh's on-disk pickles (no whoosh import here).

whoosh stores its TOC (schema and segment list), the compound-file directory, posting-block headers,
inlined postings and stored fields with ``pickle``; the stock unpickler imports and calls whatever a
pickle names, so a crafted index file runs code the moment whoosh reads it. A sha256 check does not
help when the manifest that lists the sha256 was rewritten too.

``restricted_load``/``restricted_loads`` resolve only the globals in ``ALLOWED`` (the handful of
whoosh classes and builtins a docbundle index really holds, found by recording a build and searches of
real corpora) and refuse anything else with ``UnsafePickleError`` before it is imported. Every other
pickle opcode only builds plain data, which cannot run code. ``whooshio.restricted_unpickling`` hands
them to whoosh for the duration of each call that reads an index (and refuses TOCs of other whoosh
versions, which whoosh's legacy loader would read with its own stock unpickler).
"""

from __future__ import annotations

import io
import pickle
from typing import IO, Any

from .errors import UnsafePickleError

#: (module, name) pairs a bundle's pickles may name. Anything else is refused.
ALLOWED: frozenset[tuple[str, str]] = frozenset(
    {
        # Protocol 2 pickles bytes as _codecs.encode(str, "latin1").
        ("_codecs", "encode"),
        # The segment list of the TOC: whoosh's segment and codec, its field lengths a defaultdict(int).
        ("whoosh.codec.whoosh3", "W3Segment"),
        ("whoosh.codec.whoosh3", "W3Codec"),
        ("collections", "defaultdict"),
        ("builtins", "int"),
    }
)


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED:
            raise UnsafePickleError(
                f"the index holds a pickle that names {module}.{name}, which a docbundle index never "
                "contains; the bundle was tampered with or built by something else. Rebuild or "
                "reinstall it from a trusted source."
            )
        return super().find_class(module, name)


def restricted_load(file: IO[bytes], **_: Any) -> Any:
    """``pickle.load`` that admits only the globals in ``ALLOWED``."""
    return _Restricted(file).load()


def restricted_loads(data: bytes | bytearray | memoryview, **_: Any) -> Any:
    """``pickle.loads`` that admits only the globals in ``ALLOWED``."""
    return _Restricted(io.BytesIO(data)).load()
