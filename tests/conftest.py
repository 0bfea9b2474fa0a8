"""Shared pytest fixtures: a live loopback HTTP site, private user folders, embedding off unless a test is
marked ``semantic``, and the anyio backend."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from sitesrv import Site, run_site


@pytest.fixture
def site() -> Iterator[Site]:
    """A running, initially empty ``Site`` on 127.0.0.1 (``site.base_url``, ``site.url(path)``)."""
    served = Site()
    with run_site(served):
        yield served
    # A handler exception is a bug in the test server, not in the code under test: surface it.
    assert not served.errors, f"test server raised: {served.errors!r}"


@pytest.fixture(autouse=True)
def _private_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the per-user data and config folders (the default bundles folder and keys file) at a
    temporary folder, in this process and in every subprocess a test starts: a test never reads or
    writes the real user's bundles or keys. A test that wants a default sets DOCBUNDLE_BUNDLES/KEYS."""
    home = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.delenv("DOCBUNDLE_BUNDLES", raising=False)
    monkeypatch.delenv("DOCBUNDLE_KEYS", raising=False)


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``semantic`` marker (``--strict-markers`` refuses unknown ones), and turn embedding off
    for the whole session before any fixture builds: session- and module-scoped fixtures are set up before
    the function-scoped switch below runs, and would otherwise embed every chunk they build."""
    config.addinivalue_line(
        "markers", "semantic: builds embed their chunks (the semantic extra); every other test builds without"
    )
    os.environ["DOCBUNDLE_EMBED"] = "0"


@pytest.fixture(autouse=True)
def _embedding_only_when_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds embed nothing (DOCBUNDLE_EMBED=0, in this process and its subprocesses) unless the test is
    marked ``semantic``: with the semantic extra installed every build would embed, at about a second
    per chunk on two busy cores. A semantic test embeds a few short pages with the real model."""
    embed = request.node.get_closest_marker("semantic") is not None
    monkeypatch.setenv("DOCBUNDLE_EMBED", "1" if embed else "0")


@pytest.fixture
def anyio_backend() -> str:
    """Run anyio-marked tests on asyncio only: the crawler uses asyncio-specific APIs."""
    return "asyncio"
