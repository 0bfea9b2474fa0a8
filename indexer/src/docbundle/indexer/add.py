"""``docbundle-index add URL``: look at a site's llms.txt, then add it to the catalogue as a library.

``survey`` fetches the llms.txt with the crawler (the same address policy as a build: the llms.txt's own
origin and ``--allow-host`` hosts are exempted, nothing else private or loopback is reached), parses it,
and fetches up to ``probe`` of the pages it links to tell how many come as markdown and how many as HTML
(converted at build time), and which failed. A URL that answers with an HTML page (a site's root) costs
at most one more request: ``/llms.txt`` on the same origin, to say whether the site publishes one.
``append_entry`` adds a ``[[library]]`` table to ``libraries.toml`` with tomlkit, so every comment,
blank line and key order of the file stays as it was; the new file is validated with ``load_config``
before it replaces the old one (atomically), and a file that would not load is never written.
``append_version`` adds a ``[[library.version]]`` to a listed library instead, when the llms.txt is a
new version of it (``version_home``: the title names a version the library lacks, same host).
``remove_entry`` puts the file back as it was (``add --build`` when the build fails). The id, version
and description come from ``naming``.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from collections.abc import Collection
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import msgspec
import tomlkit
from docbundle.bundle.layout import LIBRARY_ID_RE, LIBRARY_ID_RULE
from docbundle.common.terminal import printable

from .config import Config, LibraryConfig, load_config
from .errors import ConfigError, FetchError
from .naming import MAX_DESCRIPTION, derive_id, description_from, title_version, unique_id
from .pipeline.crawl import CrawlOptions, crawl, fetch_one
from .pipeline.llmstxt import parse_llms_txt
from .pipeline.scope import CrawlScope, HostRule

DEFAULT_PROBE = 20
MAX_PROBE = 200
_HEADER = (
    "# The docbundle library catalogue: one [[library]] table per library (docs/configuration.md).\n"
    "# Created by docbundle-index add.\n"
)


class SectionSummary(msgspec.Struct, kw_only=True):
    """One H2 section of the llms.txt and how many links it holds."""

    name: str
    links: int
    optional: bool


class ProbeFailure(msgspec.Struct, kw_only=True):
    """A probed page that could not be fetched: its HTTP status, else the kind of failure."""

    url: str
    status: int | None
    kind: str
    error: str

    def brief(self) -> str:
        """``HTTP 404``, or the kind and reason of a failure without a status (``refused: ...``)."""
        if self.status is not None and self.status >= 400:
            return f"HTTP {self.status}"
        return f"{self.kind}: {_clip(self.error, 100)}"


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
    failures: list[ProbeFailure]
    deviations: list[str]

    @property
    def all_failed(self) -> bool:
        """Pages were probed and not one of them could be fetched."""
        return self.probed > 0 and self.failed == self.probed


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
    try:
        fetched = fetch_one(url, scope=scope, options=options)
    except FetchError as exc:
        if exc.kind != "content-type":
            raise
        raise FetchError(url, _not_an_llms_txt(url, scope, options)) from exc
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
        failures=[
            ProbeFailure(url=r.url, status=r.status, kind=r.error_kind or "error", error=r.error or "failed")
            for r in results
            if not r.ok
        ],
        deviations=sorted({issue.code for issue in parsed.issues if issue.deviation}),
    )


def _not_an_llms_txt(url: str, scope: CrawlScope, options: CrawlOptions) -> str:
    """Why an HTML page at ``url`` is not read, and where the site's llms.txt is when it publishes one at
    ``/llms.txt`` on the same origin (asked with one request: no retry, no redirect)."""
    parts = urlsplit(url)
    root = urlunsplit((parts.scheme, parts.netloc, "/llms.txt", "", ""))
    said = "this is an HTML page, not an llms.txt (an llms.txt served as HTML is not read)"
    if root == url:
        return f"{said}; ask the site where its llms.txt is"
    once = msgspec.structs.replace(options, retries=0, max_redirects=0)
    try:
        found = fetch_one(root, scope=scope, options=once)
    except FetchError as exc:
        return (
            f"{said}; the site has no llms.txt at {root} either (tried once: {printable(exc.reason, 200)}); "
            "ask the site where its llms.txt is"
        )
    parsed = parse_llms_txt(found.text or "", base_url=found.final_url)
    if not parsed.links and not parsed.inline_docs:
        return f"{said}; {root} answers (tried once) but lists no pages; ask the site where its llms.txt is"
    return f"{said}; the site publishes {root} (tried once): run docbundle-index add {root}"


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


def render_all_failed(s: Survey, shown: int = 5) -> str:
    """Why nothing was added when every probed page failed: each page's status, and what to do."""
    which = "the" if s.probed == s.links else f"the first {s.probed} of {s.links}"
    lines = [f"not one of {which} pages probed could be fetched, so nothing was added:"]
    lines += [f"  {printable(f.url, 200)}: {printable(f.brief(), 200)}" for f in s.failures[:shown]]
    if len(s.failures) > shown:
        lines.append(f"  ... and {len(s.failures) - shown} more (see --json)")
    lines.append(
        f"check the llms.txt's links (relative ones resolve against {printable(s.final_url, 200)}); pages on "
        "a private or loopback host need --allow-host HOST; then run add again"
    )
    return "\n".join(lines)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class IdChoice(msgspec.Struct, frozen=True, kw_only=True):
    """The id ``add`` picked when none was given, the one it wanted (``wanted`` != ``id`` when taken),
    and what it came from ("title", "host name" or "default")."""

    id: str
    wanted: str
    source: str


def choose_id(s: Survey, taken: Collection[str]) -> IdChoice:
    """The id users would type (from the title, else the host), made unique among ``taken``."""
    # printable first: an escape sequence's letters are not the title's.
    wanted, source = derive_id(printable(s.title or "", 200), s.final_url)
    return IdChoice(id=unique_id(wanted, taken), wanted=wanted, source=source)


def configured(config: Path) -> Config | None:
    """The catalogue at ``config``, None when there is no file; ConfigError when it does not load."""
    return load_config(config) if config.exists() else None


def _listing(config: Config, url: str) -> LibraryConfig | None:
    """The library whose llms.txt (or one of whose versions') is ``url``."""
    for lib in config.libraries:
        if url in ([lib.llms_txt] if lib.llms_txt is not None else [v.llms_txt for v in lib.version]):
            return lib
    return None


class Added(msgspec.Struct, frozen=True, kw_only=True):
    """What ``append_entry`` wrote: the new text, the file's text before (None: there was no file), and
    the version the entry names (None: the single version ``latest``)."""

    text: str
    previous: str | None
    version: str | None


def append_entry(
    config: Path, s: Survey, library_id: str, *, allow_hosts: list[str] | None = None, write: bool = True
) -> Added:
    """Append a ``[[library]]`` entry to ``config`` (created when missing).

    The text is loaded with ``load_config`` before anything is written; ``write=False`` only checks. A URL
    already in the catalogue is refused first, naming its library (another id would not make it new).
    """
    try:
        previous: str | None = config.read_text(encoding="utf-8")
    except FileNotFoundError:
        previous = None
    loaded = configured(config) if previous is not None else None  # refuse to edit one that fails
    if loaded is not None:
        listed = _listing(loaded, s.url) or _listing(loaded, s.final_url)
        if listed is not None:
            raise ConfigError(
                f"{config} already lists {s.url} as library {listed.id!r}, so it is configured already "
                f"(another --id would not make it a new library). To rebuild it: docbundle-index build "
                f"--config {config} --library {listed.id}; to change it, edit that entry"
            )
    if not LIBRARY_ID_RE.fullmatch(library_id):
        raise ConfigError(f"{library_id[:80]!r} is not a library id: {LIBRARY_ID_RULE}")
    if loaded is not None and library_id in {lib.id for lib in loaded.libraries}:
        raise ConfigError(f"{config} already has a library {library_id!r}; pass --id to choose another")
    original = (
        _HEADER if previous is None else previous + ("" if previous.endswith("\n") or not previous else "\n")
    )
    try:
        doc = tomlkit.parse(original)
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(f"{config}: not valid TOML: {exc}") from exc
    table = tomlkit.table()
    table.add("id", library_id)
    # The catalogue keeps the site's words as they will be shown: no control characters.
    if s.title and printable(s.title, 100).strip():
        table.add("name", _clip(printable(s.title, 100), 100))
    description = description_from(printable(s.summary or "", 4 * MAX_DESCRIPTION))
    if description:
        table.add("description", description)
    version = title_version(printable(s.title or "", 200))
    if version is None:
        table.add("llms_txt", s.url)
    if allow_hosts:
        table.add("allow_hosts", list(allow_hosts))
    if version is not None:
        # A library whose title names its version gets it as a [[library.version]]: "latest" would hide it.
        entry = tomlkit.table()
        entry.add("name", version)
        entry.add("llms_txt", s.url)
        versions = tomlkit.aot()
        versions.append(entry)
        table.add("version", versions)
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
    return Added(text=text, previous=previous, version=version)


def version_home(config: Config | None, s: Survey, library_id: str | None) -> LibraryConfig | None:
    """The listed library that ``s`` is another version of, or None (then it is a library of its own).

    It is when the llms.txt's title names a version (``Django 4.2 documentation``) and a library that title
    names (its id, or the ``-2``, ``-3`` ... add gave a namesake; or ``--id``) is listed with
    ``[[library.version]]`` tables, one of them served from the same host and none of them that version:
    a second release of the same docs, not a namesake.
    """
    version = title_version(printable(s.title or "", 200))
    if config is None or version is None or _listing(config, s.url) or _listing(config, s.final_url):
        return None  # a listed URL is refused by append_entry, naming its library
    if library_id is not None:
        named = [lib for lib in config.libraries if lib.id == library_id]
    else:  # the title's id, or the "-2", "-3" ... that add gave a namesake of it
        wanted = derive_id(printable(s.title or "", 200), s.final_url)[0]
        namesake = re.compile(re.escape(wanted) + r"(?:-[0-9]+)?\Z")
        named = [lib for lib in config.libraries if namesake.match(lib.id)]
    host = _host(s.url)
    for lib in named:
        if lib.version and any(_host(v.llms_txt) == host for v in lib.version):
            return None if version in {v.name for v in lib.version} else lib
    return None


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def append_version(
    config: Path, s: Survey, library_id: str, *, allow_hosts: list[str] | None = None, write: bool = True
) -> Added:
    """Add ``s`` as a ``[[library.version]]`` of the listed library ``library_id`` (see ``version_home``),
    its version from the title; checked with ``load_config`` and written atomically, like ``append_entry``."""
    previous = config.read_text(encoding="utf-8")
    version = title_version(printable(s.title or "", 200))
    if version is None:
        raise ConfigError(f"{s.url}: its title names no version, so it cannot be added as one")
    try:
        doc = tomlkit.parse(previous)
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(f"{config}: not valid TOML: {exc}") from exc
    libraries = doc.get("library")
    table = next((t for t in libraries or [] if isinstance(t, dict) and t.get("id") == library_id), None)
    versions = table.get("version") if table is not None else None
    if table is None or not isinstance(versions, tomlkit.items.AoT):
        raise ConfigError(f"{config}: library {library_id!r} has no [[library.version]] tables to add to")
    entry = tomlkit.table()
    entry.add("name", version)
    entry.add("llms_txt", s.url)
    versions.append(entry)
    if allow_hosts:
        listed = table.get("allow_hosts")
        if listed is None:
            table["allow_hosts"] = list(allow_hosts)
        else:
            listed.extend(h for h in allow_hosts if h not in listed)
    text = tomlkit.dumps(doc)
    _check(config, text)
    if write:
        _replace(config, text)
    return Added(text=text, previous=previous, version=version)


def remove_entry(config: Path, added: Added) -> bool:
    """Put ``config`` back as it was before ``added`` (removed when add created it); False, changing
    nothing, when the file no longer holds what add wrote (someone edited it since)."""
    try:
        if config.read_text(encoding="utf-8") != added.text:
            return False
    except FileNotFoundError:
        return False
    if added.previous is None:
        config.unlink()
    else:
        _replace(config, added.previous)
    return True


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
