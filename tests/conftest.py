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


@pytest.fixture
def anyio_backend() -> str:
    """Run anyio-marked tests on asyncio only: the crawler uses asyncio-specific APIs."""
    return "asyncio"
