"""Issue 31, items 1 and 3, and a library folder that is a symbolic link: odd files in the bundles folder.

Someone with write access to the bundles folder plants, in place of ``catalog.json``, a version's
``CURRENT`` or a bundle's ``manifest.json``: a FIFO (an ``open`` that blocks for ever), a symbolic link to
``/dev/zero`` (``stat`` says 0 bytes, ``read`` never ends), a sparse file of gigabytes, or JSON nested
5,000 deep (msgspec raises ``RecursionError``). ``docbundle serve`` over stdio, talked to with the MCP SDK
client, must start (a hang guard bounds it), list every library, serve the others and name the bad file:
a bad ``catalog.json`` is rebuilt from the manifests, a bad ``CURRENT`` or manifest fails its library.
A library folder, or a version folder, that is a symbolic link is refused the same way: what it points
at lies outside the bundles folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from clikit import server_cli
from docbundle.bundle.summary import SUMMARY_NAME, update_summary
from mcp import Client, StdioServerParameters
from serverkit import GOLDEN_BUILD, install_golden

pytestmark = pytest.mark.anyio

# A server that hangs on a planted file fails the test after this long (a hang guard, not a timing).
HANG_GUARD = 60
GOOD = ("alpha", "omega")  # libraries that must keep serving
VICTIM = "victim"
SPARSE_BYTES = 3 * 1024**3  # a sparse file past every bound (no disk blocks are written)
# ~10 KB: an unknown key whose value is nested 5,000 deep (msgspec skips it recursively and raises
# RecursionError, before any typed field could refuse the file).
NESTED = b'{"format_version": 1, "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")


def _sparse(path: Path) -> None:
    with open(path, "r+b" if path.exists() else "wb") as fh:
        fh.truncate(SPARSE_BYTES)


def _nested(path: Path) -> None:
    path.write_bytes(NESTED)


PLANT: dict[str, Callable[[Path], None]] = {
    "fifo": _fifo,
    "dev-zero": _dev_zero,
    "sparse": _sparse,
    "nested": _nested,
}


def _tree(root: Path) -> Path:
    """alpha, victim and omega: three copies of the golden bundle."""
    for lib in (*GOOD, VICTIM):
        install_golden(root, lib)
    return root


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three libraries, built once (each test attacks a private copy)."""
    return _tree(tmp_path_factory.mktemp("attacks") / "bundles")


def _copy(tree: Path, tmp_path: Path, *, summary: bool) -> Path:
    root = tmp_path / "bundles"
    shutil.copytree(tree, root, symlinks=True)
    if summary:
        assert update_summary(root), "the summary was not written"
    return root


def _params(root: Path, log: Path) -> StdioServerParameters:
    """``docbundle serve --bundles ROOT`` over stdio, its stderr into ``log``."""
    start = (
        "import os, runpy, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC); "
        "os.dup2(fd, 2); sys.argv = ['docbundle', 'serve', '--bundles', sys.argv[2], '--reload-interval', '0']; "
        "runpy.run_module('docbundle.server', run_name='__main__')"
    )
    # The whole environment (the SDK passes only a few variables by default): the server runs the code
    # under test, whatever PYTHONPATH names.
    return StdioServerParameters(
        command=sys.executable, args=["-c", start, str(log), str(root)], env=dict(os.environ)
    )


async def _served(root: Path, log: Path) -> tuple[dict[str, dict[str, Any]], str | None]:
    """Start the server (within the hang guard), list the libraries, search each good one, then the
    victim: the listing, and the victim search's error text (None when it answered)."""
    with anyio.fail_after(HANG_GUARD):
        async with Client(_params(root, log)) as client:
            listed = await client.call_tool("list_libraries", {})
            assert not listed.is_error, listed.content
            libraries = {lib["id"]: lib for lib in (listed.structured_content or {})["libraries"]}
            for lib in GOOD:
                found = await client.call_tool(
                    "search_documents", {"query": "useEffect cleanup", "libraryId": lib}
                )
                assert not found.is_error and (found.structured_content or {})["hits"], found.content
            victim = await client.call_tool(
                "search_documents", {"query": "useEffect cleanup", "libraryId": VICTIM}
            )
    return libraries, str(victim.content) if victim.is_error else None


def _failed(libraries: dict[str, dict[str, Any]], lib: str, *words: str) -> str:
    """``lib`` is listed as failed and its reason holds every one of ``words``; the reason."""
    assert lib in libraries, sorted(libraries)
    assert libraries[lib]["status"] == "failed", libraries[lib]
    reason = str(libraries[lib]["reason"])
    for word in words:
        assert word in reason, reason
    return reason


@pytest.mark.parametrize("kind", sorted(PLANT))
async def test_a_hostile_catalog_json_is_rebuilt_and_every_library_serves(
    tree: Path, tmp_path: Path, kind: str
) -> None:
    root = _copy(tree, tmp_path, summary=True)
    PLANT[kind](root / SUMMARY_NAME)
    log = tmp_path / "serve.log"
    libraries, refused = await _served(root, log)
    assert sorted(libraries) == sorted((*GOOD, VICTIM)) and refused is None, refused
    assert all(lib["status"] != "failed" for lib in libraries.values()), libraries
    text = log.read_text(encoding="utf-8", errors="replace")
    assert SUMMARY_NAME in text and "rebuilt from the manifests" in text, text[-2000:]
    assert "Traceback" not in text, text[-2000:]


@pytest.mark.parametrize("summary", [False, True], ids=["read-at-start", "checked-on-first-use"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse"])
async def test_a_hostile_current_fails_its_library_only(
    tree: Path, tmp_path: Path, kind: str, summary: bool
) -> None:
    root = _copy(tree, tmp_path, summary=summary)
    PLANT[kind](root / VICTIM / "latest" / "CURRENT")
    libraries, refused = await _served(root, tmp_path / "serve.log")
    assert sorted(libraries) == sorted((*GOOD, VICTIM))
    _failed(libraries, VICTIM, "victim/latest/CURRENT")
    assert str(root) not in libraries[VICTIM]["reason"]  # no server paths in what a client reads
    assert refused is not None and "CURRENT" in refused, refused


@pytest.mark.parametrize("summary", [False, True], ids=["read-at-start", "checked-on-first-use"])
@pytest.mark.parametrize("kind", sorted(PLANT))
async def test_a_hostile_manifest_fails_its_library_only(
    tree: Path, tmp_path: Path, kind: str, summary: bool
) -> None:
    root = _copy(tree, tmp_path, summary=summary)
    PLANT[kind](root / VICTIM / "latest" / GOLDEN_BUILD / "manifest.json")
    libraries, refused = await _served(root, tmp_path / "serve.log")
    assert sorted(libraries) == sorted((*GOOD, VICTIM))
    # With a summary too: the check on first use (the listing) reads the manifest itself, never
    # taking the summary's entry for it (issue 31, item 10), so the listing already says why.
    _failed(libraries, VICTIM, "manifest.json")
    assert refused is not None and "manifest.json" in refused, refused


@pytest.mark.parametrize("summary", [False, True], ids=["read-at-start", "checked-on-first-use"])
@pytest.mark.parametrize("level", ["library", "version", "build"])
async def test_a_library_folder_that_is_a_symlink_is_refused(
    tree: Path, tmp_path: Path, level: str, summary: bool
) -> None:
    """A bundle outside the bundles folder, linked in as a library, version or build folder, is not
    served: listed as failed with the reason, while the others serve. With a summary written while the
    folder was a real one, the link is found when the library is checked on its first use."""
    root = _copy(tree, tmp_path, summary=summary)
    here = {
        "library": root / VICTIM,
        "version": root / VICTIM / "latest",
        "build": root / VICTIM / "latest" / GOLDEN_BUILD,
    }[level]
    moved = tmp_path / "outside" / here.name
    moved.parent.mkdir()
    shutil.move(here, moved)
    here.symlink_to(moved, target_is_directory=True)
    libraries, refused = await _served(root, tmp_path / "serve.log")
    assert sorted(libraries) == sorted((*GOOD, VICTIM))
    _failed(libraries, VICTIM, "symbolic link", here.relative_to(root).as_posix())
    assert refused is not None and "symbolic link" in refused, refused


def test_a_lock_file_that_is_a_fifo_stops_serve_with_a_clear_error(tmp_path: Path) -> None:
    """The lock file is what pins every bundle: one that cannot be read refuses to start (it is never
    skipped, which would serve unpinned bundles), and a FIFO does not hang it."""
    root = install_golden(tmp_path / "bundles").parents[2]
    lock = root / "bundles.lock"
    os.mkfifo(lock)
    for args in ([], ["--lock", str(lock)]):
        r = server_cli("serve", "--bundles", str(root), *args, timeout=HANG_GUARD, stdin=subprocess.DEVNULL)
        assert r.returncode != 0 and "bundles.lock" in r.stderr and "FIFO" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr, r.stderr
