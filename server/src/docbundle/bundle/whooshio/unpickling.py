"""Restricted unpickling: while a call is inside ``restricted_unpickling``, what whoosh unpickles for
that thread (or task) goes through ``safepickle``; every other thread keeps whoosh's own unpickler."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import whoosh.codec.whoosh3 as _w3
import whoosh.columns as _columns
import whoosh.filedb.structfile as _structfile

from .. import safepickle

__all__ = ["restricted_unpickling"]

# -- restricted unpickling ---------------------------------------------------------------------------

_RESTRICTED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "docbundle_whoosh_restricted", default=False
)
# (module, attribute, restricted replacement): where whoosh 2.7 unpickles what it reads from an index.
_HOOKS: tuple[tuple[ModuleType, str, Callable[..., Any]], ...] = (
    (_structfile, "load_pickle", safepickle.restricted_load),  # TOC segments, compound dir, block headers
    (_w3, "loads", safepickle.restricted_loads),  # inlined postings, block data
    (_columns, "loads", safepickle.restricted_loads),  # stored fields
)
_hook_lock = threading.Lock()
_hook_users = 0
_hook_saved: list[Any] = []


def _dispatcher(original: Callable[..., Any], restricted: Callable[..., Any]) -> Callable[..., Any]:
    def load(data: Any, *args: Any, **kwargs: Any) -> Any:
        if _RESTRICTED.get():
            return restricted(data)
        return original(data, *args, **kwargs)

    return load


@contextlib.contextmanager
def restricted_unpickling() -> Iterator[None]:
    """Within the block, whatever whoosh unpickles for this thread goes through ``safepickle``."""
    global _hook_users
    token = _RESTRICTED.set(True)
    with _hook_lock:
        if _hook_users == 0:
            _hook_saved[:] = [getattr(module, name) for module, name, _ in _HOOKS]
            for (module, name, restricted), original in zip(_HOOKS, _hook_saved, strict=True):
                setattr(module, name, _dispatcher(original, restricted))
        _hook_users += 1
    try:
        yield
    finally:
        with _hook_lock:
            _hook_users -= 1
            if _hook_users == 0:
                for (module, name, _), original in zip(_HOOKS, _hook_saved, strict=True):
                    setattr(module, name, original)
                _hook_saved.clear()
        _RESTRICTED.reset(token)


def _refuse_outside() -> None:
    if not _RESTRICTED.get():
        raise RuntimeError(
            "a docbundle index is read through docbundle.bundle.whooshio (PostingReader, searching), "
            "where whoosh's pickles go through the restricted unpickler"
        )
