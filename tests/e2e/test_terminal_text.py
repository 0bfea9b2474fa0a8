"""Issue 19, item 10: what a site, a release or a bundle says reaches the terminal only through
``docbundle.common.terminal.printable``: no escape sequence, C0/C1 control or bidi override, and no
field longer than its cap. Each command is run as a user runs it: the real CLI in a subprocess."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from clikit import index_cli, server_cli
from docbundle.bundle.release import INDEX
from docbundle.bundle.summary import SUMMARY_NAME
from docbundle.common.terminal import printable
from hypothesis import given
from hypothesis import strategies as st
from sitesrv import Site

# Sets the terminal's title, clears the screen, colours the rest, turns the line round.
HOSTILE = "\x1b]0;pwned\x07Evil\x1b[2J\x1b[31m\u202eDocs\x9b2J\x00\x08\x7f"
_BAD = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _clean(text: str, longest: int = 440) -> None:
    """No control character but newlines, and no line longer than ``longest`` (a capped field, indented)."""
    assert not _BAD.search(text), repr(_BAD.search(text))
    assert max((len(line) for line in text.splitlines()), default=0) <= longest


@given(st.text())
def test_printable_leaves_no_control_and_keeps_its_cap(text: str) -> None:
    out = printable(text, 50)
    assert not _BAD.search(out) and "\n" not in out and len(out) <= 50
    assert printable(text, 50, lines=True).count("\n") <= text.count("\n")


def test_printable_keeps_ordinary_text_as_it_is() -> None:
    assert printable("Café › Reference (v2.1) — 日本語") == "Café › Reference (v2.1) — 日本語"
    assert printable(HOSTILE) == "EvilDocs"
    assert printable("x" * 1000, 10) == "x" * 9 + "…"


@pytest.fixture(scope="module")
def hostile_bundles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library built from a local folder whose titles and text carry escapes and a bidi override,
    with its manifest's name, description, status and a safety finding rewritten to hostile strings."""
    root = tmp_path_factory.mktemp("hostile")
    src = root / "site"
    src.mkdir()
    (src / "llms.txt").write_text(
        f"# {HOSTILE}\n\n> Docs.\n\n## Docs\n\n- [Tables {HOSTILE}](tables.md)\n", encoding="utf-8"
    )
    body = " ".join(["Tables hold rows and columns."] * 20)
    (src / "tables.md").write_text(f"# Tables {HOSTILE}\n\n{body} {HOSTILE} {body}\n", encoding="utf-8")
    config = root / "libraries.toml"
    config.write_text(f'[[library]]\nid = "evil"\nname = "Evil"\nllms_txt = "{src / "llms.txt"}"\n')
    bundles = root / "bundles"
    r = index_cli("build", "--config", str(config), "--out", str(bundles))
    assert r.returncode == 0, r.stderr
    (manifest_path,) = bundles.glob("evil/latest/*/manifest.json")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["library"].update(name=HOSTILE + "N" * 5000, description=HOSTILE + "D" * 5000)
    manifest["version"]["status"] = "active"
    manifest["safety"] = [
        {"kind": "hidden-unicode", "path": f"tables.md{HOSTILE}", "chunk": 0, "detail": HOSTILE + "x" * 5000}
    ]
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    (bundles / SUMMARY_NAME).unlink(missing_ok=True)  # it described the manifest before the rewrite
    return bundles


def test_search_info_and_audit_print_a_bundle_s_words_safely(hostile_bundles: Path) -> None:
    r = server_cli("search", "evil", "tables", "--bundles", str(hostile_bundles))
    assert r.returncode == 0 and "Tables" in r.stdout, r.stderr
    _clean(r.stdout)
    r = server_cli("info", "evil", "--bundles", str(hostile_bundles))
    assert r.returncode == 0 and "evil: EvilDocs" in r.stdout, r.stderr
    _clean(r.stdout)
    r = server_cli("info", "--bundles", str(hostile_bundles))
    assert r.returncode == 0, r.stderr
    _clean(r.stdout)
    (bundle,) = hostile_bundles.glob("evil/latest/*/manifest.json")
    r = index_cli("audit", str(bundle.parent))
    assert r.returncode == 0 and "EvilDocs" in r.stdout, r.stderr
    _clean(r.stdout)


def test_pull_prints_a_release_s_words_safely(site: Site, release: Path, tmp_path: Path) -> None:
    hostile = tmp_path / "rel"
    shutil.copytree(release, hostile)
    index = json.loads((hostile / INDEX).read_text())
    # 400 characters: within the index's bound on a field (500), far over what --list prints (80). (The
    # version's status is a lower-case word by pattern since issue 31, so the description carries it.)
    index["bundles"][0].update(name=HOSTILE, description=HOSTILE + "s" * 400)
    (hostile / INDEX).write_text(json.dumps(index))
    site.serve_dir(hostile, "/rel")
    latin1 = HOSTILE.replace("\u202e", "")  # what a header can carry
    site.fault(f"/away/{INDEX}", "redirect", to=f"gopher://example.invalid/{latin1}")
    env = {"DOCBUNDLE_RELEASES": "http://127.0.0.1:9/unreachable/", "PATH": "/usr/bin:/bin"}
    r = server_cli("pull", "--list", "--from", site.url("/rel/"), env=env)
    assert r.returncode == 0 and "EvilDocs" in r.stdout, r.stderr
    _clean(r.stdout, 240)  # a row: id, name (40), state, age, counts, build, description (80)
    r = server_cli("pull", "--list", "--from", site.url("/away/"), env=env)
    assert r.returncode == 1 and "redirects to gopher://" in r.stderr, r.stderr
    _clean(r.stderr)


def test_add_prints_a_site_s_words_safely(site: Site, tmp_path: Path) -> None:
    site.add("/tables.md", "# Tables\n\nRows and columns.\n")
    site.add(
        "/llms.txt",
        f"# {HOSTILE}\n\n> {HOSTILE} summary\n\n## {HOSTILE}\n\n- [Tables](tables.md)\n",
        content_type="text/plain; charset=utf-8",
    )
    config = tmp_path / "libraries.toml"
    r = index_cli("add", site.url("/llms.txt"), "--config", str(config))
    assert r.returncode == 0 and r.stdout.startswith("EvilDocs  <"), r.stderr
    _clean(r.stdout)
    _clean(r.stderr)
    assert "added library 'evildocs'" in r.stderr
    written = config.read_text(encoding="utf-8")
    assert 'name = "EvilDocs"' in written and "\\u001b" not in written.lower()
