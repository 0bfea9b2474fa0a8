"""Front matter: the one parser of the ``key: value`` blocks that open a page.

The grammar, shared by every reader:

- A block opens with a fence line, ``---`` (YAML) or ``+++`` (TOML), and closes with ``---`` or ``...``
  (YAML) or ``+++`` (TOML): ``CLOSERS``.
- A *field* is a line ``key: value`` whose key is ``[A-Za-z_][\\w-]*`` and whose colon is followed by a
  space, a tab or the end of the line (``field``). A value in double quotes is a JSON string, one in
  single quotes a YAML single-quoted string (``''`` is a quote), anything else the text as written
  (``scalar``). The first of two equal keys wins.

Its readers:

- ``read_front_matter`` (the chunker's ``parse_page``: a page's own block) takes the block at the very
  start of the page and parses it with a real YAML or TOML parser; when that fails, the block's fields
  are read line by line (``lenient_fields``), keeping only plain scalars. A block that parses to
  something other than a mapping was a pair of thematic breaks, not front matter.
- The llms.txt parser reads blocks inside a file: ``leading_block_end`` finds a YAML block that opens
  the llms.txt itself (stricter, because an llms.txt may well start with a ``---`` rule: its first line
  must be a field, and it must close within 60 lines), and the per-page blocks of an llms-full file are
  read with ``field`` and ``scalar``; where those blocks begin and end (``-{3,}`` fences, ``Back to
  top---`` openers glued to the previous page) is llms-full structure, decided in ``llmstxt/scan.py``.
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any, NamedTuple

import yaml

#: The closing lines of each opening fence.
CLOSERS = {"---": ("---", "..."), "+++": ("+++",)}
#: A field's key and colon (the value follows ``match.end()``).
FIELD_RE = re.compile(r"([A-Za-z_][\w-]*):(?:[ \t]|$)")
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# A plain value starting with one of these is YAML structure (flow collection, block scalar, anchor,
# alias, tag, comment...), not a string a title can be read from.
_NOT_PLAIN = "[{|>&*!#@`"


class PageFrontMatter(NamedTuple):
    """A page's front matter, read by ``read_front_matter``."""

    data: dict[str, object]  # the parsed mapping ({} when there is none or it does not parse)
    fields: dict[str, object]  # where titles are read from: ``data``, or a broken block's plain fields
    body: str  # the text after the block (the whole text when there is no block)


def scalar(raw: str) -> str:
    """A field's value: a JSON string in double quotes, a YAML string in single quotes, else as written."""
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            decoded = json.loads(value)
        except ValueError:
            return value[1:-1]
        return decoded if isinstance(decoded, str) else value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def field(line: str) -> tuple[str, str] | None:
    """``(key, raw value)`` when ``line`` is a field, else None (the value is not decoded: see ``scalar``)."""
    m = FIELD_RE.match(line)
    return None if m is None else (m.group(1), line[m.end() :].strip())


def split_front_matter(text: str) -> tuple[str | None, str, str]:
    """``(block source or None, opening fence, body)`` of a block at the very start of ``text``."""
    first_end = text.find("\n")
    if first_end == -1:
        return None, "", text
    fence = text[:first_end].rstrip()
    if fence not in CLOSERS:
        return None, "", text
    closers = CLOSERS[fence]
    pos = first_end + 1
    while pos <= len(text):
        end = text.find("\n", pos)
        line_end = len(text) if end == -1 else end
        if text[pos:line_end].rstrip() in closers:
            body = "" if end == -1 else text[end + 1 :]
            return text[first_end + 1 : pos], fence, body
        if end == -1:
            break
        pos = end + 1
    return None, "", text


def leading_block_end(lines: list[str], max_lines: int = 60) -> int:
    """Index just past a YAML block opening an llms.txt (first line a field, closed within ``max_lines``), or 0."""
    if not lines or lines[0].strip() != "---" or len(lines) < 3 or field(lines[1]) is None:
        return 0
    for k in range(2, min(len(lines), max_lines)):
        if lines[k].strip() in CLOSERS["---"]:
            return k + 1
    return 0


def lenient_fields(raw: str) -> dict[str, object]:
    """The plain fields of a block that does not parse (often only an unquoted colon: ``title: Foo: Bar``)."""
    out: dict[str, object] = {}
    for line in raw.split("\n"):
        found = field(line)
        if found is None:
            continue
        key, value = found
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            out.setdefault(key, scalar(value))
        elif value and value[0] not in _NOT_PLAIN:
            out.setdefault(key, value)
    return out


def _load(raw: str, fence: str) -> object:
    """Parse a block's source; raises whatever the YAML/TOML parser raises."""
    if fence == "+++":
        return tomllib.loads(raw)
    return yaml.load(raw, Loader=_YAML_LOADER)


def read_front_matter(text: str) -> PageFrontMatter:
    """Split a page (``\\n`` line endings) into its front matter and body; never raises."""
    raw, fence, body = split_front_matter(text)
    if raw is None:
        return PageFrontMatter({}, {}, body)
    try:
        data = _load(raw, fence)
    except Exception:
        # YAMLError, TOMLDecodeError, RecursionError...: broken front matter, still not body text.
        return PageFrontMatter({}, lenient_fields(raw) if fence == "---" else {}, body)
    if isinstance(data, dict):
        mapping = {str(key): value for key, value in data.items()}
        return PageFrontMatter(mapping, mapping, body)
    if data is not None:
        # Parses, but not as a mapping: the fences were thematic breaks, not front matter.
        return PageFrontMatter({}, {}, text)
    return PageFrontMatter({}, {}, body)


def text_field(front_matter: dict[str, object], *keys: str) -> str | None:
    """The first of ``keys`` whose value is a non-empty string or number, whitespace collapsed."""
    for key in keys:
        value = front_matter.get(key)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, str | int | float):
            text = " ".join(str(value).split())
            if text:
                return text
    return None
