"""One way to print text that comes from outside: ``printable``.

A site (an llms.txt title, a page title or text, a URL a redirect named), a release (``index.json``'s
``name`` and ``status``) or a bundle (its manifest's names, reasons and safety findings) can hold any
characters. Printed raw, an escape sequence can set a terminal's title, clear its screen, rewrite the
line above or hide text; a bidi override can make a line read differently from what it holds; an
unbounded field can flood a log. Every command that prints such text (``docbundle pull``, ``info``,
``search``, and the indexer's ``add`` and ``audit``) passes it through ``printable`` first.

Pure standard library; the server and the indexer import it (the ``common`` contract in ``.importlinter``).
"""

from __future__ import annotations

import re

__all__ = ["MAX_FIELD_CHARS", "printable"]

MAX_FIELD_CHARS = 200  # a name, title, status or URL from outside, on one line

# Escape sequences, whole (ECMA-48): CSI, OSC and the string controls (DCS, SOS, PM, APC), then any other
# ESC. Each ends optionally, so a match never fails after its start and the scan stays linear.
_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_BREAKS = "\t\n\v\f\r\x85\u2028\u2029"
# Every C0 and C1 control and DEL dropped, bidi controls dropped, line and tab breaks made spaces.
_ONE_LINE: dict[int, str | None] = {c: None for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]}
_ONE_LINE |= {ord(c): None for c in _BIDI} | {ord(c): " " for c in _BREAKS}
_LINES = _ONE_LINE | {ord("\n"): "\n"}


def printable(text: object, limit: int = MAX_FIELD_CHARS, *, lines: bool = False) -> str:
    """``text`` safe for a terminal or a log line: escape sequences, C0/C1 controls and bidi controls
    removed, line breaks made spaces (kept when ``lines``), cut to ``limit`` characters with "…"."""
    raw = text if isinstance(text, str) else str(text)
    # Cut first (with room for the sequences removed), so the work is bounded by the limit, not the input.
    bound = 4 * limit + 64
    cut = len(raw) > bound
    clean = _SEQUENCES.sub("", raw[:bound] if cut else raw).translate(_LINES if lines else _ONE_LINE)
    if cut or len(clean) > limit:
        return clean[: max(limit - 1, 0)].rstrip() + "…"
    return clean
