"""``docbundle-index build`` as a user runs it: exit codes, JSON report, and a kill in mid-build."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from clikit import index_build_argv, index_cli, server_cli
from docbundle.bundle.layout import BUILD_ID_RE, read_current
from docbundle.bundle.reader import verify_bundle
from docsite import TOPICS, page_markdown, publish_site, write_config
from sitesrv import Site

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return index_cli(*args, timeout=timeout)


def test_build_prints_a_summary_and_exits_0(site: Site, tmp_path: Path) -> None:
    publish_site(site)
    config = write_config(tmp_path, site.url("/llms.txt"))
    r = _cli("build", "--config", str(config), "--out", str(tmp_path / "out"), "--quiet")
    assert r.returncode == 0, r.stderr
    assert "1 built, 0 unchanged, 0 failed" in r.stdout
    r = _cli("build", "--config", str(config), "--out", str(tmp_path / "out"), "--quiet")
    assert r.returncode == 0 and "0 built, 1 unchanged, 0 failed" in r.stdout


def test_json_report_names_failures_and_exit_1_when_a_library_fails(site: Site, tmp_path: Path) -> None:
    publish_site(site)
    site.fault("/gone/llms.txt", "status", code=404)
    config = tmp_path / "libraries.toml"
    config.write_text(
        f'[[library]]\nid = "good"\nllms_txt = "{site.url("/llms.txt")}"\n'
        f'[[library]]\nid = "bad"\nllms_txt = "{site.url("/gone/llms.txt")}"\ncrawl = {{ retries = 0 }}\n',
        encoding="utf-8",
    )
    report_file = tmp_path / "report.json"
    r = _cli(
        "build",
        "--config",
        str(config),
        "--out",
        str(tmp_path / "out"),
        "--json",
        "--report",
        str(report_file),
    )
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    assert json.loads(report_file.read_text()) == report
    status = {lib["library"]: lib for lib in report["libraries"]}
    assert status["good"]["status"] == "built" and status["good"]["documents"] == len(TOPICS)
    assert status["bad"]["status"] == "failed" and "404" in status["bad"]["message"]
    assert (report["built"], report["failed"]) == (1, 1)
    assert read_current(tmp_path / "out" / "good" / "latest") == status["good"]["build_id"]


def test_library_filter_and_usage_errors_exit_2(site: Site, tmp_path: Path) -> None:
    publish_site(site)
    config = write_config(tmp_path, site.url("/llms.txt"))
    r = _cli("build", "--config", str(config), "--out", str(tmp_path / "out"), "--library", "nope")
    assert r.returncode == 2 and "no library 'nope'; configured: demo" in r.stderr
    r = _cli("build", "--bogus-flag")
    assert r.returncode == 2
    bad = tmp_path / "bad.toml"
    bad.write_text('[[library]]\nid = "x"\nllms_txt = "y"\ntypo = 1\n', encoding="utf-8")
    r = _cli("build", "--config", str(bad))
    assert r.returncode == 2 and "library 'x': key 'typo': unknown key" in r.stderr


def test_the_demo_library_builds_from_the_repository_docs(tmp_path: Path) -> None:
    r = _cli(
        "build", "--config", str(ROOT / "bundles" / "libraries.toml"), "--library", "docbundle",
        "--out", str(tmp_path), "--json", "--quiet",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout
    (lib,) = json.loads(r.stdout)["libraries"]
    links = [line for line in (ROOT / "docs" / "llms.txt").read_text().splitlines() if line.startswith("- [")]
    assert lib["status"] == "built" and lib["pages_failed"] == 0
    assert lib["conformance"] == []  # the quick start's build does not warn about the demo's own llms.txt
    assert lib["documents"] == len(links)
    m = verify_bundle(Path(lib["bundle"]))
    assert str(ROOT) not in json.dumps([d.path for d in m.documents])


def test_killing_a_build_midway_leaves_current_valid_and_nothing_partial(site: Site, tmp_path: Path) -> None:
    # Enough pages that writing the index takes a while, so the kill lands during the write.
    for i in range(300):
        site.add(f"/p/{i}.md", page_markdown(f"p{i}", f"Page {i}", f"Lead {i} " * 40))
    listing = "# Big\n\n## Pages\n\n" + "".join(f"- [Page {i}](p/{i}.md)\n" for i in range(300))
    site.add("/llms.txt", listing, content_type="text/plain")
    config = write_config(tmp_path, site.url("/llms.txt"))
    out = tmp_path / "out"
    vdir = out / "demo" / "latest"
    assert _cli("build", "--config", str(config), "--out", str(out), "--quiet").returncode == 0
    first = read_current(vdir)

    site.add("/p/0.md", "# Changed\n\nA new revision forces a new bundle.\n")
    proc = subprocess.Popen(
        index_build_argv(config, out, "--quiet"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    killed_during_write = False
    while time.monotonic() < deadline and proc.poll() is None:
        if any(p.name.startswith(".tmp-") for p in vdir.iterdir()):
            os.kill(proc.pid, signal.SIGKILL)
            killed_during_write = True
            break
        time.sleep(0.002)
    proc.wait(timeout=30)
    assert killed_during_write, "the build finished before it could be killed; make the site bigger"

    assert read_current(vdir) == first
    verify_bundle(vdir / first)
    visible = [p.name for p in vdir.iterdir() if BUILD_ID_RE.match(p.name)]
    assert visible == [first], "no partial bundle may appear under a build id"

    r = _cli("build", "--config", str(config), "--out", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    assert not [p for p in vdir.iterdir() if p.name.startswith(".tmp-")]
    assert read_current(vdir) != first


def test_regress_audit_and_package_commands(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = _cli(
        "build",
        "--config",
        str(ROOT / "bundles" / "libraries.toml"),
        "--library",
        "docbundle",
        "--out",
        str(out),
        "--quiet",
    )
    assert r.returncode == 0, r.stderr
    vdir = out / "docbundle" / "latest"
    golden = ROOT / "bundles" / "golden" / "docbundle.toml"

    r = _cli("regress", str(vdir), "--golden", str(golden))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[OK]" in r.stdout and "[FAIL]" not in r.stdout

    impossible = tmp_path / "impossible.toml"
    impossible.write_text(
        '[expect]\nndcg10 = { value = 1.0, reason = "no search is perfect" }\n'
        '[[query]]\nid = "nonsense"\ntext = "zebra quantum marmalade"\nrelevant = { "index.md" = 2 }\n',
        encoding="utf-8",
    )
    r = _cli("regress", str(vdir), "--golden", str(impossible), "--json")
    assert r.returncode == 1
    assert json.loads(r.stdout)["checks"][0]["ok"] is False

    r = _cli("diff", str(vdir), str(vdir), "--golden", str(golden), "--json")
    assert r.returncode == 0, r.stderr
    effect = json.loads(r.stdout)["golden"]
    assert effect["before"] == effect["after"] and effect["changed"] == []

    r = _cli("audit", str(vdir), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["library"] == "docbundle"

    r = _cli("package", str(out), "--out", str(tmp_path / "dist"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "dist" / "SHA256SUMS").read_text().count(".tar.gz") == 1

    r = _cli("regress", str(tmp_path / "nowhere"))
    assert r.returncode == 1 and "cannot run the golden queries" in r.stderr


# -- issue 14: one default folder, progress, a failed first build, shell conventions ----------------


def test_the_first_search_after_a_build_needs_no_bundles_flag(site: Site, tmp_path: Path) -> None:
    """build and search from unrelated folders meet in the per-user default (a private one here)."""
    publish_site(site)
    (tmp_path / "elsewhere").mkdir()
    config = write_config(tmp_path / "elsewhere", site.url("/llms.txt"))
    r = _cli("build", "--config", str(config), "--quiet")
    assert r.returncode == 0, r.stderr
    default = Path(os.environ["XDG_DATA_HOME"]) / "docbundle" / "bundles"
    assert read_current(default / "demo" / "latest") is not None and f"in {default}" in r.stdout
    assert not (config.parent / "demo").exists()
    r = server_cli("search", "demo", TOPICS[0][1])
    assert r.returncode == 0 and "demo@latest (build " in r.stdout and "1. " in r.stdout, r.stderr
    r = server_cli("info")
    assert r.returncode == 0 and r.stdout.splitlines()[1].startswith("demo "), r.stdout


def test_every_phase_shows_progress_with_rate_and_eta_in_plain_lines(site: Site, tmp_path: Path) -> None:
    publish_site(site)
    config = write_config(tmp_path, site.url("/llms.txt"))
    r = _cli("build", "--config", str(config), "--out", str(tmp_path / "out"))  # stderr is a pipe: lines
    assert r.returncode == 0, r.stderr
    n = len(TOPICS)
    lines = r.stderr.splitlines()
    crawled = [x for x in lines if x.startswith(f"docbundle: demo@latest: crawled {n}/{n} pages")]
    indexed = [x for x in lines if x.startswith(f"docbundle: demo@latest: indexed {n}/{n} pages")]
    wrote = [x for x in lines if x.startswith("docbundle: demo@latest: wrote ")]
    assert crawled and indexed, r.stderr
    # Each phase ends with its final count, rate and time (a phase this short prints nothing else).
    assert wrote[-1].startswith("docbundle: demo@latest: wrote 3/3 parts (manifest, files hashed), ")
    assert all(re.search(r", [\d.]+/s, \d+ s$", x) for x in (crawled[-1], indexed[-1], wrote[-1])), r.stderr
    assert "\r" not in r.stderr  # no bar redrawn in a log
    r = _cli("build", "--config", str(config), "--out", str(tmp_path / "out"), "--quiet")
    assert r.returncode == 0 and r.stderr == ""


def test_a_failed_first_build_leaves_no_skeleton(site: Site, tmp_path: Path) -> None:
    site.fault("/llms.txt", "status", code=404)
    config = write_config(tmp_path, site.url("/llms.txt"))
    out = tmp_path / "out"
    r = _cli("build", "--config", str(config), "--out", str(out), "--no-cache", "--quiet")
    assert r.returncode == 1 and "404" in r.stdout
    assert not (out / "demo").exists(), list(out.rglob("*"))
    r = server_cli("info", "--bundles", str(out))
    assert r.returncode == 0 and "no libraries installed" in r.stdout, r.stdout + r.stderr
    # A library that built once keeps its version folder (and its lock file) when a later build fails.
    site.clear_fault("/llms.txt")
    publish_site(site)
    assert _cli("build", "--config", str(config), "--out", str(out), "--no-cache", "--quiet").returncode == 0
    site.fault("/llms.txt", "status", code=404)
    assert _cli("build", "--config", str(config), "--out", str(out), "--no-cache", "--quiet").returncode == 1
    assert read_current(out / "demo" / "latest") is not None
    r = server_cli("verify", str(out))
    assert r.returncode == 0, r.stdout


def test_version_and_a_closed_pipe(site: Site, tmp_path: Path) -> None:
    from importlib.metadata import version

    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"docbundle-index {version('docbundle-indexer')}"
    publish_site(site)
    config = write_config(tmp_path, site.url("/llms.txt"))
    read, write = os.pipe()
    os.close(read)  # `| head` that has already gone
    with os.fdopen(write, "wb") as stdout:
        proc = subprocess.run(
            [sys.executable, "-m", "docbundle.indexer.cli", "build", "--config", str(config),
             "--out", str(tmp_path / "out"), "--json", "--quiet"],
            stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert proc.returncode == 141 and "Traceback" not in proc.stderr, proc.stderr


def test_config_errors_are_all_reported_with_did_you_mean(tmp_path: Path) -> None:
    bad = tmp_path / "libraries.toml"
    bad.write_text(
        '[[library]]\nid = "one"\nllms_tx = "a/llms.txt"\nmax_page = 3\n'
        '[[library]]\nid = "Two"\nllms_txt = "b/llms.txt"\n'
        '[[library]]\nid = "three"\nllms_txt = "c/llms.txt"\ncrawl = { retrys = 2 }\n',
        encoding="utf-8",
    )
    r = _cli("build", "--config", str(bad))
    assert r.returncode == 2
    assert f"{bad}: 4 problems:" in r.stderr, r.stderr
    assert "library 'one': key 'llms_tx': unknown key; did you mean 'llms_txt'?" in r.stderr
    assert "library 'one': key 'max_page': unknown key; did you mean 'max_pages'?" in r.stderr
    assert (
        "library 'Two': key 'id': 'Two' is not a library id: lower-case letters, digits and '-'" in r.stderr
    )
    assert "library 'three': crawl.retrys: unknown key; did you mean 'retries'?" in r.stderr


def test_the_nightly_job_logs_progress_too(site: Site, tmp_path: Path) -> None:
    publish_site(site)
    config = write_config(tmp_path, site.url("/llms.txt"))
    r = _cli(
        "nightly", "--config", str(config), "--out", str(tmp_path / "out"), "--dist", str(tmp_path / "dist"),
        "--golden", str(tmp_path / "no-golden"),
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    n = len(TOPICS)
    for phase in (f"crawled {n}/{n} pages", f"indexed {n}/{n} pages", "wrote 3/3 parts"):
        assert f"docbundle: demo@latest: {phase}" in r.stderr, r.stderr
