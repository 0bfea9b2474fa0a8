"""A library's source: its llms.txt as fetched and parsed, or the listing of its folder of markdown.

``fetch_source`` is the first step of a build's crawl and goes through the build's ``CrawlSession``; a
folder of markdown (no llms.txt) is listed instead (``directory_listing``), with no fetch at all. A
source that cannot be fetched or read raises ``FetchError``: the library fails as a whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import msgspec

from ..config import Target
from ..errors import FetchError
from .addresses import PAGE_SUFFIXES, is_url, source_base_url
from .fetched import FetchResult
from .llmstxt import LlmsTxt, parse_llms_txt, render_llms_txt
from .session import CrawlSession

__all__ = ["Source", "directory_listing", "fetch_source"]


class Source(NamedTuple):
    """The library's llms.txt (or its folder's listing), as parsed and as fetched."""

    llms: LlmsTxt
    text: str  # the llms.txt exactly as fetched (or rendered from the folder listing)
    result: FetchResult | None  # None for a folder of markdown
    base_url: str


async def fetch_source(target: Target, session: CrawlSession) -> Source:
    """Fetch and parse the library's llms.txt (or list its folder); raises FetchError when unusable."""
    source = target.source
    if not is_url(source) and Path(source).is_dir():
        listing = directory_listing(Path(source))
        return Source(listing, render_llms_txt(listing), None, source_base_url(source, None))
    result = await session.fetch_one(source)
    if not result.ok or result.text is None:
        raise FetchError(
            source,
            result.error or "could not be fetched",
            kind=result.error_kind or "error",
            status=result.status,
        )
    base = source_base_url(source, result)
    return Source(parse_llms_txt(result.text, base_url=base), result.text, result, base)


def directory_listing(root: Path) -> LlmsTxt:
    """An llms.txt equivalent for a folder of markdown: one link per page, sectioned by top folder."""
    lines = [f"# {root.name}", ""]
    current = None
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in PAGE_SUFFIXES):
        rel = path.relative_to(root)
        if rel.name.lower() in ("llms.txt", "llms-full.txt"):
            continue
        section = rel.parts[0] if len(rel.parts) > 1 else "Pages"
        if section != current:
            lines += ["", f"## {section}", ""]
            current = section
        lines.append(f"- [{rel.stem}]({rel.as_posix()})")
    listing = parse_llms_txt("\n".join(lines) + "\n", base_url=root.resolve().as_uri() + "/")
    # The listing is docbundle's own, not the library's: its deviations from the spec (relative links, no
    # summary) say nothing about the source, and would be reported on every build of the folder.
    return msgspec.structs.replace(listing, issues=[])
