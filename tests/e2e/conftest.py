"""Fixtures for end-to-end indexer tests: a generated documentation site on a real loopback server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from docbundle.indexer.config import load_config
from docbundle.indexer.pipeline.build import Outcome, build_target
from docbundle.indexer.pipeline.cache import CrawlCache

Build = Callable[..., Outcome]  # the same as docsite.Build, typed


@pytest.fixture
def build(tmp_path: Path) -> Build:
    """Build library ``demo`` from a config into ``tmp_path / 'bundles'`` with a crawl cache."""

    def run(config: Path, *, out: Path | None = None, cache: bool = True) -> Outcome:
        catalogue = load_config(config)
        (target,) = catalogue.targets(catalogue.get("demo"))
        crawl_cache = CrawlCache(tmp_path / "cache") if cache else None
        return build_target(target, out or tmp_path / "bundles", cache=crawl_cache)

    return run
