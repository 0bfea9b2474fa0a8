"""``docbundle pull --list``: what a release offers, with each library version's health, filtered, as a table.

The rows are ``index.json``'s entries (what can be pulled). When the release folder also publishes the
nightly job's ``status.json`` (``docbundle.bundle.status``), each row shows its library version's state
(built, unchanged, failed, unavailable; a failure with its class and how many nights in a row) and age
(how long since the site was last read successfully), and rows can be filtered by category and state. A
release folder without one (``docbundle-index package``'s, or an older nightly's) lists the same rows
with the age of each bundle's build and no state.

Every word from the release (names, categories, descriptions, messages) is printed through ``printable``.
Pure standard library and ``docbundle.bundle``; no network here (``pull.read_status`` fetches the file).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime

from docbundle.bundle.releaseindex import PackagedBundle
from docbundle.bundle.status import CatalogueStatus, LibraryStatus
from docbundle.common.terminal import printable

from .errors import PullError

DESCRIPTION_CHARS = 80  # of a library's description on its pull --list line
NAME_CHARS = 30  # of a library's name in its column
CATEGORY_CHARS = 16  # of a category in its column (the shipped taxonomy's longest is 15)
MAX_NAMED = 30  # categories an error names before it gives a count instead
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Filters:
    """What ``pull --list`` was asked to show: words (all of them in the id, name, category, version or
    description, ignoring case), a category, a state (both ignoring case); empty means any."""

    words: tuple[str, ...] = ()
    category: str = ""
    state: str = ""

    def active(self) -> bool:
        """Whether any filter is set."""
        return bool(self.words or self.category or self.state)


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (Unicode-normalized; ``_`` and ``-`` separate words)."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).lower().replace("_", " "))


@dataclass(frozen=True)
class Row:
    """One line of the listing: an archive and its library version's health (None without status.json)."""

    bundle: PackagedBundle
    health: LibraryStatus | None


def rows(entries: list[PackagedBundle], status: CatalogueStatus | None, filters: Filters) -> list[Row]:
    """The entries ``filters`` keep, libraries in order, latest version first, each with its health.

    ``PullError`` when a category or state filter cannot be applied: no ``status.json`` (so no category
    nor state), or a category the release does not have (the error names those it has)."""
    health = {(e.library, e.version): e for e in status.libraries} if status else {}
    category, state = filters.category.strip().lower(), filters.state.strip().lower()
    if (category or state) and status is None:
        raise PullError(
            "this release publishes no status.json, so its libraries have no category or state to filter "
            "by: filter by words instead (docbundle pull --list WORDS)"
        )
    if category and status is not None:
        known = sorted({e.category.lower() for e in status.libraries if e.category})
        if category not in known:
            shown = ", ".join(printable(c, 40) for c in known[:MAX_NAMED]) or "none"
            more = f" and {len(known) - MAX_NAMED} more" if len(known) > MAX_NAMED else ""
            raise PullError(f"the release has no category {printable(category, 40)!r}; it has: {shown}{more}")
    terms = [w for text in filters.words for w in words(text)]
    chosen = []
    for e in sorted(entries, key=lambda e: (e.library, not e.latest, e.version, e.build_id)):
        h = health.get((e.library, e.version))
        if category and (h is None or h.category.lower() != category):
            continue
        if state and (h is None or h.state != state):
            continue
        if terms:
            text = " ".join((e.library, e.version, e.name, e.description, h.category if h else "")).lower()
            text = unicodedata.normalize("NFKC", text).replace("_", " ")
            if not all(t in text for t in terms):
                continue
        chosen.append(Row(e, h))
    return chosen


def age(iso: str, now: datetime) -> str:
    """How long ago ``iso`` (``2026-12-02T03:17:00Z``) was, in one short word: ``12 min``, ``5 h``, ``3 d``."""
    try:
        then = datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "?"
    seconds = max(0.0, (now - then).total_seconds())
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    if seconds < 2 * 86400:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 86400)} d"


def _state(h: LibraryStatus | None) -> str:
    if h is None:
        return "-"
    return h.state


def _notes(row: Row) -> str:
    """What follows the build id: latest, the version's status, a failure's class and nights, the description."""
    e, h = row.bundle, row.health
    notes = "  latest" if e.latest else ""
    if e.status != "active":
        notes += f"  ({printable(e.status, 40)})"
    if h is not None and h.state in ("failed", "unavailable"):
        nights = "1 night" if h.failed_nights == 1 else f"{h.failed_nights} nights"
        notes += f"  [{printable(h.reason, 32)}, {nights}; pull installs the last good build]"
    if e.description:
        notes += f"  {printable(e.description, DESCRIPTION_CHARS)}"
    return notes


def render_list(found: list[Row], *, now: datetime | None = None, total: int | None = None) -> str:
    """The table ``pull --list`` prints: a header, then one line per row (the release's words made
    terminal-safe and cut to their column); ``total``: the release's entries, when a filter left some out."""
    if not found:
        if total:
            return f"no library version of the {total} the release offers matches\n"
        return "the release offers no bundles\n"
    now = now or datetime.now(UTC)
    width = max(len("LIBRARY"), *(len(f"{r.bundle.library}@{r.bundle.version}") for r in found))
    header = (
        f"{'LIBRARY':<{width}}  {'NAME':<{NAME_CHARS}}  {'CATEGORY':<{CATEGORY_CHARS}}  {'STATE':<11}  "
        f"{'AGE':>6}  {'DOCS':>6}  {'SIZE':>9}  BUILD"
    )
    lines = [header]
    for r in found:
        e, h = r.bundle, r.health
        when = (h.last_success or e.built_at) if h is not None else e.built_at
        lines.append(
            f"{f'{e.library}@{e.version}':<{width}}  {printable(e.name, NAME_CHARS):<{NAME_CHARS}}  "
            f"{printable(h.category if h else '', CATEGORY_CHARS):<{CATEGORY_CHARS}}  {_state(h):<11}  "
            f"{age(when, now):>6}  {e.documents:>6}  {size(e.size):>9}  {e.build_id}{_notes(r)}"
        )
    if total is not None and total > len(found):
        lines.append(f"{len(found)} of the {total} library versions the release offers match")
    return "\n".join(lines) + "\n"


def size(n: int) -> str:
    """``n`` bytes for a person: ``512 B``, ``3.1 KiB``, ``12.0 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
