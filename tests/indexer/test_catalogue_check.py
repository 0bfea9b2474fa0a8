"""The shipped catalogue (issue 32, item 1): hundreds of real documentation libraries that pass
``docbundle-index check`` offline, rendered from the committed table, planned by the nightly job within
its limits; and the check itself, which reports each problem of a broken catalogue on a line of its own.

Nothing here builds a catalogue entry: the real sites cannot be reached from a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from clikit import index_cli, run_module
from docbundle.bundle.releaseindex import MAX_ASSETS_PER_RELEASE
from docbundle.indexer.config import CATEGORIES, load_config
from docbundle.indexer.release.plan import MAX_SHARDS, Plan
from test_nightly_plan import NO_SOCKETS

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "bundles" / "libraries.toml"
#: What issue 32 asks of the shipped catalogue.
MIN_LIBRARIES = 500


def _check(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return index_cli("check", "--config", str(config), *args)


def test_the_shipped_catalogue_passes_the_offline_check_without_a_socket(tmp_path: Path) -> None:
    events = tmp_path / "sockets.txt"
    r = subprocess.run(
        [sys.executable, "-c", NO_SOCKETS, str(events), "check", "--config", str(SHIPPED), "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert events.read_text() == ""
    report = json.loads(r.stdout)
    assert report["problems"] == []
    assert report["libraries"] >= MIN_LIBRARIES
    assert set(report["categories"]) == set(CATEGORIES)  # every category of the taxonomy is used
    r = _check(SHIPPED)
    assert r.returncode == 0 and r.stdout.endswith(": no problems\n"), r.stdout[-3000:]


def test_the_shipped_catalogue_keeps_the_demo_first_and_its_first_entries() -> None:
    config = load_config(SHIPPED)
    ids = [lib.id for lib in config.libraries]
    assert ids[0] == "docbundle"
    assert ids[1:11] == [
        "tosspayments", "llms-txt", "fasthtml", "mcp", "anthropic", "cloudflare", "supabase", "svelte", "atmos",
        "docker",
    ]  # fmt: skip
    versioned = [lib for lib in config.libraries if lib.version]
    assert versioned and all(sum(v.latest for v in lib.version) == 1 for lib in versioned)


def test_the_shipped_catalogue_is_the_rendering_of_its_committed_table(tmp_path: Path) -> None:
    script = ROOT / "bundles" / "catalogue" / "make_catalogue.py"
    r = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "libraries.toml"
    r = subprocess.run(
        [sys.executable, str(script), "--out", str(out)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert out.read_text(encoding="utf-8") == SHIPPED.read_text(encoding="utf-8")


def test_the_nightly_plan_covers_the_shipped_catalogue_within_the_workflow_limits(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    r = index_cli(
        "nightly", "--config", str(SHIPPED), "--plan", "--dry-run", "--release-prefix", "bundles-20261202",
        "--plan-out", str(plan_file),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    plan = msgspec.json.decode(plan_file.read_bytes(), type=Plan)
    config = load_config(SHIPPED)
    placed = Counter(lib for shard in plan.shards for lib in shard.libraries)
    assert set(placed) == {lib.id for lib in config.libraries} and set(placed.values()) == {1}
    assert 1 <= len(plan.shards) <= MAX_SHARDS
    archives = [a for release in plan.releases for a in release.archives]
    assert len(archives) == len(set(archives)) == sum(len(config.targets(lib)) for lib in config.libraries)
    assert all(len(release.archives) + 2 <= MAX_ASSETS_PER_RELEASE for release in plan.releases)
    assert r.stdout.startswith(f"nightly plan: {len(config.libraries)} libraries")


BROKEN = """
[[library]]
id = "good"
name = "Good"
category = "ai"
llms_txt = "https://docs.example.org/llms.txt"

[[library]]
id = "full-of-good"
name = "Same site"
category = "ai"
llms_txt = "https://www.docs.example.org/llms-full.txt"

[[library]]
id = "nameless"
category = "ui"
llms_txt = "https://nameless.example.org/llms.txt"

[[library]]
id = "uncategorised"
name = "No category"
llms_txt = "https://uncat.example.org/llms.txt"

[[library]]
id = "games"
name = "Off the taxonomy"
category = "games"
llms_txt = "https://games.example.org/llms.txt"

[[library]]
id = "plain-http"
name = "Plain HTTP"
category = "data"
llms_txt = "http://plain.example.org/llms.txt"

[[library]]
id = "one-machine"
name = "A file URL"
category = "data"
llms_txt = "file:///srv/docs/llms.txt"

[[library]]
id = "twice"
name = "Two versions, one URL"
category = "languages"
[[library.version]]
name = "1"
llms_txt = "https://twice.example.org/llms.txt"
[[library.version]]
name = "2"
llms_txt = "https://twice.example.org/llms.txt/"
latest = true

[[library]]
id = "good"
name = "The same id again"
category = "ai"
llms_txt = "https://other.example.org/llms.txt"

[[library]]
id = "Bad_Id"
name = "Not typeable"
category = "ai"
llms_txt = "https://bad.example.org/llms.txt"

[[library]]
id = "local"
name = "A local folder"
category = "developer-tools"
llms_txt = "docs/llms.txt"

[[library]]
id = "golden"
name = "A folder of bundles/"
category = "developer-tools"
llms_txt = "https://golden.example.org/llms.txt"
"""

#: Each problem of BROKEN, as the line that reports it says it (after ``<config>: ``).
EXPECTED = [
    "library 'full-of-good': key 'llms_txt': 'https://www.docs.example.org/llms-full.txt' is the site "
    "library 'good' already names ('https://docs.example.org/llms.txt')",
    "library 'nameless': key 'name': missing",
    "library 'uncategorised': key 'category': missing; use one of languages, web-frameworks",
    "library 'games': key 'category': 'games' is not in the taxonomy; use one of",
    "library 'plain-http': key 'llms_txt': 'http://plain.example.org/llms.txt' is not https",
    "library 'one-machine': key 'llms_txt': 'file:///srv/docs/llms.txt' is a file: URL",
    "library 'twice': version '2': key 'llms_txt': 'https://twice.example.org/llms.txt/' is the site another "
    "version of this library already names",
    "library 'good': key 'id': duplicate library id",
    "library 'Bad_Id': key 'id': 'Bad_Id' is not a library id",
    "library 'golden': key 'id': 'golden' is the name of a folder of bundles/",
]


def test_the_check_reports_each_problem_on_a_line_of_its_own(tmp_path: Path) -> None:
    config = tmp_path / "libraries.toml"
    config.write_text(BROKEN, encoding="utf-8")
    r = _check(config)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    problems, summary = lines[:-1], lines[-1]
    assert len(problems) == len(EXPECTED), r.stdout
    for expected in EXPECTED:
        (line,) = [line for line in problems if expected in line]
        assert line.startswith(f"{config}: ")
    # The local folder (a path, like the demo library's) is no problem; the first 'good' neither.
    assert not [line for line in problems if "'local'" in line]
    assert [line for line in problems if line.startswith(f"{config}: library 'good'")] == [
        f"{config}: library 'good': key 'id': duplicate library id"
    ]
    assert summary == f"{config}: {len(EXPECTED)} problem(s) among 10 libraries, 11 versions, 7 categories"
    report = json.loads(_check(config, "--json").stdout)
    assert len(report["problems"]) == len(EXPECTED) and report["categories"]["ai"] == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(None, "config file not found", id="missing"),
        pytest.param("[[library]\n", "not valid TOML", id="not-toml"),
    ],
)
def test_a_file_that_is_no_catalogue_is_a_configuration_error(
    tmp_path: Path, text: str | None, message: str
) -> None:
    config = tmp_path / "libraries.toml"
    if text is not None:
        config.write_text(text, encoding="utf-8")
    r = _check(config)
    assert r.returncode == 2 and message in r.stderr and r.stdout == ""


def test_the_check_is_listed_in_the_help() -> None:
    r = run_module("docbundle.indexer.cli", "--help")
    assert r.returncode == 0 and "check" in r.stdout
