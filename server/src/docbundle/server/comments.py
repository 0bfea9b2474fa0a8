"""HTML comments left out of the text a search hit shows.

Documentation sources carry comments a reader never sees (``<!-- loio7d2b… -->`` ids of SAP's help
portal, editor notes, ``<!-- prettier-ignore -->``); in a hit they only cost tokens. Chunks stay exact
slices of their page (the bundle format), so the comments are dropped where a hit's text is made. A
comment inside a fenced code block is part of the example and is kept.
"""

from __future__ import annotations

import re

__all__ = ["without_html_comments"]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_COMMENT = re.compile(r"<!--.*?-->", re.S)


def without_html_comments(text: str) -> str:
    """``text`` without HTML comments outside fenced code; lines left empty by a removal are dropped."""
    if "<!--" not in text:
        return text
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    for line in text.splitlines(keepends=True):
        m = _FENCE.match(line)
        if fence is None and m:
            out.append(_strip("".join(prose)))
            prose = []
            fence = m[1][0] * len(m[1])
            out.append(line)
        elif fence is not None:
            out.append(line)
            if m and m[1].startswith(fence):
                fence = None
        else:
            prose.append(line)
    out.append(_strip("".join(prose)))
    return "".join(out)


def _strip(prose: str) -> str:
    if "<!--" not in prose:
        return prose
    lines = _COMMENT.sub("\0", prose).splitlines(keepends=True)
    # A line that held nothing but comments goes; other lines keep their text, the comments removed.
    return "".join(
        line.replace("\0", "") for line in lines if line.replace("\0", "").strip() or "\0" not in line
    )
