"""``docbundle-index add URL``: a loopback site's llms.txt surveyed, then appended to a commented catalogue."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clikit import index_cli, server_cli
from docbundle.indexer.config import load_config
from docsite import TOPICS, llms_txt, page_markdown, publish_site
from prockit import alive, descendants
from sitesrv import Site, run_site

CATALOGUE = """\
# My catalogue: comments, blank lines and key order must survive an add.

[defaults]
keep = 2          # keep two builds

# --- first library ---
[[library]]
id = "first"
llms_txt = "https://example.invalid/llms.txt"   # never fetched by these tests
"""

HTML_PAGE = "<html><head><title>Guide</title></head><body><main><h1>Guide</h1><p>{}</p></main></body></html>"


def _site_with_html(site: Site, extra: str = "") -> None:
    publish_site(site)
    for slug in ("alpha", "beta"):
        site.add(f"/html/{slug}", HTML_PAGE.format("Text " * 40), content_type="text/html; charset=utf-8")
    body = llms_txt(TOPICS) + "\n## Pages in HTML\n\n- [Alpha](html/alpha)\n- [Beta](html/beta)\n" + extra
    site.add("/llms.txt", body, content_type="text/plain; charset=utf-8")


def test_add_shows_what_it_found_and_appends_keeping_the_layout(site: Site, tmp_path: Path) -> None:
    _site_with_html(site)
    config = tmp_path / "libraries.toml"
    config.write_text(CATALOGUE, encoding="utf-8")
    url = site.url("/llms.txt")

    r = index_cli("add", url, "--config", str(config))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"Demo Docs  <{url}>\n  > Documentation for the demo payment SDK.\n")
    assert "sections: Guides (3), Reference (3), Pages in HTML (2)" in r.stdout
    assert "links: 8" in r.stdout
    assert "pages fetched: 6 markdown, 2 HTML (converted when built), 0 failed" in r.stdout
    assert "library id 'demo', from the llms.txt's title" in r.stderr and "--id ID" in r.stderr
    assert "added library 'demo'" in r.stderr and "--library demo" in r.stderr

    text = config.read_text(encoding="utf-8")
    assert text.startswith(CATALOGUE)  # every comment, blank line and key of the file, as it was
    assert text[len(CATALOGUE) :] == (
        '\n[[library]]\nid = "demo"\nname = "Demo Docs"\n'
        f'description = "Documentation for the demo payment SDK."\nllms_txt = "{url}"\n'
    )
    lib = load_config(config).get("demo")
    assert (lib.name, lib.llms_txt) == ("Demo Docs", url)

    site.add("/v2/llms.txt", llms_txt(TOPICS), content_type="text/plain; charset=utf-8")
    for args, message in [
        (["--id", "demo"], "already has a library 'demo'; pass --id"),
        (["--id", "Bad_Id"], "'Bad_Id' is not a library id"),
    ]:
        r = index_cli("add", site.url("/v2/llms.txt"), "--config", str(config), "--probe", "0", *args)
        assert r.returncode == 2 and message in r.stderr, r.stderr
        assert config.read_text(encoding="utf-8") == text
    for args in ([], ["--id", "other"]):  # the URL is configured: no id makes it a second library
        r = index_cli("add", url, "--config", str(config), *args)
        assert r.returncode == 2, r.stderr
        assert f"already lists {url} as library 'demo', so it is configured already" in r.stderr
        assert "another --id would not make it a new library" in r.stderr
        assert (
            f"docbundle-index build --config {config} --library demo; to change it, edit that entry"
            in r.stderr
        )
        assert config.read_text(encoding="utf-8") == text


def test_add_json_and_dry_run_change_nothing(site: Site, tmp_path: Path) -> None:
    _site_with_html(site)
    config = tmp_path / "libraries.toml"
    config.write_text(CATALOGUE, encoding="utf-8")
    r = index_cli(
        "add", site.url("/llms.txt"), "--config", str(config), "--json", "--dry-run", "--probe", "3"
    )
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)
    assert (found["title"], found["links"], found["probed"], found["markdown"]) == ("Demo Docs", 8, 3, 3)
    assert [s["name"] for s in found["sections"]] == ["Guides", "Reference", "Pages in HTML"]
    assert "'demo' would be added" in r.stderr
    assert config.read_text(encoding="utf-8") == CATALOGUE


def test_the_address_policy_applies_to_the_probe(site: Site, tmp_path: Path) -> None:
    """A page on another loopback origin is refused unless --allow-host names it (and the entry keeps it)."""
    other = Site()
    other.add("/secret.md", "# Secret\n\nInternal text.\n")
    with run_site(other):
        port = other.url("/").split(":")[2].strip("/")
        _site_with_html(site, extra=f"\n## Internal\n\n- [Secret]({other.url('/secret.md')})\n")
        config = tmp_path / "libraries.toml"
        r = index_cli("add", site.url("/llms.txt"), "--config", str(config), "--dry-run")
        assert r.returncode == 0, r.stderr
        assert "6 markdown, 2 HTML (converted when built), 1 failed" in r.stdout
        assert other.requests == []  # refused before a connection was made
        assert not config.exists()

        r = index_cli(
            "add", site.url("/llms.txt"), "--config", str(config), "--allow-host", f"127.0.0.1:{port}"
        )
        assert r.returncode == 0, r.stderr
        assert "7 markdown, 2 HTML (converted when built), 0 failed" in r.stdout
        assert [q.path for q in other.requests] == ["/secret.md"]
    assert load_config(config).get("demo").allow_hosts == [f"127.0.0.1:{port}"]
    assert config.read_text(encoding="utf-8").startswith("# The docbundle library catalogue")


def test_add_build_builds_and_the_library_searches(site: Site, tmp_path: Path) -> None:
    publish_site(site)
    config, out = tmp_path / "cfg" / "libraries.toml", tmp_path / "bundles"
    r = index_cli(
        "add", site.url("/llms.txt"), "--config", str(config), "--id", "demo", "--build", "--out", str(out)
    )
    assert r.returncode == 0, r.stderr
    assert "1 built, 0 unchanged, 0 failed" in r.stdout
    search = ["search", "demo", "webhook signing secret", "--json", "--bundles", str(out)]
    r = server_cli(*search, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["hits"][0]["documentId"].endswith("webhooks.md")


def test_add_refuses_what_it_cannot_use(site: Site, tmp_path: Path) -> None:
    site.add("/empty/llms.txt", "# Nothing here\n\n> No links at all.\n", content_type="text/plain")
    config = tmp_path / "libraries.toml"
    config.write_text(CATALOGUE, encoding="utf-8")
    cases = [
        (site.url("/missing/llms.txt"), [], 1, "cannot read the llms.txt"),
        (site.url("/empty/llms.txt"), [], 1, "lists no pages; nothing added"),
        ("file:///etc/llms.txt", [], 2, "give the http(s) address of an llms.txt"),
        (site.url("/empty/llms.txt"), ["--allow-host", "*"], 2, "--allow-host '*'"),
    ]
    for url, extra, code, message in cases:
        r = index_cli("add", url, "--config", str(config), *extra)
        assert (r.returncode, message in r.stderr) == (code, True), (url, r.stderr)
        assert "Traceback" not in r.stderr
    assert config.read_text(encoding="utf-8") == CATALOGUE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["libraries.toml"]  # no temporary file left


def test_every_add_option_is_documented() -> None:
    import argparse
    import re

    from docbundle.indexer.cli import _parser

    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    options = [o for a in sub.choices["add"]._actions for o in a.option_strings if o.startswith("--")]
    root = Path(__file__).resolve().parents[2]
    docs = (root / "docs" / "configuration.md").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert len(options) >= 9
    for option in set(options) - {"--help"}:
        mentioned = re.compile(rf"(?<![\w-]){re.escape(option)}(?![\w-])")
        assert mentioned.search(docs), option
        if option != "--out":
            assert mentioned.search(readme), option


def test_add_refuses_a_library_whose_probed_pages_all_failed(site: Site, tmp_path: Path) -> None:
    """Every probed page 404: nothing is appended, exit 1, each page's status and what to do are said."""
    site.add("/llms.txt", llms_txt(TOPICS), content_type="text/plain; charset=utf-8")  # no page published
    config = tmp_path / "libraries.toml"
    config.write_text(CATALOGUE, encoding="utf-8")
    for extra in ([], ["--dry-run"], ["--probe", "3"]):
        r = index_cli("add", site.url("/llms.txt"), "--config", str(config), *extra)
        assert r.returncode == 1, r.stderr
        probed = "the first 3 of 6" if extra == ["--probe", "3"] else "the"
        assert f"not one of {probed} pages probed could be fetched, so nothing was added:" in r.stderr
        assert f"  {site.url('/guides/install.md')}: HTTP 404\n" in r.stderr
        assert r.stderr.count(": HTTP 404\n") == (3 if extra == ["--probe", "3"] else 5)  # the first five
        assert ("... and 1 more (see --json)" in r.stderr) == (extra != ["--probe", "3"])
        assert "check the llms.txt's links" in r.stderr and "--allow-host HOST" in r.stderr
        assert "added" not in r.stderr.replace("nothing was added", "")
        assert config.read_text(encoding="utf-8") == CATALOGUE
    r = index_cli("add", site.url("/llms.txt"), "--config", str(config), "--json")
    failures = json.loads(r.stdout)["failures"]
    assert r.returncode == 1 and [(f["status"], f["kind"]) for f in failures] == [(404, "http")] * 6


def test_a_failed_add_build_leaves_the_config_as_it_was(site: Site, tmp_path: Path) -> None:
    """``--build`` whose build fails takes the entry out again: the file as before, or no file."""
    site.add("/llms.txt", llms_txt(TOPICS), content_type="text/plain; charset=utf-8")  # every page 404
    config = tmp_path / "libraries.toml"
    config.write_text(CATALOGUE, encoding="utf-8")
    missing = tmp_path / "new" / "libraries.toml"
    for path, before in ((config, CATALOGUE), (missing, None)):
        r = index_cli(
            "add", site.url("/llms.txt"), "--config", str(path), "--probe", "0", "--build",
            "--out", str(tmp_path / "bundles"),
        )  # fmt: skip
        assert r.returncode == 1, r.stderr
        assert "0 built, 0 unchanged, 1 failed" in r.stdout
        assert f"the build did not succeed, so 'demo' was taken out of {path} again" in r.stderr
        assert (path.read_text(encoding="utf-8") if path.exists() else None) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundles", "libraries.toml", "new"]
    assert list((tmp_path / "new").iterdir()) == []  # no temporary file left


DJANGO = """\
# Django 3.2 documentation

> The web framework for perfectionists with deadlines. Links are relative to this file.

## Topics

- [Models](topics/models.md): the single, definitive source of information about your data
"""


def test_the_id_version_and_description_are_what_users_type(site: Site, tmp_path: Path) -> None:
    """Title "Django 3.2 documentation": id ``django`` (then ``django-2``), version 3.2, the summary
    without its sentence about the file; the built library is searched as ``django``."""
    site.add("/llms.txt", DJANGO, content_type="text/plain; charset=utf-8")
    site.add("/topics/models.md", page_markdown("models", "Models", "A model is the source of your data."))
    site.add("/v4/llms.txt", DJANGO.replace("3.2", "4.0"), content_type="text/plain; charset=utf-8")
    site.add("/v4/topics/models.md", page_markdown("models", "Models", "Models in the newer release."))
    config, out = tmp_path / "libraries.toml", tmp_path / "bundles"
    r = index_cli("add", site.url("/llms.txt"), "--config", str(config), "--build", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "library id 'django', from the llms.txt's title; clients pass it as libraryId" in r.stderr
    assert "added library 'django' (version 3.2, from the title)" in r.stderr
    assert "django@3.2" in r.stdout
    text = config.read_text(encoding="utf-8")
    assert text.endswith(
        '[[library]]\nid = "django"\nname = "Django 3.2 documentation"\n'
        'description = "The web framework for perfectionists with deadlines."\n\n'
        f'[[library.version]]\nname = "3.2"\nllms_txt = "{site.url("/llms.txt")}"\n'
    )
    r = server_cli("search", "django", "definitive source of information", "--json", "--bundles", str(out))
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)
    assert (found["libraryId"], found["version"]) == ("django", "3.2")
    assert found["hits"][0]["documentId"].endswith("models.md")


def test_a_new_release_of_a_listed_library_becomes_one_of_its_versions(site: Site, tmp_path: Path) -> None:
    """ "Django 4.0 documentation" on the host that serves django 3.2 is version 4.0 of ``django``, not a
    library ``django-2``; the same title from another host is a namesake, added as a library of its own."""
    site.add("/llms.txt", DJANGO, content_type="text/plain; charset=utf-8")
    site.add("/topics/models.md", page_markdown("models", "Models", "A model is the source of your data."))
    site.add("/v4/llms.txt", DJANGO.replace("3.2", "4.0"), content_type="text/plain; charset=utf-8")
    site.add("/v4/topics/models.md", page_markdown("models", "Models", "Models in the newer release."))
    config, out = tmp_path / "libraries.toml", tmp_path / "bundles"
    config.write_text(
        CATALOGUE + '\n[[library]]\nid = "django"\n\n'
        '[[library.version]]\nname = "1.0"\nllms_txt = "https://example.invalid/django/llms.txt"\n',
        encoding="utf-8",
    )
    r = index_cli("add", site.url("/llms.txt"), "--config", str(config))
    assert r.returncode == 0, r.stderr
    assert "library id 'django-2' ('django' is taken), from the llms.txt's title" in r.stderr  # other host
    r = index_cli("add", site.url("/v4/llms.txt"), "--config", str(config), "--build", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "is version 4.0 of library 'django-2' (from the title; 'django-2' has 3.2)" in r.stderr
    assert "added version 4.0 of library 'django-2'" in r.stderr
    catalogue = load_config(config)
    assert [lib.id for lib in catalogue.libraries] == ["first", "django", "django-2"]
    assert [(v.name, v.llms_txt) for v in catalogue.get("django-2").version] == [
        ("3.2", site.url("/llms.txt")),
        ("4.0", site.url("/v4/llms.txt")),
    ]
    assert config.read_text(encoding="utf-8").startswith(CATALOGUE)  # comments and layout kept
    r = server_cli("search", "django-2", "newer release", "--version", "4.0", "--json", "--bundles", str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["version"] == "4.0"
    r = index_cli("add", site.url("/v4/llms.txt"), "--config", str(config))  # listed now: refused
    assert r.returncode == 2 and "already lists" in r.stderr and "'django-2'" in r.stderr


def test_a_site_root_serving_html_points_at_its_llms_txt(site: Site, tmp_path: Path) -> None:
    """The address of a web page, not an llms.txt: one more request, to /llms.txt on the same origin."""
    site.add("/", HTML_PAGE.format("Welcome."), content_type="text/html; charset=utf-8")
    config = tmp_path / "libraries.toml"
    r = index_cli("add", site.url("/"), "--config", str(config))
    assert r.returncode == 1 and "this is an HTML page, not an llms.txt" in r.stderr, r.stderr
    assert f"the site has no llms.txt at {site.url('/llms.txt')} either (tried once: HTTP 404" in r.stderr
    assert [q.path for q in site.requests] == ["/", "/llms.txt"]

    publish_site(site)
    site.reset_log()
    r = index_cli("add", site.url("/"), "--config", str(config))
    assert r.returncode == 1, r.stderr
    assert (
        f"the site publishes {site.url('/llms.txt')} (tried once): run docbundle-index add {site.url('/llms.txt')}"
        in r.stderr
    )
    assert [q.path for q in site.requests] == ["/", "/llms.txt"]

    site.add("/llms.txt", HTML_PAGE.format("Not here."), content_type="text/html; charset=utf-8")
    site.reset_log()
    r = index_cli("add", site.url("/llms.txt"), "--config", str(config))  # no second guess for /llms.txt
    assert r.returncode == 1 and "ask the site where its llms.txt is" in r.stderr, r.stderr
    assert [q.path for q in site.requests] == ["/llms.txt"]
    assert not config.exists()


#: The exit code of a command interrupted by each signal: 128 + its number, as a shell reports it.
INTERRUPTED = {signal.SIGINT: 130, signal.SIGTERM: 143}
#: A hang guard of generous size: how long a test waits for a build to get going or to end.
HANG_GUARD = 120.0
#: The test site's slow page: a byte every quarter second, hours in all, so the build is interrupted.
SLOW = {"size": 100_000, "chunk": 1, "delay": 0.25}


def _interrupt_when_crawling(
    site: Site,
    command: list[str],
    sig: signal.Signals,
    *,
    hits: int = 1,
    workers: bool = False,
    sigint_ignored: bool = False,
) -> tuple[int, str, dict[int, int]]:
    """Run ``docbundle-index COMMAND``, send it ``sig`` (to its own pid) once it has asked for the slow
    page ``/a.md`` (the ``hits``-th time), and return its exit code, its stderr and the processes it
    had started then (pid -> start time; with ``workers``, once its forkserver and worker run). With
    ``sigint_ignored`` it starts with SIGINT ignored, as a job a script starts in the background does
    (``trap "" INT`` is inherited through ``exec``; Python then installs no SIGINT handler)."""
    argv = [sys.executable, "-m", "docbundle.indexer.cli", *command]
    if sigint_ignored:
        argv = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *argv]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    children: dict[int, int] = {}
    try:
        hang_guard = time.monotonic() + HANG_GUARD
        # The build is crawling (its version folder and lock exist); with workers, its page worker
        # (started beside the crawl) and the forkserver run too.
        while site.hits("/a.md") < hits or (workers and len(children := descendants(proc.pid)) < 2):
            assert proc.poll() is None and time.monotonic() < hang_guard, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=HANG_GUARD)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, stderr, children


@pytest.mark.parametrize(
    ("sig", "sigint_ignored"),
    [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGTERM, True)],
    ids=["SIGINT", "SIGTERM", "SIGTERM-with-SIGINT-ignored"],
)
def test_an_interrupted_first_build_leaves_no_empty_folder(
    site: Site, tmp_path: Path, sig: signal.Signals, sigint_ignored: bool
) -> None:
    # Ctrl-C during `add --build` (issue 31): the entry was taken back out, but an empty
    # bundles/<id>/<version>/ stayed, although a failed first build leaves no empty folder. SIGTERM
    # (a service manager, a CI runner's cancel, `timeout`) killed it outright: the entry stayed in the
    # config and the version folder with its lock file stayed too.
    site.add("/llms.txt", "# Slow Docs\n\n- [A](a.md)\n", content_type="text/plain; charset=utf-8")
    site.fault("/a.md", "slow", **SLOW)
    config = tmp_path / "libraries.toml"
    config.write_text(CATALOGUE, encoding="utf-8")
    out = tmp_path / "bundles"
    add = ["add", site.url("/llms.txt"), "--id", "slow", "--config", str(config), "--probe", "0"]
    command = [*add, "--build", "--out", str(out)]
    code, stderr, _ = _interrupt_when_crawling(site, command, sig, sigint_ignored=sigint_ignored)
    assert code == INTERRUPTED[sig], stderr
    assert "taken out of" in stderr and f"interrupted ({sig.name})" in stderr and "Traceback" not in stderr
    assert config.read_text(encoding="utf-8") == CATALOGUE
    assert not (out / "slow").exists(), sorted(str(p.relative_to(out)) for p in out.rglob("*"))


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_sigterm_during_a_build_keeps_the_previous_bundle_and_leaves_no_process(
    site: Site, tmp_path: Path
) -> None:
    # `kill -TERM` of a rebuild mid-crawl: the bundle built before stays as it was, byte for byte, the
    # command says it was interrupted, and its page worker and forkserver are gone with it.
    site.add("/llms.txt", "# Slow Docs\n\n- [A](a.md)\n", content_type="text/plain; charset=utf-8")
    site.add("/a.md", "# A\n\nWords about the widget and how it configures things.\n")
    config = tmp_path / "libraries.toml"
    config.write_text(f'[[library]]\nid = "slow"\nllms_txt = "{site.url("/llms.txt")}"\n', encoding="utf-8")
    out = tmp_path / "bundles"
    build = ["build", "--config", str(config), "--out", str(out)]
    first = index_cli(*build)
    assert first.returncode == 0, first.stderr
    before = {p: p.read_bytes() for p in sorted((out / "slow").rglob("*")) if p.is_file()}
    assert any(p.name == "manifest.json" for p in before)

    site.fault("/a.md", "slow", **SLOW)
    code, stderr, children = _interrupt_when_crawling(site, build, signal.SIGTERM, hits=2, workers=True)
    assert code == INTERRUPTED[signal.SIGTERM], stderr
    assert "interrupted (SIGTERM); published bundles are intact" in stderr and "Traceback" not in stderr
    after = {p: p.read_bytes() for p in sorted((out / "slow").rglob("*")) if p.is_file()}
    assert after == before
    hang_guard = time.monotonic() + HANG_GUARD  # the forkserver exits once the indexer has
    while (
        left := [pid for pid, start in children.items() if alive(pid, start)]
    ) and time.monotonic() < hang_guard:
        time.sleep(0.05)
    assert not left, f"still running after the build was interrupted: {left}"
