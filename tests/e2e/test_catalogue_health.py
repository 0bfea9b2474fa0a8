"""The catalogue's health (issue 32 item 3): ``status.json`` and ``catalogue.html`` beside the catalogue
index, ``pull --list`` with states, ages and filters, and the page in a real browser.

Four nights of the nightly job over sites on a real HTTP server on 127.0.0.1, each step the command the
workflow's job runs (plan, one build per shard, one merge per release, the roll with last night's files
and the plan): ``fresh`` changes every night (built), ``steady`` never does (unchanged; on night 3 its
shard reports nothing), ``moving`` builds on night 1 then answers 404 (failed for one, two nights, then
unavailable on the third, its night-1 bundle still in ``index.json`` and pullable), and ``gone`` answers
410 from the start (never built). Each night is dated a day apart (``SOURCE_DATE_EPOCH``), so ages show.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from browserkit import browser_fixture, page_fixture  # noqa: F401  (the browser and page fixtures)
from clikit import pull_cli
from docbundle.bundle.errors import BundleFormatError
from docbundle.bundle.layout import read_current
from docbundle.bundle.release import INDEX
from docbundle.bundle.releaseindex import decode_index
from docbundle.bundle.status import MAX_STATUS_BYTES, REASONS, STATUS, LibraryStatus, decode_status
from docbundle.indexer.cli import main as index_main
from docbundle.indexer.release.status import UNAVAILABLE_AFTER, reason_of
from sitesrv import Site, run_site

DAY = 86_400
HOSTILE = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script> charts"
LIBRARIES = {  # id: (category, description)
    "fresh": ("ai", "Fresh writes new pages every night."),
    "steady": ("databases", HOSTILE),
    "moving": ("ai", "Moving moved its documentation away."),
    "gone": ("ai", "Gone removed its documentation."),
}


def _page(site: Site, library: str, text: str) -> None:
    site.add(f"/{library}/guide.md", f"# {library}\n\n{text}\n")
    site.add(f"/{library}/llms.txt", f"# {library}\n\n## Docs\n\n- [Guide](guide.md)\n")


def _config(site: Site, root: Path) -> None:
    (root / "libraries.toml").write_text(
        "".join(
            f'[[library]]\nid = "{lib}"\ncategory = "{category}"\ndescription = {json.dumps(description)}\n'
            f'llms_txt = "{site.url(f"/{lib}/llms.txt")}"\ncrawl = {{ timeout = 5.0, retries = 0 }}\n'
            for lib, (category, description) in LIBRARIES.items()
        ),
        encoding="utf-8",
    )


def _nightly(*args: str) -> int:
    return index_main(["nightly", *args])


def _night(root: Path, night: int, *, lost: str | None = None) -> dict[str, LibraryStatus]:
    """One nightly run, step by step as the workflow runs it; the shard that holds ``lost`` reports
    nothing (its job died). Tonight's ``status.json``, by library."""
    config = ["--config", str(root / "libraries.toml"), "--out", str(root / "bundles")]
    latest = root / "download" / "bundles-latest"
    before = ["--timings", str(latest / "timings.json"), "--previous", str(latest / INDEX)]
    plan_file = root / f"plan-{night}.json"
    prefix = f"bundles-2026120{night}-1"
    assert _nightly(*config, "--plan", "--plan-out", str(plan_file), "--target-minutes", "0.01",
                    "--release-prefix", prefix, *before) == 0  # fmt: skip
    plan = json.loads(plan_file.read_text())
    reported = []
    for shard in plan["shards"]:
        if lost in shard["libraries"]:
            continue
        dist = root / f"night-{night}" / f"shard-{shard['shard']}"
        _nightly(*config, "--plan-file", str(plan_file), "--shard", str(shard["shard"]), "--dist", str(dist))
        reported.append(shard["shard"])
    tags = []
    for release in plan["releases"]:
        dists = [str(root / f"night-{night}" / f"shard-{k}") for k in release["shards"] if k in reported]
        out = root / "download" / release["tag"]
        assert _nightly("--merge", *dists, "--release", release["tag"], "--dist", str(out)) == 0
        tags.append(str(out))
    assert (
        _nightly(*config, "--roll", *tags, *before, "--plan-file", str(plan_file), "--dist", str(latest)) == 0
    )
    status = decode_status((latest / STATUS).read_bytes(), STATUS)
    return {e.library: e for e in status.libraries}


# What the nights fixture gives: (root, each night's status by library, night 1's time).
Nights = tuple[Path, list[dict[str, LibraryStatus]], int]


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> Nights:
    """Four nights, a day apart, the last one now: (root, each night's status by library, night 1's time)."""
    root = tmp_path_factory.mktemp("health")
    site = Site()

    start = int(time.time()) - 3 * DAY
    seen = []
    with run_site(site), pytest.MonkeyPatch.context() as mp:
        _config(site, root)
        for lib in LIBRARIES:
            _page(site, lib, f"{lib} explains its features on night 1.")
        site.fault("/gone/llms.txt", "status", code=410)
        for night in (1, 2, 3, 4):
            mp.setenv("SOURCE_DATE_EPOCH", str(start + (night - 1) * DAY))
            _page(site, "fresh", f"Fresh explains new features on night {night}.")
            if night == 2:
                site.remove("/moving/llms.txt")
            seen.append(_night(root, night, lost="steady" if night == 3 else None))
        assert not site.errors
    return root, seen, start


def test_each_night_records_each_librarys_state_reason_and_failed_nights(
    nights: Nights,
) -> None:
    root, seen, start = nights
    first, second, third, fourth = seen
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))
    assert {lib: e.state for lib, e in first.items()} == {
        "fresh": "built", "steady": "built", "moving": "built", "gone": "failed",
    }  # fmt: skip
    assert (first["gone"].reason, first["gone"].failed_nights, first["gone"].build_id) == ("http-410", 1, "")
    assert "410" in first["gone"].message
    served = first["moving"]
    assert served.last_success == stamp and served.pages == 1 and served.chunks >= 1 and served.bytes > 0

    assert (second["steady"].state, second["fresh"].state) == ("unchanged", "built")
    moving = [night["moving"] for night in (second, third, fourth)]
    assert [(m.state, m.reason, m.failed_nights) for m in moving] == [
        ("failed", "http-404", 1),
        ("failed", "http-404", 2),
        ("unavailable", "http-404", UNAVAILABLE_AFTER),
    ]
    # The failing nights keep the last good bundle and when it was last read successfully.
    assert all((m.build_id, m.last_success, m.pages) == (served.build_id, stamp, 1) for m in moving)
    assert "404" in moving[-1].message and moving[-1].checked_at > moving[0].checked_at

    assert (third["steady"].state, third["steady"].reason, third["steady"].failed_nights) == (
        "failed", "no-report", 1,
    )  # fmt: skip
    assert (fourth["steady"].state, fourth["steady"].failed_nights) == ("unchanged", 0)  # one good night
    assert (fourth["gone"].state, fourth["gone"].failed_nights) == ("unavailable", 4)
    assert fourth["steady"].category == "databases" and fourth["steady"].description == HOSTILE

    latest = root / "download" / "bundles-latest"
    index = {e.library: e for e in decode_index((latest / INDEX).read_bytes(), INDEX)}
    assert sorted(index) == ["fresh", "moving", "steady"]  # never built: nothing to pull
    assert index["moving"].build_id == served.build_id  # unavailable, still named


@contextmanager
def _download_site(root: Path) -> Iterator[Site]:
    """The nights' download folder served at ``/download`` (the rolling release in ``bundles-latest``)."""
    site = Site()
    with run_site(site):
        site.serve_dir(root / "download", "/download")
        yield site


def test_an_unavailable_library_is_still_pullable(nights: Nights, tmp_path: Path) -> None:
    root, seen, _ = nights
    with _download_site(root) as site:
        base = site.url("/download/bundles-latest/")
        code, _, err = pull_cli(
            "moving", "--from", base, "--bundles", str(tmp_path / "b"), tmp=tmp_path / "t"
        )
        assert code == 0, err
    assert read_current(tmp_path / "b" / "moving" / "latest") == seen[0]["moving"].build_id


def _table(out: str) -> dict[str, str]:
    """``pull --list``'s rows by library, after checking its header."""
    header, *rows = out.splitlines()
    assert header.split() == ["LIBRARY", "NAME", "CATEGORY", "STATE", "AGE", "DOCS", "SIZE", "BUILD"]
    return {row.split("@")[0]: row for row in rows if "@" in row.split()[0]}


def test_pull_list_shows_state_and_age_and_filters(nights: Nights, tmp_path: Path) -> None:
    root, _, _ = nights
    with _download_site(root) as site:
        base = site.url("/download/bundles-latest/")

        def listed(*args: str) -> tuple[int, str, str]:
            return pull_cli("--list", *args, "--from", base, tmp=tmp_path / "t")

        code, out, err = listed()
        assert code == 0, err
        rows = _table(out)
        assert sorted(rows) == ["fresh", "moving", "steady"]
        assert rows["moving"].split()[2:6] == ["ai", "unavailable", "3", "d"]  # read well 3 days ago
        assert "[http-404, 3 nights; pull installs the last good build]" in rows["moving"]
        assert rows["steady"].split()[2:6] == ["databases", "unchanged", "0", "min"]
        assert rows["fresh"].split()[3] == "built"
        assert "<img" in rows["steady"] and "\x1b" not in out  # the release's words, as text

        code, out, err = listed("--json", "--state", "unavailable")
        listed_json = json.loads(out)
        assert [b["library"] for b in listed_json["bundles"]] == ["moving"]
        assert [(h["library"], h["state"], h["failed_nights"]) for h in listed_json["status"]] == [
            ("moving", "unavailable", 3)
        ]
        code, out, err = listed("--category", "AI")
        assert code == 0 and sorted(_table(out)) == ["fresh", "moving"], err
        assert out.splitlines()[-1] == "2 of the 3 library versions the release offers match"
        code, out, _ = listed("--state", "unchanged")
        assert sorted(_table(out)) == ["steady"]
        code, out, _ = listed("moved", "documentation")  # every word, in the description
        assert sorted(_table(out)) == ["moving"]
        code, out, _ = listed("charts", "--category", "ai")
        assert code == 0 and out == "no library version of the 3 the release offers matches\n"
        code, out, err = listed("--category", "games")
        assert code == 1 and "no category 'games'; it has: ai, databases" in err and out == ""

        # A dated release folder has no status.json: the same rows, no state, the age of the build.
        tag = decode_index((root / "download" / "bundles-latest" / INDEX).read_bytes(), INDEX)[0].release
        code, out, err = pull_cli("--list", "--from", site.url(f"/download/{tag}/"), tmp=tmp_path / "t")
        assert code == 0, err
        assert all(row.split()[2] == "-" for row in _table(out).values())  # no category either
        code, out, err = pull_cli(
            "--list", "--state", "built", "--from", site.url(f"/download/{tag}/"), tmp=tmp_path / "t"
        )
        assert code == 1 and "publishes no status.json" in err


def test_the_status_file_is_checked_as_data_from_the_network(nights: Nights, tmp_path: Path) -> None:
    """Oversized, nested, or a field out of its bounds: refused with the field named, and pull says so."""
    root, _, _ = nights
    good = (root / "download" / "bundles-latest" / STATUS).read_bytes()
    doc = json.loads(good)
    cases: list[tuple[bytes, str]] = [
        (b" " * (MAX_STATUS_BYTES + 1), f"over the {MAX_STATUS_BYTES}-byte limit"),
        (
            b'{"format":"docbundle-catalogue-status","version":1,"x":' + b"[" * 5000 + b"]" * 5000 + b"}",
            "nested too deeply",
        ),
        (json.dumps({**doc, "version": 9}).encode(), "has status version 9; this docbundle reads 1"),
        (json.dumps({**doc, "format": "other"}).encode(), "is not a docbundle catalogue status"),
    ]
    for field, value, named in (
        ("pages", -1, "$.libraries[0].pages"),
        ("state", "thriving", "$.libraries[0].state"),
        ("library", "../etc", "$.libraries[0].library"),
        ("build_id", "x" * 40, "$.libraries[0].build_id"),
        ("last_success", "yesterday", "$.libraries[0].last_success"),
        ("message", "m" * 301, "$.libraries[0].message"),
        ("reason", "Not A Class", "$.libraries[0].reason"),
    ):
        bad: dict[str, Any] = json.loads(good)
        bad["libraries"][0][field] = value
        cases.append((json.dumps(bad).encode(), named))
    for data, message in cases:
        with pytest.raises(BundleFormatError) as caught:
            decode_status(data, STATUS)
        assert message in str(caught.value), (message, str(caught.value)[:300])

    served = tmp_path / "rel"
    served.mkdir()
    (served / INDEX).write_bytes((root / "download" / "bundles-latest" / INDEX).read_bytes())
    bad = json.loads(good)
    bad["libraries"][0]["pages"] = -1
    (served / STATUS).write_text(json.dumps(bad))
    site = Site()

    with run_site(site):
        site.serve_dir(served, "/rel")
        code, out, err = pull_cli("--list", "--from", site.url("/rel/"), tmp=tmp_path / "t")
        # A damaged health report does not hide what can be pulled: the list, without states, and why.
        assert code == 0 and "at `$.libraries[0].pages`" in err and "listing without states" in err
        assert "Traceback" not in err and out.splitlines()[0].split()[:2] == ["LIBRARY", "NAME"]
        assert "failed" not in out and "unavailable" not in out
        # ... but a filter that needs the states cannot be answered: it says so and lists nothing.
        code, out, err = pull_cli(
            "--list", "--state", "failed", "--from", site.url("/rel/"), tmp=tmp_path / "t"
        )
    assert code == 1 and "at `$.libraries[0].pages`" in err and out == "" and "Traceback" not in err


def test_failure_classes_are_the_documented_list() -> None:
    """Every class the shards write is one of REASONS, which docs/releases.md lists."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "releases.md").read_text(encoding="utf-8")
    for reason in REASONS:
        assert f"| `{reason}` |" in docs, reason
    kinds = ["http", "timeout", "too-large", "encoding", "redirects", "network", "content-type",
             "rate-limited", "not-found", "refused", "empty", "build", "something-new"]  # fmt: skip
    for kind in kinds:
        for status in (None, 404, 410, 403, 429, 503):
            assert reason_of("failed", kind, status) in REASONS
    assert reason_of("failed", "http", 404) == "http-404" and reason_of("failed", "http", 503) == "http-5xx"
    assert (
        reason_of("failed", "empty", None) == "no-content" and reason_of("regressed", "", None) == "regressed"
    )


def test_the_catalogue_page_filters_and_shows_hostile_text_as_text(nights: Nights, page: Any) -> None:
    root, _, _ = nights
    html = root / "download" / "bundles-latest" / "catalogue.html"
    page.goto(html.as_uri())
    page.wait_for_selector("#libraries tbody tr")
    rows = page.locator("#libraries tbody tr")

    def shown() -> list[str]:
        return [str(rows.nth(i).locator("td").first.text_content()) for i in range(rows.count())]

    assert shown() == ["fresh", "gone", "moving", "steady"]
    assert page.text_content("#count") == "Showing 4 of 4 libraries."
    moving = rows.nth(2)
    cells = [str(c) for c in moving.locator("td").all_text_contents()]
    assert cells[1:5] == [
        "ai",
        "Moving moved its documentation away.",
        "latest",
        "unavailable (http-404, 3 nights)",
    ]
    assert cells[5] == "3 d" and cells[6].endswith("KiB") and cells[7] == "docbundle pull moving"

    page.fill("#search", "documentation away")
    assert shown() == ["moving"] and page.text_content("#count") == "Showing 1 of 4 libraries."
    page.fill("#search", "")
    page.select_option("#category", "databases")
    assert shown() == ["steady"]
    # The hostile description is text on the page: no element made of it, no script run.
    steady = rows.nth(0).locator("td").nth(2)
    assert steady.text_content() == HOSTILE
    assert page.locator("#libraries img, #libraries script").count() == 0
    assert page.title() == "docbundle catalogue"
    page.select_option("#category", "")
    page.select_option("#state", "unavailable")
    assert shown() == ["gone", "moving"] and page.text_content("#count") == "Showing 2 of 4 libraries."
    page.fill("#search", "nothing-matches-this")
    assert shown() == [] and page.text_content("#count") == "Showing 0 of 4 libraries."
    assert page.problems == []  # no console error: the policy allowed the page's own style and script
