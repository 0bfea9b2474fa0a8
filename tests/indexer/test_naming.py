"""``naming``: what ``add`` writes from a title and a summary is always valid, whatever the site wrote."""

from __future__ import annotations

import pytest
from docbundle.bundle.layout import LIBRARY_ID_RE, VERSION_RE
from docbundle.indexer.naming import derive_id, describe, title_version, unique_id
from hypothesis import given
from hypothesis import strategies as st

URL = st.sampled_from(
    ["https://docs.python.org/llms.txt", "http://127.0.0.1:8000/llms.txt", "https://x.co.uk/"]
)


@given(st.text(max_size=300), URL)
def test_the_id_is_always_a_valid_library_id(title: str, url: str) -> None:
    library_id, source = derive_id(title, url)
    assert LIBRARY_ID_RE.match(library_id) and source in ("title", "host name", "default")


@given(st.text(max_size=300))
def test_a_version_from_a_title_is_always_a_valid_version_name(title: str) -> None:
    version = title_version(title)
    assert version is None or VERSION_RE.match(version)


@given(st.text(max_size=300))
def test_the_description_keeps_only_words_of_the_summary(summary: str) -> None:
    description = describe(summary)
    assert set(description.split()) <= set(summary.split())
    assert "Links are relative" not in describe(summary + " Links are relative to this file.")


@given(st.sets(st.from_regex(r"[a-z][a-z0-9-]{0,70}", fullmatch=True), max_size=20), st.text(max_size=80))
def test_a_unique_id_is_new_and_valid(taken: set[str], title: str) -> None:
    chosen = unique_id(derive_id(title, "https://example.org/")[0], taken)
    assert chosen not in taken and LIBRARY_ID_RE.match(chosen)


@pytest.mark.parametrize(
    ("title", "url", "library_id", "source", "version"),
    [
        ("Django 3.2 documentation", "https://docs.djangoproject.com/llms.txt", "django", "title", "3.2"),
        ("Node.js v20.11.0 Documentation", "https://nodejs.org/llms.txt", "nodejs", "title", "20.11.0"),
        (
            "Welcome to Click — Click Documentation (8.1.x)",
            "https://click.example/",
            "click",
            "title",
            "8.1.x",
        ),
        ("Toss Payments developer docs: widget", "https://t.example/", "toss-payments", "title", None),
        ("Documentation", "https://docs.python.org/llms.txt", "python", "host name", None),
        ("결제위젯", "https://www.example.co.uk/llms.txt", "example", "host name", None),
        ("", "http://127.0.0.1:8000/llms.txt", "library", "default", None),
        ("Top 10 recipes", "https://r.example/", "top-recipes", "title", None),
    ],
)
def test_ids_and_versions_of_real_titles(
    title: str, url: str, library_id: str, source: str, version: str | None
) -> None:
    assert (derive_id(title, url), title_version(title)) == ((library_id, source), version)


def test_sentences_about_the_file_are_dropped() -> None:
    summary = "The web framework for perfectionists. Links are relative to this file. This file lists pages."
    assert describe(summary) == "The web framework for perfectionists."
    assert describe("Links are relative to this file.") == ""
    assert describe("This llms.txt indexes the docs. Use the API.") == "Use the API."
    # A library about llms.txt files keeps its words: only "this file" talk is the file's.
    assert (
        describe("The llms.txt specification and its tooling.")
        == "The llms.txt specification and its tooling."
    )
