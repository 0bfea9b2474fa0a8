"""``docbundle pull``: a release made by ``docbundle-index package``, served over real HTTP on 127.0.0.1."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from clikit import server_cli
from docbundle.bundle.layout import read_current
from docbundle.bundle.reader import verify_bundle
from docbundle.bundle.release import INDEX, SUMS, PackagedBundle, render_sums
from docbundle.server.errors import PullError
from docbundle.server.pull import MAX_INDEX_BYTES, Spec, choose, parse_spec
from docsite import packaged_entry
from sitesrv import Site


def docbundle(*args: str, tmp: Path, releases: str = "") -> subprocess.CompletedProcess[str]:
    """``docbundle ARGS`` in a fresh process whose temporary folder is ``tmp`` (to see what it leaves).

    ``$DOCBUNDLE_RELEASES`` is ``releases``, set to a loopback address whenever ``--from`` is not given:
    a test must never reach the project's real release.
    """
    tmp.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "DOCBUNDLE_RELEASES"}
    if releases:
        env["DOCBUNDLE_RELEASES"] = releases
    elif "--from" not in args:
        env["DOCBUNDLE_RELEASES"] = "http://127.0.0.1:9/unreachable/"  # the discard port: refused at once
    env["TMPDIR"] = str(tmp)
    return server_cli(*args, env=env)


def _copy(release: Path, to: Path) -> Path:
    shutil.copytree(release, to)
    return to


def _rewrite_member(archive: Path, name: str) -> None:
    """Flip one byte of member ``.../name`` and pack the archive again (same names and sizes)."""
    out = io.BytesIO()
    with tarfile.open(archive, "r:gz") as src, tarfile.open(fileobj=out, mode="w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            if data is not None and member.name.endswith("/" + name):
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    archive.write_bytes(out.getvalue())


def _leftovers(bundles: Path, tmp: Path) -> list[str]:
    """Temporary folders a pull left in the bundles tree or the temporary folder."""
    found = [p.name for p in tmp.iterdir()] if tmp.exists() else []
    if bundles.exists():
        found += [p.name for p in bundles.rglob(".tmp-*")]
    return found


def test_list_then_pull_installs_a_bundle_that_searches(site: Site, release: Path, tmp_path: Path) -> None:
    site.serve_dir(release, "/rel")
    base, bundles, tmp = site.url("/rel/"), tmp_path / "bundles", tmp_path / "tmp"

    r = docbundle("pull", "--list", "--from", base, tmp=tmp)
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()  # a table: its header, then one row per library version
    assert header.split() == ["LIBRARY", "NAME", "CATEGORY", "STATE", "AGE", "DOCS", "SIZE", "BUILD"]
    assert row.startswith("golden@latest") and row.split()[-1] == "latest"
    r = docbundle("pull", "--list", "--json", "--from", base + INDEX, tmp=tmp)
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)
    assert listed["release"] == base and listed["bundles"][0]["archive"] == packaged_entry(release).archive
    assert not bundles.exists()  # --list installs nothing

    r = docbundle("pull", "golden", "--from", base, "--bundles", str(bundles), tmp=tmp)
    assert r.returncode == 0, r.stderr
    # Live reload serves it: no restart is needed (issue 23).
    assert "restart a running server" not in r.stderr
    assert "a running `docbundle serve` over this folder serves it within 2 s (live reload)" in r.stderr
    entry = packaged_entry(release)
    assert r.stdout.strip().startswith(f"installed golden@latest build {entry.build_id}")
    assert read_current(bundles / "golden" / "latest") == entry.build_id
    assert (
        verify_bundle(bundles / "golden" / "latest" / entry.build_id).build.content_hash == entry.content_hash
    )
    assert _leftovers(bundles, tmp) == []
    fetched = [q.path for q in site.requests if q.path.startswith("/rel/")]
    assert fetched[-3:] == [f"/rel/{INDEX}", f"/rel/{SUMS}", f"/rel/{entry.archive}"]

    r = docbundle("search", "golden", "tables", "--bundles", str(bundles), "--json", tmp=tmp)
    assert r.returncode == 0, r.stderr
    assert any("tables" in hit["documentId"] for hit in json.loads(r.stdout)["hits"])

    r = docbundle("pull", "golden@latest", "--from", base, "--bundles", str(bundles), tmp=tmp)
    assert r.returncode == 0 and "already present" in r.stdout
    assert "nothing changed: a running server over this folder already serves it" in r.stderr


def test_an_unreachable_release_says_what_works_offline(tmp_path: Path) -> None:
    """No network: the error says why in words and points to --from and install (issue 23)."""
    advice = (
        "`docbundle pull --from URL` reads another copy of the release folder (a mirror, an internal web "
        "server), and `docbundle install ARCHIVE` installs archives copied here"
    )
    refused = docbundle("pull", "--list", tmp=tmp_path / "tmp")
    assert refused.returncode == 1 and "127.0.0.1 refused the connection." in refused.stderr
    assert advice in refused.stderr
    # A resolver that fails as it does offline, in the command's own process (no query leaves the host).
    hook = tmp_path / "offline"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import socket\n"
        "def _offline(*args, **kwargs):\n"
        "    raise socket.gaierror(-3, 'Temporary failure in name resolution')\n"
        "socket.getaddrinfo = _offline\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")])}
    env.pop("DOCBUNDLE_RELEASES", None)
    offline = server_cli("pull", "--list", "--from", "https://releases.example/bundles/", env=env)
    assert offline.returncode == 1 and "Traceback" not in offline.stderr
    assert (
        "cannot resolve releases.example (Temporary failure in name resolution): no network, or no DNS"
        in (offline.stderr)
    )
    assert advice in offline.stderr


@pytest.mark.parametrize("tamper", ["archive", "archive-and-sums", "everything"])
def test_a_tampered_release_is_refused_and_nothing_is_lost(
    tamper: str, site: Site, release: Path, tmp_path: Path
) -> None:
    """A byte of the archive flipped; then SHA256SUMS rewritten to match; then index.json as well."""
    site.serve_dir(release, "/good")
    bundles, tmp = tmp_path / "bundles", tmp_path / "tmp"
    r = docbundle("pull", "golden", "--from", site.url("/good/"), "--bundles", str(bundles), tmp=tmp)
    assert r.returncode == 0, r.stderr
    vdir = bundles / "golden" / "latest"
    before = {p: p.read_bytes() for p in sorted(vdir.rglob("*")) if p.is_file()}

    bad = _copy(release, tmp_path / "bad")
    entry = packaged_entry(bad)
    archive = bad / entry.archive
    if tamper == "everything":
        _rewrite_member(archive, "docs.bin")  # a well-formed archive whose docs.bin is not the manifest's
    else:
        data = bytearray(archive.read_bytes())
        data[len(data) // 2] ^= 0xFF
        archive.write_bytes(bytes(data))
    if tamper != "archive":
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        (bad / SUMS).write_text(render_sums({entry.archive: digest}))
        if tamper == "everything":
            index = json.loads((bad / INDEX).read_text())
            index["bundles"][0].update(sha256=digest, size=archive.stat().st_size)
            (bad / INDEX).write_text(json.dumps(index))
    site.serve_dir(bad, "/bad")

    r = docbundle("pull", "golden", "--from", site.url("/bad/"), "--bundles", str(bundles), tmp=tmp)
    assert r.returncode == 1, r.stdout
    assert "Traceback" not in r.stderr
    expected = {
        "archive": "does not match its sha256",
        "archive-and-sums": "index.json and SHA256SUMS give different sha256 values",
        "everything": "docs.bin does not match its sha256 in the manifest",
    }[tamper]
    assert expected in r.stderr
    after = {p: p.read_bytes() for p in sorted(vdir.rglob("*")) if p.is_file()}
    assert after == before  # the installed bundle and CURRENT untouched
    assert _leftovers(bundles, tmp) == []


def test_sizes_are_bounded(site: Site, release: Path, tmp_path: Path) -> None:
    bundles, tmp = tmp_path / "bundles", tmp_path / "tmp"
    short = _copy(release, tmp_path / "short")
    index = json.loads((short / INDEX).read_text())
    index["bundles"][0]["size"] -= 100  # the server then sends more than the index declares
    (short / INDEX).write_text(json.dumps(index))
    site.serve_dir(short, "/short")
    r = docbundle("pull", "golden", "--from", site.url("/short/"), "--bundles", str(bundles), tmp=tmp)
    assert r.returncode == 1 and "index.json says" in r.stderr, r.stderr
    assert not bundles.exists() and _leftovers(bundles, tmp) == []

    entry = packaged_entry(release)
    for name, kind, params, message in [
        ("cut", "oversized", {"size": 100, "declared": entry.size}, "is 100 bytes; index.json says"),
        ("reset", "reset", {}, "cannot fetch"),
        ("slow", "timeout", {"seconds": 0.5}, "cannot fetch"),
    ]:
        site.serve_dir(release, f"/{name}")
        site.fault(f"/{name}/{entry.archive}", kind, **params)
        r = docbundle("pull", "golden", "--from", site.url(f"/{name}/"), "--bundles", str(bundles), tmp=tmp)
        assert r.returncode == 1 and message in r.stderr and "Traceback" not in r.stderr, (name, r.stderr)
        assert not bundles.exists() and _leftovers(bundles, tmp) == []

    for framing in ("length", "chunked"):
        site.fault(f"/{framing}/{INDEX}", "oversized", size=MAX_INDEX_BYTES + 1, framing=framing)
        r = docbundle("pull", "--list", "--from", site.url(f"/{framing}/"), tmp=tmp)
        assert r.returncode == 1 and f"over the {MAX_INDEX_BYTES}-byte limit" in r.stderr, r.stderr


def test_only_http_is_fetched_and_errors_are_clear(site: Site, release: Path, tmp_path: Path) -> None:
    tmp, bundles = tmp_path / "tmp", tmp_path / "bundles"
    site.serve_dir(release, "/rel")
    site.fault(f"/redir/{INDEX}", "redirect", to=f"file://{release / INDEX}")
    cases = [
        (["pull", "golden"], 1, "cannot fetch http://127.0.0.1:9/unreachable/index.json"),
        (["pull", "golden", "--from", str(release)], 2, "only http(s) addresses are fetched"),
        (["pull", "golden", "--from", f"file://{release}/"], 2, "only http(s) addresses are fetched"),
        (["pull", "--list", "--from", site.url("/redir/")], 1, "redirects to file://"),
        (["pull", "--list", "--from", site.url("/none/")], 1, "answered 404"),
        (["pull", "nope", "--from", site.url("/rel/")], 1, "offers no library 'nope'; it offers: golden"),
        (
            ["pull", "golden@2.x", "--from", site.url("/rel/")],
            1,
            "no version '2.x' of golden; it offers: latest",
        ),
        (["pull", "Bad_Id", "--from", site.url("/rel/")], 2, "is not a library id"),
        (["pull", "--from", site.url("/rel/")], 2, "give LIBRARY[@VERSION] to install, or --list"),
        (["pull", "golden", "gold", "--from", site.url("/rel/")], 2, "give LIBRARY[@VERSION] to install"),
        (
            ["pull", "golden", "--category", "ai", "--from", site.url("/rel/")],
            2,
            "or --list [WORDS] [--category",
        ),
    ]
    for args, code, message in cases:
        r = docbundle(*args, "--bundles", str(bundles), tmp=tmp)
        assert (r.returncode, message in r.stderr) == (code, True), (args, r.stderr)
        assert "Traceback" not in r.stderr and r.stdout == ""
    assert not bundles.exists() and _leftovers(bundles, tmp) == []


def _e(
    version: str, *, latest: bool, built: str = "2026-01-01T00:00:00Z", build: str = "20260101"
) -> PackagedBundle:
    return PackagedBundle(
        library="lib",
        name="Lib",
        version=version,
        status="active",
        latest=latest,
        build_id=f"{build}-{'a' * 12}",
        content_hash="c" * 64,
        manifest_sha256="m" * 64,
        built_at=built,
        documents=1,
        archive=f"lib-{version}-{build}-{'a' * 12}.tar.gz",
        sha256="0" * 64,
        size=1,
    )


def test_which_entry_a_spec_picks() -> None:
    two = [_e("1.x", latest=False), _e("2.x", latest=True)]
    assert choose(two, Spec("lib", None)).version == "2.x"
    assert choose(two, Spec("lib", "1.x")).version == "1.x"
    with pytest.raises(PullError, match=r"none is marked latest; name one: lib@1.x, lib@2.x"):
        choose([_e("1.x", latest=False), _e("2.x", latest=False)], Spec("lib", None))
    newer = _e("2.x", latest=True, built="2026-02-01T00:00:00Z", build="20260201")
    assert choose([*two, newer], Spec("lib", None)) is newer
    assert parse_spec(" lib@2.x ") == Spec("lib", "2.x")
    for bad in ("lib@", "@2.x", "lib@1@2", "a b"):
        with pytest.raises(PullError):
            parse_spec(bad)


def test_the_cli_loads_no_network_code_until_pull_runs() -> None:
    code = (
        "import sys; import docbundle.server.cli as c; c._parser(); "
        "print(sorted(m for m in sys.modules if m in ('docbundle.server.pull', 'docbundle.common.netpolicy') "
        "or m.startswith('urllib.request')))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert r.stdout.strip() == "[]"


def test_every_pull_option_is_documented() -> None:
    import argparse
    import re

    from docbundle.server.cli import _parser

    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    options = [o for a in sub.choices["pull"]._actions for o in a.option_strings if o.startswith("--")]
    docs = (Path(__file__).resolve().parents[2] / "docs" / "releases.md").read_text(encoding="utf-8")
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert len(options) >= 6
    for option in set(options) - {"--help"}:
        mentioned = re.compile(rf"(?<![\w-]){re.escape(option)}(?![\w-])")
        assert mentioned.search(docs) and mentioned.search(readme), option
