"""One build run per library version: one event loop and one HTTP client for its whole crawl (issue 20).

The llms.txt, the listed pages, robots.txt and every follow level go through one crawler, so what it
learned about a host in one phase holds in the next: a host found without ``.md`` twins while the listed
pages are crawled is not probed again for the followed ones, and every request can reuse one kept-alive
connection. Each test builds against a real loopback site (tests/sitesrv.py) and counts what the server
was asked.
"""

from __future__ import annotations

from pathlib import Path

from docsite import Build, write_config
from sitesrv import Site

HTML = "text/html; charset=utf-8"


def _page(title: str, links: str = "") -> str:
    prose = f"<p>{title} explains one topic of the demo library. {'Useful prose. ' * 20}</p>"
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title></head><body>'
        f"<main><h1>{title}</h1>{prose}{links}</main></body></html>"
    )


def _html_site(site: Site) -> None:
    """An llms.txt listing one HTML page (no ``.md`` twins anywhere) that links two more, one level down."""
    site.add("/docs/llms.txt", "# Demo\n\n## Docs\n\n- [Start](start.html)\n", content_type="text/plain")
    links = '<p><a href="a.html">A</a> <a href="b.html">B</a></p>'
    site.add("/docs/start.html", _page("Start", links), content_type=HTML)
    site.add("/docs/a.html", _page("Alpha"), content_type=HTML)
    site.add("/docs/b.html", _page("Beta"), content_type=HTML)


def test_a_host_found_without_md_twins_is_not_probed_again_by_a_later_follow_level(
    site: Site, tmp_path: Path, build: Build
) -> None:
    _html_site(site)
    config = write_config(tmp_path, site.url("/docs/llms.txt"), 'follow = { depth = 1, prefix = "/docs/" }')
    outcome = build(config, cache=False)
    assert outcome.status == "built", outcome.message
    assert outcome.pages_followed == 2
    assert outcome.obtained == {"html": 3}
    probes = [r.path for r in site.requests if r.path.endswith(".md")]
    # The listed page's twin answered 404: the host has none, for this build's every later phase too.
    assert probes == ["/docs/start.html.md"]


def test_the_whole_crawl_of_a_library_goes_over_one_kept_alive_connection(
    site: Site, tmp_path: Path, build: Build
) -> None:
    _html_site(site)
    config = tmp_path / "libraries.toml"
    config.write_text(
        f'[[library]]\nid = "demo"\nllms_txt = "{site.url("/docs/llms.txt")}"\n'
        'follow = { depth = 1, prefix = "/docs/" }\n'
        "crawl = { concurrency = 1, per_host = 1, timeout = 5.0, retries = 0 }\n",
        encoding="utf-8",
    )
    outcome = build(config, cache=False)
    assert outcome.status == "built", outcome.message
    paths = {r.path for r in site.requests}
    assert {"/docs/llms.txt", "/docs/start.html", "/robots.txt", "/docs/a.html", "/docs/b.html"} <= paths
    # llms.txt, the listed page, robots.txt and the follow level: one client, so one connection.
    assert len({r.peer for r in site.requests}) == 1, [(r.path, r.peer) for r in site.requests]
