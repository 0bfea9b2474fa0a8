"""The toolchain lock (issue 34): requirements/*.txt, one hashed requirements file per set of what the nox
sessions install, are the record of the exact versions CI, the nightly job and the nox sessions install.
`nox -s lock` pins them (uv pip compile) from the pyprojects' dependencies, extras and dependency groups;
Dependabot bumps pins inside them.

Checked offline, without uv: every file's header names the digest of the inputs it was pinned from and
matches the pyprojects now (a dependency, extra or group changed without ``nox -s lock`` fails here with
what to run), every pin carries hashes and no URL, every requirement is pinned within its range (a bot's
bump past a range fails too), and a package pinned in several files has one version in all of them.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from noxfilekit import ROOT, load_noxfile
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

NOXFILE = load_noxfile()
MEMBERS = NOXFILE.MEMBERS
FIX = "run `nox -s lock` and commit requirements/"
EXPORTS = [what.export for what in NOXFILE.INSTALLS]


def _copy(tmp_path: Path) -> Path:
    """The pyprojects and requirements files of the checkout, copied under ``tmp_path``."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for member in MEMBERS:
        (tmp_path / member).mkdir()
        shutil.copy(ROOT / member / "pyproject.toml", tmp_path / member / "pyproject.toml")
    shutil.copytree(ROOT / "requirements", tmp_path / "requirements")
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path.name} no longer holds {old!r}: update this test"
    path.write_text(text.replace(old, new), encoding="utf-8")


def _pins(export: Path) -> Iterator[tuple[str, str, str]]:
    """(name, version, marker) of every ``name==version`` line of a requirements file."""
    for line in export.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith((" ", "#", "-")):
            pin, _, marker = line.rstrip(" \\").partition(";")
            name, _, version = pin.strip().partition("==")
            yield canonicalize_name(name), version, marker.strip()


def test_every_requirements_file_was_pinned_from_the_current_inputs() -> None:
    assert NOXFILE.stale_locks(ROOT) == [], FIX


@pytest.mark.parametrize(
    ("member", "old", "new"),
    [
        ("indexer", '"markdown-it-py>=3,<5"', '"markdown-it-py>=3,<6"'),  # a range widened
        ("server", '"platformdirs>=4",', '"platformdirs>=4",\n    "rich>=13",'),  # a dependency added
        ("server", 'otel = ["', 'otel = ["wrapt>=1", "'),  # an extra's dependency added
        (
            "server",
            'provenance = ["sigstore>=4.5,<5"]',
            'provenance = ["sigstore>=4.6,<5"]',
        ),  # an extra's range
        ("", 'lint = ["ruff>=0.6"]', 'lint = ["ruff>=0.7"]'),  # a dependency group's range
    ],
)
def test_a_pyproject_changed_without_relocking_is_named(
    tmp_path: Path, member: str, old: str, new: str
) -> None:
    root = _copy(tmp_path)
    assert NOXFILE.stale_locks(root) == []
    _edit(root / member / "pyproject.toml", old, new)
    stale = NOXFILE.stale_locks(root)
    assert len(stale) == len(EXPORTS)
    assert stale[0] == (
        f"requirements/{NOXFILE.INSTALLS[0].name}.txt was pinned from other dependencies, extras or groups"
        " than the pyprojects declare now: run `nox -s lock` and commit requirements/"
    )


def test_a_missing_requirements_file_is_named(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "requirements" / "lint.txt").unlink()
    assert NOXFILE.stale_locks(root) == ["requirements/lint.txt is missing: run `nox -s lock`"]


def test_comments_layout_and_a_bots_version_bump_keep_the_lock_current(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    # A comment and another order of a dependency list: the same inputs.
    _edit(root / "pyproject.toml", 'lint = ["ruff>=0.6"]', '# the linter\nlint = [ "ruff >= 0.6" ]')
    _edit(root / "pyproject.toml", '"pytest>=8", "hypothesis>=6.100"', '"hypothesis>=6.100", "pytest>=8"')
    # docbundle's own version (a release) is the checkout's, never pinned by the lock.
    _edit(root / "indexer" / "pyproject.toml", '"docbundle-server==0.1.0"', '"docbundle-server==0.2.0"')
    # A pin moved inside the files (what Dependabot's pull request does) changes no input.
    lint = root / "requirements" / "lint.txt"
    ((_, version, _),) = [p for p in _pins(lint) if p[0] == "ruff"]
    _edit(lint, f"ruff=={version}", "ruff==99.0.0")
    assert NOXFILE.stale_locks(root) == []


@pytest.mark.parametrize("export", EXPORTS, ids=lambda p: p.name)
def test_every_pin_has_hashes_and_no_file_names_a_url(export: Path) -> None:
    lines = export.read_text(encoding="utf-8").splitlines()
    # Hashes under every pin: pip's --require-hashes refuses a file with one missing.
    for pin, after in zip(lines, [*lines[1:], ""], strict=True):
        if pin and not pin.startswith((" ", "#")):
            assert "==" in pin and after.strip().startswith("--hash=sha256:"), f"{export.name}: {pin}: {FIX}"
    # No index URL, find-links or direct URL: the lock names no package index's host, pip's settings do.
    assert [line for line in lines if "://" in line or line.startswith("-")] == [], export.name


def _declared(what: object) -> Iterator[Requirement]:
    """Every third-party requirement a session's install set declares in the pyprojects."""
    groups = NOXFILE._pyproject(ROOT)["dependency-groups"]
    for group in what.groups:  # type: ignore[attr-defined]
        yield from map(Requirement, groups[group])
    if what.extras is None:  # type: ignore[attr-defined]
        return
    for member in what.members:  # type: ignore[attr-defined]
        project = NOXFILE._pyproject(ROOT, member)["project"]
        reqs = list(project["dependencies"])
        for extra in what.extras:  # type: ignore[attr-defined]
            reqs += project.get("optional-dependencies", {}).get(extra, [])
        yield from (r for r in map(Requirement, reqs) if not r.name.startswith("docbundle-"))


@pytest.mark.parametrize("what", NOXFILE.INSTALLS, ids=lambda w: w.name)
def test_every_requirement_is_pinned_in_its_export_within_its_range(what: object) -> None:
    pins: dict[str, list[tuple[str, str]]] = {}
    for name, version, marker in _pins(what.export):  # type: ignore[attr-defined]
        pins.setdefault(name, []).append((version, marker))
    declared = list(_declared(what))
    assert declared
    for req in declared:
        found = pins.get(canonicalize_name(req.name), [])
        here = [v for v, marker in found if not marker or Marker(marker).evaluate()]
        assert here, f"{req.name} is not pinned in {what.export.name} for this Python: {FIX}"  # type: ignore[attr-defined]
        for version, _ in found:
            assert req.specifier.contains(version, prereleases=True), (
                f"{what.export.name} pins {req.name}=={version}, outside {req}: {FIX}"  # type: ignore[attr-defined]
            )


def versions_across(exports: list[Path]) -> dict[str, dict[str, set[str]]]:
    """The packages pinned to different versions in different files: name -> file name -> versions (a
    file may pin two, one per Python, under markers)."""
    found: dict[str, dict[str, set[str]]] = {}
    for export in exports:
        for name, version, _ in _pins(export):
            found.setdefault(name, {}).setdefault(export.name, set()).add(version)
    return {n: files for n, files in found.items() if len({frozenset(v) for v in files.values()}) > 1}


def test_a_package_pinned_in_several_files_has_one_version_in_all() -> None:
    assert versions_across(EXPORTS) == {}, FIX


def test_a_version_bumped_in_one_file_only_is_named(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    exports = [root / "requirements" / p.name for p in EXPORTS]
    ((_, version, _),) = [p for p in _pins(root / "requirements" / "nox.txt") if p[0] == "nox"]
    _edit(root / "requirements" / "nox.txt", f"nox=={version}", "nox==9999.1.1")
    assert versions_across(exports) == {"nox": {"nox.txt": {"9999.1.1"}, "tests.txt": {version}}}


def test_the_pyprojects_keep_ranges_for_a_users_pip_install() -> None:
    # The lock pins; a user's `pip install docbundle-server` resolves within the ranges. Only the pins that
    # were there before the lock stay (whoosh's private parts, the indexer's own server).
    pinned = {
        Requirement(r).name
        for m in MEMBERS
        for r in NOXFILE._pyproject(ROOT, m)["project"]["dependencies"]
        if "==" in r
    }
    assert pinned == {"whoosh-reloaded", "docbundle-server"}
