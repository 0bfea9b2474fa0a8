"""``nox -s serve -- ARGS`` adds ARGS to the demo's defaults (issue 14): read from noxfile.py itself,
loaded with a stand-in for nox (tests/noxfilekit.py)."""

from __future__ import annotations

import pytest
from docbundle.server.cli import _parser
from noxfilekit import load_noxfile

NOXFILE = load_noxfile()


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
