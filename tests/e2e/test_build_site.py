"""Building bundles from a generated docs site served on 127.0.0.1, as a nightly job would."""

from __future__ import annotations

import shutil
from pathlib import Path

from docbundle.bundle.layout import read_current
from docbundle.bundle.reader import open_bundle, verify_bundle
from docbundle.bundle.search import BundleSearcher
from docbundle.bundle.whooshio import searching
from docbundle.indexer.pipeline.build import Outcome
from docsite import TOPICS, Build, llms_txt, page_markdown, publish_site, write_config
from sitesrv import Site


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _vdir(tmp_path: Path) -> Path:
    return tmp_path / "bundles" / "demo" / "latest"


def _published_and_built(site: Site, tmp_path: Path, build: Build) -> tuple[list[str], Path, Outcome]:
    """Publish the demo site and build it once: its page paths, the config and the first outcome."""
    paths = publish_site(site)
    config = write_config(tmp_path, site.url("/llms.txt"))
    return paths, config, build(config)


def test_full_crawl_builds_a_verified_bundle(site: Site, tmp_path: Path, build: Build) -> None:
    publish_site(site)
    o = build(write_config(tmp_path, site.url("/llms.txt")))
    assert o.status == "built", o.message
    assert (o.documents, o.pages_failed) == (len(TOPICS), 0)
    bundle = Path(o.bundle or "")
    assert read_current(_vdir(tmp_path)) == bundle.name == o.build_id
    m = verify_bundle(bundle)
    assert m.library.id == "demo" and m.build.content_hash == o.content_hash
    assert m.source.title == "Demo Docs" and m.source.summary == "Documentation for the demo payment SDK."
    assert {d.section for d in m.documents} == {"Guides", "Reference"}
    assert sorted(p.name for p in bundle.iterdir()) == [
        "docs.bin",
        "docs.idx",
        "index",
        "llms.txt",
        "manifest.json",
        "routing.bin",
    ]
    assert not list((bundle / "index").glob("*LOCK")), "the whoosh write lock must not ship"
    b = open_bundle(bundle)
    try:
        doc = b.store.get(b.store.number_of("guides/install.md") or 0)
        assert doc.title == "Installation" and doc.section == "Guides"
        assert doc.description.startswith("Install the widget SDK")
        assert "# configure install" in doc.text  # code blocks kept whole in the text
        with searching(b.index) as s:
            assert s.doc_count() == m.counts.chunks
    finally:
        b.close()


def test_second_run_sends_conditional_requests_and_builds_nothing(
    site: Site, tmp_path: Path, build: Build
) -> None:
    paths, config, first = _published_and_built(site, tmp_path, build)
    before = _tree(_vdir(tmp_path))
    site.reset_log()
    second = build(config)
    assert second.status == "unchanged", second.message
    assert second.content_hash == first.content_hash and second.build_id == first.build_id
    assert second.pages_not_modified == len(paths)
    for path in paths:
        (req,) = site.requests_for(path)
        assert "if-none-match" in req.headers or "if-modified-since" in req.headers
        assert req.status == 304
    assert _tree(_vdir(tmp_path)) == before


def test_one_changed_page_gives_a_new_bundle_and_keeps_the_old(
    site: Site, tmp_path: Path, build: Build
) -> None:
    paths, config, first = _published_and_built(site, tmp_path, build)
    slug, title, lead = TOPICS[0]
    site.add(paths[0], page_markdown(slug, title, lead, revision=1))
    site.reset_log()
    second = build(config)
    assert second.status == "built"
    assert second.content_hash != first.content_hash
    assert second.pages_not_modified == len(paths) - 1  # only the changed page was downloaded again
    assert read_current(_vdir(tmp_path)) == second.build_id
    assert Path(first.bundle or "").is_dir()
    verify_bundle(Path(first.bundle or ""))


def test_failing_pages_are_recorded_and_the_bundle_is_still_built(
    site: Site, tmp_path: Path, build: Build
) -> None:
    publish_site(site)
    faults = {
        "/f/missing.md": ("status", {"code": 404}),
        "/f/broken.md": ("status", {"code": 500}),
        "/f/hangs.md": ("timeout", {"seconds": 5}),
        "/f/trickles.md": ("slow", {"size": 4000, "chunk": 10, "delay": 0.05}),
        "/f/huge.md": ("oversized", {"size": 400_000, "framing": "chunked"}),
        "/f/latin1.md": ("bad-encoding", {}),
        "/f/loop.md": ("redirect-loop", {}),
        "/f/busy.md": ("retry-after", {"times": 1, "after": 1}),
    }
    for path, (kind, params) in faults.items():
        site.fault(path, kind, **params)
    site.add("/f/busy.md", "# Busy\n\nServed after one 429 with Retry-After.\n")
    extra = "\n## Faults\n\n" + "".join(f"- [{p}]({p.lstrip('/')})\n" for p in faults)
    site.add("/llms.txt", (site_llms := _llms(extra)), content_type="text/plain")
    assert "Faults" in site_llms
    o = build(write_config(tmp_path, site.url("/llms.txt")))
    assert o.status == "built", o.message
    m = verify_bundle(Path(o.bundle or ""))
    by_path = {d.path: d for d in m.documents}
    kinds = {p: by_path[p.lstrip("/")].error_kind for p in faults}
    assert kinds == {
        "/f/missing.md": "http",
        "/f/broken.md": "http",
        "/f/hangs.md": "timeout",
        "/f/trickles.md": "timeout",
        "/f/huge.md": "too-large",
        "/f/latin1.md": "encoding",
        "/f/loop.md": "redirects",
        "/f/busy.md": None,
    }
    assert by_path["f/busy.md"].chunks == 1
    assert m.counts.failed == 7 == o.pages_failed
    assert m.counts.documents == len(TOPICS) + 1
    assert all(by_path[p.lstrip("/")].error for p in faults if p != "/f/busy.md")


def _llms(extra: str) -> str:
    return llms_txt(TOPICS, extra)


def test_failing_llms_txt_keeps_the_previous_bundle_untouched(
    site: Site, tmp_path: Path, build: Build
) -> None:
    publish_site(site)
    config = write_config(tmp_path, site.url("/llms.txt"))
    first = build(config)
    before = _tree(_vdir(tmp_path))
    site.fault("/llms.txt", "status", code=503)
    o = build(config)
    assert o.status == "failed"
    assert "llms.txt" in o.message and "503" in o.message
    assert _tree(_vdir(tmp_path)) == before
    assert read_current(_vdir(tmp_path)) == first.build_id


def test_llms_txt_that_lists_nothing_fails_clearly(site: Site, tmp_path: Path, build: Build) -> None:
    site.add("/llms.txt", "# Empty\n\n> Nothing here.\n", content_type="text/plain")
    o = build(write_config(tmp_path, site.url("/llms.txt")))
    assert o.status == "failed" and "lists no documents" in o.message
    assert not (_vdir(tmp_path) / "CURRENT").exists()


def test_html_pages_are_converted_and_recorded(site: Site, tmp_path: Path, build: Build) -> None:
    publish_site(site)
    site.add("/page.html", "<html><body><p>hi</p></body></html>", content_type="text/html; charset=utf-8")
    site.add("/llms.txt", _llms("\n## Web\n\n- [HTML page](page.html)\n"), content_type="text/plain")
    o = build(write_config(tmp_path, site.url("/llms.txt")))
    m = verify_bundle(Path(o.bundle or ""))
    (html,) = [d for d in m.documents if d.path == "page.html"]
    assert html.error is None and html.obtained == "html" and html.chunks == 1


def test_same_inputs_give_the_same_content_hash(site: Site, tmp_path: Path, build: Build) -> None:
    publish_site(site)
    config = write_config(tmp_path, site.url("/llms.txt"))
    a = build(config, out=tmp_path / "a", cache=False)
    b = build(config, out=tmp_path / "b", cache=False)
    assert a.status == b.status == "built"
    assert a.content_hash == b.content_hash
    # Not yet a promise (byte reproducibility is a later issue), but the store is already identical.
    assert (Path(a.bundle or "") / "docs.bin").read_bytes() == (
        Path(b.bundle or "") / "docs.bin"
    ).read_bytes()


def test_only_the_newest_builds_are_kept_and_never_current(site: Site, tmp_path: Path, build: Build) -> None:
    paths = publish_site(site)
    config = write_config(tmp_path, site.url("/llms.txt"), extra="keep = 2")
    ids = []
    for rev in range(4):
        slug, title, lead = TOPICS[1]
        site.add(paths[1], page_markdown(slug, title, lead, revision=rev + 10))
        o = build(config)
        assert o.status == "built"
        ids.append(o.build_id)
    kept = sorted(p.name for p in _vdir(tmp_path).iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(set(ids)) == 4
    assert len(kept) == 2 and ids[-1] in kept
    assert read_current(_vdir(tmp_path)) == ids[-1]


def test_a_local_llms_txt_and_a_markdown_folder_need_no_network(tmp_path: Path, build: Build) -> None:
    src = tmp_path / "site"
    (src / "guides").mkdir(parents=True)
    for slug, title, lead in TOPICS[:3]:
        (src / "guides" / f"{slug}.md").write_text(page_markdown(slug, title, lead), encoding="utf-8")
    (src / "llms.txt").write_text(
        "# Local\n\n## Guides\n\n" + "".join(f"- [{t}](guides/{s}.md)\n" for s, t, _ in TOPICS[:3]),
        encoding="utf-8",
    )
    o = build(write_config(tmp_path, "site/llms.txt"), out=tmp_path / "from-file")
    assert (o.status, o.documents) == ("built", 3), o.message
    assert verify_bundle(Path(o.bundle or "")).documents[0].path == "guides/install.md"

    (src / "llms.txt").write_text((src / "llms.txt").read_text() + "- [Gone](guides/missing.md)\n")
    o = build(write_config(tmp_path, "site/llms.txt"), out=tmp_path / "with-missing")
    (gone,) = [d for d in verify_bundle(Path(o.bundle or "")).documents if d.error]
    assert gone.error_kind == "not-found" and str(tmp_path) not in (gone.error or "") + gone.url
    assert "site/guides/missing.md" in (gone.error or "")

    (src / "llms.txt").unlink()
    o = build(write_config(tmp_path, "site"), out=tmp_path / "from-dir")
    assert (o.status, o.documents) == ("built", 3), o.message
    m = verify_bundle(Path(o.bundle or ""))
    assert m.source.kind == "directory"
    assert {d.title for d in m.documents} == {t for _, t, _ in TOPICS[:3]}
    assert not any(str(tmp_path) in d.path for d in m.documents), (
        "ids must not leak the build machine's paths"
    )


def test_llms_full_file_produces_documents_without_crawling(site: Site, tmp_path: Path, build: Build) -> None:
    full = "".join(
        f"# {title}\n\nSource: {site.url('/' + slug + '.md')}\n\n{lead}\n\n## Details\n\n{lead} {lead}\n\n"
        for slug, title, lead in TOPICS
    )
    site.add("/llms-full.txt", full, content_type="text/plain")
    o = build(write_config(tmp_path, site.url("/llms-full.txt")))
    assert o.status == "built", o.message
    m = verify_bundle(Path(o.bundle or ""))
    assert m.source.kind == "full"
    assert o.documents == len(TOPICS)
    assert site.hits("/install.md") == 0


def test_stale_temporary_directories_are_removed_by_the_next_build(
    site: Site, tmp_path: Path, build: Build
) -> None:
    publish_site(site)
    config = write_config(tmp_path, site.url("/llms.txt"))
    build(config)
    stale = _vdir(tmp_path) / ".tmp-20260101-000000000000-1"
    (stale / "index").mkdir(parents=True)
    (stale / "docs.bin").write_bytes(b"half")
    build(config)
    assert not stale.exists()


def test_copying_a_bundle_elsewhere_keeps_it_valid(site: Site, tmp_path: Path, build: Build) -> None:
    publish_site(site)
    o = build(write_config(tmp_path, site.url("/llms.txt")))
    copy = tmp_path / "elsewhere" / "bundle"
    shutil.copytree(Path(o.bundle or ""), copy)
    assert verify_bundle(copy).build.content_hash == o.content_hash


def test_a_heading_id_in_a_link_text_stays_out_of_the_page_title(
    site: Site, tmp_path: Path, build: Build
) -> None:
    # The Chinese, Japanese and Korean React docs' llms.txt copy a heading id into sixteen link texts
    # ("[参考 {/*reference*/}](...)"); the link text is the page's title, so the id is dropped there.
    site.add(
        "/llms.txt",
        "# Demo Docs\n\n> Docs.\n\n## API {/*api*/}\n\n"
        "- [参考 {/*reference*/}](pages/form.md): 内置的浏览器组件\n- [Forms guide](pages/guide.md)\n",
        content_type="text/plain; charset=utf-8",
    )
    body = "使用内置的浏览器组件创建交互式控件来提交信息。" * 8
    site.add("/pages/form.md", f"# <form> {{/*form*/}}\n\n{body}\n\n## 用法 {{/*usage*/}}\n\n{body}\n")
    site.add(
        "/pages/guide.md", "# Forms guide\n\n" + "Build a form that posts its fields to the server. " * 8
    )
    o = build(write_config(tmp_path, site.url("/llms.txt")))
    assert o.status == "built", o.message
    bundle = Path(o.bundle or "")
    m = verify_bundle(bundle)
    assert {d.path: (d.title, d.section) for d in m.documents} == {
        "pages/form.md": ("参考", "API"),
        "pages/guide.md": ("Forms guide", "API"),
    }
    b = open_bundle(bundle)
    try:
        doc = b.store.get(b.store.number_of("pages/form.md") or 0)
        assert doc.title == "参考" and doc.section == "API"
        # Keyword search's title field holds the clean title: "reference" names no page of this site.
        searcher = BundleSearcher(b)
        hits = searcher.search("reference", limit=10, per_doc=1, mode="balanced").hits
        assert hits == []
        (first, *_) = searcher.search("参考", limit=10, per_doc=1, mode="balanced").hits
        assert b.store.get(first.doc).id == "pages/form.md"
    finally:
        b.close()
