"""``docbundle-index add URL``: a loopback site's llms.txt surveyed, then appended to a commented catalogue."""

from __future__ import annotations

import json
from pathlib import Path

from clikit import index_cli, server_cli
from docbundle.indexer.config import load_config
from docsite import TOPICS, llms_txt, publish_site
from sitesrv import Site, run_site

CATALOGUE = """\
# My catalogue: comments, blank lines and key order must survive an add.

[defaults]
keep = 2          # keep two builds

# --- first library ---
[[library]]
id = "first"
llms_txt = "https://example.invalid/llms.txt"   # never fetched by these tests
"""

HTML_PAGE = "<html><head><title>Guide</title></head><body><main><h1>Guide</h1><p>{}</p></main></body></html>"


def _site_with_html(site: Site, extra: str = "") -> None:
    publish_site(site)
    for slug in ("alpha", "beta"):
        site.add(f"/html/{slug}", HTML_PAGE.format("Text " * 40), content_type="text/html; charset=utf-8")
    body = llms_txt(TOPICS) + "\n## Pages in HTML\n\n- [Alpha](html/alpha)\n- [Beta](html/beta)\n" + extra
    site.add("/llms.txt", body, content_type="text/plain; charset=utf-8")


def test_add_shows_what_it_found_and_appends_keeping_the_layout(site: Site, tmp_path: Path) -> None:
    _site_with_html(site)
    config = tmp_path / "libraries.toml"
    config.write_text(CATALOGUE, encoding="utf-8")
    url = site.url("/llms.txt")

    r = index_cli("add", url, "--config", str(config))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"Demo Docs  <{url}>\n  > Documentation for the demo payment SDK.\n")
    assert "sections: Guides (3), Reference (3), Pages in HTML (2)" in r.stdout
    assert "links: 8" in r.stdout
    assert "pages fetched: 6 markdown, 2 HTML (converted when built), 0 failed" in r.stdout
    assert "added library 'demo-docs'" in r.stderr and "--library demo-docs" in r.stderr

    text = config.read_text(encoding="utf-8")
    assert text.startswith(CATALOGUE)  # every comment, blank line and key of the file, as it was
    assert text[len(CATALOGUE) :] == (
        '\n[[library]]\nid = "demo-docs"\nname = "Demo Docs"\n'
        f'description = "Documentation for the demo payment SDK."\nllms_txt = "{url}"\n'
    )
    lib = load_config(config).get("demo-docs")
    assert (lib.name, lib.llms_txt) == ("Demo Docs", url)

    for args, message in [
        ([], "already has a library 'demo-docs'; pass --id"),
        (["--id", "other"], f"already lists {url} as library 'demo-docs'"),
        (["--id", "Bad_Id"], "'Bad_Id' is not a library id"),
    ]:
        r = index_cli("add", url, "--config", str(config), *args)
        assert r.returncode == 2 and message in r.stderr, r.stderr
        assert config.read_text(encoding="utf-8") == text


def test_add_json_and_dry_run_change_nothing(site: Site, tmp_path: Path) -> None:
    _site_with_html(site)
    config = tmp_path / "libraries.toml"
    config.write_text(CATALOGUE, encoding="utf-8")
    r = index_cli(
        "add", site.url("/llms.txt"), "--config", str(config), "--json", "--dry-run", "--probe", "3"
    )
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)
    assert (found["title"], found["links"], found["probed"], found["markdown"]) == ("Demo Docs", 8, 3, 3)
    assert [s["name"] for s in found["sections"]] == ["Guides", "Reference", "Pages in HTML"]
    assert "'demo-docs' would be added" in r.stderr
    assert config.read_text(encoding="utf-8") == CATALOGUE


def test_the_address_policy_applies_to_the_probe(site: Site, tmp_path: Path) -> None:
    """A page on another loopback origin is refused unless --allow-host names it (and the entry keeps it)."""
    other = Site()
    other.add("/secret.md", "# Secret\n\nInternal text.\n")
    with run_site(other):
        port = other.url("/").split(":")[2].strip("/")
        _site_with_html(site, extra=f"\n## Internal\n\n- [Secret]({other.url('/secret.md')})\n")
        config = tmp_path / "libraries.toml"
        r = index_cli("add", site.url("/llms.txt"), "--config", str(config), "--dry-run")
        assert r.returncode == 0, r.stderr
        assert "6 markdown, 2 HTML (converted when built), 1 failed" in r.stdout
        assert other.requests == []  # refused before a connection was made
        assert not config.exists()

        r = index_cli(
            "add", site.url("/llms.txt"), "--config", str(config), "--allow-host", f"127.0.0.1:{port}"
        )
        assert r.returncode == 0, r.stderr
        assert "7 markdown, 2 HTML (converted when built), 0 failed" in r.stdout
        assert [q.path for q in other.requests] == ["/secret.md"]
    assert load_config(config).get("demo-docs").allow_hosts == [f"127.0.0.1:{port}"]
    assert config.read_text(encoding="utf-8").startswith("# The docbundle library catalogue")


def test_add_build_builds_and_the_library_searches(site: Site, tmp_path: Path) -> None:
    publish_site(site)
    config, out = tmp_path / "cfg" / "libraries.toml", tmp_path / "bundles"
    r = index_cli(
        "add", site.url("/llms.txt"), "--config", str(config), "--id", "demo", "--build", "--out", str(out)
    )
    assert r.returncode == 0, r.stderr
    assert "1 built, 0 unchanged, 0 failed" in r.stdout
    search = ["search", "demo", "webhook signing secret", "--json", "--bundles", str(out)]
    r = server_cli(*search, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["hits"][0]["documentId"].endswith("webhooks.md")


def test_add_refuses_what_it_cannot_use(site: Site, tmp_path: Path) -> None:
    site.add("/empty/llms.txt", "# Nothing here\n\n> No links at all.\n", content_type="text/plain")
    config = tmp_path / "libraries.toml"
    config.write_text(CATALOGUE, encoding="utf-8")
    cases = [
        (site.url("/missing/llms.txt"), [], 1, "cannot read the llms.txt"),
        (site.url("/empty/llms.txt"), [], 1, "lists no pages; nothing added"),
        ("file:///etc/llms.txt", [], 2, "give the http(s) address of an llms.txt"),
        (site.url("/empty/llms.txt"), ["--allow-host", "*"], 2, "--allow-host '*'"),
    ]
    for url, extra, code, message in cases:
        r = index_cli("add", url, "--config", str(config), *extra)
        assert (r.returncode, message in r.stderr) == (code, True), (url, r.stderr)
        assert "Traceback" not in r.stderr
    assert config.read_text(encoding="utf-8") == CATALOGUE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["libraries.toml"]  # no temporary file left


def test_every_add_option_is_documented() -> None:
    import argparse
    import re

    from docbundle.indexer.cli import _parser

    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    options = [o for a in sub.choices["add"]._actions for o in a.option_strings if o.startswith("--")]
    root = Path(__file__).resolve().parents[2]
    docs = (root / "docs" / "configuration.md").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert len(options) >= 9
    for option in set(options) - {"--help"}:
        mentioned = re.compile(rf"(?<![\w-]){re.escape(option)}(?![\w-])")
        assert mentioned.search(docs), option
        if option != "--out":
            assert mentioned.search(readme), option
