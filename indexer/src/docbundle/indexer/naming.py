"""What an llms.txt's title and summary say about the library, in the words ``add`` writes into the
catalogue: the id users type, the docs version the title names, and a description without the file's
talk about itself.

Pure functions over strings: no I/O, no config. The caller passes the site's text already made
printable (``docbundle.common.terminal.printable``); the results are checked against the catalogue's
own rules (``LIBRARY_ID_RE``, ``VERSION_RE``) before they are returned, so a result is always valid.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from urllib.parse import urlsplit

from docbundle.bundle.layout import LIBRARY_ID_RE, VERSION_RE

#: A version as titles write it: 3.2, v20.11.0, 5.x, 2024.1 (a bare "3" or "v3" names one too, but only
#: a dotted number is taken as the docs version: "Top 10 recipes" names none).
_VERSION = re.compile(r"^v?(\d+(?:\.(?:\d+|x))+)\Z", re.I)
_NUMBERISH = re.compile(r"^v?\d+(?:\.(?:\d+|x))*\Z", re.I)
#: Where a title's name ends: "Django 3.2 documentation | Django", "Click — Click Documentation (8.1.x)",
#: "FastHTML: a Python web framework".
_TITLE_PARTS = re.compile(r"\s+[|·•—–-]\s+|:\s+|\s+\(")
#: Words that say "documentation" rather than name the library; never part of an id.
_FILLER = frozenset(
    [
        "documentation",
        "docs",
        "doc",
        "manual",
        "reference",
        "references",
        "guide",
        "guides",
        "handbook",
        "api",
        "apis",
        "official",
        "the",
        "welcome",
        "to",
        "home",
        "homepage",
        "dev",
        "developer",
        "developers",
        "site",
        "website",
        "index",
        "llms",
        "llms.txt",
        "llms-full.txt",
        "version",
        "release",
        "latest",
        "stable",
        "for",
        "of",
        "and",
    ]
)
#: Host labels that name a documentation site rather than the library.
_HOST_FILLER = frozenset(["www", "docs", "doc", "developer", "developers", "dev", "api", "learn", "help"])
_SECOND_LEVEL = frozenset(["co", "com", "org", "net", "ac", "gov", "edu"])
#: A sentence about the llms.txt file itself ("Links are relative to this file.", "This file lists the
#: pages of the documentation."), not about the library.
_ABOUT_THE_FILE = [
    re.compile(pattern, re.I)
    for pattern in (
        r"\bthis\s+(?:file|document|index|listing|page|llms(?:-full)?\.txt)\b",  # "This file lists..."
        r"\blinks?\s+(?:are|is)\s+relative\b",  # "Links are relative to this file."
    )
]
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def _ascii_words(text: str) -> list[str]:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return ascii_text.split()


def _slug(words: list[str]) -> str:
    """Words joined as an id: "Node.js" becomes "nodejs" (what people type), other punctuation a '-'."""
    joined = "-".join(re.sub(r"(?<=[a-z0-9])\.(?=[a-z])", "", w.lower()) for w in words)
    return re.sub(r"[^a-z0-9]+", "-", joined).strip("-")[:64].strip("-")


def _name_words(title: str) -> list[str]:
    """The words of a title that name the library: its first part, without versions and filler."""
    for part in [_TITLE_PARTS.split(title, maxsplit=1)[0], title]:
        words = [w.strip(".,;:!?()[]{}\"'") for w in _ascii_words(part)]
        kept = [w for w in words if w and not _NUMBERISH.match(w) and w.lower() not in _FILLER]
        if kept:
            return kept
    return []


def _host_words(url: str) -> list[str]:
    """A host name's label that names the site: docs.python.org -> python."""
    host = urlsplit(url).hostname or ""
    if not host or re.fullmatch(r"[\d.]+|\[?[0-9a-f:]+\]?", host):
        return []  # an address names nothing
    labels = host.split(".")
    labels = labels[:-1] if len(labels) > 1 else labels  # the top-level domain
    if len(labels) > 1 and labels[-1] in _SECOND_LEVEL:
        labels = labels[:-1]  # example.co.uk
    named = [label for label in labels if label not in _HOST_FILLER]
    return named[-1:] if named else []


def derive_id(title: str | None, url: str) -> tuple[str, str]:
    """A library id from the title ("Django 3.2 documentation" -> "django"), else the host name, else
    "library" (always a valid id), and what it came from: "title", "host name" or "default"."""
    for source, words in (("title", _name_words(title or "")), ("host name", _host_words(url))):
        slug = _slug(words)
        if slug and LIBRARY_ID_RE.match(slug):
            return slug, source
    return "library", "default"


def unique_id(base: str, taken: Collection[str]) -> str:
    """``base``, or ``base-2``, ``base-3``... the first not in ``taken`` (within the id length limit)."""
    if base not in taken:
        return base
    n = 2
    while True:
        suffix = f"-{n}"
        candidate = base[: 64 - len(suffix)].rstrip("-") + suffix
        if candidate not in taken:
            return candidate
        n += 1


def title_version(title: str | None) -> str | None:
    """The docs version a title names ("Django 3.2 documentation" -> "3.2"), or None."""
    for word in _ascii_words(title or ""):
        m = _VERSION.match(word.strip(".,;:!?()[]{}\"'"))
        if m and VERSION_RE.match(m.group(1)):
            return m.group(1)
    return None


#: The longest description taken from a summary: one line of a listing.
MAX_DESCRIPTION = 200


def description_from(summary: str | None) -> str:
    """The description a (printable) summary gives: ``describe``d, on one line, cut to
    ``MAX_DESCRIPTION`` characters with "…"; "" when nothing is left. ``add`` writes it into a new
    entry, and a build records it for a library whose entry has none (the catalogue leaves most
    descriptions to the sites' own summaries)."""
    text = " ".join(describe(summary).split())
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1].rstrip() + "…"


def describe(summary: str | None) -> str:
    """The summary without its sentences about the llms.txt file itself ("Links are relative to this
    file."); "" when nothing else is left."""
    sentences = _SENTENCE_END.split(" ".join((summary or "").split()))
    return " ".join(s for s in sentences if s and not any(p.search(s) for p in _ABOUT_THE_FILE))
