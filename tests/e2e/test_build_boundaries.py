"""Crawl boundaries, attacked through the real build: a hostile llms.txt must not read local files
or reach internal services (issue 9, items 1 and 2).

The "site" fixture is the documentation site on 127.0.0.1:PORT (the llms.txt's own origin, so it
builds); ``internal`` is a second loopback server on another port playing an internal service that
must never be hit unless the config allows it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from clikit import index_cli
from docbundle.bundle.reader import verify_bundle
from docsite import TOPICS, Build, llms_txt, page_markdown, publish_site, write_config
from sitesrv import Site, run_site

SECRET = "TOPSECRET-7f3a9c build machine credentials"
# "Answers instead of hanging": far above what these builds take (about a second), far below forever.
GUARD_SECONDS = 60


@pytest.fixture
def internal() -> Iterator[Site]:
    """A second loopback HTTP server: an internal service the crawler must not reach."""
    served = Site()
    served.add("/secret.md", f"# Internal\n\n{SECRET}\n")
    served.add("/latest/meta-data/iam.md", f"# Metadata\n\n{SECRET}\n")
    with run_site(served):
        yield served
    assert not served.errors, f"test server raised: {served.errors!r}"


def _secret_file(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    path = outside / "secret.md"
    path.write_text(f"# Secret\n\n{SECRET}\n", encoding="utf-8")
    return path


def _links(*links: tuple[str, str]) -> str:
    return "\n## Extra\n\n" + "".join(f"- [{title}]({url})\n" for title, url in links)


def _failures(bundle: Path) -> dict[str, tuple[str | None, str]]:
    """Failed documents of a bundle: url -> (error_kind, error)."""
    m = verify_bundle(bundle)
    return {d.url: (d.error_kind, d.error or "") for d in m.documents if d.error}


def _assert_secret_absent(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), f"{path} carries the secret"


def _cli_build(config: Path, out: Path, *, stdin: int | None = None) -> dict[str, object]:
    r = index_cli(
        *("build", "--config", str(config), "--out", str(out), "--no-cache", "--quiet", "--json"),
        stdin=stdin,
        timeout=GUARD_SECONDS,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    report: dict[str, object] = json.loads(r.stdout)
    return report


# -- item 1: local files -------------------------------------------------------------------------


def test_file_links_in_a_remote_llms_txt_are_refused_and_never_read(
    site: Site, tmp_path: Path, build: Build
) -> None:
    publish_site(site)
    secret = _secret_file(tmp_path)
    site.add(
        "/llms.txt",
        llms_txt(TOPICS, _links(("Secret", secret.as_uri()), ("Stdin", "file:///dev/stdin"))),
        content_type="text/plain",
    )
    o = build(write_config(tmp_path, site.url("/llms.txt")), out=tmp_path / "bundles")
    assert o.status == "built", o.message
    assert o.documents == len(TOPICS)
    failures = _failures(Path(o.bundle or ""))
    for url in (secret.as_uri(), "file:///dev/stdin"):
        kind, error = failures[url]
        assert kind == "refused", (url, kind, error)
        assert "remote llms.txt" in error and "http(s)" in error
    _assert_secret_absent(tmp_path / "bundles")
    assert {f.kind for f in o.failures} == {"refused"}


def _local_site(tmp_path: Path, extra: str) -> Path:
    src = tmp_path / "site"
    src.mkdir()
    for slug, title, lead in TOPICS[:2]:
        (src / f"{slug}.md").write_text(page_markdown(slug, title, lead), encoding="utf-8")
    (src / "llms.txt").write_text(
        "# Local\n\n## Guides\n\n" + "".join(f"- [{t}]({s}.md)\n" for s, t, _ in TOPICS[:2]) + extra,
        encoding="utf-8",
    )
    return src


def test_a_fifo_and_dev_stdin_in_a_local_llms_txt_are_refused_and_the_build_finishes(tmp_path: Path) -> None:
    src = _local_site(tmp_path, _links(("Stdin", "file:///dev/stdin"), ("Pipe", "pipe.md")))
    os.mkfifo(src / "pipe.md")
    config = write_config(tmp_path, "site/llms.txt")
    # stdin is a pipe nobody writes to: reading /dev/stdin (or opening the FIFO) would block until the
    # guard's timeout instead of finishing.
    report = _cli_build(config, tmp_path / "bundles", stdin=subprocess.PIPE)
    libraries = report["libraries"]
    assert isinstance(libraries, list)
    (lib,) = libraries
    assert lib["status"] == "built" and lib["documents"] == 2, lib
    kinds = {f["url"]: (f["kind"], f["error"]) for f in lib["failures"]}
    assert kinds["file:///dev/stdin"][0] == "refused", kinds
    (pipe_url,) = [u for u in kinds if u.endswith("/pipe.md")]
    kind, error = kinds[pipe_url]
    assert kind == "refused" and "not a regular file" in error, kinds


def test_a_symlink_leading_out_of_the_local_folder_is_refused(tmp_path: Path, build: Build) -> None:
    secret = _secret_file(tmp_path)
    src = _local_site(tmp_path, _links(("Linked", "linked.md"), ("Inside", "inside.md")))
    (src / "linked.md").symlink_to(secret)
    (src / "inside.md").symlink_to(src / f"{TOPICS[0][0]}.md")  # a link that stays inside is fine
    o = build(write_config(tmp_path, "site/llms.txt"), out=tmp_path / "bundles")
    assert (o.status, o.documents) == ("built", 3), o.message
    ((url, (kind, error)),) = _failures(Path(o.bundle or "")).items()
    assert url == "site/linked.md" and kind == "refused" and "outside" in error, error
    assert str(tmp_path) not in error
    _assert_secret_absent(tmp_path / "bundles")


@pytest.mark.parametrize(
    "link", ["../outside/secret.md", "%2e%2e/outside/secret.md", "sub/../../outside/secret.md"]
)
def test_dot_dot_out_of_the_local_folder_is_refused(tmp_path: Path, build: Build, link: str) -> None:
    _secret_file(tmp_path)
    _local_site(tmp_path, _links(("Up", link)))
    o = build(write_config(tmp_path, "site/llms.txt"), out=tmp_path / "bundles")
    assert (o.status, o.documents) == ("built", 2), o.message
    ((kind, error),) = _failures(Path(o.bundle or "")).values()
    assert kind == "refused" and "outside" in error, error
    _assert_secret_absent(tmp_path / "bundles")


def test_a_directory_source_does_not_follow_a_symlink_out(tmp_path: Path, build: Build) -> None:
    secret = _secret_file(tmp_path)
    src = _local_site(tmp_path, "")
    (src / "llms.txt").unlink()
    (src / "escape.md").symlink_to(secret)
    o = build(write_config(tmp_path, "site"), out=tmp_path / "bundles")
    assert (o.status, o.documents) == ("built", 2), o.message
    ((kind, _error),) = _failures(Path(o.bundle or "")).values()
    assert kind == "refused"
    _assert_secret_absent(tmp_path / "bundles")


# -- item 2: internal addresses ------------------------------------------------------------------


def test_a_link_to_another_loopback_port_is_refused_without_a_request(
    site: Site, internal: Site, tmp_path: Path, build: Build
) -> None:
    publish_site(site)
    port = internal.url("/").rsplit(":", 1)[1].split("/")[0]
    links = _links(
        ("Other port", internal.url("/secret.md")),
        ("By name", f"http://localhost:{port}/secret.md"),
        ("Mapped", f"http://[::ffff:127.0.0.1]:{port}/secret.md"),
        ("Decimal", f"http://2130706433:{port}/secret.md"),
    )
    site.add("/llms.txt", llms_txt(TOPICS, links), content_type="text/plain")
    o = build(write_config(tmp_path, site.url("/llms.txt")), out=tmp_path / "bundles")
    assert o.status == "built" and o.documents == len(TOPICS), o.message
    failures = _failures(Path(o.bundle or ""))
    assert len(failures) == 4
    for url, (kind, error) in failures.items():
        assert kind == "refused", (url, error)
        assert "loopback" in error and "allow_hosts" in error, error
    assert failures[internal.url("/secret.md")][1] == (
        f"127.0.0.1:{port} is a loopback address, not the llms.txt's own origin; "
        "allow it with allow_hosts in the library's config"
    )
    assert "localhost:" in failures[f"http://localhost:{port}/secret.md"][1]
    assert internal.hits("/secret.md") == 0 and not internal.requests
    _assert_secret_absent(tmp_path / "bundles")


def test_a_redirect_to_an_internal_port_is_refused_at_the_hop(
    site: Site, internal: Site, tmp_path: Path, build: Build
) -> None:
    publish_site(site)
    site.fault("/moved.md", "redirect", to=internal.url("/secret.md"))
    site.add("/llms.txt", llms_txt(TOPICS, _links(("Moved", "moved.md"))), content_type="text/plain")
    o = build(write_config(tmp_path, site.url("/llms.txt")), out=tmp_path / "bundles")
    assert o.status == "built", o.message
    ((kind, error),) = _failures(Path(o.bundle or "")).values()
    assert kind == "refused" and f"redirect to {internal.url('/secret.md')}" in error, error
    assert site.hits("/moved.md") == 1
    assert not internal.requests
    _assert_secret_absent(tmp_path / "bundles")


def test_the_cloud_metadata_address_is_refused_without_connecting(
    site: Site, tmp_path: Path, build: Build
) -> None:
    publish_site(site)
    links = _links(("Metadata", "http://169.254.169.254/latest/meta-data/iam.md"))
    site.add("/llms.txt", llms_txt(TOPICS, links), content_type="text/plain")
    o = build(write_config(tmp_path, site.url("/llms.txt")), out=tmp_path / "bundles")
    ((kind, error),) = _failures(Path(o.bundle or "")).values()
    # Refused before any connect: not a timeout or a network error after trying.
    assert kind == "refused" and "169.254.169.254:80 is a link-local address" in error, error
    (failure,) = o.failures
    assert failure.kind == "refused"


def test_allow_hosts_lets_an_internal_host_through(
    site: Site, internal: Site, tmp_path: Path, build: Build
) -> None:
    publish_site(site)
    port = internal.url("/").rsplit(":", 1)[1].split("/")[0]
    site.add(
        "/llms.txt",
        llms_txt(TOPICS, _links(("Internal", internal.url("/secret.md")))),
        content_type="text/plain",
    )
    config = write_config(tmp_path, site.url("/llms.txt"), extra=f'allow_hosts = ["127.0.0.1:{port}"]')
    o = build(config, out=tmp_path / "bundles")
    assert (o.status, o.documents, o.pages_failed) == ("built", len(TOPICS) + 1, 0), o.message
    assert internal.hits("/secret.md") == 1


def test_a_local_llms_txt_may_link_web_pages_and_internal_ones_need_allow_hosts(
    site: Site, tmp_path: Path, build: Build
) -> None:
    publish_site(site)
    port = site.url("/").rsplit(":", 1)[1].split("/")[0]
    src = tmp_path / "site"
    src.mkdir()
    (src / "local.md").write_text(page_markdown("local", "Local", "A page read from disk."), encoding="utf-8")
    (src / "llms.txt").write_text(
        "# Mixed\n\n## Pages\n\n- [Local](local.md)\n" + f"- [Web]({site.url('/guides/install.md')})\n",
        encoding="utf-8",
    )
    # A local llms.txt has no web origin: a loopback page is internal until the config allows it.
    o = build(write_config(tmp_path, "site/llms.txt"), out=tmp_path / "denied")
    assert (o.status, o.documents) == ("built", 1), o.message
    ((kind, error),) = _failures(Path(o.bundle or "")).values()
    assert kind == "refused" and "allow_hosts" in error
    assert site.hits("/guides/install.md") == 0

    config = write_config(tmp_path, "site/llms.txt", extra=f'allow_hosts = ["127.0.0.1:{port}"]')
    o = build(config, out=tmp_path / "allowed")
    assert (o.status, o.documents, o.pages_failed) == ("built", 2, 0), o.message
    assert site.hits("/guides/install.md") == 1


def test_the_cli_report_says_what_was_refused_and_why(site: Site, internal: Site, tmp_path: Path) -> None:
    publish_site(site)
    site.add(
        "/llms.txt",
        llms_txt(TOPICS, _links(("Internal", internal.url("/secret.md")))),
        content_type="text/plain",
    )
    config = write_config(tmp_path, site.url("/llms.txt"))
    cmd = [sys.executable, "-m", "docbundle.indexer.cli", "build", "--config", str(config)]
    r = subprocess.run(
        [*cmd, "--out", str(tmp_path / "b"), "--no-cache", "--quiet"],
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"! {internal.url('/secret.md')}: " in r.stdout
    assert "is a loopback address, not the llms.txt's own origin; allow it with allow_hosts" in r.stdout
    assert not internal.requests


def test_local_root_widens_the_folder_a_local_llms_txt_may_read(tmp_path: Path, build: Build) -> None:
    (tmp_path / "CHANGES.md").write_text(
        page_markdown("changes", "Changes", "What changed."), encoding="utf-8"
    )
    _secret_file(tmp_path)
    _local_site(tmp_path, _links(("Changes", "../CHANGES.md")))
    o = build(write_config(tmp_path, "site/llms.txt"), out=tmp_path / "narrow")
    ((kind, error),) = _failures(Path(o.bundle or "")).values()
    assert kind == "refused" and error.startswith("../CHANGES.md is outside the llms.txt's folder"), error

    o = build(write_config(tmp_path, "site/llms.txt", extra='local_root = "."'), out=tmp_path / "wide")
    assert (o.status, o.documents, o.pages_failed) == ("built", 3, 0), o.message
    # Wider, still bounded: a symbolic link out of local_root is refused.
    # (Dangling, and outside any temporary folder: resolving it is enough to refuse it.)
    (tmp_path / "site" / "escape.md").symlink_to(Path("/nonexistent-docbundle-test/escape.md"))
    (tmp_path / "site" / "llms.txt").write_text("# L\n\n- [Escape](escape.md)\n- [Changes](../CHANGES.md)\n")
    o = build(write_config(tmp_path, "site/llms.txt", extra='local_root = "."'), out=tmp_path / "wide2")
    ((kind, error),) = _failures(Path(o.bundle or "")).values()
    assert kind == "refused" and "outside the library's local_root through a symbolic link" in error, error
