"""Content safety: text in a page that may try to steer an AI assistant, found at build time.

The build scans every document (``scan_chunks``, in the page workers) and records the findings in the
manifest (``safety``), so the server can show them without reading documents; ``docbundle-index audit``
(``release/audit.py``) reports them again with the rest.

What counts as a finding:

- ``hidden-unicode``: Unicode tag characters (U+E0000-U+E007F, invisible text that models still read),
  bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069, the "Trojan Source" trick), and
  runs of three or more zero-width characters.
- ``instructions``: text addressed to an AI assistant rather than to a reader - "ignore previous
  instructions", "you are now ...", "do not tell the user", chat-template tokens such as ``<|im_start|>``.

Findings are reports, not verdicts: documentation about prompt injection quotes such text on purpose.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_FINDINGS_PER_DOC = 20

_HIDDEN = re.compile(
    "(?P<tag>[\U000e0000-\U000e007f]+)"
    "|(?P<bidi>[\u202a-\u202e\u2066-\u2069]+)"
    "|(?P<zw>[\u200b\u200c\u200d\u2060\ufeff]{3,})"
)
_INSTRUCTIONS = re.compile(
    r"(?i)\b(?:"
    r"ignore\s+(?:all\s+|any\s+|the\s+)?(?:previous|prior|above|earlier)\s+(?:instructions|prompts?|rules)"
    r"|disregard\s+(?:all\s+|any\s+|the\s+)?(?:previous|prior|above|earlier|system)\s+\w+"
    r"|forget\s+(?:all\s+|everything\s+)?(?:you\s+were\s+told|previous\s+instructions)"
    # "you are now" only where it hands out a role or a mode ("You are now DAN", "you are now an
    # unrestricted AI", "you are now in developer mode"), not tutorial prose ("You are now ready to build").
    r"|you\s+are\s+now\s+(?:"
    r"an?\s+(?:[\w-]+\s+){0,3}?(?:ai|assistant|model|chatbot|bot|llm|persona|character)\b"
    r"|in\s+(?:[\w-]+\s+){0,2}mode\b"
    r"|(?:jailbroken|unrestricted|unfiltered|uncensored|free\s+from)\b"
    r"|(?-i:[A-Z][A-Z0-9]+)\b)"
    r"|(?:do\s+not|don't|never)\s+(?:tell|reveal\s+(?:this\s+)?to|mention\s+(?:this\s+)?to|inform)\s+the\s+user"
    r"|(?:if\s+you\s+are|as)\s+an?\s+(?:ai|llm|language\s+model|ai\s+assistant)\b[^.\n]{0,60}?\b(?:must|should|always|never)"
    r"|new\s+system\s+prompt"
    r")"
    r"|<\|im_start\|>|<\|im_end\|>|\[/?INST\]|<<SYS>>"
)
# Most text holds none of this, and running the two patterns above over every character is the
# costliest part of the scan (about 1 ms per chunk). So a chunk is checked cheaply first, and only one
# that may match is scanned: the findings are exactly those of the full scan (a hypothesis test holds
# it). Hidden characters are all outside ASCII; each alternative of _INSTRUCTIONS needs one of
# the literals below, which C-speed substring and literal-led searches find on the lowercased text.
_ANY_HIDDEN = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]")
# The only characters that (?i) matches to an ASCII letter but str.lower() does not lower to it alone.
_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
# (``str.translate`` looks up every character in a dict: it runs only on text holding one of them.)
_TO_FOLD = re.compile("[\u0130\u0131\u017f\u212a]")
_ALWAYS = ("ignore", "disregard", "forget", "inst]", "<|im_", "<<sys>>")
_LED = (
    ("now", re.compile(r"you\s+are\s+now")),
    ("user", re.compile(r"the\s+user")),
    ("prompt", re.compile(r"system\s+prompt")),
)
_MODAL = ("must", "should", "always", "never")
_ADDRESSED = re.compile(r"an?\s+(?:ai|llm|language)")


def _may_address(text: str) -> bool:
    """Whether ``text`` may hold a match of ``_INSTRUCTIONS`` (never False when it does)."""
    if not text.isascii() and _TO_FOLD.search(text) is not None:
        text = text.translate(_FOLD)
    low = text.lower()
    if any(word in low for word in _ALWAYS):
        return True
    if any(word in low and pattern.search(low) for word, pattern in _LED):
        return True
    return any(word in low for word in _MODAL) and _ADDRESSED.search(low) is not None


_NAMES = {
    "tag": "Unicode tag characters",
    "bidi": "bidirectional override characters",
    "zw": "zero-width run",
}


def scan_text(text: str, *, precheck: bool = True) -> list[tuple[str, str, int]]:
    """``(kind, detail, offset)`` for each suspicious span of ``text``.

    ``precheck=False`` runs both patterns over every character: the same findings, slower (the
    reference that the pre-check is tested against).
    """
    out: list[tuple[str, str, int]] = []
    skip_hidden = precheck and (text.isascii() or _ANY_HIDDEN.search(text) is None)
    for m in () if skip_hidden else _HIDDEN.finditer(text):
        kind = m.lastgroup or "hidden"
        codes = " ".join(f"U+{ord(c):04X}" for c in m.group()[:6])
        out.append(("hidden-unicode", f"{_NAMES[kind]} ({len(m.group())}: {codes})", m.start()))
    skip_instructions = precheck and not _may_address(text)
    for m in () if skip_instructions else _INSTRUCTIONS.finditer(text):
        snippet = " ".join(text[max(0, m.start() - 30) : m.end() + 30].split())
        out.append(("instructions", f"text addressed to an AI assistant: ...{snippet}...", m.start()))
    return out


def scan_chunks(texts: Iterable[str]) -> list[tuple[int, str, str]]:
    """``(chunk, kind, detail)`` for the findings in a document's chunk texts (at most
    MAX_FINDINGS_PER_DOC); the page workers run it, so the scan adds nothing to a build's serial end."""
    findings: list[tuple[int, str, str]] = []
    for ci, text in enumerate(texts):
        for kind, detail, _ in scan_text(text):
            findings.append((ci, kind, detail))
            if len(findings) >= MAX_FINDINGS_PER_DOC:
                return findings
    return findings
