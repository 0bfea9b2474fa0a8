"""``docbundle-index add URL``: look at a site's llms.txt, then add it to the catalogue as a library.

``survey`` fetches the llms.txt with the crawler (the same address policy as a build: the llms.txt's own
origin and ``--allow-host`` hosts are exempted, nothing else private or loopback is reached), parses it,
and fetches up to ``probe`` of the pages it links to tell how many come as markdown and how many as HTML
(converted at build time). ``append_entry`` adds a ``[[library]]`` table to ``libraries.toml`` with
tomlkit, so every comment, blank line and key order of the file stays as it was; the new file is
validated with ``load_config`` before it replaces the old one (atomically), and a file that would not
load is never written.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
import unicodedata
from pathlib import Path
from urllib.parse import urlsplit

import msgspec
import tomlkit
from docbundle.bundle.layout import LIBRARY_ID_RE
from docbundle.server.terminal import printable

from .config import load_config
from .errors import ConfigError
from .pipeline.crawl import CrawlOptions, crawl, fetch_one
from .pipeline.llmstxt import parse_llms_txt
from .pipeline.scope import CrawlScope, HostRule

DEFAULT_PROBE = 20
MAX_PROBE = 200
MAX_DESCRIPTION = 200
_HEADER = (
    "# The docbundle library catalogue: one [[library]] table per library (docs/configuration.md).\n"
    "# Created by docbundle-index add.\n"
)


class SectionSummary(msgspec.Struct, kw_only=True):
    """One H2 section of the llms.txt and how many links it holds."""

    name: str
    links: int
    optional: bool


class Survey(msgspec.Struct, kw_only=True):
    """What ``add`` found at the URL (``--json`` prints it)."""

    url: str
    final_url: str
    title: str | None
    summary: str | None
    kind: str  # "index" (links) or "full" (pages inline, llms-full.txt style)
    sections: list[SectionSummary]
    links: int
    inline_docs: int
    probed: int
    markdown: int
    html: int
    failed: int
    deviations: list[str]


def survey(
    url: str, *, allow_hosts: list[str] | None = None, probe: int = DEFAULT_PROBE, timeout: float = 20.0
) -> Survey:
    """Fetch and parse the llms.txt at ``url`` and probe up to ``probe`` linked pages."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{url[:200]!r}: give the http(s) address of an llms.txt")
    hosts = list(allow_hosts or [])
    for host in hosts:
        try:
            HostRule.parse(host)
        except ValueError as exc:
            raise ConfigError(f"--allow-host {host!r}: {exc}") from exc
    scope = CrawlScope.for_source(url, hosts)
    options = CrawlOptions(timeout=timeout, retries=1)
    fetched = fetch_one(url, scope=scope, options=options)
    parsed = parse_llms_txt(fetched.text or "", base_url=fetched.final_url)
    links = list(dict.fromkeys(link.url for link in parsed.links))
    sample = links[: max(0, min(probe, MAX_PROBE))]
    results = asyncio.run(crawl(sample, scope=scope, options=options)) if sample else []
    ok = [r for r in results if r.ok]
    return Survey(
        url=url,
        final_url=fetched.final_url,
        title=parsed.title,
        summary=parsed.summary,
        kind=parsed.kind,
        sections=[
            SectionSummary(
                name=s.name or "(before the first heading)", links=len(s.links), optional=s.optional
            )
            for s in parsed.sections
            if s.links
        ],
        links=len(links),
        inline_docs=len(parsed.inline_docs),
        probed=len(results),
        markdown=sum(r.obtained != "html" for r in ok),
        html=sum(r.obtained == "html" for r in ok),
        failed=len(results) - len(ok),
        deviations=sorted({issue.code for issue in parsed.issues}),
    )


def render_survey(s: Survey) -> str:
    """The survey as a person reads it (the site's words through ``printable``)."""
    lines = [f"{printable(s.title or '(no title)', 100)}  <{printable(s.final_url)}>"]
    if s.summary:
        lines.append(f"  > {printable(_clip(s.summary, 160), 160)}")
    if s.sections:
        shown = ", ".join(f"{printable(sec.name, 60)} ({sec.links})" for sec in s.sections[:12])
        more = f", and {len(s.sections) - 12} more" if len(s.sections) > 12 else ""
        lines.append(f"  sections: {shown}{more}")
    lines.append(f"  links: {s.links}" + (f"; pages inline: {s.inline_docs}" if s.inline_docs else ""))
    if s.probed:
        sampled = "" if s.probed == s.links else f" (the first {s.probed} of {s.links})"
        lines.append(
            f"  pages fetched{sampled}: {s.markdown} markdown, {s.html} HTML (converted when built), "
            f"{s.failed} failed"
        )
    if s.deviations:
        lines.append(f"  llms.txt deviations from the spec: {', '.join(s.deviations)}")
    return "\n".join(lines) + "\n"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def suggest_id(s: Survey) -> str:
    """A library id from the llms.txt's title, else from the host name."""
    title = printable(s.title or "", 200)  # an escape sequence's letters are not the title's
    for source in (title, urlsplit(s.final_url).hostname or ""):
        ascii_text = unicodedata.normalize("NFKD", source).encode("ascii", "ignore").decode()
        slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")[:64].strip("-")
        if source is not title:
            slug = re.sub(r"^(www|docs)-", "", slug)
        if slug and LIBRARY_ID_RE.fullmatch(slug):
            return slug
    return "library"


def append_entry(
    config: Path, s: Survey, library_id: str, *, allow_hosts: list[str] | None = None, write: bool = True
) -> str:
    """Append a ``[[library]]`` entry to ``config`` (created when missing); return the new file's text.

    The text is loaded with ``load_config`` before anything is written; ``write=False`` only checks.
    """
    if not LIBRARY_ID_RE.fullmatch(library_id):
        raise ConfigError(
            f"{library_id[:80]!r} is not a library id: lower-case letters, digits and '-', at most 64, "
            "starting with a letter or digit"
        )
    try:
        original = config.read_text(encoding="utf-8")
        original += "" if original.endswith("\n") or not original else "\n"
    except FileNotFoundError:
        original = _HEADER
    if config.exists():
        catalogue = load_config(config)  # refuse to edit a catalogue that does not load
        if library_id in {lib.id for lib in catalogue.libraries}:
            raise ConfigError(f"{config} already has a library {library_id!r}; pass --id to choose another")
        same = [lib.id for lib in catalogue.libraries if lib.llms_txt == s.url]
        if same:
            raise ConfigError(f"{config} already lists {s.url} as library {same[0]!r}")
    try:
        doc = tomlkit.parse(original)
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(f"{config}: not valid TOML: {exc}") from exc
    table = tomlkit.table()
    table.add("id", library_id)
    # The catalogue keeps the site's words as they will be shown: no control characters.
    if s.title and printable(s.title, 100).strip():
        table.add("name", _clip(printable(s.title, 100), 100))
    if s.summary and printable(s.summary, MAX_DESCRIPTION).strip():
        table.add("description", _clip(printable(s.summary, MAX_DESCRIPTION), MAX_DESCRIPTION))
    table.add("llms_txt", s.url)
    if allow_hosts:
        table.add("allow_hosts", list(allow_hosts))
    libraries = doc.get("library")
    if libraries is None:
        aot = tomlkit.aot()
        aot.append(table)
        doc.append("library", aot)
    elif isinstance(libraries, tomlkit.items.AoT):
        libraries.append(table)
    else:
        raise ConfigError(f"{config}: 'library' must be an array of [[library]] tables")
    text = tomlkit.dumps(doc)
    if text.startswith(original) and not original.endswith("\n\n") and original.strip():
        text = original + "\n" + text[len(original) :].lstrip("\n")  # a blank line before the new table
    _check(config, text)
    if write:
        _replace(config, text)
    return text


def _check(config: Path, text: str) -> None:
    """``load_config`` on the new text, from a file beside ``config`` (relative paths resolve the same)."""
    folder = config.parent if config.parent != Path("") else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".add-", suffix=".toml", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        load_config(Path(name))
    except ConfigError as exc:
        raise ConfigError(f"the new entry would make {config} invalid, so it was not written: {exc}") from exc
    finally:
        os.unlink(name)


def _replace(config: Path, text: str) -> None:
    fd, name = tempfile.mkstemp(prefix=".add-", suffix=".toml", dir=config.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(name, config.stat().st_mode & 0o777 if config.exists() else 0o644)
        os.replace(name, config)
    except BaseException:
        if os.path.exists(name):
            os.unlink(name)
        raise
