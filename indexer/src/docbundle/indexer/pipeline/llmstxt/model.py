"""The parsed llms.txt file: its msgspec Structs, and the conformance issues parsing reports.

Types only (and ``add_issue``, the one way an issue is recorded): no parsing here. ``LlmsLink.line`` and
``InlineDoc.line`` give the 1-based source line and ``InlineDoc.description`` the page description a file
gave (front matter ``description:``, ``desc=``).
"""

from __future__ import annotations

import msgspec

__all__ = [
    "INFORMATIONAL",
    "ConformanceIssue",
    "InlineDoc",
    "LlmsLink",
    "LlmsSection",
    "LlmsTxt",
    "add_issue",
]


#: Findings that are notes, not deviations from the spec: the spec's links are markdown links, and a
#: relative one is still one (a local docs folder's llms.txt, such as the demo library's, needs them).
#: They are recorded in the manifest, but a build or ``add`` does not call them deviations.
INFORMATIONAL = frozenset({"relative-link"})


class ConformanceIssue(msgspec.Struct, frozen=True):
    """A finding about the file's conformance to the llms.txt spec (parsing never fails)."""

    code: str
    line: int
    message: str

    @property
    def deviation(self) -> bool:
        """The file departs from the spec here (not merely an ``INFORMATIONAL`` note)."""
        return self.code not in INFORMATIONAL


class LlmsLink(msgspec.Struct, frozen=True):
    """One link entry of an llms.txt file."""

    title: str
    url: str
    notes: str = ""
    section: str = ""
    optional: bool = False
    line: int = 0


class LlmsSection(msgspec.Struct, frozen=True):
    """A headed section (or the unnamed run of links before the first heading)."""

    name: str
    links: list[LlmsLink]
    optional: bool = False
    text: str = ""


class InlineDoc(msgspec.Struct, frozen=True):
    """A documentation page carried inline by an llms-full style file."""

    title: str
    text: str
    section: str = ""
    url: str | None = None
    description: str = ""
    line: int = 0


class LlmsTxt(msgspec.Struct, frozen=True):
    """A parsed llms.txt file."""

    title: str | None
    summary: str | None
    details: str
    sections: list[LlmsSection]
    inline_docs: list[InlineDoc]
    issues: list[ConformanceIssue]
    kind: str

    @property
    def links(self) -> list[LlmsLink]:
        """All links in file order."""
        return [link for section in self.sections for link in section.links]


def add_issue(issues: list[ConformanceIssue], code: str, idx: int, message: str) -> None:
    """Record a conformance issue at line index ``idx`` (0-based; reported 1-based)."""

    issues.append(ConformanceIssue(code=code, line=idx + 1, message=message))
