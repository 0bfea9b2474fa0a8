"""``follow`` against a hostile site (issue 19, items 3 and 4): robots.txt is asked only about the links
that are kept, and read as RFC 9309 says; the prefix cannot be escaped by spelling a path or by a
redirect.

Each test builds through ``docbundle-index build`` against a real loopback site (tests/sitesrv.py, whose
server percent-decodes a path and removes its dot segments, as a real one does) and reads what the
server was asked for, the crawl report and the published bundle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clikit import index_cli
from docbundle.bundle.reader import verify_bundle
from docbundle.indexer.cli import main as cli_main
from docbundle.indexer.pipeline import follow
from sitesrv import Site, _norm

MD = "text/markdown; charset=utf-8"
HTML = "text/html; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
ROBOTS_READ = 500 * 1024  # follow.ROBOTS_MAX_BYTES, written out so this file also runs on older code
CRAWL = "crawl = { timeout = 5.0, retries = 0, backoff = 0.05 }"


def _config(tmp_path: Path, source: str, follow_spec: str) -> Path:
    path = tmp_path / "libraries.toml"
    path.write_text(
        f'[[library]]\nid = "demo"\nname = "Demo"\nllms_txt = "{source}"\n{CRAWL}\nfollow = {follow_spec}\n',
        encoding="utf-8",
    )
    return path


def _md(title: str, body: str = "") -> str:
    return f"# {title}\n\n{title} explains one topic. {'Useful prose. ' * 20}\n\n{body}\n"


def _build(tmp_path: Path, config: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``docbundle-index build --json`` in a fresh process: the library's report and its documents by URL."""
    r = index_cli(
        *("build", "--config", str(config), "--out", str(tmp_path / "out")),
        *("--no-cache", "--quiet", "--json"),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    (lib,) = json.loads(r.stdout)["libraries"]
    assert lib["status"] == "built", lib["message"]
    manifest = verify_bundle(Path(lib["bundle"]))
    return lib, {d.url: d for d in manifest.documents}


def _paths_requested(site: Site) -> list[str]:
    """What the server was asked for, as it read each path (decoded, dot segments removed)."""
    return sorted(_norm(r.path) for r in site.requests)


# -- robots.txt: asked only about what is kept, read no further than 500 KiB ------------------------


def test_a_page_of_20000_links_and_a_robots_txt_of_150000_rules_costs_only_the_kept_pages(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    links = "\n".join(f"- [Page {i}](p{i:05d}.md)" for i in range(20_000))
    site.add("/docs/start.md", _md("Start", links), content_type=MD)
    for i in range(12):
        site.add(f"/docs/p{i:05d}.md", _md(f"Page {i}"), content_type=MD)
    site.add("/docs/llms.txt", "# Demo\n\n## Docs\n\n- [Start](start.md)\n", content_type=TEXT)
    rules = "".join(f"Disallow: /docs/q{i:06d}/\n" for i in range(150_000))
    # p00003 is refused by a rule inside the first 500 KiB; the rule on p00005 lies past it.
    robots = f"User-agent: *\nDisallow: /docs/p00003.md\n{rules}Disallow: /docs/p00005.md\n"
    assert len(robots.encode()) > 4 * ROBOTS_READ
    site.add("/robots.txt", robots, content_type=TEXT)

    asked: list[str] = []
    allowed = follow.RobotsRules.allowed

    def counted(self: follow.RobotsRules, url: str) -> bool:
        asked.append(url)
        # Far more than the 11 this build needs; stops a build that asks about every link at once.
        assert len(asked) <= 200, "robots.txt asked about more links than the build keeps"
        return allowed(self, url)

    monkeypatch.setattr(follow.RobotsRules, "allowed", counted)
    config = _config(tmp_path, site.url("/docs/llms.txt"), '{ depth = 1, prefix = "/docs/", max_pages = 10 }')
    code = cli_main(
        ["build", "--config", str(config), "--out", str(tmp_path / "out"), "--no-cache", "--json"]
    )
    assert code == 0
    (lib,) = json.loads(capsys.readouterr().out)["libraries"]
    assert lib["status"] == "built" and lib["pages_followed"] == 10, lib["message"]

    kept = [f"/docs/p{i:05d}.md" for i in (0, 1, 2, 4, 5, 6, 7, 8, 9, 10)]
    # robots.txt was asked about the 10 kept links and the one refused in their midst, nothing else.
    assert [u.removeprefix(site.base_url) for u in asked] == [*kept[:3], "/docs/p00003.md", *kept[3:]]
    assert _paths_requested(site) == sorted(["/docs/llms.txt", "/docs/start.md", "/robots.txt", *kept])


# -- robots.txt: RFC 9309 ----------------------------------------------------------------------------


def _robots_site(site: Site, robots: str, links: list[str]) -> None:
    body = " ".join(f"[{name}]({name})" for name in links)
    site.add("/docs/start.md", _md("Start", body), content_type=MD)
    for name in links:
        site.add(f"/docs/{name}", _md(name), content_type=MD)
    site.add("/docs/llms.txt", "# Demo\n\n## Docs\n\n- [Start](start.md)\n", content_type=TEXT)
    site.add("/robots.txt", robots, content_type=TEXT)


def test_robots_txt_the_longest_matching_rule_wins(site: Site, tmp_path: Path) -> None:
    _robots_site(site, "User-agent: *\nDisallow: /docs/\nAllow: /docs/api/\n", ["api/x.md", "guide.md"])
    lib, docs = _build(tmp_path, _config(tmp_path, site.url("/docs/llms.txt"), '{ prefix = "/docs/" }'))
    # Allow: /docs/api/ (10 octets) is more specific than Disallow: /docs/ (6 octets).
    assert site.hits("/docs/api/x.md") == 1 and site.url("/docs/api/x.md") in docs
    assert site.hits("/docs/guide.md") == 0
    assert lib["pages_followed"] == 1


def test_robots_txt_star_and_dollar_are_patterns(site: Site, tmp_path: Path) -> None:
    robots = "User-agent: *\nDisallow: /*.pdf$\nDisallow: /docs/*/draft-\n"
    _robots_site(site, robots, ["a.pdf", "a.pdf.md", "b/draft-1.md", "b/final.md"])
    lib, docs = _build(tmp_path, _config(tmp_path, site.url("/docs/llms.txt"), '{ prefix = "/docs/" }'))
    assert site.hits("/docs/a.pdf") == 0 and site.hits("/docs/b/draft-1.md") == 0
    # "$" anchors the pattern at the end: a.pdf.md does not end with ".pdf".
    assert site.hits("/docs/a.pdf.md") == 1 and site.hits("/docs/b/final.md") == 1
    assert {site.url("/docs/a.pdf.md"), site.url("/docs/b/final.md")} <= set(docs)
    assert lib["pages_followed"] == 2


# -- the prefix: tested on what the server reads, and on every redirect hop ----------------------------


SECRET = "The secret plans are kept here."


def test_an_encoded_dot_dot_link_does_not_escape_the_prefix(site: Site, tmp_path: Path) -> None:
    hostile = [
        "%2e%2e/private/c.md",  # the case: /f2docs/%2e%2e/private/c.md
        "%2E%2E%2Fprivate/c.md",
        "a/..%2f..%2fprivate/c.md",
        "%252e%252e/private/c.md",  # decoded twice by some servers
        "a%5c..%5c..%5cprivate/c.md",  # a backslash is a slash to some servers
        "..;/private/c.md",  # ;params dropped by some servers (/f2docs/..;/private/c.md)
    ]
    body = " ".join(f"[x{i}]({h})" for i, h in enumerate(hostile)) + " [Fine](fine%20page.md)"
    site.add("/f2docs/start.md", _md("Start", body), content_type=MD)
    site.add("/f2docs/fine page.md", _md("Fine"), content_type=MD)
    site.add("/private/c.md", f"# Private\n\n{SECRET}\n", content_type=MD)
    site.add("/f2docs/llms.txt", "# Demo\n\n## Docs\n\n- [Start](start.md)\n", content_type=TEXT)
    config = _config(tmp_path, site.url("/f2docs/llms.txt"), '{ prefix = "/f2docs/" }')
    lib, docs = _build(tmp_path, config)
    assert site.hits("/private/c.md") == 0
    assert all(p.startswith("/f2docs/") or p == "/robots.txt" for p in _paths_requested(site))
    # An escape in a path that stays under the prefix is followed as before.
    assert site.hits("/f2docs/fine page.md") == 1 and lib["pages_followed"] == 1, _paths_requested(site)
    assert sorted(d.path for d in docs.values()) == ["fine page.md", "start.md"]


def test_a_redirect_or_refresh_out_of_the_prefix_fails_the_followed_page_and_the_build_goes_on(
    site: Site, tmp_path: Path
) -> None:
    site.add("/private/secret.md", f"# Secret\n\n{SECRET}\n", content_type=MD)
    site.add("/docs/blocked/x.md", f"# Blocked\n\n{SECRET}\n", content_type=MD)
    site.add("/docs/target.md", _md("Target"), content_type=MD)
    site.fault("/docs/moved.md", "redirect", to="/private/secret.md")
    site.fault("/docs/hop.md", "redirect", to="/docs/hop2.md")
    site.fault("/docs/hop2.md", "redirect", to="/docs/blocked/x.md")  # the second hop: robots.txt
    site.fault("/docs/renamed.md", "redirect", to="/docs/target.md")
    refresh = '<html><head><meta http-equiv="refresh" content="0; url=/private/secret.md"></head></html>'
    site.add("/docs/refresh.html", refresh, content_type=HTML)
    links = ["moved.md", "hop.md", "renamed.md", "refresh.html"]
    site.add("/docs/start.md", _md("Start", " ".join(f"[{n}]({n})" for n in links)), content_type=MD)
    site.add("/docs/llms.txt", "# Demo\n\n## Docs\n\n- [Start](start.md)\n", content_type=TEXT)
    site.add("/robots.txt", "User-agent: *\nDisallow: /docs/blocked/\n", content_type=TEXT)
    lib, docs = _build(tmp_path, _config(tmp_path, site.url("/docs/llms.txt"), '{ prefix = "/docs/" }'))

    assert site.hits("/private/secret.md") == 0 and site.hits("/docs/blocked/x.md") == 0
    failures = {f["url"].removeprefix(site.base_url): f for f in lib["failures"]}
    assert sorted(failures) == ["/docs/hop.md", "/docs/moved.md", "/docs/refresh.html"]
    assert {f["kind"] for f in failures.values()} == {"refused"}
    assert "outside the follow prefix '/docs/'" in failures["/docs/moved.md"]["error"]
    assert "disallowed by robots.txt" in failures["/docs/hop.md"]["error"]
    assert "meta refresh to" in failures["/docs/refresh.html"]["error"]
    # Recorded in the manifest with the reason; the page that stays inside is indexed.
    moved = docs[site.url("/docs/moved.md")]
    assert moved.error_kind == "refused" and "redirect to" in (moved.error or "")
    assert docs[site.url("/docs/renamed.md")].chunks > 0
    assert lib["pages_followed"] == 4 and lib["pages_failed"] == 3
