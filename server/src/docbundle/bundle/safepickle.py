"""A restricted unpickler for whoosh's on-disk pickles, installed wherever docbundle reads an index.

whoosh stores its TOC (schema and segment list), the compound-file directory, posting-block headers,
inlined postings and stored fields with ``pickle``; the stock unpickler imports and calls whatever a
pickle names, so a crafted index file runs code the moment whoosh reads it. A sha256 check does not
help when the manifest that lists the sha256 was rewritten too.

``install()`` replaces every ``pickle.load``/``pickle.loads`` that whoosh bound at import time with
``restricted_load``/``restricted_loads``: they resolve only the globals in ``ALLOWED`` (the handful of
whoosh classes and builtins a docbundle index really holds, found by recording a build and searches of
real corpora) and refuse anything else with ``UnsafePickleError`` before it is imported. Index TOCs of
other whoosh versions are refused as well, since whoosh's legacy TOC loader uses its own stock
unpickler. Every other pickle opcode only builds plain data, which cannot run code.
"""

from __future__ import annotations

import io
import pickle
from typing import IO, Any

from .errors import BundleFormatError, UnsafePickleError

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


class _PickleModule:
    """Stands in for the ``pickle`` module inside ``whoosh.index``: restricted loads, real dumps."""

    PicklingError = pickle.PicklingError
    UnpicklingError = pickle.UnpicklingError
    dumps = staticmethod(pickle.dumps)
    dump = staticmethod(pickle.dump)
    loads = staticmethod(restricted_loads)
    load = staticmethod(restricted_load)


def _refuse_legacy_toc(stream: Any, gen: int, schema: Any, version: int) -> Any:
    raise BundleFormatError(
        f"the index TOC has whoosh format {version}, which docbundle never writes; refusing to read it"
    )


_installed = False


def install() -> None:
    """Route every pickle that whoosh reads through the restricted unpickler (idempotent)."""
    global _installed
    if _installed:
        return
    import whoosh.codec.plaintext
    import whoosh.codec.whoosh3
    import whoosh.columns
    import whoosh.compat
    import whoosh.filedb.filetables
    import whoosh.filedb.structfile
    import whoosh.formats
    import whoosh.index
    import whoosh.legacy

    for module in (
        whoosh.compat,
        whoosh.codec.plaintext,
        whoosh.codec.whoosh3,
        whoosh.columns,
        whoosh.formats,
    ):
        if hasattr(module, "loads"):
            module.loads = restricted_loads
        if hasattr(module, "load"):
            module.load = restricted_load
    whoosh.filedb.structfile.load_pickle = restricted_load
    whoosh.index.pickle = _PickleModule  # TOC.read: pickle.loads(schema) when no schema is passed
    for version in list(whoosh.index.toc_loaders):
        whoosh.index.toc_loaders[version] = _refuse_legacy_toc
    whoosh.legacy.toc_loaders = whoosh.index.toc_loaders
    _installed = True
