"""``nox -s serve -- ARGS`` adds ARGS to the demo's defaults (issue 14): read from noxfile.py itself,
loaded with a stand-in for nox (the test environment need not have nox installed)."""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from docbundle.server.cli import _parser

ROOT = Path(__file__).resolve().parents[1]


def _load_noxfile() -> types.ModuleType:
    fake = types.ModuleType("nox")

    def session(*_args: Any, **_kwargs: Any) -> Callable[[Any], Any]:
        return lambda func: func

    fake.session = session  # type: ignore[attr-defined]
    fake.options = types.SimpleNamespace()  # type: ignore[attr-defined]
    fake.Session = object  # type: ignore[attr-defined]
    saved = sys.modules.get("nox")
    sys.modules["nox"] = fake
    try:
        spec = importlib.util.spec_from_file_location("docbundle_noxfile", ROOT / "noxfile.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        if saved is None:
            del sys.modules["nox"]
        else:
            sys.modules["nox"] = saved


NOXFILE = _load_noxfile()


@pytest.mark.parametrize(
    ("posargs", "transport", "host", "port", "no_auth", "keys"),
    [
        ([], "http", None, None, True, None),
        (["--port", "9000"], "http", None, 9000, True, None),
        (["--host", "0.0.0.0", "--port=9001"], "http", "0.0.0.0", 9001, True, None),
        (["--keys", "k.toml"], "http", None, None, None, "k.toml"),
        (["--transport", "stdio"], "stdio", None, None, None, None),
        (["--transport=stdio", "--log-level", "debug"], "stdio", None, None, None, None),
    ],
)
def test_serve_arguments_add_to_the_defaults(
    posargs: list[str],
    transport: str,
    host: str | None,
    port: int | None,
    no_auth: bool | None,
    keys: str | None,
) -> None:
    args = _parser().parse_args(["serve", *NOXFILE.serve_args(posargs)])
    assert (args.transport, args.host, args.port, args.no_auth) == (transport, host, port, no_auth)
    assert (str(args.keys) if args.keys else None) == keys
