"""Every option of every command is documented, and the defaults the docs state are the code's (issue
14). Read from the parsers themselves, so a new flag without a line in the docs fails here."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from docbundle.indexer import cli as index_cli
from docbundle.server import cli as server_cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = "\n".join(
    p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
)


def _commands(parser: argparse.ArgumentParser, prefix: str) -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser, by its full name (``docbundle keys create``)."""
    found = {prefix: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _commands(sub, f"{prefix} {name}")
    return found


PARSERS = _commands(server_cli._parser(), "docbundle") | _commands(index_cli._parser(), "docbundle-index")


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_every_option_of_every_command_is_documented(command: str) -> None:
    options = [
        o for a in PARSERS[command]._actions for o in a.option_strings if o.startswith("--") and o != "--help"
    ]
    missing = [o for o in options if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", DOCS)]
    assert missing == [], f"{command}: {missing} appear nowhere in README.md or docs/*.md"


def test_the_defaults_the_docs_state_are_the_code_defaults() -> None:
    server_md = (ROOT / "docs" / "server.md").read_text(encoding="utf-8")
    assert f"| `--host` | `{server_cli.DEFAULT_HOST}` |" in server_md
    assert f"| `--port` | `{server_cli.DEFAULT_PORT}` |" in server_md
    serve = PARSERS["docbundle serve"]
    assert (
        serve.get_default("transport") == "stdio" and "| `--transport stdio\\|http` | `stdio` |" in server_md
    )
    # One bundles folder: the server's table and the indexer's say the same, and neither the old
    # ./bundles nor "the config file's folder" survives anywhere.
    assert "| `--bundles DIR` | `$DOCBUNDLE_BUNDLES`, else the per-user data folder |" in server_md
    indexer_md = (ROOT / "docs" / "indexer.md").read_text(encoding="utf-8")
    assert (
        "| `--out DIR` | the bundles directory (default: `$DOCBUNDLE_BUNDLES`, else the per-user"
        in indexer_md
    )
    assert "else `./bundles`" not in DOCS and "the config file's folder" not in DOCS
    assert "./docbundle-keys.toml" not in DOCS
    build = PARSERS["docbundle-index build"]
    assert build.get_default("out") is None  # resolved by docbundle.bundle.userdirs, as documented


def test_every_library_key_has_a_row_in_the_configuration_docs() -> None:
    import msgspec
    from docbundle.indexer.config import LibraryConfig

    config_md = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    keys = [f.encode_name for f in msgspec.structs.fields(LibraryConfig)]
    missing = [k for k in keys if f"\n| `{k}` |" not in config_md]
    assert missing == [], f"library keys without a row in docs/configuration.md: {missing}"
    assert "| `semantic` | bool | `true` |" in config_md and LibraryConfig(id="x").semantic is True
