"""A library whose catalogue entry has no description (most of the shipped catalogue: no description is
copied from the lists it came from) is described by its own llms.txt's summary line: ``build`` records
it, ``list_libraries`` (over stdio, with the MCP client) and ``docbundle pull --list`` (over HTTP on
127.0.0.1) show it. An entry's own description still wins."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import anyio
from clikit import index_cli, server_cli
from docbundle.bundle.release import INDEX
from docbundle.server.offers import DESCRIPTION_CHARS
from mcp import Client, StdioServerParameters
from sitesrv import Site

SUMMARY = "Widgets draws charts in the terminal. Links are relative to this file."
SHOWN = "Widgets draws charts in the terminal."  # the sentence about the file itself is left out
OURS = "Our own words for gadgets."


def _library(root: Path, library: str, summary: str) -> None:
    site = root / library
    site.mkdir()
    (site / "guide.md").write_text(
        f"# Guide\n\n{library} guide: install it, then run it.\n", encoding="utf-8"
    )
    (site / "llms.txt").write_text(
        f"# {library.title()}\n\n> {summary}\n\n## Docs\n\n- [Guide](guide.md)\n", encoding="utf-8"
    )


async def _listed(bundles: Path) -> dict[str, str]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "docbundle.server", "serve", "--bundles", str(bundles)]
    )
    with anyio.fail_after(60):
        async with Client(params) as client:
            result = await client.call_tool("list_libraries", {})
    libraries = result.structured_content["libraries"]  # type: ignore[index]
    return {lib["id"]: lib["description"] for lib in libraries}


def test_a_library_without_a_description_is_listed_with_its_llms_txt_summary(
    site: Site, tmp_path: Path
) -> None:
    _library(tmp_path, "widgets", SUMMARY)
    _library(tmp_path, "gadgets", "Gadgets says this about itself.")
    config = tmp_path / "libraries.toml"
    config.write_text(
        '[[library]]\nid = "widgets"\nname = "Widgets"\ncategory = "ui"\nllms_txt = "widgets/llms.txt"\n\n'
        f'[[library]]\nid = "gadgets"\nname = "Gadgets"\ndescription = "{OURS}"\nllms_txt = "gadgets/llms.txt"\n',
        encoding="utf-8",
    )
    bundles, dist = tmp_path / "bundles", tmp_path / "dist"
    r = index_cli("build", "--config", str(config), "--out", str(bundles), "--quiet", "--no-embed")
    assert r.returncode == 0, r.stderr

    assert anyio.run(_listed, bundles) == {"widgets": SHOWN, "gadgets": OURS}

    r = index_cli("package", str(bundles), "--out", str(dist))
    assert r.returncode == 0, r.stderr
    site.serve_dir(dist, "/rel")
    env = {k: v for k, v in os.environ.items() if k != "DOCBUNDLE_RELEASES"}
    r = server_cli("pull", "--list", "--from", site.url("/rel/"), env=env)
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line for line in r.stdout.splitlines()}
    assert lines["widgets@latest"].endswith(f"  {SHOWN}") and lines["gadgets@latest"].endswith(f"  {OURS}")

    # A second build of the same sites is unchanged: the description is part of what was hashed.
    r = index_cli("build", "--config", str(config), "--out", str(bundles), "--quiet", "--no-embed")
    assert r.returncode == 0 and "2 unchanged" in r.stdout, r.stdout + r.stderr


HOSTILE = "\x1b]0;pwned\x07Evil\x1b[2J\x1b[31m\u202eDocs\x9b2J\x00\x08\x7f"
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_pull_list_prints_a_release_s_description_safely_and_cut(site: Site, tmp_path: Path) -> None:
    """The description is the release's words: no escape sequence or control reaches the terminal, and
    400 characters (within the index's bound on a field, 500) are cut on the line."""
    _library(tmp_path, "widgets", SUMMARY)
    config = tmp_path / "libraries.toml"
    config.write_text('[[library]]\nid = "widgets"\nllms_txt = "widgets/llms.txt"\n', encoding="utf-8")
    bundles, dist = tmp_path / "bundles", tmp_path / "dist"
    assert (
        index_cli("build", "--config", str(config), "--out", str(bundles), "--quiet", "--no-embed").returncode
        == 0
    )
    assert index_cli("package", str(bundles), "--out", str(dist)).returncode == 0
    index = json.loads((dist / INDEX).read_text())
    assert index["bundles"][0]["description"] == SHOWN
    index["bundles"][0]["description"] = HOSTILE + "s" * 400
    (dist / INDEX).write_text(json.dumps(index))
    site.serve_dir(dist, "/rel")
    env = {k: v for k, v in os.environ.items() if k != "DOCBUNDLE_RELEASES"}
    r = server_cli("pull", "--list", "--from", site.url("/rel/"), env=env)
    assert r.returncode == 0, r.stderr
    (_header, line) = r.stdout.splitlines()
    assert not _CONTROL.search(line), repr(line)
    shown = line.split("  ")[-1]
    assert shown.startswith("EvilDocs") and shown.endswith("…") and len(shown) == DESCRIPTION_CHARS
