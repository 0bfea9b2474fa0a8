"""One door to the MCP SDK (issue 20): every private part of the SDK docbundle touches is named in
``docbundle.server.mcp.sdk.PRIVATE``, still exists with the shape used there, and is touched nowhere
else. An SDK release that moves one of them fails here, in one place, before anything else does.
What each one does is tested through the real entry points: ``connection_state`` by
``test_server_mcp_surface.py::test_logging_set_level_filters_notifications`` (a level set on one
request filters what later ones send), ``lowlevel`` by every stdio test.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import mcp
from docbundle.server.catalog import Catalog
from docbundle.server.mcp import sdk
from docbundle.server.mcp.server import create_server
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import NotificationOptions, Server

PACKAGE = Path(sdk.__file__).resolve().parents[2]  # docbundle/ in the server distribution
SDK_SOURCE = Path(mcp.__file__).resolve().parent
_DEFINED = re.compile(r"\bself\.(_[a-z]\w*)\s*[:=]|\bdef (_[a-z]\w*)|^\s+(_[a-z]\w*)\s*[:=]", re.M)


def test_each_private_part_named_still_exists(catalog: Catalog) -> None:
    assert {attr for _, attr in sdk.PRIVATE} == {"_lowlevel_server", "_connection"}
    for owner, attr in sdk.PRIVATE:
        module, _, name = owner.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        assert f"self.{attr} = " in inspect.getsource(cls.__init__), (owner, attr)
    server = create_server(catalog)
    low = sdk.lowlevel(server)
    assert isinstance(low, Server)
    for method in ("add_request_handler", "get_capabilities", "run", "create_initialization_options"):
        assert callable(getattr(low, method)), method
    assert low.get_request_handler("logging/setLevel") is not None
    assert low.get_request_handler("server/discover") is not None
    caps = sdk.capabilities(server, NotificationOptions())
    assert caps.logging is not None and caps.completions is not None
    assert "state" in Connection.__annotations__


def _sdk_private_names() -> set[str]:
    names: set[str] = set()
    for path in SDK_SOURCE.rglob("*.py"):
        for m in _DEFINED.finditer(path.read_text(encoding="utf-8")):
            names.update(g for g in m.groups() if g)
    return names


def test_no_other_module_touches_a_private_part_of_the_sdk() -> None:
    sdk_private = _sdk_private_names()
    assert {"_lowlevel_server", "_tool_manager", "_connection", "_resource_manager"} <= sdk_private
    ours: set[str] = set()
    accessed: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for m in _DEFINED.finditer(text):
            ours.update(g for g in m.groups() if g)
        if path.name == "sdk.py" and path.parent.name == "mcp":
            continue
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                accessed.setdefault(node.attr, set()).add(str(path.relative_to(PACKAGE)))
    offenders = {name: sorted(where) for name, where in accessed.items() if name in sdk_private - ours}
    assert offenders == {}
