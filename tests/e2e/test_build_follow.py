"""Optional link following (library ``follow``): breadth-first, same origin, under the prefix, robots.txt
honoured, capped, deterministic, and nothing at all when it is not configured.

Every site is a real loopback server (tests/sitesrv.py); the assertions read the published bundle, the
crawl report and the requests the server saw.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from clikit import index_cli
from docbundle.bundle.reader import verify_bundle
from docbundle.indexer.pipeline.follow import FOLLOWED_SECTION, html_links, markdown_links, origin
from docsite import Build, write_config
from hypothesis import given
from hypothesis import strategies as st
from sitesrv import Site, run_site

HTML = "text/html; charset=utf-8"
ROBOTS = "User-agent: *\nDisallow: /docs/secret/\n"


def _page(title: str, body: str) -> str:
    """A page whose navigation (outside ``<main>``) links a page that must not be followed."""
    prose = f"<p>{title} explains one topic of the demo library. {'Useful prose. ' * 20}</p>"
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title} - Demo</title></head><body>'
        '<nav><a href="/docs/navonly.html">Only in the navigation</a></nav>'
        f"<main><h1>{title}</h1>{prose}{body}</main></body></html>"
    )


def _site(site: Site, other: Site) -> None:
    """An llms.txt listing one entry page; the pages below it, two levels deep, and decoys."""
    site.add(
        "/docs/start.html",
        _page(
            "Start",
            '<p><a href="a.html">A</a> <a href="a#part">A again</a> <a href="b/">B</a> '
            '<a href="notes.md">Notes</a> <a href="/blog/post.html">Blog</a> '
            f'<a href="{other.url("/docs/elsewhere.html")}">Elsewhere</a> '
            '<a href="secret/plan.html">Secret</a> <a href="a.html?print=1">Print</a> '
            '<a href="mailto:x@example.org">Mail</a> <a href="#top">Top</a></p>',
        ),
        content_type=HTML,
    )
    site.add("/docs/a.html", _page("Alpha", '<p><a href="deep.html">Deep</a></p>'), content_type=HTML)
    site.add("/docs/b/", _page("Beta", '<p><a href="../start.html">Back</a></p>'), content_type=HTML)
    site.add("/docs/notes.md", "# Notes\n\nSee [Gamma](gamma.html).\n\n```\n[not a link](code.html)\n```\n")
    site.add("/docs/deep.html", _page("Deep", '<p><a href="deeper.html">Deeper</a></p>'), content_type=HTML)
    site.add("/docs/gamma.html", _page("Gamma", "<p>The gamma page.</p>"), content_type=HTML)
    site.add("/docs/deeper.html", _page("Deeper", "<p>Too deep.</p>"), content_type=HTML)
    site.add("/docs/navonly.html", _page("Nav", "<p>Navigation only.</p>"), content_type=HTML)
    site.add("/docs/secret/plan.html", _page("Plan", "<p>Disallowed.</p>"), content_type=HTML)
    site.add("/blog/post.html", _page("Post", "<p>Outside the prefix.</p>"), content_type=HTML)
    other.add("/docs/elsewhere.html", _page("Elsewhere", "<p>Another origin.</p>"), content_type=HTML)
    site.add("/robots.txt", ROBOTS, content_type="text/plain; charset=utf-8")
    site.add("/docs/llms.txt", "# Demo\n\n## Docs\n\n- [Start](start.html)\n", content_type="text/plain")


@pytest.fixture
def other(site: Site) -> Iterator[Site]:
    """A second origin on 127.0.0.1, running, and ``site`` published (``_site``) with links to it."""
    served = Site()
    with run_site(served):
        _site(site, served)
        yield served


FOLLOWED = ["/docs/a.html", "/docs/b/", "/docs/notes.md", "/docs/deep.html", "/docs/gamma.html"]
NOT_FOLLOWED = [
    "/docs/deeper.html",
    "/docs/navonly.html",
    "/docs/secret/plan.html",
    "/blog/post.html",
    "/docs/code.html",
    "/docs/a",
]


def test_links_are_followed_to_the_depth_under_the_prefix_on_the_origin(
    site: Site, other: Site, tmp_path: Path, build: Build
) -> None:
    config = write_config(
        tmp_path,
        site.url("/docs/llms.txt"),
        'allow_hosts = ["127.0.0.1"]\nfollow = { depth = 2, prefix = "/docs/", max_pages = 50 }',
    )
    o = build(config)
    assert other.requests == []  # another origin is never followed, even when allowed
    assert o.status == "built", o.message
    assert o.pages_listed == 1 and o.pages_followed == 5 and o.pages_fetched == 6
    assert "5 page(s) followed" in o.message
    for path in FOLLOWED:
        assert site.hits(path) == 1, path
    for path in NOT_FOLLOWED:
        assert site.hits(path) == 0, path
    assert site.hits("/robots.txt") == 1
    m = verify_bundle(Path(o.bundle or ""))
    by_path = {d.path: d for d in m.documents}
    assert sorted(by_path) == ["a.html", "b", "deep.html", "gamma.html", "notes.md", "start.html"]
    assert by_path["start.html"].section == "Docs"
    assert {by_path[p].section for p in by_path if p != "start.html"} == {FOLLOWED_SECTION}
    assert by_path["a.html"].title == "Alpha" and by_path["notes.md"].obtained == "markdown"
    assert all(d.chunks > 0 for d in m.documents)


@pytest.mark.usefixtures("other")
def test_max_pages_caps_the_followed_pages_in_sorted_order(site: Site, tmp_path: Path, build: Build) -> None:
    config = write_config(
        tmp_path, site.url("/docs/llms.txt"), 'follow = { depth = 3, prefix = "/docs/", max_pages = 2 }'
    )
    o = build(config)
    assert o.status == "built", o.message
    assert o.pages_followed == 2
    assert site.hits("/docs/a.html") == site.hits("/docs/b/") == 1
    for path in ("/docs/notes.md", "/docs/deep.html", "/docs/gamma.html", "/docs/deeper.html"):
        assert site.hits(path) == 0, path


@pytest.mark.usefixtures("other")
def test_without_follow_nothing_is_followed(site: Site, tmp_path: Path, build: Build) -> None:
    o = build(write_config(tmp_path, site.url("/docs/llms.txt")))
    assert o.status == "built", o.message
    assert o.pages_followed == 0 and o.documents == 1
    # Exactly today's requests: the llms.txt, its page and the host's one twin probe.
    assert sorted(r.path for r in site.requests) == [
        "/docs/llms.txt",
        "/docs/start.html",
        "/docs/start.html.md",
    ]


@pytest.mark.usefixtures("other")
def test_an_unreachable_robots_txt_allows_nothing_and_a_missing_one_everything(
    site: Site, tmp_path: Path, build: Build
) -> None:
    site.fault("/robots.txt", "status", code=503)
    extra = 'follow = { depth = 1, prefix = "/docs/" }'
    o = build(write_config(tmp_path, site.url("/docs/llms.txt"), extra), cache=False)
    assert o.status == "built", o.message
    assert o.pages_followed == 0 and site.hits("/robots.txt") >= 1
    assert site.hits("/docs/a.html") == 0

    site.clear_fault("/robots.txt")
    site.remove("/robots.txt")
    o = build(write_config(tmp_path, site.url("/docs/llms.txt"), extra), cache=False)
    assert o.status == "built", o.message
    # Depth 1: the entry page's links under /docs/ on this origin, secret/ included now.
    assert o.pages_followed == 4
    assert site.hits("/docs/secret/plan.html") == 1 and site.hits("/docs/deep.html") == 0


@pytest.mark.usefixtures("other")
def test_two_builds_of_one_site_give_the_same_bundle(site: Site, tmp_path: Path, build: Build) -> None:
    config = write_config(tmp_path, site.url("/docs/llms.txt"), 'follow = { depth = 3, prefix = "/docs/" }')
    first = build(config, out=tmp_path / "one", cache=False)
    second = build(config, out=tmp_path / "two", cache=False)
    assert first.status == second.status == "built", (first.message, second.message)
    assert first.pages_followed == second.pages_followed == 6
    assert first.content_hash == second.content_hash
    one = verify_bundle(Path(first.bundle or ""))
    two = verify_bundle(Path(second.bundle or ""))
    assert [d.url for d in one.documents] == [d.url for d in two.documents]


_SEGMENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=8).filter(
    lambda t: t not in (".", "..")
)
_HREF = st.builds(
    lambda segs, frag: "/".join(segs) + (f"#{frag}" if frag else ""),
    st.lists(_SEGMENT, min_size=1, max_size=3),
    st.one_of(st.just(""), _SEGMENT),
)
_BASE = "https://docs.example/guide/page.html"


@given(st.lists(_HREF, max_size=8), st.lists(st.text(alphabet="ab [] ", max_size=6), min_size=8, max_size=8))
def test_markdown_links_are_every_link_in_order_absolute_and_without_fragment(
    hrefs: list[str], texts: list[str]
) -> None:
    texts = [t.replace("[", "").replace("]", "") for t in texts]
    body = "\n".join(f"Para {i}: see [{texts[i]}]({h}) and ![img]({h}.png)." for i, h in enumerate(hrefs))
    got = markdown_links(f"# T\n\n{body}\n\n```\n[code](x.html)\n```\n", _BASE)
    assert got == [urljoin(_BASE, h).split("#")[0] for h in hrefs]
    assert all(urlsplit(u).scheme == "https" and not urlsplit(u).fragment for u in got)


@given(st.lists(_HREF, max_size=8))
def test_html_links_come_from_the_main_content_only(hrefs: list[str]) -> None:
    anchors = "".join(f'<a href="{h}">link {i}</a> ' for i, h in enumerate(hrefs))
    page = (
        '<html><body><nav><a href="/nav.html">Nav</a></nav><main><h1>T</h1>'
        f'<p>Prose of the page. {anchors}</p></main><footer><a href="/f.html">F</a></footer></body></html>'
    )
    assert html_links(page, _BASE) == [urljoin(_BASE, h).split("#")[0] for h in hrefs]


def test_origin_makes_the_default_port_explicit() -> None:
    assert (
        origin("https://Docs.Example/a")
        == origin("https://docs.example:443/b")
        == ("https", "docs.example", 443)
    )
    assert origin("http://docs.example/a") != origin("https://docs.example/a")
    assert origin("http://docs.example:8080/a") == ("http", "docs.example", 8080)
    assert origin("mailto:x@example.org") is None and origin("file:///etc/passwd") is None


@pytest.mark.usefixtures("other")
def test_the_summary_line_says_how_many_pages_were_followed(site: Site, tmp_path: Path) -> None:
    config = write_config(tmp_path, site.url("/docs/llms.txt"), 'follow = { depth = 1, prefix = "/docs/" }')
    r = index_cli("build", "--config", str(config), "--out", str(tmp_path / "out"), "--quiet", "--no-cache")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 fetched, 3 followed, 0 not modified" in r.stdout


@pytest.mark.usefixtures("other")
def test_robots_rules_for_this_crawler_and_the_library_exclude_apply(
    site: Site, tmp_path: Path, build: Build
) -> None:
    site.add(
        "/robots.txt",
        "User-agent: *\nDisallow:\n\nUser-agent: docbundle-indexer\nDisallow: /docs/b/\n",
        content_type="text/plain; charset=utf-8",
    )
    extra = 'exclude = ["*/notes.md"]\nfollow = { depth = 1, prefix = "/docs/" }'
    o = build(write_config(tmp_path, site.url("/docs/llms.txt"), extra), cache=False)
    assert o.status == "built", o.message
    # The group naming this crawler wins over '*'; the library's exclude applies to followed links.
    assert site.hits("/docs/b/") == 0 and site.hits("/docs/notes.md") == 0
    assert site.hits("/docs/a.html") == site.hits("/docs/secret/plan.html") == 1
    assert o.pages_followed == 2
