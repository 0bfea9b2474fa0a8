"""The nightly job (``docbundle-index nightly``): build, check against golden queries, package only what
changed and passed."""

from __future__ import annotations

import json
from pathlib import Path

from buildkit import golden_query, golden_toml
from docbundle.bundle.layout import read_current
from docbundle.indexer.cli import main as cli_main
from docbundle.indexer.release.nightly import shards

PAGES = {
    "install.md": "# Installation\n\nInstall the package with pip and set the API key.\n",
    "webhooks.md": "# Webhooks\n\nEvery webhook event is signed with the signing secret.\n",
}
GOLDEN = golden_toml(
    [
        golden_query("install", "install the package", "install.md"),
        golden_query("signing", "webhook signing secret", "webhooks.md"),
    ],
    expect={"mrr10": {"value": 1.0, "tolerance": 0.0, "reason": "both queries name their page"}},
)


def _site(root: Path, pages: dict[str, str]) -> None:
    site = root / "site"
    site.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (site / name).write_text(text, encoding="utf-8")
    listing = "# Demo\n\n## Docs\n\n" + "".join(f"- [Page {i}]({n})\n" for i, n in enumerate(pages))
    (site / "llms.txt").write_text(listing, encoding="utf-8")


def main(argv: list[str]) -> int:
    """``docbundle-index nightly ARGS``."""
    return cli_main(["nightly", *argv])


def _setup(tmp_path: Path) -> list[str]:
    _site(tmp_path, PAGES)
    (tmp_path / "libraries.toml").write_text(
        '[[library]]\nid = "demo"\nllms_txt = "site/llms.txt"\n'
        '[[library]]\nid = "broken"\nllms_txt = "missing/llms.txt"\n',
        encoding="utf-8",
    )
    (tmp_path / "golden").mkdir()
    (tmp_path / "golden" / "demo.toml").write_text(GOLDEN, encoding="utf-8")
    return [
        "--config",
        str(tmp_path / "libraries.toml"),
        "--out",
        str(tmp_path / "bundles"),
        "--golden",
        str(tmp_path / "golden"),
    ]


def _dist(tmp_path: Path, name: str) -> tuple[list[str], list[dict[str, object]]]:
    dist = tmp_path / name
    archives = sorted(p.name for p in dist.glob("*.tar.gz"))
    return archives, json.loads((dist / "nightly.json").read_text())


def test_nightly_publishes_changed_bundles_that_pass_their_checks(tmp_path: Path) -> None:
    common = _setup(tmp_path)
    assert main([*common, "--dist", str(tmp_path / "d1")]) == 1  # "broken" fails, "demo" is still packaged
    archives, entries = _dist(tmp_path, "d1")
    status = {e["library"]: e["status"] for e in entries}
    assert status == {"demo": "built", "broken": "failed"}
    assert len(archives) == 1 and archives[0].startswith("demo-latest-")
    assert (tmp_path / "d1" / "SHA256SUMS").read_text().count(".tar.gz") == 1

    assert main([*common, "--library", "demo", "--dist", str(tmp_path / "d2")]) == 0
    archives, entries = _dist(tmp_path, "d2")
    assert archives == [] and entries[0]["status"] == "unchanged"

    _site(tmp_path, {**PAGES, "install.md": "# Notes\n\nNothing useful here.\n"})
    assert main([*common, "--library", "demo", "--dist", str(tmp_path / "d3")]) == 1
    archives, entries = _dist(tmp_path, "d3")
    assert archives == [] and entries[0]["status"] == "regressed"
    assert "[FAIL] overall mrr10" in str(entries[0]["regress"])
    assert entries[0]["previous"] is not None
    # The regressed build is not left as CURRENT, so the next run checks it again instead of skipping it.
    assert read_current(tmp_path / "bundles" / "demo" / "latest") == entries[0]["previous"]
    assert main([*common, "--library", "demo", "--dist", str(tmp_path / "d4")]) == 1

    assert (
        main(["--merge", str(tmp_path / "d1"), str(tmp_path / "d2"), "--dist", str(tmp_path / "release")])
        == 0
    )
    release = json.loads((tmp_path / "release" / "index.json").read_text())
    assert [b["library"] for b in release["bundles"]] == ["demo"]
    assert (tmp_path / "release" / "SHA256SUMS").read_text().count(".tar.gz") == 1


def test_shards_cover_every_library_once(tmp_path: Path) -> None:
    config = tmp_path / "libraries.toml"
    config.write_text(
        "".join(f'[[library]]\nid = "lib{i}"\nllms_txt = "x"\n' for i in range(7)), encoding="utf-8"
    )
    groups = shards(config, 3)
    assert len(groups) == 3
    ids = [i for g in groups for i in g.split(",")]
    assert sorted(ids) == sorted(f"lib{i}" for i in range(7))
    assert shards(config, 500) == [f"lib{i}" for i in range(7)]
