"""A generated documentation site for end-to-end indexer tests."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from docbundle.bundle.release import INDEX, PackagedBundle
from sitesrv import Site

TOPICS = [
    ("install", "Installation", "Install the widget SDK with pip and configure the API key."),
    (
        "webhooks",
        "Webhooks",
        "Receive payment events by registering a webhook endpoint with a signing secret.",
    ),
    ("use-effect", "Effects", "Synchronise with external systems using the useEffect hook and its cleanup."),
    ("tables", "Tables", "Render tabular data with sap.m.Table and bind rows to a JSON model."),
    ("retries", "Retries", "Configure max_retry_after and exponential backoff for failed requests."),
    (
        "widget-ko",
        "결제위젯 연동하기",
        "결제위젯을 연동하는 방법을 알아봅니다. 결제 요청과 승인 과정을 설명합니다.",
    ),
]


def page_markdown(slug: str, title: str, lead: str, revision: int = 0) -> str:
    """A realistic page: front matter, headings, prose, a code block with '#' lines."""
    return (
        f"---\ntitle: {title}\ndescription: {lead[:40]}\n---\n\n"
        f"# {title}\n\n{lead} Revision {revision}.\n\n"
        f"## Overview of {slug}\n\n" + ("This section explains the concepts in detail. " * 12) + "\n\n"
        f"## Example\n\n```python\n# configure {slug}\nclient = Client(api_key='k')  # comment\n```\n\n"
        "### Notes\n\n" + ("Further notes for careful readers. " * 10) + "\n"
    )


def llms_txt(pages: list[tuple[str, str, str]], extra: str = "") -> str:
    """An llms.txt listing the pages under two sections, with relative links."""
    lines = ["# Demo Docs", "", "> Documentation for the demo payment SDK.", "", "## Guides", ""]
    half = len(pages) // 2
    for slug, title, lead in pages[:half]:
        lines.append(f"- [{title}](guides/{slug}.md): {lead[:30]}")
    lines += ["", "## Reference", ""]
    for slug, title, _lead in pages[half:]:
        lines.append(f"- [{title}](reference/{slug}.md)")
    return "\n".join(lines) + "\n" + extra


def page_path(i: int, slug: str, n: int) -> str:
    """Where page ``i`` of ``n`` lives on the site."""
    return f"/{'guides' if i < n // 2 else 'reference'}/{slug}.md"


def publish_site(site: Site, revision: int = 0) -> list[str]:
    """Put the demo site on ``site``; returns the page paths."""
    paths = []
    for i, (slug, title, lead) in enumerate(TOPICS):
        path = page_path(i, slug, len(TOPICS))
        site.add(path, page_markdown(slug, title, lead, revision))
        paths.append(path)
    site.add("/llms.txt", llms_txt(TOPICS), content_type="text/plain; charset=utf-8")
    return paths


FAST_CRAWL = (
    "crawl = { timeout = 1.5, retries = 1, backoff = 0.05, max_retry_after = 3.0, max_bytes = 200000 }"
)


def write_config(directory: Path, source: str, extra: str = "") -> Path:
    """A libraries.toml with one library ``demo`` reading ``source``."""
    path = directory / "libraries.toml"
    path.write_text(
        f'[[library]]\nid = "demo"\nname = "Demo"\nllms_txt = "{source}"\n{FAST_CRAWL}\n{extra}\n',
        encoding="utf-8",
    )
    return path


#: The type of the ``build`` fixture (tests/e2e/conftest.py): build library ``demo`` from a config.
Build = Callable[..., Any]


def tree_digests(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (the version lock file aside), by relative path."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def packaged_entry(release: Path) -> PackagedBundle:
    """The one bundle a release folder's ``index.json`` lists."""
    (raw,) = json.loads((release / INDEX).read_text())["bundles"]
    return msgspec.convert(raw, PackagedBundle)
