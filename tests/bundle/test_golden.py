"""The committed golden bundle of every supported format version must always open and answer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from docbundle.bundle.manifest import SUPPORTED_FORMAT_VERSIONS
from docbundle.bundle.reader import open_bundle, verify_bundle
from docbundle.bundle.whooshio import searching
from whoosh.qparser import MultifieldParser, OrGroup

GOLDEN = Path(__file__).parent / "golden"


def _search(path: Path, text: str) -> list[str]:
    bundle = open_bundle(path)
    try:
        parser = MultifieldParser(["title", "headings", "body", "code"], bundle.index.schema, group=OrGroup)
        with searching(bundle.index) as s:
            hits = s.search(parser.parse(text), limit=5)
            return [bundle.store.get(h["doc"]).id for h in hits]
    finally:
        bundle.close()


@pytest.mark.parametrize("version", SUPPORTED_FORMAT_VERSIONS)
def test_golden_bundle_exists_and_verifies(version: int) -> None:
    m = verify_bundle(GOLDEN / f"v{version}")
    assert m.format_version == version
    assert m.library.id == "golden" and m.counts.documents == 3


def test_an_early_v1_bundle_still_verifies() -> None:
    """golden/v1-early was built by an earlier chunker, before the optional manifest fields (routing,
    converter, obtained) existed; it must keep verifying (the server tests serve it)."""
    m = verify_bundle(GOLDEN / "v1-early")
    assert m.format_version == 1 and m.library.id == "golden" and m.counts.documents == 3
    assert m.routing is None and m.build.chunking.chunker.startswith("docbundle-chunker/1 ")


@pytest.mark.parametrize("folder", ["v1", "v1-early"])
def test_golden_v1_answers_searches(folder: str) -> None:
    v1 = GOLDEN / folder
    assert _search(v1, "useEffect")[0] == "guides/hooks.md"
    assert _search(v1, "effect")[0] == "guides/hooks.md"
    assert _search(v1, "run")[0] == "guides/hooks.md"  # "Running", stemmed
    assert _search(v1, "sap.m.Table")[0] == "guides/tables.md"
    assert _search(v1, "결제위젯")[0] == "guides/widget-ko.md"


def test_golden_v1_documents_read_back() -> None:
    bundle = open_bundle(GOLDEN / "v1")
    try:
        docs = list(bundle.store)
        assert [d.id for d in docs] == ["guides/hooks.md", "guides/tables.md", "guides/widget-ko.md"]
        hooks = docs[0]
        assert hooks.chunks[0].heading_path == ["Hooks"]
        assert "// # not a heading" in hooks.text
        assert docs[2].optional and docs[2].section == "Optional"
    finally:
        bundle.close()


def test_rebuilding_the_golden_site_gives_the_golden_content_hash(tmp_path: Path) -> None:
    # Fails when the content-hash rule, the analyzer identity or the chunker's output changes:
    # then bump the format or regenerate the golden bundle (tests/bundle/make_golden.py) on purpose.
    from make_golden import build_golden

    rebuilt = verify_bundle(build_golden(tmp_path))
    assert rebuilt.build.content_hash == verify_bundle(GOLDEN / "v1").build.content_hash


def test_a_copy_of_the_golden_bundle_with_a_flipped_byte_is_refused(tmp_path: Path) -> None:
    from docbundle.bundle.errors import BundleIntegrityError

    copy = tmp_path / "b"
    shutil.copytree(GOLDEN / "v1", copy)
    seg = next((copy / "index").glob("*.seg"))
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0x01
    seg.write_bytes(bytes(data))
    with pytest.raises(BundleIntegrityError, match="does not match its sha256"):
        open_bundle(copy)
