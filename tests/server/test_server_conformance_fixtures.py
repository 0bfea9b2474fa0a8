"""The conformance suite's fixture tools exist only when DOCBUNDLE_CONFORMANCE_FIXTURES=1.

``nox -s conformance`` runs the suite's ``tools-call-simple-text`` and ``tools-call-error`` scenarios,
which call ``test_simple_text`` and ``test_error_handling`` by name. A normal server must not list them
and must answer them as unknown tools (-32602); with the variable set they answer as the suite expects.
Driven through the SDK's own client in memory.
"""

from __future__ import annotations

import pytest
from docbundle.server.catalog import Catalog
from docbundle.server.mcp.fixtures import CONFORMANCE_ENV
from docbundle.server.mcp.server import create_server
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio
FIXTURES = {"test_simple_text", "test_error_handling"}


async def test_a_normal_server_has_no_fixture_tools(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONFORMANCE_ENV, raising=False)
    async with Client(create_server(catalog)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert not names & FIXTURES and len(names) == 7
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("test_simple_text", {})
        assert unknown.value.error.code == -32602


async def test_the_fixture_tools_answer_as_the_suite_expects(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFORMANCE_ENV, "1")
    async with Client(create_server(catalog)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names >= FIXTURES
        text = await client.call_tool("test_simple_text", {})
        assert not text.is_error and text.content[0].text  # type: ignore[union-attr]
        error = await client.call_tool("test_error_handling", {})
        assert error.is_error and "intentionally" in error.content[0].text  # type: ignore[union-attr]
