"""Fixtures for the server tests: bundle trees built once per session, catalogues per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from docbundle.server.catalog import Catalog
from serverkit import GOLDEN_BUILD, SERVER_TREE, catalog_over, flip_byte, install_golden, set_format_version
from treekit import build


@pytest.fixture(scope="session")
def bundles_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """golden, demo (2.x latest, 1.x deprecated) and cjk, built once; tests must not modify it."""
    base = tmp_path_factory.mktemp("server-bundles")
    root = build(base / "site" / "libraries.toml", base / "bundles", SERVER_TREE).root
    install_golden(root)
    return root


@pytest.fixture
def catalog(bundles_root: Path) -> Iterator[Catalog]:
    """A fresh catalogue over ``bundles_root`` (nothing opened yet)."""
    yield from catalog_over(bundles_root)


@pytest.fixture(scope="session")
def broken_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """golden (intact) beside one library per kind of damage in ``serverkit.BROKEN``."""
    root = tmp_path_factory.mktemp("broken") / "bundles"
    install_golden(root)
    flip_byte(install_golden(root, "flipped") / "docs.bin")
    (install_golden(root, "missing") / "index" / "_MAIN_1.toc").unlink()
    (install_golden(root, "extra") / "index" / "payload.pkl").write_bytes(b"not part of the bundle")
    set_format_version(install_golden(root, "future"), 99)
    install_golden(root, "nocurrent")
    (root / "nocurrent" / "latest" / "CURRENT").unlink()
    return root


@pytest.fixture
def golden_root(tmp_path: Path) -> Path:
    """A private bundles tree holding only the golden bundle (tests may damage it)."""
    root = tmp_path / "bundles"
    install_golden(root)
    return root


@pytest.fixture
def golden_bundle(golden_root: Path) -> Path:
    """The bundle directory inside ``golden_root``."""
    return golden_root / "golden" / "latest" / GOLDEN_BUILD
