"""An HTML response body's bytes to text: the charset from the header, a BOM, ``<meta>`` or ``<?xml?>``.

Bytes only: no tree is built, and it never raises (bytes invalid in the charset become U+FFFD).
"""

from __future__ import annotations

import codecs
import re

__all__ = ["decode_html"]


_CHARSET_RE = re.compile(rb"""charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_META_RE = re.compile(rb"<meta\b[^>]*>", re.IGNORECASE)
_XML_DECL_RE = re.compile(rb"""^\s*<\?xml\b[^>]*\bencoding\s*=\s*["']([A-Za-z0-9_.:-]+)["']""")
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# What the WHATWG encoding standard maps these labels to.
_ALIASES = {
    "iso-8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "x-sjis": "shift_jis",
    "utf8": "utf-8",
    "unicode": "utf-16-le",
}


def _codec(label: str | bytes | None) -> str | None:
    """The Python codec for a charset label, or ``None`` when there is none or it is unknown."""
    if label is None:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "replace")
    name = label.strip().strip("\"'").lower()
    if not name:
        return None
    name = _ALIASES.get(name, name)
    try:
        return str(codecs.lookup(name).name)
    except LookupError:
        return None


def _header_charset(content_type: str | None) -> str | None:
    if not content_type:
        return None
    match = _CHARSET_RE.search(content_type.encode("latin-1", "replace"))
    return _codec(match.group(1)) if match else None


def _sniff_meta(head: bytes) -> str | None:
    for tag in _META_RE.finditer(head):
        text = tag.group(0)
        lower = text.lower()
        if b"charset" not in lower:
            continue
        # <meta charset="x"> or <meta http-equiv="Content-Type" content="text/html; charset=x">
        match = _CHARSET_RE.search(text)
        if match:
            codec = _codec(match.group(1))
            if codec:
                # A page declaring UTF-16 in ASCII-compatible bytes is not UTF-16 (WHATWG).
                return "utf-8" if codec.startswith("utf_16") or codec.startswith("utf-16") else codec
    return None


def decode_html(body: bytes, content_type: str | None) -> str:
    """Text of an HTML (or XHTML) response body; never raises.

    The charset comes from the ``Content-Type`` header, else a byte order mark, else ``<meta charset>``
    or ``<meta http-equiv="Content-Type">`` in the first 4 KiB, else an ``<?xml encoding?>``
    declaration, else UTF-8. Bytes that are not valid in the chosen charset become U+FFFD; a BOM is
    never part of the text.
    """
    codec = _header_charset(content_type)
    start = 0
    if codec is None:
        for bom, name in _BOMS:
            if body.startswith(bom):
                codec, start = name, len(bom)
                break
    if codec is None:
        head = body[:4096]
        codec = _sniff_meta(head)
        if codec is None:
            match = _XML_DECL_RE.match(head)
            codec = _codec(match.group(1)) if match else None
    if codec is None:
        codec = "utf-8"
    try:
        text = body[start:].decode(codec, "replace")
    except Exception:  # a codec that fails on its own (not on the bytes): fall back to UTF-8
        text = body[start:].decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text
