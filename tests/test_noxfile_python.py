"""nox runs on any supported Python and never skips silently; ``bundles`` and ``serve`` reuse their
virtualenv (issue 20 item 9).

Every session runs on one Python: the one running nox when it is 3.11-3.13, else the oldest of those on
PATH. A missing interpreter fails the run (exit 1) instead of skipping every session and exiting 0. The
choice is read from noxfile.py (tests/noxfilekit.py); what nox does with it is run with the real nox.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from noxfilekit import ROOT, load_noxfile

NOXFILE = load_noxfile()
RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.mark.parametrize(
    ("running", "on_path", "chosen"),
    [
        ((3, 11), [], "3.11"),  # CI: one run, on 3.11
        ((3, 12), [], "3.12"),  # a machine with only 3.12: the tests run on it
        ((3, 13), ["python3.11"], "3.13"),  # nox's own Python first
        ((3, 10), ["python3.13", "python3.12"], "3.12"),  # nox on an old Python: the oldest supported on PATH
        ((3, 14), [], "3.11"),  # nothing supported anywhere: 3.11, which is missing, so the run fails
    ],
)
def test_sessions_run_on_the_python_running_nox_when_supported(
    running: tuple[int, int], on_path: list[str], chosen: str
) -> None:
    found = {name: f"/bin/{name}" for name in on_path}
    assert NOXFILE.default_python(running, found.get) == chosen


def test_every_session_runs_on_that_one_python_and_a_missing_one_fails_the_run() -> None:
    sessions = {name: f for name, f in vars(NOXFILE).items() if hasattr(f, "nox_session")}
    assert {"tests", "lint", "typecheck", "bundles", "serve", "bench", "conformance"} <= set(sessions)
    assert {name: f.nox_session.get("python") for name, f in sessions.items()} == dict.fromkeys(
        sessions, RUNNING
    )
    assert NOXFILE.nox.options.error_on_missing_interpreters is True


def _nox(*args: str, envdir: Path) -> subprocess.CompletedProcess[str]:
    """The real nox on noxfile.py, its virtualenvs (none is made here) under ``envdir``."""
    return subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "--envdir", str(envdir), *args],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
    )  # fmt: skip


def test_nox_tests_is_one_run_on_this_python(tmp_path: Path) -> None:
    listed = _nox("-s", "tests", "--list", "--json", envdir=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [(s["name"], s["python"]) for s in json.loads(listed.stdout)] == [("tests", RUNNING)]


def test_a_missing_interpreter_fails_the_run_instead_of_skipping_it(tmp_path: Path) -> None:
    # As on a machine without the Python a session asks for: before, nox said "skipped" and exited 0.
    run = _nox("-s", "tests", "--force-python", "3.99", envdir=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Python interpreter 3.99 not found" in run.stderr and "skipped" not in run.stderr, run.stderr


class FakeSession:
    """What ``bundles`` and ``serve`` use of a nox session, recording installs and commands."""

    def __init__(self, venv: Path, posargs: list[str]) -> None:
        self.virtualenv = SimpleNamespace(location=str(venv))
        self.posargs = posargs
        self.installs: list[tuple[str, ...]] = []
        self.runs: list[tuple[str, ...]] = []
        self.run_options: list[dict[str, Any]] = []

    def install(self, *args: str) -> None:
        self.installs.append(args)

    def run(self, *args: str, **kwargs: Any) -> None:
        self.runs.append(args)
        self.run_options.append(kwargs)

    def log(self, *_args: Any) -> None:
        pass

    def create_tmp(self) -> str:
        return str(Path(self.virtualenv.location) / "tmp")

    def error(self, message: str) -> None:
        raise SessionError(message)


class SessionError(Exception):
    """``session.error``: nox stops the session with this message."""


def _locked(export: str) -> list[tuple[str, ...]]:
    """The installs of a session from the lock: the export with hashes, then docbundle without deps."""
    return [
        ("--require-hashes", "-r", f"requirements/{export}.txt"),
        ("--no-deps", "--no-build-isolation", *NOXFILE.PACKAGES),
    ]


@pytest.fixture(autouse=True)
def _locked_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read the default (the lock), even in the newest-releases job that sets DOCBUNDLE_DEPS."""
    monkeypatch.delenv(NOXFILE.DEPS_ENV, raising=False)


@pytest.mark.parametrize("name", ["bundles", "serve"])
def test_bundles_and_serve_install_into_their_reused_virtualenv_once(name: str, tmp_path: Path) -> None:
    session = getattr(NOXFILE, name)
    assert session.nox_session.get("reuse_venv") is True
    first, second = FakeSession(tmp_path, []), FakeSession(tmp_path, [])
    session(first)
    session(second)
    assert first.installs == _locked("run") and second.installs == []
    assert second.runs == first.runs and second.runs[0][:2] == ("docbundle-index", "build")
    # A changed pyproject (the stamp no longer matches): installed again.
    (tmp_path / ".docbundle-installed").write_text("an older pyproject", encoding="ascii")
    third = FakeSession(tmp_path, [])
    session(third)
    assert third.installs == _locked("run")


def test_tests_runs_one_pytest_worker_per_core_and_fails_on_any_nonzero_exit(tmp_path: Path) -> None:
    session = FakeSession(tmp_path, ["-k", "search", "-n", "0"])
    NOXFILE.tests(session)
    assert session.installs == _locked("tests")
    assert "\npytest-xdist==" in (ROOT / "requirements" / "tests.txt").read_text(encoding="utf-8")
    # The posargs come last, so `nox -s tests -- -n 0` runs in one process.
    assert session.runs == [("pytest", "-n", "auto", "--dist", "loadfile", "-k", "search", "-n", "0")]
    # nox's default: only exit 0 succeeds, so pytest's 1 (a test failed) and 5 (no test ran) fail the run.
    assert session.run_options == [{}]


@pytest.mark.parametrize(
    ("name", "posargs", "export"),
    [
        ("tests", [], "tests"),
        ("typecheck", [], "typecheck"),
        ("regress", [], "run"),
        ("nightly", ["--plan", "--dry-run"], "run"),  # planning needs no model
        ("nightly", ["--library", "docbundle"], "semantic"),  # a build embeds
        ("bench", ["limits"], "run"),
        ("bench", ["hostile", "--hybrid-query"], "semantic"),
        ("image", [], "run"),  # the host side of the smoke test
    ],
)
def test_every_session_installs_from_the_lock_with_hashes(
    name: str, posargs: list[str], export: str, tmp_path: Path
) -> None:
    session = FakeSession(tmp_path, posargs)
    getattr(NOXFILE, name)(session)
    assert session.installs == _locked(export)


def test_lint_installs_only_its_locked_tools(tmp_path: Path) -> None:
    session = FakeSession(tmp_path, [])
    NOXFILE.lint(session)
    assert session.installs == [("--require-hashes", "-r", "requirements/lint.txt")]


def test_newest_installs_the_newest_releases_within_the_pyprojects_ranges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NOXFILE.DEPS_ENV, "newest")
    session = FakeSession(tmp_path, [])
    NOXFILE.tests(session)
    (args,) = session.installs
    assert args[0] == "--upgrade" and "--require-hashes" not in args
    # The ranges themselves (the root pyproject's groups), and docbundle with its extras and their deps.
    assert {"pytest-xdist>=3.5", "hatchling>=1.27"} <= set(args)
    assert args[-4:] == ("-e", "./server[semantic,otel,provenance]", "-e", "./indexer[semantic]")
    assert session.runs[0][:2] == ("pytest", "-n")


def test_an_unknown_deps_mode_stops_the_session_and_says_what_to_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NOXFILE.DEPS_ENV, "latest")
    session = FakeSession(tmp_path, [])
    with pytest.raises(SessionError, match=r"DOCBUNDLE_DEPS='latest': use locked or newest"):
        NOXFILE.tests(session)
    assert session.installs == [] and session.runs == []


@pytest.mark.parametrize("posargs", [["--upgrade-packages", "ruff"], ["--upgrade-package"], ["ruff"]])
def test_lock_refuses_an_unknown_argument_before_installing_anything(
    posargs: list[str], tmp_path: Path
) -> None:
    session = FakeSession(tmp_path, posargs)
    with pytest.raises(
        SessionError, match=r"nox -s lock: unknown argument .*: use --upgrade or --upgrade-package NAME"
    ):
        NOXFILE.lock(session)
    assert session.installs == [] and session.runs == []
