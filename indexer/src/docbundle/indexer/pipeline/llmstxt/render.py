"""``render_llms_txt``: a parsed file written back as a spec-conformant llms.txt.

Title, summary, details and sections only (inline docs are not written). Every section is written as an
H2, so a section's optional flag only survives when its name is ``Optional``; headings, link titles and
URLs are escaped so that the parser reads back what was written.
"""

from __future__ import annotations

from .links import collapse
from .model import LlmsTxt

__all__ = ["render_llms_txt"]


def _escape_inline(text: str, chars: str) -> str:
    out = text.replace("\\", "\\\\")
    for ch in chars:
        out = out.replace(ch, "\\" + ch)
    return out


def _render_heading(text: str) -> str:
    flat = collapse(text)
    return _escape_inline(flat, "*_`[]<>#")


def _render_url(url: str) -> str:
    flat = url.replace("\n", "%0A")
    # the <...> form allows spaces and unbalanced parentheses, and a trailing backslash cannot escape ")"
    if any(ch in flat for ch in " \t()<>\\"):
        return "<" + flat.replace("<", "%3C").replace(">", "%3E") + ">"
    return flat


def render_llms_txt(doc: LlmsTxt) -> str:
    """Render title, summary, details and sections as a spec-conformant llms.txt."""
    out: list[str] = []
    if doc.title is not None:
        out += [f"# {_render_heading(doc.title)}", ""]
    if doc.summary:
        out += [("> " + line) if line.strip() else ">" for line in doc.summary.split("\n")]
        out.append("")
    if doc.details.strip():
        out += [doc.details.strip("\n"), ""]
    for k, section in enumerate(doc.sections):
        # only a leading unnamed section can be written without a heading
        if section.name or k > 0:
            out += [f"## {_render_heading(section.name)}", ""]
        if section.text.strip():
            out += [section.text.strip("\n"), ""]
        for link in section.links:
            title = _escape_inline(collapse(link.title), "[]`")
            entry = f"- [{title}]({_render_url(link.url)})"
            notes = collapse(link.notes)
            if notes:
                entry += f": {notes}"
            out.append(entry)
        if section.links:
            out.append("")
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n"
