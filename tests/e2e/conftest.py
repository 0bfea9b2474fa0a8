"""Fixtures for end-to-end indexer tests: a generated documentation site on a real loopback server."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import treekit
from clikit import index_cli
from docbundle.indexer.pipeline.build import Outcome

Build = Callable[..., Outcome]  # the same as docsite.Build, typed


@pytest.fixture
def build(tmp_path: Path) -> Build:
    """Build library ``demo`` from a config into ``tmp_path / 'bundles'`` with a crawl cache; the test
    reads the outcome (``treekit.build``, unchecked)."""

    def run(config: Path, *, out: Path | None = None, cache: bool = True) -> Outcome:
        crawl_cache = tmp_path / "cache" if cache else None
        built = treekit.build(
            config, out or tmp_path / "bundles", library="demo", cache=crawl_cache, check=False
        )
        return built.outcome

    return run


GOLDEN = Path(__file__).resolve().parents[1] / "bundle" / "golden" / "v1"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A release folder written by ``docbundle-index package`` from the golden bundle."""
    base = tmp_path_factory.mktemp("release")
    build_id = json.loads((GOLDEN / "manifest.json").read_text())["build"]["build_id"]
    shutil.copytree(GOLDEN, base / "built" / "golden" / "latest" / build_id)
    (base / "built" / "golden" / "latest" / "CURRENT").write_text(build_id + "\n")
    r = index_cli("package", str(base / "built"), "--out", str(base / "dist"))
    assert r.returncode == 0, r.stderr
    return base / "dist"
