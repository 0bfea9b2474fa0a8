"""The catalogue release ``bundles-latest``: ``docbundle-index nightly --roll`` writes its index,
``docbundle pull`` reads it by default (``--from``, else ``$DOCBUNDLE_RELEASES``, else the project's own)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import msgspec
import pytest
from clikit import index_cli
from docbundle.bundle.layout import read_current
from docbundle.bundle.release import INDEX, SUMS
from docbundle.bundle.releaseindex import encode_index
from docbundle.server import pull as pull_module
from docbundle.server.errors import PullError
from docbundle.server.pull import parse_spec, pull, release_base
from docsite import packaged_entry
from sitesrv import Site

ROOT = Path(__file__).resolve().parents[2]


def test_the_default_release_is_the_projects_rolling_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """--from, else $DOCBUNDLE_RELEASES, else bundles-latest of the project's Homepage (package metadata)."""
    home = tomllib.loads((ROOT / "server" / "pyproject.toml").read_text())["project"]["urls"]["Homepage"]
    monkeypatch.delenv("DOCBUNDLE_RELEASES", raising=False)
    assert release_base(None) == f"{home}/releases/download/bundles-latest/"
    monkeypatch.setenv("DOCBUNDLE_RELEASES", "https://mirror.example/rel/index.json")
    assert release_base(None) == "https://mirror.example/rel/"
    assert release_base("http://127.0.0.1:1/x") == "http://127.0.0.1:1/x/"
    monkeypatch.delenv("DOCBUNDLE_RELEASES")
    monkeypatch.setattr(pull_module, "default_release", lambda: None)
    with pytest.raises(PullError, match=r"no release to pull from: pass --from URL"):
        release_base(None)


def test_the_catalogue_index_keeps_every_librarys_newest_bundle_and_its_release(
    site: Site, release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nightly --merge --release TAG, then --roll: tonight's bundles replace the same library versions and
    name tonight's release; the others stay listed where they were; pull follows the index there."""
    entry = packaged_entry(release)
    old_golden = msgspec.structs.replace(
        entry, build_id="20250101-" + "b" * 12, built_at="2025-01-01T00:00:00Z"
    )
    old_golden = msgspec.structs.replace(old_golden, archive=f"golden-latest-{old_golden.build_id}.tar.gz")
    other = msgspec.structs.replace(entry, library="other", archive=f"other-latest-{entry.build_id}.tar.gz")
    previous = tmp_path / "previous" / INDEX
    previous.parent.mkdir()
    # A version 1 index, as bundles-latest held before the catalogue was spread over releases.
    previous.write_text(
        json.dumps(
            {
                "format": "docbundle-release-index",
                "version": 1,
                "bundles": msgspec.to_builtins([old_golden, other]),
            }
        )
    )
    config = tmp_path / "libraries.toml"
    config.write_text('[[library]]\nid = "golden"\nllms_txt = "x"\n', encoding="utf-8")
    tag = "bundles-20261127-7-01"
    tree = tmp_path / "releases"
    r = index_cli("nightly", "--merge", str(release), "--release", tag, "--dist", str(tree / tag))
    assert r.returncode == 0, r.stderr
    r = index_cli(
        "nightly", "--config", str(config), "--roll", str(tree / tag),
        "--previous", str(previous), "--dist", str(tree / "bundles-latest"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "2 bundle(s) in the release index, in 2 release(s)" in r.stdout
    index = json.loads((tree / "bundles-latest" / INDEX).read_text())
    assert index["version"] == 2
    # Tonight's entry also names the release's attestation, which the nightly job publishes beside it.
    assert {
        (b["library"], b["archive"], b.get("release", ""), b.get("attestation", "")) for b in index["bundles"]
    } == {
        ("golden", entry.archive, tag, "attestation.sigstore.json"),
        ("other", other.archive, "", ""),
    }
    # No archive is copied into bundles-latest: it holds the index, the timings, the health and its page.
    assert sorted(p.name for p in (tree / "bundles-latest").iterdir()) == [
        "catalogue.html",
        INDEX,
        "status.json",
        "timings.json",
    ]

    first = tmp_path / "first"
    r = index_cli(
        "nightly", "--config", str(config), "--roll", str(tree / tag),
        "--previous", str(first / INDEX), "--dist", str(first),
    )  # fmt: skip
    assert r.returncode == 0 and "1 bundle(s)" in r.stdout, r.stderr  # the first run: no previous index

    site.serve_dir(tree, "/download")
    monkeypatch.setenv("DOCBUNDLE_RELEASES", site.url("/download/bundles-latest/"))
    done = pull(parse_spec("golden"), release_base(None), tmp_path / "bundles")
    assert (done.library, done.build_id) == ("golden", entry.build_id)
    assert read_current(tmp_path / "bundles" / "golden" / "latest") == entry.build_id
    assert site.hits(f"/download/{tag}/{entry.archive}") == 1 and site.hits(f"/download/{tag}/{SUMS}") == 1


def test_a_release_never_holds_more_than_997_archives(release: Path, tmp_path: Path) -> None:
    """--merge refuses to make a release GitHub could not hold (1,000 assets with SHA256SUMS, index.json
    and the attestation), and a release tag that is not one path segment."""
    entry = packaged_entry(release)
    data = (release / entry.archive).read_bytes()
    shard = tmp_path / "shard"
    shard.mkdir()
    entries = []
    for i in range(998):
        e = msgspec.structs.replace(
            entry, library=f"lib-{i:04d}", archive=f"lib-{i:04d}-latest-{entry.build_id}.tar.gz"
        )
        (shard / e.archive).write_bytes(data)
        entries.append(e)
    (shard / INDEX).write_bytes(encode_index(entries))
    r = index_cli(
        "nightly", "--merge", str(shard), "--release", "bundles-1-01", "--dist", str(tmp_path / "r")
    )
    assert r.returncode == 1 and "998 archives do not fit one release (997 archives, 1000 assets" in r.stderr
    r = index_cli("nightly", "--merge", str(release), "--release", "..", "--dist", str(tmp_path / "r2"))
    assert r.returncode == 1 and "'..' is not a release tag" in r.stderr, r.stderr
