"""The served libraries as one frozen snapshot, and the views derived from it.

A reload (or a check that found a library's summary entry wrong) makes a new ``Snapshot`` and the
catalogue swaps it whole; a request holds the one it started with. Whatever is derived from the
libraries (the resolver's word index, the routing defaults and choices) is a *view* of a snapshot:
made once, on first use, by ``Snapshot.view``, and dropped with it. So no consumer keeps a generation
counter of its own to know when to rebuild: a new snapshot has no views yet.

One refinement happens in place: the first check of a library that finds what the summary claimed
(the same build, described the same way) marks its entries checked (``refine``). Nothing a view
derives from changes then (ids, names, words, builds), so the views stay true; a check that changes any
of it makes a new snapshot instead (``replace``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar, cast

from .entries import LibraryEntry, VersionEntry

T = TypeVar("T")


class Snapshot:
    """Every served library, sorted by id, with its derived views (see the module docstring)."""

    __slots__ = ("_ids", "_libraries", "_lock", "_views")

    def __init__(self, libraries: dict[str, LibraryEntry], ids: list[str] | None = None) -> None:
        self._libraries = libraries
        self._ids = sorted(libraries) if ids is None else ids
        self._views: dict[str, object] = {}
        self._lock = threading.Lock()

    def ids(self) -> list[str]:
        """Every library id, sorted."""
        return list(self._ids)

    def libraries(self) -> list[LibraryEntry]:
        """Every library, sorted by id."""
        libraries = self._libraries
        return [libraries[k] for k in self._ids]

    def entries(self) -> list[VersionEntry]:
        """Every library version (each library's default first)."""
        return [v for lib in self.libraries() for v in lib.versions.values()]

    def get(self, library_id: str) -> LibraryEntry | None:
        """The library with exactly this id, or None."""
        return self._libraries.get(library_id)

    def __contains__(self, library_id: object) -> bool:
        return library_id in self._libraries

    def by_id(self) -> dict[str, LibraryEntry]:
        """A copy of the libraries by id (for a reload to compare against)."""
        return dict(self._libraries)

    def view(self, name: str, make: Callable[[Snapshot], T]) -> T:
        """The view ``name`` of this snapshot, made by ``make(self)`` on first use (once, whatever the
        number of concurrent callers: they wait for it) and kept as long as the snapshot serves."""
        views = self._views
        if name in views:
            return cast(T, views[name])
        with self._lock:
            if name not in views:
                views[name] = make(self)
            return cast(T, views[name])

    def replace(self, lib: LibraryEntry) -> Snapshot:
        """A new snapshot with ``lib`` in place of the library of its id (its views made again). The ids
        are the same (a check replaces, never adds), so they are not sorted again."""
        assert lib.id in self._libraries
        return Snapshot({**self._libraries, lib.id: lib}, self._ids)

    def refine(self, lib: LibraryEntry) -> None:
        """``lib``, now checked, in place of its unchecked self: the same builds, described the same way
        (the catalogue's guard held; see the module docstring)."""
        self._libraries[lib.id] = lib
