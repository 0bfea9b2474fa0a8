"""Content safety: text in a page that may try to steer an AI assistant, found at build time.

The build scans every document (``scan_document``) and records the findings in the manifest
(``safety``), so the server can show them without reading documents; ``docbundle-index audit``
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

from docbundle.bundle.manifest import SafetyFinding
from docbundle.bundle.store import DocRecord

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
_NAMES = {
    "tag": "Unicode tag characters",
    "bidi": "bidirectional override characters",
    "zw": "zero-width run",
}


def scan_text(text: str) -> list[tuple[str, str, int]]:
    """``(kind, detail, offset)`` for each suspicious span of ``text``."""
    out: list[tuple[str, str, int]] = []
    for m in _HIDDEN.finditer(text):
        kind = m.lastgroup or "hidden"
        codes = " ".join(f"U+{ord(c):04X}" for c in m.group()[:6])
        out.append(("hidden-unicode", f"{_NAMES[kind]} ({len(m.group())}: {codes})", m.start()))
    for m in _INSTRUCTIONS.finditer(text):
        snippet = " ".join(text[max(0, m.start() - 30) : m.end() + 30].split())
        out.append(("instructions", f"text addressed to an AI assistant: ...{snippet}...", m.start()))
    return out


def scan_document(doc: DocRecord) -> list[SafetyFinding]:
    """Content-safety findings of one document, chunk by chunk (at most MAX_FINDINGS_PER_DOC)."""
    findings: list[SafetyFinding] = []
    for ci, chunk in enumerate(doc.chunks):
        for kind, detail, _ in scan_text(chunk.text):
            findings.append(SafetyFinding(path=doc.id, kind=kind, detail=detail, chunk=ci))
            if len(findings) >= MAX_FINDINGS_PER_DOC:
                return findings
    return findings
