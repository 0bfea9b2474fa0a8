"""Shared pytest fixtures: a live loopback HTTP site and the anyio backend."""

from __future__ import annotations

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


@pytest.fixture
def anyio_backend() -> str:
    """Run anyio-marked tests on asyncio only: the crawler uses asyncio-specific APIs."""
    return "asyncio"
