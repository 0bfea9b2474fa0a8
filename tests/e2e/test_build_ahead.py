"""A build prepares pages while its crawl still fetches the others (issue 22): over real HTTP, the bundle
is byte-identical to one prepared after the crawl in one process, and a build that keeps its bundle, or
changes one page, prepares ahead only what is new."""

from __future__ import annotations

from pathlib import Path

import pytest
from docbundle.indexer.pipeline.prepare import pool as prepare_pool
from docsite import TOPICS, Build, page_path, publish_site, tree_digests, write_config
from sitesrv import Site


def test_pages_prepared_during_the_crawl_give_the_same_bundle(
    site: Site, tmp_path: Path, build: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish_site(site)
    config = write_config(tmp_path, site.url("/llms.txt"))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    monkeypatch.setenv("DOCBUNDLE_WORKERS", "0")  # prepared after the crawl, in this process
    serial = build(config, out=tmp_path / "serial", cache=False)
    assert serial.status == "built" and serial.prepared_ahead == 0
    monkeypatch.setenv("DOCBUNDLE_WORKERS", "2")
    ahead = build(config, out=tmp_path / "ahead", cache=False)
    assert ahead.status == "built", ahead.message
    assert ahead.prepared_ahead == ahead.documents == len(TOPICS)
    assert tree_digests(tmp_path / "ahead") == tree_digests(tmp_path / "serial")


def test_only_what_changed_is_prepared_ahead(
    site: Site, tmp_path: Path, build: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCBUNDLE_WORKERS", "1")
    paths = publish_site(site)
    config = write_config(tmp_path, site.url("/llms.txt"))
    first = build(config)
    assert first.status == "built" and first.prepared_ahead == len(TOPICS)
    again = build(config)  # every page answers 304: nothing to prepare
    assert again.status == "unchanged" and again.prepared_ahead == 0
    slug, title, lead = TOPICS[0]
    site.add(paths[0], f"# {title}\n\n{lead} Rewritten for this test.\n")
    changed = build(config)  # one page new (its ETag too), the others 304
    assert changed.status == "built", changed.message
    assert changed.prepared_ahead == 1
    assert prepare_pool._shared.lock.acquire(blocking=False)  # the build left the shared pool free
    prepare_pool._shared.lock.release()
    assert page_path(0, slug, len(TOPICS)) == paths[0]
