"""How a catalogue serves: one record (``CatalogSettings``) given to ``Catalog.load``, never changed after.

A server (``docbundle serve``) asks for its own, ``CatalogSettings.serving`` (``--max-open``,
``--route-libraries``, a warm-up of the bundles it opens); a one-shot command (search, info, verify) takes
the defaults. Tests and benchmarks that measure a server build their catalogue with ``serving`` too, so
they run what ``serve`` runs (issue 35: a test without the warm-up missed it starving searches). Each
default and bound is named here with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass

RETIRE_AFTER_SECONDS = 60.0  # a build replaced by a reload stays open this long for requests in flight
# A bundle closed because it is past --max-open stays open this long for the requests still reading it
# (a search stops at its 2 s budget). Not the 60 s above: a search across a big catalogue opens up to 10
# bundles, and 60 s of them held a file descriptor each by the thousand (measured: 20,000 at 10,000
# libraries and 12 searches a second, and "Too many open files").
EVICT_AFTER_SECONDS = 5.0
DEFAULT_RELOAD_SECONDS = 2.0  # how often serve looks for new builds (--reload-interval; 0 = never)
WARM_TERMS = 1_000  # most frequent terms whose postings a server caches in the background per opened bundle
DEFAULT_ROUTE_LIBRARIES = 10  # libraries a search across libraries searches, chosen by the route index
MAX_ROUTE_LIBRARIES = 100  # the most --route-libraries may ask for
# Bundles a server keeps open at once (--max-open): past it the least recently used one is closed
# (after EVICT_AFTER_SECONDS, for the requests still reading it) and opened again, verified, when asked.
DEFAULT_MAX_OPEN = 32


@dataclass(frozen=True, kw_only=True)
class CatalogSettings:
    """What a catalogue is told once, when it is loaded: how many bundles it keeps open, how it warms
    them, how many libraries a search across libraries routes to, how long replaced builds live."""

    max_open: int = DEFAULT_MAX_OPEN  # bundles open at once (--max-open)
    # Terms whose postings an opened bundle caches in the catalogue's one warm-up thread (0: none; see
    # ``warmup``). A server asks for WARM_TERMS (``serving``); one-shot commands for none.
    warm_terms: int = 0
    # Libraries a search across libraries routes to (``routing``; 0: no routing; --route-libraries).
    route_libraries: int = DEFAULT_ROUTE_LIBRARIES
    retire_after: float = RETIRE_AFTER_SECONDS  # a replaced build's grace time (requests in flight)

    @classmethod
    def serving(
        cls,
        *,
        max_open: int = DEFAULT_MAX_OPEN,
        route_libraries: int = DEFAULT_ROUTE_LIBRARIES,
        retire_after: float = RETIRE_AFTER_SECONDS,
    ) -> CatalogSettings:
        """What ``docbundle serve`` tells its catalogue, over stdio and HTTP alike: its options, and a
        warm-up of the bundles it opens (``WARM_TERMS``; one-shot commands warm nothing)."""
        return cls(
            max_open=max_open,
            warm_terms=WARM_TERMS,
            route_libraries=route_libraries,
            retire_after=retire_after,
        )

    @property
    def evict_after(self) -> float:
        """A bundle closed past ``max_open`` lives this long for its requests (never past ``retire_after``)."""
        return min(self.retire_after, EVICT_AFTER_SECONDS)
