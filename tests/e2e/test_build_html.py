"""Building HTML documentation sites end to end: served markdown first, converted HTML otherwise.

Every site here is a real loopback server (tests/sitesrv.py) with small pages in the styles of the
common generators; the assertions read the published bundle, the crawl report and the search tool.
"""

from __future__ import annotations

from pathlib import Path

import treekit
from clikit import index_cli
from docbundle.bundle.reader import verify_bundle
from docbundle.indexer.pipeline.build import page_key
from docbundle.indexer.pipeline.html import CONVERTER_ID
from docbundle.server.catalog import Catalog
from docbundle.server.docs import Docs
from docbundle.server.render import render_libraries
from docsite import Build, tree_digests, write_config
from hypothesis import given
from hypothesis import strategies as st
from sitesrv import Site, run_site
from treekit import write_sized_site

HTML = "text/html; charset=utf-8"


def _page(title: str, body: str, *, chrome: bool = True) -> str:
    """A Sphinx-like page: navigation and footer around a ``<main>`` holding the text."""
    nav = '<nav class="sidebar"><a href="/">Home</a> <a href="/api">API</a></nav>' if chrome else ""
    footer = "<footer>Copyright the Demo project</footer>" if chrome else ""
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title} - Demo docs</title></head>'
        f"<body>{nav}<main><h1>{title}</h1>{body}</main>{footer}</body></html>"
    )


def _section(words: str, n: int = 6) -> str:
    return "".join(
        f"<h2>Part {i}</h2><p>{words} Part {i} of the page. {'More prose here. ' * 12}</p>" for i in range(n)
    )


def _mixed_site(site: Site) -> None:
    """HTML pages under three URL styles, a markdown page, a meta-refresh page and duplicate links."""
    site.add(
        "/docs/guide.html",
        _page(
            "Guide",
            _section("The zanzibarite configuration switch lives in the guide.")
            + '<pre><code class="language-python">client.connect(retries=3)\n</code></pre>',
        ),
        content_type=HTML,
    )
    site.add(
        "/docs/api", _page("API", _section("Call quuxify to flatten the widget tree.")), content_type=HTML
    )
    site.add(
        "/docs/tutorial/",
        _page("Tutorial", _section("Start the tutorial by installing the SDK.")),
        content_type=HTML,
    )
    site.add("/docs/notes.md", "# Notes\n\n" + "Release notes in markdown. " * 40 + "\n")
    site.add(
        "/docs/old.html",
        '<html><head><meta http-equiv="refresh" content="0; url=moved.html"></head><body>Moved.</body></html>',
        content_type=HTML,
    )
    site.add(
        "/docs/moved.html",
        _page("Moved", _section("The relocated page about frobnication.")),
        content_type=HTML,
    )
    site.add(
        "/docs/llms.txt",
        "# Demo\n\n> Demo docs.\n\n## Docs\n\n"
        "- [Guide](guide.html)\n- [API](api)\n- [Tutorial](tutorial/)\n- [Notes](notes.md)\n"
        "- [Old](old.html)\n\n## Again\n\n"
        "- [Guide again](guide)\n- [Guide part](guide.html#part-2)\n- [Tutorial again](tutorial/index.html)\n"
        "- [API again](api.html)\n",
        content_type="text/plain; charset=utf-8",
    )


def test_an_html_site_is_converted_indexed_and_searchable(site: Site, tmp_path: Path, build: Build) -> None:
    _mixed_site(site)
    o = build(write_config(tmp_path, site.url("/docs/llms.txt")))
    assert o.status == "built", o.message
    m = verify_bundle(Path(o.bundle or ""))
    by_path = {d.path: d for d in m.documents}
    assert sorted(by_path) == ["api", "guide.html", "notes.md", "old.html", "tutorial"]
    assert {p: d.obtained for p, d in by_path.items()} == {
        "api": "html",
        "guide.html": "html",
        "notes.md": "markdown",
        "old.html": "html",
        "tutorial": "html",
    }
    assert all(d.chunks > 0 and d.error is None for d in m.documents)
    assert m.build.converter == CONVERTER_ID
    assert o.obtained == {"markdown": 1, "html": 4} and "(1 markdown, 4 html)" in o.message
    # Each page was fetched once whatever style it was linked under; the host has no twins: one probe.
    for path in ("/docs/guide.html", "/docs/api", "/docs/tutorial/", "/docs/notes.md", "/docs/moved.html"):
        assert site.hits(path) == 1, path
    assert (
        site.hits("/docs/guide") == site.hits("/docs/api.html") == site.hits("/docs/tutorial/index.html") == 0
    )
    assert len([r for r in site.requests if r.path.endswith(".md") and r.path != "/docs/notes.md"]) == 1
    # The meta-refresh page is indexed with its target's text.
    assert "frobnication" in (by_path["old.html"].title + " ".join(_texts(o, "old.html")))

    docs = Docs(Catalog.load(tmp_path / "bundles"))
    hits = docs.search("zanzibarite configuration switch", library_id="demo").result.hits
    assert hits and hits[0].document_id == "guide.html"
    assert "Copyright the Demo project" not in " ".join(_texts(o, "guide.html"))
    listed = docs.list_libraries()
    (lib,) = listed.libraries
    assert lib.obtained == {"html": 4, "markdown": 1}
    assert "5 docs (1 markdown, 4 html)" in render_libraries(listed)  # the order of the build summary


def _texts(o: object, doc_id: str) -> list[str]:
    from docbundle.bundle.reader import open_bundle

    b = open_bundle(Path(getattr(o, "bundle", "") or ""))
    try:
        return [b.store.get(b.store.number_of(doc_id) or 0).text]
    finally:
        b.close()


def test_a_host_with_md_twins_and_a_negotiating_host_serve_markdown(
    site: Site, tmp_path: Path, build: Build
) -> None:
    other = Site()
    with run_site(other):
        site.add("/a.html", _page("A", "<p>html a</p>"), content_type=HTML)
        site.add("/a.html.md", "# A\n\nMarkdown twin of page a, about ferrocene.\n")
        site.add("/b", _page("B", "<p>html b</p>"), content_type=HTML)
        site.add("/b.md", "# B\n\nMarkdown twin of page b.\n")
        other.add("/n", _page("N", "<p>html n</p>"), content_type=HTML)
        other.add("/n.src.md", "# N\n\nNegotiated markdown of page n.\n")
        other.negotiate("/n", "/n.src.md")
        site.add(
            "/llms.txt",
            f"# Twins\n\n- [A](a.html)\n- [B](b)\n- [N]({other.url('/n')})\n",
            content_type="text/plain",
        )
        config = write_config(tmp_path, site.url("/llms.txt"), 'allow_hosts = ["127.0.0.1"]')
        o = build(config)
        assert o.status == "built", o.message
        m = verify_bundle(Path(o.bundle or ""))
        got = {d.title: d.obtained for d in m.documents}
        assert got == {"A": "md-url", "B": "md-url", "N": "negotiated"}
        assert m.build.converter == ""  # nothing was converted
        assert other.hits("/n.md") == 0  # markdown came back at once: no twin probe
        assert "ferrocene" in _texts(o, "a.html")[0]


def test_a_build_whose_pages_all_fail_exits_1_and_says_why(site: Site, tmp_path: Path) -> None:
    site.add("/llms.txt", "# Broken\n\n- [A](a.html)\n- [B](b)\n- [C](c.pdf)\n", content_type="text/plain")
    site.add("/c.pdf", b"%PDF-1.4", content_type="application/pdf")
    config = write_config(tmp_path, site.url("/llms.txt"))
    r = index_cli("build", "--config", str(config), "--out", str(tmp_path / "out"), "--quiet", "--no-cache")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "0 built, 0 unchanged, 1 failed" in r.stdout
    assert "no page could be fetched and indexed: 3 of 3 failed (1 content-type, 2 http)" in r.stdout
    assert "HTTP 404" in r.stdout and "application/pdf" in r.stdout
    assert not (tmp_path / "out" / "demo").exists() or not list((tmp_path / "out" / "demo").rglob("CURRENT"))


def _local_html_site(root: Path) -> Path:
    """A local folder of HTML pages big enough (over 1 MB) that a build may use worker processes."""

    def page(i: int) -> tuple[str, str, str]:
        text = _page(
            f"Topic {i}",
            _section(f"Topic {i} explains setting number {i * 7}.", 12)
            + f'<p><a href="{i + 1}.html">next</a></p><table><tr><th>k</th><td>{i}</td></tr></table>',
        )
        return f"{i}.html", text, f"- [Topic {i}](pages/{i}.html)"

    head = ["# Repro HTML\n", "> Reproducibility fixture, HTML pages.\n", "## Pages\n"]
    return write_sized_site(root, head, 1_200_000, page)


def test_an_html_site_built_twice_gives_byte_identical_bundles(tmp_path: Path) -> None:
    _local_html_site(tmp_path)
    config = tmp_path / "libraries.toml"
    config.write_text('[[library]]\nid = "repro"\nllms_txt = "site/llms.txt"\n', encoding="utf-8")
    treekit.build(config, tmp_path / "a", fresh=treekit.IN_ONE_PROCESS)  # converted in this process
    treekit.build(config, tmp_path / "b", fresh=treekit.IN_WORKERS)  # converted in worker processes
    a, b = tree_digests(tmp_path / "a"), tree_digests(tmp_path / "b")
    assert any(name.endswith(".seg") for name in a)
    assert a == b
    (manifest,) = [name for name in a if name.endswith("manifest.json")]
    m = verify_bundle((tmp_path / "a" / manifest).parent)
    assert {d.obtained for d in m.documents} == {"html"} and m.counts.failed == 0
    assert str(tmp_path) not in (tmp_path / "a" / manifest).read_text(encoding="utf-8")


def test_a_rebuild_whose_pages_all_fail_keeps_the_previous_bundle(
    site: Site, tmp_path: Path, build: Build
) -> None:
    site.add("/llms.txt", "# Site\n\n- [A](a.html)\n- [B](b/)\n", content_type="text/plain")
    site.add("/a.html", _page("A", _section("Alpha text.")), content_type=HTML)
    site.add("/b/", _page("B", _section("Beta text.")), content_type=HTML)
    config = write_config(tmp_path, site.url("/llms.txt"))
    first = build(config)
    assert first.status == "built" and first.documents == 2
    vdir = tmp_path / "bundles" / "demo" / "latest"
    current = (vdir / "CURRENT").read_bytes()
    site.remove("/a.html")
    site.fault("/b/", "status", code=500)
    o = build(config)
    assert o.status == "failed" and o.documents == 0
    assert o.message.endswith(
        "no page could be fetched and indexed: 2 of 2 failed (2 http); "
        f"first: {site.url('/a.html')}: HTTP 404 Not Found"
    )
    assert (vdir / "CURRENT").read_bytes() == current
    assert verify_bundle(vdir / current.decode().strip()).counts.documents == 2


@given(
    st.sampled_from(["http://docs.example", "https://Docs.Example:8443"]),
    st.lists(st.from_regex(r"[A-Za-z0-9_~-]{1,8}", fullmatch=True), min_size=1, max_size=4),
    st.sampled_from(["", "#part", "#"]),
    st.sampled_from([".md", ".MDX", ".markdown", ".txt"]),
)
def test_page_key_gives_one_page_for_every_url_style(
    origin: str, segments: list[str], fragment: str, text_suffix: str
) -> None:
    stem = origin + "/" + "/".join(segments)
    styles = [stem, stem + ".html", stem + "/", stem + "/index.html", stem + ".htm", stem + "/index.htm"]
    keys = {page_key(u + fragment) for u in styles}
    assert keys == {page_key(stem)}
    assert page_key(page_key(stem)) == page_key(stem)
    assert page_key(stem + "-other") != page_key(stem)
    # Markdown and text URLs are pages of their own.
    text = stem + text_suffix
    assert page_key(text + fragment) == page_key(text) != page_key(stem)


def test_links_that_land_on_one_page_give_one_document(site: Site, tmp_path: Path, build: Build) -> None:
    site.add("/new.html", _page("New", _section("The one page.")), content_type=HTML)
    site.fault("/old", "redirect", status=301, to="/new.html")
    site.add("/refresh.html", '<meta http-equiv="refresh" content="0;URL=\'new.html\'">', content_type=HTML)
    site.add("/other.html", _page("Other", _section("Another page.")), content_type=HTML)
    site.add(
        "/llms.txt",
        "# Site\n\n- [Old](old)\n- [New](new.html)\n- [Refresh](refresh.html)\n- [Other](other.html)\n",
        content_type="text/plain",
    )
    o = build(write_config(tmp_path, site.url("/llms.txt")))
    assert o.status == "built", o.message
    m = verify_bundle(Path(o.bundle or ""))
    assert [(d.path, d.title) for d in m.documents] == [("old", "Old"), ("other.html", "Other")]
    assert o.documents == 2 and o.pages_listed == 4


def test_the_llms_txt_link_to_its_own_folder_gets_the_id_index(
    site: Site, tmp_path: Path, build: Build
) -> None:
    site.add("/docs/", _page("Home", "<p>Welcome to the quoxel documentation.</p>"), content_type=HTML)
    site.add("/docs/guide.html", _page("Guide", "<p>The guide.</p>"), content_type=HTML)
    site.add("/docs/llms.txt", "# Demo\n\n- [Home](./)\n- [Guide](guide.html)\n", content_type="text/plain")
    o = build(write_config(tmp_path, site.url("/docs/llms.txt")))
    assert o.status == "built", o.message
    m = verify_bundle(Path(o.bundle or ""))
    assert sorted(d.path for d in m.documents) == ["guide.html", "index"]  # not the host "127.0.0.1:PORT"
    assert "quoxel" in _texts(o, "index")[0]
