"""The config (``bundles/libraries.toml``): adding a library is a config entry and nothing else.

Decoded with msgspec; every table forbids unknown keys so a typo is an error that names the library and
the key, not a silently ignored setting. See ``docs/configuration.md`` for every key.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit
from urllib.request import url2pathname

import msgspec
from docbundle.bundle.layout import LIBRARY_ID_RE, LIBRARY_ID_RULE, VERSION_RE, VERSION_RULE
from docbundle.bundle.manifest import ChunkingInfo, LibraryInfo, SearchSettings, VersionInfo

from .errors import ConfigError
from .pipeline.crawl import CrawlOptions
from .pipeline.scope import HostRule

_FIELD_RE = re.compile(r"at `\$((?:\.[A-Za-z_][\w]*|\[\d+\])*)`")

#: The catalogue's taxonomy: every ``category`` of the shipped ``bundles/libraries.toml`` is one of these
#: (``docbundle-index check`` holds it to them; docs/configuration.md lists them). Small on purpose: a
#: user filters ``list_libraries`` and ``pull --list`` by category, and sixteen words can be learnt at a
#: glance, where the lists the catalogue came from had hundreds. A config of one's own may use any word.
CATEGORIES: dict[str, str] = {
    "languages": "programming languages, runtimes and general-purpose libraries of a language",
    "web-frameworks": "web application frameworks, front and back end, and their state and data layers",
    "ui": "component libraries, CSS frameworks, design systems, editors and charts",
    "mobile": "mobile, desktop and game development",
    "ai": "model APIs, agent frameworks, LLM tooling, evaluation and speech",
    "data": "data engineering, analytics, notebooks, scraping and data APIs",
    "databases": "databases, ORMs, sync engines, vector and search engines",
    "cloud": "cloud platforms, hosting, serverless, storage and sandboxes",
    "devops": "CI/CD, infrastructure as code, containers, monitoring and observability",
    "developer-tools": "editors, build tools, linters, testing, docs tooling, feature flags, workflow engines",
    "apis": "SaaS APIs: messaging, email, maps, video, integrations, productivity",
    "payments": "payments, billing, banking and commerce",
    "security": "authentication, authorization, identity, secrets and application security",
    "content": "CMSs, documents, images and video",
    "blockchain": "chains, wallets, web3 SDKs and on-chain data",
    "specifications": "protocols, standards and specifications",
}


class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    pass


class ChunkingConfig(_Strict, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """How pages are split into search units."""

    max_depth: int = 3
    min_words: int = 60
    max_words: int = 500

    def __post_init__(self) -> None:
        if not 1 <= self.max_depth <= 6:
            raise ValueError("max_depth must be between 1 and 6")
        if self.min_words < 0 or self.max_words < 50 or self.min_words > self.max_words:
            raise ValueError("need 0 <= min_words <= max_words and max_words >= 50")

    def info(self) -> ChunkingInfo:
        """The manifest record of these settings."""
        return ChunkingInfo(max_depth=self.max_depth, min_words=self.min_words, max_words=self.max_words)


#: ``follow.max_pages``: its default, and the hard maximum a config may set.
FOLLOW_DEFAULT_PAGES = 100
FOLLOW_MAX_PAGES = 1000
#: ``follow.depth``: the deepest a config may set.
FOLLOW_MAX_DEPTH = 5
_PREFIX_RE = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*\Z")


class FollowConfig(_Strict, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """``follow``: crawl the pages the llms.txt's pages link, on its origin, under ``prefix``."""

    depth: int = 1
    prefix: str = "/"
    max_pages: int = FOLLOW_DEFAULT_PAGES


class VersionConfig(_Strict, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """One documentation version of a library."""

    name: str
    llms_txt: str
    status: Literal["active", "deprecated", "eol"] = "active"
    latest: bool = False
    lts: bool = False


class LibraryConfig(_Strict, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """One ``[[library]]`` entry."""

    id: str
    name: str = ""
    description: str = ""
    category: str = ""
    llms_txt: str | None = None
    version: list[VersionConfig] = []
    include: list[str] = []
    exclude: list[str] = []
    section_weights: dict[str, float] = {}
    synonyms: list[list[str]] = []
    max_pages: int = 5000
    keep: int | None = None
    chunking: ChunkingConfig = ChunkingConfig()
    crawl: dict[str, Any] = {}
    allow_hosts: list[str] = []
    local_root: str | None = None
    follow: FollowConfig | None = None
    site_url: str | None = None  # a local source's public address: documents get absolute URLs under it
    semantic: bool = True  # embed every chunk for semantic search when the extra is installed (issue 21)

    @property
    def display_name(self) -> str:
        """The configured name, or the id when none is given."""
        return self.name or self.id

    def search(self) -> SearchSettings:
        """The manifest record of the search settings."""
        return SearchSettings(
            section_weights=dict(self.section_weights), synonyms=[list(s) for s in self.synonyms]
        )

    def info(self) -> LibraryInfo:
        """The manifest record of the library."""
        return LibraryInfo(
            id=self.id, name=self.display_name, description=self.description, category=self.category
        )


class Defaults(_Strict, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """``[defaults]``: settings every library inherits unless it sets its own."""

    keep: int = 3
    crawl: dict[str, Any] = {}


class _File(_Strict, forbid_unknown_fields=True, frozen=True, kw_only=True):
    defaults: Defaults = Defaults()
    library: list[dict[str, Any]] = []


class Target(msgspec.Struct, frozen=True):
    """One (library, version) pair to build, with its resolved source."""

    library: LibraryConfig
    version: VersionInfo
    source: str  # an http(s) URL, or an absolute local path (file or directory)
    crawl: CrawlOptions
    keep: int
    label: str = ""  # the source as written in the config (recorded in manifests instead of local paths)
    local_root: str | None = None  # absolute: the folder local file links may read (None: the source's)


class Config(msgspec.Struct, frozen=True):
    """The decoded config (``libraries.toml``): its defaults and its valid libraries."""

    path: Path
    defaults: Defaults
    libraries: list[LibraryConfig]

    def get(self, library_id: str) -> LibraryConfig:
        """The library with this id, or ConfigError naming the known ids."""
        for lib in self.libraries:
            if lib.id == library_id:
                return lib
        known = ", ".join(lib.id for lib in self.libraries) or "(none)"
        raise ConfigError(f"{self.path}: no library {library_id!r}; configured: {known}")

    def targets(self, library: LibraryConfig) -> list[Target]:
        """The versions of ``library`` to build, sources resolved against the config file's folder."""
        crawl = _crawl_options(self.path, library, {**self.defaults.crawl, **library.crawl})
        keep = library.keep if library.keep is not None else self.defaults.keep
        root = _local_root(self.path, library)
        if library.llms_txt is not None:
            src = library.llms_txt
            return [Target(library, VersionInfo(), _resolve(self.path, src), crawl, keep, src, root)]
        return [
            Target(
                library,
                VersionInfo(name=v.name, status=v.status, latest=v.latest, lts=v.lts),
                _resolve(self.path, v.llms_txt),
                crawl,
                keep,
                v.llms_txt,
                root,
            )
            for v in library.version
        ]


def _where(config: Path, entry: int, lib_id: object) -> str:
    name = f"library {lib_id!r}" if isinstance(lib_id, str) and lib_id else f"library #{entry + 1}"
    return f"{config}: {name}"


def _key_of(message: str) -> tuple[str, str]:
    """Split a msgspec message into (what is wrong, dotted key path)."""
    m = _FIELD_RE.search(message)
    key = m.group(1).lstrip(".").replace("[", ".").replace("]", "") if m else ""
    msg = message[: m.start()].rstrip(" -") if m else message
    if msg.startswith("Object contains unknown field"):
        field = msg.split("`")[1] if "`" in msg else "?"
        key = f"{key}.{field}" if key else field
        msg = _unknown(field)
    return msg, key


def _known_keys() -> list[str]:
    """Every key a config table can hold (the vocabulary of "did you mean")."""
    tables = (_File, Defaults, LibraryConfig, VersionConfig, ChunkingConfig, FollowConfig, CrawlOptions)
    return sorted({f.encode_name for t in tables for f in msgspec.structs.fields(t)})


#: The tables of the file, by the name the docs give them: where a key that is misplaced belongs.
_TABLES: tuple[tuple[str, type[msgspec.Struct]], ...] = (
    ("[[library]]", LibraryConfig),
    ("[defaults]", Defaults),
    ("[[library.version]]", VersionConfig),
)


def _misplaced(key: str) -> str:
    """The message for a key at the top of the file: where it belongs, when some table holds it."""
    homes = [name for name, table in _TABLES if key in {f.encode_name for f in msgspec.structs.fields(table)}]
    if not homes:
        return f"key {key!r}: {_unknown(key)}"
    where = " or ".join(f"a {name} table" if name.startswith("[[") else name for name in homes)
    hint = " (each library starts with a [[library]] line above its keys)" if "[[library]]" in homes else ""
    return f"key {key!r} belongs inside {where}, not at the top of the file{hint}"


def _unknown(key: str) -> str:
    """The message for an unknown key, with the closest known key when one is close (never itself: a
    known key in the wrong table is reported where it is found, by ``_misplaced``)."""
    close = difflib.get_close_matches(key, [k for k in _known_keys() if k != key], n=1, cutoff=0.75)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    return "unknown key (check the spelling against docs/configuration.md)"


def _problems(path: Path, problems: list[str]) -> ConfigError:
    """One error reporting every problem found (one per line when several)."""
    if len(problems) == 1:
        return ConfigError(problems[0])
    return ConfigError(f"{path}: {len(problems)} problems:\n  " + "\n  ".join(problems))


def _resolve(config: Path, source: str) -> str:
    scheme = urlsplit(source).scheme.lower()
    if scheme in ("http", "https"):
        return source
    if scheme == "file":
        return source
    return str((config.parent / source).resolve())


def _local_root(config: Path, lib: LibraryConfig) -> str | None:
    """The library's ``local_root`` as an absolute path; ConfigError unless it holds every local source."""
    if lib.local_root is None:
        return None
    where = f"{config}: library {lib.id!r}: key 'local_root'"
    root = (config.parent / lib.local_root).resolve()
    sources = [lib.llms_txt] if lib.llms_txt is not None else [v.llms_txt for v in lib.version]
    for src in sources:
        parts = urlsplit(src)
        if parts.scheme.lower() in ("http", "https"):
            raise ConfigError(f"{where}: a remote llms.txt ({src}) reads no local files; remove local_root")
        path = Path(url2pathname(parts.path)) if parts.scheme.lower() == "file" else config.parent / src
        if not path.resolve().is_relative_to(root):
            raise ConfigError(f"{where}: {lib.local_root!r} must be a folder holding the llms.txt {src!r}")
    return str(root)


def _crawl_options(config: Path, lib: LibraryConfig, raw: dict[str, Any]) -> CrawlOptions:
    try:
        return msgspec.convert(raw, CrawlOptions)
    except msgspec.ValidationError as exc:
        msg, key = _key_of(str(exc))
        raise ConfigError(f"{config}: library {lib.id!r}: crawl.{key or '?'}: {msg}") from exc


def _check_library(config: Path, i: int, lib: LibraryConfig, seen: set[str]) -> None:
    where = _where(config, i, lib.id)
    if not LIBRARY_ID_RE.match(lib.id):
        raise ConfigError(f"{where}: key 'id': {lib.id[:80]!r} is not a library id: {LIBRARY_ID_RULE}")
    if lib.id in seen:
        raise ConfigError(f"{where}: key 'id': duplicate library id")
    seen.add(lib.id)
    if (lib.llms_txt is None) == (not lib.version):
        raise ConfigError(f"{where}: give either 'llms_txt' or one or more [[library.version]] tables")
    sources = [lib.llms_txt] if lib.llms_txt is not None else [v.llms_txt for v in lib.version]
    if lib.site_url is not None:
        site = urlsplit(lib.site_url)
        if site.scheme not in ("http", "https") or not site.netloc or site.query or site.fragment:
            raise ConfigError(f"{where}: key 'site_url': {lib.site_url!r} must be an http(s) URL of a folder")
        if any(urlsplit(src).scheme.lower() in ("http", "https") for src in sources):
            raise ConfigError(f"{where}: key 'site_url': a remote llms.txt's pages have their own URLs")
    for src in sources:
        try:
            scheme = urlsplit(src).scheme.lower()
        except ValueError as exc:
            raise ConfigError(f"{where}: key 'llms_txt': {src!r} is not a valid URL ({exc})") from exc
        if not src.strip() or (scheme not in ("", "http", "https", "file") and len(scheme) > 1):
            raise ConfigError(f"{where}: key 'llms_txt': {src!r} is not an http(s) URL, file: URL or path")
    names = [v.name for v in lib.version]
    for v in lib.version:
        if not VERSION_RE.match(v.name):
            raise ConfigError(
                f"{where}: key 'version.name': {v.name[:80]!r} is not a version name: {VERSION_RULE}"
            )
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: key 'version.name': duplicate version names")
    if lib.version and sum(v.latest for v in lib.version) > 1:
        raise ConfigError(f"{where}: key 'version.latest': only one version can be latest")
    if lib.keep is not None and lib.keep < 1:
        raise ConfigError(f"{where}: key 'keep': must be at least 1")
    if lib.max_pages < 1:
        raise ConfigError(f"{where}: key 'max_pages': must be at least 1")
    for section, weight in lib.section_weights.items():
        if not 0 <= weight <= 10:
            raise ConfigError(f"{where}: key 'section_weights.{section}': weight must be within 0..10")
    if lib.follow is not None:
        _check_follow(where, lib.follow, sources)
    for i_host, host in enumerate(lib.allow_hosts):
        try:
            HostRule.parse(host)
        except ValueError as exc:
            raise ConfigError(f"{where}: key 'allow_hosts.{i_host}': {exc}") from exc


def _check_follow(where: str, follow: FollowConfig, sources: list[str]) -> None:
    if not 1 <= follow.depth <= FOLLOW_MAX_DEPTH:
        raise ConfigError(f"{where}: key 'follow.depth': must be between 1 and {FOLLOW_MAX_DEPTH}")
    if not 1 <= follow.max_pages <= FOLLOW_MAX_PAGES:
        raise ConfigError(f"{where}: key 'follow.max_pages': must be between 1 and {FOLLOW_MAX_PAGES}")
    segments = follow.prefix.split("/")
    if not _PREFIX_RE.match(follow.prefix) or "//" in follow.prefix or ".." in segments or "." in segments:
        raise ConfigError(
            f"{where}: key 'follow.prefix': {follow.prefix!r} must be a URL path starting with '/' "
            "(e.g. \"/docs/\"), without '..', '//', '?' or '#'"
        )
    for src in sources:
        if urlsplit(src).scheme.lower() not in ("http", "https"):
            raise ConfigError(f"{where}: key 'follow': only an http(s) llms.txt can have its links followed")


def load_config(path: Path) -> Config:
    """Read and validate a libraries.toml; raises ConfigError naming the library and key."""
    config, problems = decode_config(path)
    if problems:
        raise _problems(path, problems)
    return config


def decode_config(path: Path) -> tuple[Config, list[str]]:
    """The libraries of a libraries.toml that are valid, and one line per problem of the others (the
    offline check reports both); ConfigError when the file as a whole cannot be read."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: config file not found") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    top_keys = {f.encode_name for f in msgspec.structs.fields(_File)}
    misplaced = [f"{path}: {_misplaced(k)}" for k in raw if k not in top_keys]
    if misplaced:
        raise _problems(path, misplaced)
    try:
        top = msgspec.convert(raw, _File)
    except msgspec.ValidationError as exc:
        msg, key = _key_of(str(exc))
        raise ConfigError(f"{path}: {msg}" + (f" (key {key!r})" if key else "")) from exc
    # Every problem is collected and reported at once: a first run of a new config shows them all.
    problems: list[str] = []
    if top.defaults.keep < 1:
        problems.append(f"{path}: [defaults] key 'keep': must be at least 1")
    libraries: list[LibraryConfig] = []
    seen: set[str] = set()
    known = {f.encode_name for f in msgspec.structs.fields(LibraryConfig)}
    for i, entry in enumerate(top.library):
        where = _where(path, i, entry.get("id"))
        unknown = [f"{where}: key {k!r}: {_unknown(k)}" for k in entry if k not in known]
        if unknown:
            problems += unknown
            continue
        try:
            lib = msgspec.convert(entry, LibraryConfig)
        except msgspec.ValidationError as exc:
            msg, key = _key_of(str(exc))
            problems.append(f"{where}: key {key!r}: {msg}")
            continue
        try:
            _check_library(path, i, lib, seen)
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        libraries.append(lib)
    config = Config(path, top.defaults, libraries)
    for lib in libraries:
        try:
            config.targets(lib)  # validates the crawl options early
        except ConfigError as exc:
            problems.append(str(exc))
    return config, problems
