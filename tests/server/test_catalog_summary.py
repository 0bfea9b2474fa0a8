"""Issue 22, item 1: the catalogue summary (``<bundles>/catalog.json``), written by every publish, install
and prune, read at start instead of every manifest, and never trusted past what ``CURRENT`` says."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import msgspec
import pytest
from clikit import server_cli
from docbundle.bundle.layout import current_bundles, read_current
from docbundle.bundle.manifest import MANIFEST_NAME, decode_manifest, encode_manifest
from docbundle.bundle.release import package
from docbundle.bundle.summary import SUMMARY_NAME, entry_from_manifest, read_summary, write_summary
from docbundle.indexer.pipeline.write import prune
from docbundle.server.catalog import Catalog
from mcp import Client, StdioServerParameters
from serverkit import call, connect, install_golden
from treekit import build, builds, one_page

pytestmark = pytest.mark.anyio


def _summary(root: Path) -> dict[tuple[str, str], str]:
    """(library, version) -> build id, as the summary on disk says."""
    entries = read_summary(root)
    assert entries is not None, "no readable catalog.json"
    return {e.key: e.build_id for e in entries}


def test_a_build_writes_the_summary_and_each_rebuild_updates_it(tmp_path: Path) -> None:
    root = tmp_path / "bundles"
    first = build(tmp_path / "work" / "alpha.toml", root, one_page("alpha", "lanterns")).build_id
    build(tmp_path / "work" / "beta.toml", root, one_page("beta", "kettles"))
    assert _summary(root) == {
        ("alpha", "latest"): first,
        ("beta", "latest"): read_current(root / "beta" / "latest"),
    }
    second = build(tmp_path / "work" / "alpha.toml", root, one_page("alpha", "compasses")).build_id
    assert second != first
    assert _summary(root)[("alpha", "latest")] == second


def test_install_writes_the_summary(tmp_path: Path) -> None:
    built = tmp_path / "built"
    install_golden(built)
    (entry,) = package(current_bundles(built), tmp_path / "release")
    bundles = tmp_path / "bundles"
    r = server_cli("install", str(tmp_path / "release" / entry.archive), "--bundles", str(bundles))
    assert r.returncode == 0, r.stderr
    assert _summary(bundles) == {("golden", "latest"): read_current(bundles / "golden" / "latest")}


def test_a_prune_writes_the_summary(tmp_path: Path) -> None:
    root = tmp_path / "bundles"
    build(tmp_path / "work" / "alpha.toml", root, one_page("alpha", "lanterns"))
    current = build(tmp_path / "work" / "alpha.toml", root, one_page("alpha", "compasses")).build_id
    (root / SUMMARY_NAME).unlink()
    vdir = root / "alpha" / "latest"
    assert prune(vdir, keep=1), "nothing was pruned"
    assert builds(vdir) == {current}
    assert _summary(root) == {("alpha", "latest"): current}


async def test_a_missing_summary_is_rebuilt_from_the_manifests(tmp_path: Path) -> None:
    root = tmp_path / "bundles"
    for i in range(3):
        install_golden(root, f"lib-{i}", name=f"Library {i}")
    assert not (root / SUMMARY_NAME).exists()  # copied by hand: no writer ran
    catalog = Catalog.load(root)
    try:
        assert sorted(_summary(root)) == [(f"lib-{i}", "latest") for i in range(3)]
        async with connect(catalog) as c:
            listed = await call(c, "list_libraries")
        assert [lib["name"] for lib in listed["libraries"]] == ["Library 0", "Library 1", "Library 2"]
    finally:
        catalog.close()


@pytest.mark.parametrize(
    "damage", [b"", b"{not json", b'{"format": "docbundle-catalog", "format_version": 99}']
)
def test_an_unreadable_summary_is_rebuilt(tmp_path: Path, damage: bytes) -> None:
    root = tmp_path / "bundles"
    install_golden(root, "lib-a", description="the real description")
    (root / SUMMARY_NAME).write_bytes(damage)
    catalog = Catalog.load(root)
    try:
        assert catalog.library("lib-a").description == "the real description"
        assert _summary(root) == {("lib-a", "latest"): read_current(root / "lib-a" / "latest")}
    finally:
        catalog.close()


async def test_a_summary_that_names_another_build_than_current_is_not_served(tmp_path: Path) -> None:
    """The summary says build A (still on disk, with its manifest); CURRENT names B: B is served."""
    root = tmp_path / "bundles"
    # build_target runs its own event loop: in a thread, out of this test's.
    old = await anyio.to_thread.run_sync(
        lambda: build(tmp_path / "work" / "alpha.toml", root, one_page("alpha", "lanterns")).build_id
    )
    new = await anyio.to_thread.run_sync(
        lambda: build(tmp_path / "work" / "alpha.toml", root, one_page("alpha", "compasses")).build_id
    )
    vdir = root / "alpha" / "latest"
    assert old in builds(vdir)
    data = (vdir / old / MANIFEST_NAME).read_bytes()
    lie = entry_from_manifest(decode_manifest(data), "0" * 64)
    write_summary(root, [lie])
    assert _summary(root) == {("alpha", "latest"): old}
    catalog = Catalog.load(root)
    try:
        assert catalog.version_entry("alpha").build_id == new
        async with connect(catalog) as c:
            listed = await call(c, "list_libraries")
            assert [lib["buildId"] for lib in listed["libraries"]] == [new]
            found = await call(c, "search_documents", query="compasses", libraryId="alpha")
            assert found["hits"] and found["buildId"] == new
            gone = await call(c, "search_documents", query="lanterns", libraryId="alpha")
            assert not gone["hits"]
        assert _summary(root) == {("alpha", "latest"): new}, "the stale summary was not rewritten"
    finally:
        catalog.close()


async def test_a_summary_entry_that_misdescribes_its_build_is_replaced_by_its_manifest(
    tmp_path: Path,
) -> None:
    """Same build id as CURRENT, other content hash: the check reads the manifest, the bundle is served
    with the manifest's hash, and the summary is rewritten (issue 31, item 10: never the summary's)."""
    root = tmp_path / "bundles"
    install_golden(root, "lib-a")
    Catalog.load(root).close()
    (entry,) = read_summary(root) or []
    forged = msgspec.structs.replace(entry, content_hash="f" * 64)
    write_summary(root, [forged])
    catalog = Catalog.load(root)
    try:
        async with connect(catalog) as c:
            found = await call(c, "search_documents", query="useEffect cleanup", libraryId="lib-a")
            assert found["hits"]
            listed = await call(c, "list_libraries")
        assert [lib["contentHash"] for lib in listed["libraries"]] == [entry.content_hash]
    finally:
        catalog.close()
    assert read_summary(root) == [entry], "the misdescribing summary entry was not rewritten"


async def test_a_manifest_rewritten_in_place_after_its_check_is_refused_when_opened(tmp_path: Path) -> None:
    """The entry was read from the manifest at the check; a manifest rewritten since (same build id, other
    content hash) does not describe what was listed: the bundle is refused, saying why."""
    root = tmp_path / "bundles"
    bundle = install_golden(root, "lib-a")
    catalog = Catalog.load(root)
    try:
        catalog.library("lib-a")  # checked: its entry read from the manifest, its lease taken
        manifest = decode_manifest((bundle / MANIFEST_NAME).read_bytes())
        build = msgspec.structs.replace(manifest.build, content_hash="f" * 64)
        (bundle / MANIFEST_NAME).write_bytes(encode_manifest(msgspec.structs.replace(manifest, build=build)))
        async with connect(catalog) as c:
            result = await c.call_tool(
                "search_documents", {"query": "useEffect cleanup", "libraryId": "lib-a"}
            )
        assert result.is_error
        assert "manifest changed after the server read it" in str(result.content)
    finally:
        catalog.close()


def test_a_version_published_by_hand_is_read_from_its_manifest(tmp_path: Path) -> None:
    """A library copied in without a writer (no summary entry) is still found, and the summary gains it."""
    root = tmp_path / "bundles"
    install_golden(root, "lib-a")
    Catalog.load(root).close()
    assert list(_summary(root)) == [("lib-a", "latest")]
    shutil.copytree(root / "lib-a", root / "lib-b")
    manifest = json.loads(
        (root / "lib-b" / "latest" / read_current(root / "lib-b" / "latest") / MANIFEST_NAME).read_text()
    )
    assert manifest["library"]["id"] == "lib-a"  # a misplaced bundle: refused, and kept out of the summary
    catalog = Catalog.load(root)
    try:
        assert catalog.state(catalog.version_entry("lib-b"))[0] == "failed"
        assert list(_summary(root)) == [("lib-a", "latest")]
    finally:
        catalog.close()
    install_golden(root, "lib-c")
    catalog = Catalog.load(root)
    try:
        assert catalog.state(catalog.version_entry("lib-c"))[0] == "available"
        assert list(_summary(root)) == [("lib-a", "latest"), ("lib-c", "latest")]
    finally:
        catalog.close()


def test_with_a_lock_file_every_manifest_is_read(tmp_path: Path) -> None:
    """A pin names the manifest's sha256: the summary's word for it is not taken."""
    root = tmp_path / "bundles"
    install_golden(root)
    Catalog.load(root).close()
    (entry,) = read_summary(root) or []
    manifest_sha = entry.manifest_sha256
    write_summary(root, [msgspec.structs.replace(entry, manifest_sha256="0" * 64)])
    lock = tmp_path / "bundles.lock"
    lock.write_text(
        f'[libraries.golden]\nlatest = {{ content_hash = "{entry.content_hash}", '
        f'manifest_sha256 = "{manifest_sha}" }}\n',
        encoding="utf-8",
    )
    catalog = Catalog.load(root, lock=lock)
    try:
        assert catalog.state(catalog.version_entry("golden")) == ("available", None)
    finally:
        catalog.close()


async def test_a_catalogue_past_the_soft_open_file_limit_is_served(tmp_path: Path) -> None:
    """One lease per library: serve raises its soft limit (here 64) to the hard one."""
    root = tmp_path / "bundles"
    for i in range(80):
        install_golden(root, f"lib-{i:03d}")
    start = (
        "import resource, runpy, sys; _, hard = resource.getrlimit(resource.RLIMIT_NOFILE); "
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard)); "
        "sys.argv = ['docbundle', 'serve', '--bundles', sys.argv[1]]; "
        "runpy.run_module('docbundle.server', run_name='__main__')"
    )
    params = StdioServerParameters(command=sys.executable, args=["-c", start, str(root)])
    with anyio.fail_after(120):
        async with Client(params) as client:
            found = await client.call_tool(
                "search_documents", {"query": "useEffect cleanup", "libraryId": "lib-079"}
            )
    assert not found.is_error, found.content
    assert (found.structured_content or {})["hits"]
