"""``docbundle-index check``: the offline check of a library catalogue, before anything is fetched.

``build`` and ``nightly`` already refuse a config that does not decode (unknown keys, bad ids, bad
values). A shipped catalogue of hundreds of libraries is held to more, so that what ``pull --list`` and
``list_libraries`` offer is consistent and each site is built once a night:

- every library has a ``name`` (what listings show) and a ``category`` from the taxonomy
  (``config.CATEGORIES``), so a user can filter by it, and an id that is not one of the repository's
  own folders of ``bundles/`` (``RESERVED_IDS``);
- every remote source is an ``https`` URL with a host (a local path, like the demo library's, is fine);
- no two entries name the same site: the same host (a leading ``www.`` aside) and path, where
  ``llms-full.txt`` counts as the ``llms.txt`` beside it. Two entries for one site would build it twice
  each night and show one library under two ids; a new version of a library is a ``[[library.version]]``
  table of it, with a URL that pins the version.

Nothing here touches the network: the check reads the file and nothing else. Every problem is one line
naming the file, the library and the key, and what to do.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import msgspec

from .config import CATEGORIES, Config, LibraryConfig, decode_config

#: Folders of the repository's ``bundles/`` that are not libraries (``nightly`` builds into ``bundles/<id>``
#: by default): a library of that id would mix its bundles with them.
RESERVED_IDS = ("catalogue", "golden")
#: The names a site's whole-docs file goes by; each counts as the ``llms.txt`` in its folder.
FULL_NAMES = ("llms-full.txt",)
_DEFAULT_PORTS = {"https": 443, "http": 80}


class CheckReport(msgspec.Struct, kw_only=True):
    """What ``check`` found: the counts of a catalogue and one line per problem."""

    config: str
    libraries: int
    versions: int
    categories: dict[str, int]
    problems: list[str]


def site_key(source: str, config: Path) -> str:
    """What identifies the site a source is: ``host/path`` for a URL (lower-case host without ``www.``,
    the default port dropped, ``llms-full.txt`` read as ``llms.txt``, no trailing ``/``, no query or
    fragment), the resolved path for a local source."""
    parts = urlsplit(source)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        host = (parts.hostname or "").removeprefix("www.")
        try:
            port = parts.port
        except ValueError:
            port = None
        if port is not None and port != _DEFAULT_PORTS[scheme]:
            host = f"{host}:{port}"
        folder, name = posixpath.split(parts.path.rstrip("/"))
        if name in FULL_NAMES:
            name = "llms.txt"
        return f"{host}{posixpath.join(folder, name) if name else folder}"
    if scheme == "file":
        return str(Path(url2pathname(parts.path)).resolve())
    return str((config.parent / source).resolve())


def _sources(lib: LibraryConfig) -> list[tuple[str, str]]:
    """``(where, source)`` for each source of a library: its ``llms_txt``, or each version's (``where``
    names the key, and the version)."""
    if lib.llms_txt is not None:
        return [("key 'llms_txt'", lib.llms_txt)]
    return [(f"version {v.name!r}: key 'llms_txt'", v.llms_txt) for v in lib.version]


def _source_problem(source: str) -> str | None:
    """Why a source cannot be in the shipped catalogue, or None."""
    parts = urlsplit(source)
    scheme = parts.scheme.lower()
    if scheme == "https":
        return None if parts.hostname else f"{source!r} has no host"
    if scheme == "http":
        return f"{source!r} is not https; the catalogue is fetched over https only (write https://)"
    if scheme == "file":
        return f"{source!r} is a file: URL, a path of one machine; write a path relative to the config file"
    return None  # a path relative to the config file (the demo library's docs)


def library_problems(config: Path, lib: LibraryConfig) -> list[str]:
    """The problems of one decoded library: its name, its category, its sources' schemes."""
    where = f"{config}: library {lib.id!r}"
    problems = []
    if lib.id in RESERVED_IDS:
        problems.append(
            f"{where}: key 'id': {lib.id!r} is the name of a folder of bundles/ ({', '.join(RESERVED_IDS)}), "
            "where nightly builds each library; choose another id"
        )
    if not lib.name.strip():
        problems.append(f"{where}: key 'name': missing; give the name listings show (name = \"...\")")
    if lib.category not in CATEGORIES:
        wrong = f"{lib.category[:80]!r} is not in the taxonomy" if lib.category else "missing"
        problems.append(
            f"{where}: key 'category': {wrong}; use one of {', '.join(CATEGORIES)} (docs/configuration.md)"
        )
    for key, source in _sources(lib):
        problem = _source_problem(source)
        if problem:
            problems.append(f"{where}: {key}: {problem}")
    return problems


def duplicate_sites(config: Config) -> list[str]:
    """One problem per source whose site an earlier entry (or an earlier version) already names."""
    first: dict[str, tuple[str, str]] = {}  # site key -> (library id, the source as written)
    problems = []
    for lib in config.libraries:
        for key, source in _sources(lib):
            site = site_key(source, config.path)
            if site not in first:
                first[site] = (lib.id, source)
                continue
            owner, written = first[site]
            whose = "another version of this library" if owner == lib.id else f"library {owner!r}"
            problems.append(
                f"{config.path}: library {lib.id!r}: {key}: {source!r} is the site {whose} already "
                f"names ({written!r}); list each site once (a new version is a [[library.version]] whose URL "
                "pins it)"
            )
    return problems


def check_config(path: Path) -> CheckReport:
    """Check a catalogue offline; ConfigError when the file as a whole cannot be read."""
    config, problems = decode_config(path)
    for lib in config.libraries:
        problems += library_problems(path, lib)
    problems += duplicate_sites(config)
    categories: dict[str, int] = {}
    for lib in config.libraries:
        categories[lib.category] = categories.get(lib.category, 0) + 1
    return CheckReport(
        config=str(path),
        libraries=len(config.libraries),
        versions=sum(len(_sources(lib)) for lib in config.libraries),
        categories=dict(sorted(categories.items())),
        problems=problems,
    )


def render_check(report: CheckReport) -> str:
    """The report as ``check`` prints it: one line per problem, then one line of counts."""
    lines = list(report.problems)
    counts = f"{report.libraries} libraries, {report.versions} versions, {len(report.categories)} categories"
    if report.problems:
        lines.append(f"{report.config}: {len(report.problems)} problem(s) among {counts}")
    else:
        lines.append(f"{report.config}: {counts}: no problems")
    return "\n".join(lines) + "\n"
