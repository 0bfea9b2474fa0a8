"""Issue 10: an install and a build of the same version share one writing protocol (the version lock).

Before, ``install`` wrote its temporary folder without the version lock while a build of the same
version, under that lock, swept every ``.tmp-*`` in the version folder: an install running during a
build lost its files. Now the second writer is refused with a clear message and the first one's files
are untouched.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
from docbundle.bundle.layout import current_bundles, read_current
from docbundle.bundle.release import package
from docbundle.server import install as installer
from treekit import build

GOLDEN = Path(__file__).resolve().parents[1] / "bundle" / "golden" / "v1"


def _archive(tmp_path: Path) -> Path:
    built = tmp_path / "built"
    build_id = json.loads((GOLDEN / "manifest.json").read_text())["build"]["build_id"]
    shutil.copytree(GOLDEN, built / "golden" / "latest" / build_id)
    (built / "golden" / "latest" / "CURRENT").write_text(build_id + "\n")
    (entry,) = package(current_bundles(built), tmp_path / "release")
    return tmp_path / "release" / entry.archive


def _config(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    (site / "page.md").write_text("# Page\n\nA page about hooks and effects, long enough to index.\n")
    (site / "llms.txt").write_text("# Golden\n\n## Docs\n\n- [Page](page.md)\n")
    config = tmp_path / "libraries.toml"
    config.write_text(f'[[library]]\nid = "golden"\nllms_txt = "{site / "llms.txt"}"\n')
    return config


def test_a_build_during_an_install_of_the_same_version_leaves_the_install_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = _archive(tmp_path)
    bundles = tmp_path / "bundles"
    halfway, resume = threading.Event(), threading.Event()
    real_extract = installer._extract

    def slow_extract(*args: object, **kwargs: object) -> None:
        real_extract(*args, **kwargs)  # type: ignore[arg-type]
        halfway.set()
        assert resume.wait(30)

    monkeypatch.setattr(installer, "_extract", slow_extract)
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(_install_or_error(archive, bundles)))
    worker.start()
    assert halfway.wait(30), "the install never started writing"
    # the same version folder: bundles/golden/latest
    outcome = build(_config(tmp_path), bundles, library="golden", check=False).outcome
    resume.set()
    worker.join(30)
    assert outcome.status == "failed" and "another build or install" in (outcome.message or "")
    (installed,) = done
    assert isinstance(installed, installer.Installed), installed
    assert read_current(bundles / "golden" / "latest") == installed.build_id
    assert not list((bundles / "golden" / "latest").glob(".tmp-*"))


def _install_or_error(archive: Path, bundles: Path) -> object:
    try:
        return installer.install(archive, bundles)
    except Exception as exc:
        return exc
