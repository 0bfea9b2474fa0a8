"""The nightly job (``docbundle-index nightly``): build, check against golden queries, package only what
changed and passed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from buildkit import golden_query, golden_toml
from clikit import index_cli
from docbundle.bundle.layout import read_current
from docbundle.indexer.cli import main as cli_main

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


def test_a_shard_of_the_plan_builds_its_libraries_and_records_their_timings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--plan --plan-out, then --plan-file --shard K: each job builds its shard's libraries, and its
    timings.json (seconds and shard per library) is what the next night's plan reads."""
    common = _setup(tmp_path)
    plan_file = tmp_path / "plan.json"
    assert main([*common, "--plan", "--plan-out", str(plan_file), "--release-prefix", "bundles-t"]) == 0
    matrices = json.loads(capsys.readouterr().out)
    plan = json.loads(plan_file.read_text())
    # Two libraries estimated at about 20 s each: one shard of the default 30 minutes.
    assert matrices == {
        "build": {"include": [{"shard": 0, "release": "bundles-t-01"}]},
        "publish": {"include": [{"release": "bundles-t-01"}]},
    }
    assert plan["shards"][0]["libraries"] == ["broken", "demo"]
    only = [*common, "--plan", "--plan-out", str(plan_file), "--library", "demo", "--release-prefix", "t"]
    assert main(only) == 0  # a manual run of a few libraries plans only those
    assert [s["libraries"] for s in json.loads(plan_file.read_text())["shards"]] == [["demo"]]

    two = [
        *common,
        "--plan",
        "--plan-out",
        str(plan_file),
        "--target-minutes",
        "0.01",
        "--release-prefix",
        "t",
    ]
    assert main(two) == 0
    shards = json.loads(plan_file.read_text())["shards"]
    assert sorted(lib for s in shards for lib in s["libraries"]) == ["broken", "demo"] and len(shards) == 2
    capsys.readouterr()
    k = next(s["shard"] for s in shards if s["libraries"] == ["demo"])
    dist = tmp_path / "d"
    assert main([*common, "--plan-file", str(plan_file), "--shard", str(k), "--dist", str(dist)]) == 0
    archives, entries = _dist(tmp_path, "d")
    assert [e["library"] for e in entries] == ["demo"] and len(archives) == 1
    timings = json.loads((dist / "timings.json").read_text())
    assert list(timings["libraries"]) == ["demo"] and timings["libraries"]["demo"]["shard"] == k
    assert timings["libraries"]["demo"]["seconds"] > 0

    assert main([*common, "--plan-file", str(plan_file), "--shard", "7", "--dist", str(dist)]) == 2
    assert "the plan has shards 0-1, not 7" in capsys.readouterr().err
    assert main([*common, "--plan-file", str(plan_file), "--dist", str(dist)]) == 2
    assert "--plan-file needs --shard K" in capsys.readouterr().err


@pytest.mark.parametrize("minutes", ["nan", "inf", "-inf", "0"])
def test_a_target_of_minutes_that_is_not_a_positive_number_is_refused(minutes: str, tmp_path: Path) -> None:
    # nan and inf passed the "<= 0" check (issue 31): the plan was made with an infinite shard time.
    common = _setup(tmp_path)
    done = index_cli("nightly", *common, "--plan", f"--target-minutes={minutes}", timeout=60)
    assert done.returncode == 2, done.stdout
    assert f"--target-minutes must be a positive number of minutes (e.g. 30), not {minutes}" in done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr


def test_a_shard_cut_at_its_time_limit_keeps_every_library_it_finished(tmp_path: Path) -> None:
    """GitHub cuts a build job at its ``timeout-minutes``; the workflow still uploads ``--dist``
    (``if: always()``). Each library is packed as soon as it passes, and ``SHA256SUMS``, ``index.json``,
    ``timings.json`` and ``nightly.json`` are rewritten after it, so the folder a killed shard leaves
    names exactly the libraries it finished, and ``--merge`` publishes them. Here the second library's
    host accepts the connection and never answers; the shard is killed while it waits."""
    import signal
    import socket
    import subprocess
    import sys
    import time

    from docbundle.bundle.release import merge

    _site(tmp_path, PAGES)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes the handshakes; nobody ever reads or answers
    port = silent.getsockname()[1]
    (tmp_path / "libraries.toml").write_text(
        '[[library]]\nid = "demo"\nllms_txt = "site/llms.txt"\n'
        f'[[library]]\nid = "stuck"\nllms_txt = "http://127.0.0.1:{port}/llms.txt"\n',
        encoding="utf-8",
    )
    dist = tmp_path / "dist"
    argv = ["nightly", "--config", str(tmp_path / "libraries.toml"), "--out", str(tmp_path / "bundles")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "docbundle.indexer.cli", *argv, "--dist", str(dist)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        guard = time.monotonic() + 120  # a hang guard: demo builds in a few seconds
        while not (dist / "nightly.json").is_file():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < guard, "demo was never recorded"
            time.sleep(0.05)
        time.sleep(1.0)  # stuck's crawl is under way, waiting for an answer that never comes
        assert proc.poll() is None, "the shard ended before it could be cut"
        proc.send_signal(signal.SIGKILL)  # what a runner's time limit does to the job's processes
        proc.communicate(timeout=60)
    finally:
        proc.kill()
        silent.close()
    archives, outcomes = _dist(tmp_path, "dist")
    assert [(o["library"], o["status"]) for o in outcomes] == [("demo", "built")]
    assert len(archives) == 1 and archives[0].startswith("demo-latest-")
    index = json.loads((dist / "index.json").read_text())
    assert [e["archive"] for e in index["bundles"]] == archives
    assert (dist / "SHA256SUMS").read_text().split() == [index["bundles"][0]["sha256"], archives[0]]
    timings = json.loads((dist / "timings.json").read_text())["libraries"]
    assert list(timings) == ["demo"]
    merged = merge([dist], tmp_path / "release", release="bundles-20261202-1-01")  # sha256 checked
    assert [e.archive for e in merged] == archives
