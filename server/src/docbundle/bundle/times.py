"""The one reading of a build time (a manifest's ``build.built_at``, ISO 8601) shared by the server and
the indexer: the page's and the metrics' build age, the audit's age in days.

A time that names no zone is UTC (builds write ``...Z``; a hand-made manifest may leave the zone out,
and the server's own zone must not move an age). An unreadable one is None: each caller says so its own
way (no age shown, no sample, -1 days), and nothing fails.
"""

from __future__ import annotations

from datetime import UTC, datetime


def parse_time(text: str) -> datetime | None:
    """``text`` as an aware datetime (UTC when it names no zone), or None when it is not ISO 8601."""
    try:
        parsed = datetime.fromisoformat(text)
    except (ValueError, OverflowError, TypeError):
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


def seconds_since(text: str, now: float) -> float | None:
    """Seconds from the time ``text`` names to ``now`` (seconds since the epoch), at least 0; None when
    unreadable."""
    parsed = parse_time(text)
    if parsed is None:
        return None
    try:
        return max(0.0, now - parsed.timestamp())
    except (OverflowError, OSError, ValueError):
        return None
