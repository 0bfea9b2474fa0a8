"""The "weak match" note: a search whose hits do not hold the question's informative words says so.

Driven through the SDK's in-memory client (what a model receives) and the ``docbundle search`` command
as a subprocess. Keyword modes are asked for explicitly, so the checks hold with or without the semantic
extra; hybrid and semantic are checked in ``test_server_semantic``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from clikit import server_cli
from docbundle.server.catalog import Catalog
from docbundle.server.mcp.server import create_server
from mcp import Client

pytestmark = pytest.mark.anyio


async def search(catalog: Catalog, **args: Any) -> tuple[dict[str, Any], str]:
    with anyio.fail_after(30):
        async with Client(create_server(catalog)) as c:
            r = await c.call_tool("search_documents", {"mode": "balanced", **args})
    assert not r.is_error, r.content
    assert isinstance(r.structured_content, dict)
    return r.structured_content, r.content[0].text  # type: ignore[union-attr]


async def test_a_question_of_stop_and_question_words_says_it_names_no_topic(catalog: Catalog) -> None:
    r, text = await search(catalog, query="how do I", libraryId="demo")
    assert r["hits"], "the hits are still returned: the model decides"
    assert r["wordMatch"] == "no_topic"
    assert r["message"].startswith("Weak match: the question has no informative word")
    assert "merely hold how" in r["message"] and r["message"] in text
    assert "\n" not in r["message"]


async def test_an_out_of_domain_question_says_no_hit_holds_its_words(catalog: Catalog) -> None:
    # "operators" is all over the demo handbook; the three rare words are nowhere.
    r, text = await search(catalog, query="kubernetes helm ingress operators", libraryId="demo")
    assert r["hits"] and r["wordMatch"] == "weak"
    assert r["message"] == (
        "Weak match: no section holds most of the question's words (kubernetes, helm, ingress, operators; "
        "rarer words count more); this library may not cover it."
    )
    assert r["message"] in text
    everywhere, _ = await search(catalog, query="kubernetes helm ingress operators")
    assert (
        everywhere["wordMatch"] == "weak"
        and "the libraries searched may not cover it" in everywhere["message"]
    )


async def test_hits_that_hold_the_question_s_words_carry_no_note(catalog: Catalog) -> None:
    r, text = await search(catalog, query="useEffect cleanup", libraryId="demo")
    assert r["wordMatch"] == "matched" and r["message"] is None and "Weak match" not in text
    # The rarer word carries the question: a section on webhooks that does not say "configure" is an answer.
    rare, _ = await search(catalog, query="how should I configure webhooks", libraryId="demo")
    top = rare["hits"][0]
    assert rare["wordMatch"] == "matched" and top["documentId"] == "topics/webhooks.md"
    assert "configur" not in top["text"].lower()
    none, _ = await search(catalog, query="kubernetes", libraryId="demo")
    assert none["hits"] == [] and none["wordMatch"] is None and "No results" in none["message"]


def test_the_cli_prints_the_note(bundles_root: Path) -> None:
    command = ["search", "demo", "how do I", "--mode", "balanced", "--bundles", str(bundles_root)]
    done = server_cli(*command, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Weak match: the question has no informative word" in done.stdout
