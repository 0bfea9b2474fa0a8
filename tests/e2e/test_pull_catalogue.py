"""``docbundle pull`` from a catalogue spread over several releases, as the nightly job publishes it:
two nights of ``docbundle-index nightly`` (plan, one job per shard, one release folder per release of the
plan, then the release index of ``bundles-latest``), served over real HTTP on 127.0.0.1 in GitHub's
layout (``<download>/<tag>/<asset>``); and the same at 10,000 libraries: one download lists them all."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
from clikit import pull_cli
from docbundle.bundle.layout import read_current
from docbundle.bundle.release import INDEX, SUMS
from docbundle.bundle.releaseindex import decode_index, encode_index
from docbundle.indexer.cli import main as index_main
from sitesrv import Site

LIBRARIES = {
    "alpha": "# Alpha\n\nAlpha parses configuration files.\n",
    "beta": "# Beta\n\nBeta signs webhook events.\n",
    "gamma": "# Gamma\n\nGamma renders charts.\n",
}


def _site(root: Path, library: str, text: str) -> None:
    site = root / "sites" / library
    site.mkdir(parents=True, exist_ok=True)
    (site / "guide.md").write_text(text, encoding="utf-8")
    (site / "llms.txt").write_text(f"# {library}\n\n## Docs\n\n- [Guide](guide.md)\n", encoding="utf-8")


def _nightly(*args: str) -> None:
    assert index_main(["nightly", *args]) == 0


def _night(root: Path, night: str) -> list[str]:
    """One nightly run, each step the command the workflow's job runs; the tags it published."""
    config = ["--config", str(root / "libraries.toml"), "--out", str(root / "bundles")]
    latest = root / "download" / "bundles-latest"
    before = ["--timings", str(latest / "timings.json"), "--previous", str(latest / INDEX)]
    plan = root / f"plan-{night}.json"
    _nightly(*config, "--plan", "--plan-out", str(plan), "--target-minutes", "0.01",
             "--release-prefix", f"bundles-{night}-1", *before)  # fmt: skip
    shards = json.loads(plan.read_text())
    for shard in shards["shards"]:
        k = str(shard["shard"])
        _nightly(*config, "--plan-file", str(plan), "--shard", k, "--dist", str(root / night / f"shard-{k}"))
    tags = []
    for release in shards["releases"]:
        dists = [str(root / night / f"shard-{k}") for k in release["shards"]]
        _nightly(
            "--merge", *dists, "--release", release["tag"], "--dist", str(root / "download" / release["tag"])
        )
        tags.append(release["tag"])
    _nightly(*config, "--roll", *[str(root / "download" / t) for t in tags], *before, "--dist", str(latest))
    return tags


def test_pull_follows_the_catalogue_index_into_each_release(site: Site, tmp_path: Path) -> None:
    for library, text in LIBRARIES.items():
        _site(tmp_path, library, text)
    (tmp_path / "libraries.toml").write_text(
        "".join(f'[[library]]\nid = "{lib}"\nllms_txt = "sites/{lib}/llms.txt"\n' for lib in LIBRARIES),
        encoding="utf-8",
    )
    first = _night(tmp_path, "20261126")
    _site(tmp_path, "beta", "# Beta\n\nBeta signs webhook events with a rotating secret.\n")
    second = _night(tmp_path, "20261127")
    assert set(first).isdisjoint(second)

    latest = tmp_path / "download" / "bundles-latest"
    catalogue = decode_index((latest / INDEX).read_bytes(), "index.json")
    where = {e.library: e.release for e in catalogue}
    assert where["beta"] in second and where["alpha"] in first and where["gamma"] in first
    timings = json.loads((latest / "timings.json").read_text())["libraries"]
    assert sorted(timings) == sorted(LIBRARIES)  # the next night's plan reads these
    assert sorted(p.name for p in latest.iterdir()) == [
        "catalogue.html",
        INDEX,
        "status.json",
        "timings.json",
    ]

    site.serve_dir(tmp_path / "download", "/download")
    base = site.url("/download/bundles-latest/")
    code, out, err = pull_cli("--list", "--from", base, tmp=tmp_path / "tmp")
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()[1:]] == [
        "alpha@latest",
        "beta@latest",
        "gamma@latest",
    ]
    for library in LIBRARIES:
        code, out, err = pull_cli(
            library, "--from", base, "--bundles", str(tmp_path / "b"), tmp=tmp_path / "tmp"
        )
        assert code == 0, err
        entry = next(e for e in catalogue if e.library == library)
        assert read_current(tmp_path / "b" / library / "latest") == entry.build_id
        assert site.hits(f"/download/{entry.release}/{entry.archive}") == 1
        assert site.hits(f"/download/{entry.release}/{SUMS}") >= 1
    assert site.hits(f"/download/bundles-latest/{INDEX}") == 4  # one per command, never one per library


def test_ten_thousand_libraries_list_and_pull_with_one_index_download(site: Site, tmp_path: Path) -> None:
    _site(tmp_path, "gamma", LIBRARIES["gamma"])
    (tmp_path / "libraries.toml").write_text('[[library]]\nid = "gamma"\nllms_txt = "sites/gamma/llms.txt"\n')
    (tag,) = _night(tmp_path, "20261127")
    latest = tmp_path / "download" / "bundles-latest"
    (real,) = decode_index((latest / INDEX).read_bytes(), "index.json")
    others = [
        msgspec.structs.replace(
            real,
            library=f"lib-{i:05d}",
            name=f"Library {i}",
            archive=f"lib-{i:05d}-latest-{real.build_id}.tar.gz",
            release=f"bundles-20261127-1-{i // 998 + 1:02d}",
        )
        for i in range(9_999)
    ]
    data = encode_index(sorted([real, *others], key=lambda e: e.library))
    (latest / INDEX).write_bytes(data)
    site.serve_dir(tmp_path / "download", "/download")
    base = site.url("/download/bundles-latest/")

    code, out, err = pull_cli("--list", "--from", base, tmp=tmp_path / "tmp")
    assert code == 0, err
    assert len(out.splitlines()) == 1 + 10_000 and site.hits(f"/download/bundles-latest/{INDEX}") == 1
    code, out, err = pull_cli("gamma", "--from", base, "--bundles", str(tmp_path / "b"), tmp=tmp_path / "tmp")
    assert code == 0, err
    assert (
        site.hits(f"/download/{tag}/{real.archive}") == 1
        and site.hits(f"/download/bundles-latest/{INDEX}") == 2
    )
    # A library the catalogue lacks: the error names the closest ids and a count, not 10,000 ids.
    code, out, err = pull_cli(
        "lib-0999", "--from", base, "--bundles", str(tmp_path / "b"), tmp=tmp_path / "tmp"
    )
    assert code == 1 and "offers 10000 libraries (the closest: lib-0999" in err and len(err) < 500, err
