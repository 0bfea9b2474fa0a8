"""One hostile page among good ones: the build finishes, indexes the rest and names the bad page.

Issue 19: one page whose preparation took minutes held the whole build. Each page now has a CPU budget
in its worker process; these tests run the real ``docbundle-index build`` against a loopback site. The
hostile page is a markdown page of 500,000 ``[``: markdown-it-py pays tens of microseconds per
character on it (looking for the end of a link label at each one), about 10 s of CPU in all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from clikit import index_cli
from docsite import page_markdown
from sitesrv import Site

GOOD = 100
HOSTILE_PATH = "/brackets.md"


def _hostile_page(size: int = 500_000) -> str:
    return "[" * size


def _publish(site: Site) -> None:
    lines = ["# Demo Docs", "", "> A site with one hostile page.", "", "## Guides", ""]
    for i in range(GOOD):
        site.add(f"/guides/p{i}.md", page_markdown(f"p{i}", f"Page {i}", f"Lead of page number {i}."))
        lines.append(f"- [Page {i}](guides/p{i}.md)")
    site.add(HOSTILE_PATH, _hostile_page())
    lines.append(f"- [Brackets]({HOSTILE_PATH[1:]})")
    site.add("/llms.txt", "\n".join(lines) + "\n", content_type="text/plain; charset=utf-8")


def test_a_page_over_its_budget_fails_alone_and_the_build_indexes_the_rest(
    site: Site, tmp_path: Path
) -> None:
    _publish(site)
    config = tmp_path / "libraries.toml"
    config.write_text(
        f'[[library]]\nid = "demo"\nllms_txt = "{site.url("/llms.txt")}"\n'
        "crawl = { timeout = 10, retries = 0, max_bytes = 2000000 }\n",
        encoding="utf-8",
    )
    out = tmp_path / "bundles"
    env = {**os.environ, "DOCBUNDLE_PAGE_SECONDS": "2", "DOCBUNDLE_WORKERS": "2"}
    # Before the budget this build ran for minutes: the bounded wait is the failure then.
    r = index_cli(
        "build", "--config", str(config), "--out", str(out), "--no-cache", "--json", timeout=150, env=env
    )
    assert r.returncode == 0, r.stdout + r.stderr
    (lib,) = json.loads(r.stdout)["libraries"]
    assert lib["status"] == "built"
    assert lib["documents"] == GOOD
    (failure,) = lib["failures"]
    assert failure["url"].endswith(HOSTILE_PATH)
    assert failure["kind"] == "budget"
    assert "CPU budget of 2 s" in failure["error"]
    # The manifest names it too, with the same reason.
    (manifest,) = out.glob("demo/latest/*/manifest.json")
    documents = json.loads(manifest.read_text())["documents"]
    (bad,) = [d for d in documents if d.get("error")]
    assert bad["url"].endswith(HOSTILE_PATH) and bad["error_kind"] == "budget"
    assert bad["error"] == failure["error"]
    assert sum(1 for d in documents if not d.get("error")) == GOOD
