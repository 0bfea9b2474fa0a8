"""Issue 19, items 7, 8 and 9: a hostile release cannot steer ``docbundle pull`` to internal addresses,
keep it waiting for ever, or make it print a traceback. Real CLI, real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from clikit import server_cli
from docbundle.bundle.release import INDEX
from docsite import packaged_entry
from sitesrv import Site, run_site


def pull(*args: str, tmp: Path, deadline: str | None = None) -> subprocess.CompletedProcess[str]:
    """``docbundle pull ARGS`` in a fresh process; never the project's real release."""
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["DOCBUNDLE_RELEASES"] = "http://127.0.0.1:9/unreachable/"
    env["TMPDIR"] = str(tmp)
    tmp.mkdir(exist_ok=True)
    if deadline is not None:
        env["DOCBUNDLE_PULL_DEADLINE"] = deadline
    return server_cli("pull", *args, env=env)


@pytest.fixture
def other() -> Iterator[Site]:
    """A second loopback site on another port: what a redirect must not reach."""
    served = Site()
    served.add(f"/rel/{INDEX}", '{"format": "docbundle-release-index", "version": 1, "bundles": []}')
    with run_site(served):
        yield served


@pytest.fixture
def listener_v6() -> Iterator[socket.socket]:
    """A listening socket on [::1] that nothing should connect to."""
    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    sock.bind(("::1", 0))
    sock.listen(8)
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


def _connected(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def test_a_redirect_to_another_loopback_port_is_refused_without_a_request(
    site: Site, other: Site, release: Path, tmp_path: Path
) -> None:
    site.fault(f"/list/{INDEX}", "redirect", to=other.url(f"/rel/{INDEX}"))
    r = pull("--list", "--from", site.url("/list/"), tmp=tmp_path / "tmp")
    port = other.url("/").split(":")[-1].rstrip("/")
    assert r.returncode == 1, r.stdout
    assert f"redirects to 127.0.0.1:{port}: 127.0.0.1:{port} is a loopback address" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""

    # The archive's hop: index.json and SHA256SUMS come from the release, the archive redirects away.
    entry = packaged_entry(release)
    site.serve_dir(release, "/arch")
    site.fault(f"/arch/{entry.archive}", "redirect", to=other.url(f"/rel/{entry.archive}"))
    bundles = tmp_path / "bundles"
    r = pull("golden", "--from", site.url("/arch/"), "--bundles", str(bundles), tmp=tmp_path / "tmp")
    assert r.returncode == 1 and "is a loopback address" in r.stderr, r.stderr
    assert other.requests == [] and not bundles.exists()


def test_a_redirect_to_ipv6_loopback_is_refused_without_connecting(
    site: Site, listener_v6: socket.socket, tmp_path: Path
) -> None:
    port = listener_v6.getsockname()[1]
    for target in (f"http://[::1]:{port}/{INDEX}", f"http://[::ffff:127.0.0.1]:{port}/{INDEX}"):
        site.fault(f"/v6/{INDEX}", "redirect", to=target)
        r = pull("--list", "--from", site.url("/v6/"), tmp=tmp_path / "tmp")
        assert r.returncode == 1 and "is a loopback address" in r.stderr, (target, r.stderr)
        assert "Traceback" not in r.stderr
    assert not _connected(listener_v6)


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254:80 is a link-local address"),
        ("http://[fd00:ec2::254]/latest/meta-data/", "is a private address"),
        ("http://2130706433:{port}/rel/index.json", "resolves to 127.0.0.1, which is a loopback address"),
        ("http://0x7f.1:{port}/rel/index.json", "resolves to 127.0.0.1, which is a loopback address"),
        ("http://localhost:{port}/rel/index.json", "which is a loopback address"),
        ("http://10.0.0.1/rel/index.json", "10.0.0.1:80 is a private address"),
        ("http://0.0.0.0:{port}/rel/index.json", "is an unspecified address"),
    ],
)
def test_internal_addresses_in_every_form_are_refused_at_the_hop(
    target: str, problem: str, site: Site, other: Site, tmp_path: Path
) -> None:
    port = other.url("/").split(":")[-1].rstrip("/")
    site.fault(f"/x/{INDEX}", "redirect", to=target.format(port=port))
    r = pull("--list", "--from", site.url("/x/"), tmp=tmp_path / "tmp")
    assert r.returncode == 1 and problem in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and other.requests == []


def test_the_release_named_by_from_may_be_loopback_and_redirect_within_itself(
    site: Site, release: Path, tmp_path: Path
) -> None:
    site.serve_dir(release, "/rel")
    site.fault(f"/moved/{INDEX}", "redirect", to=site.url(f"/rel/{INDEX}"))
    r = pull("--list", "--from", site.url("/moved/"), tmp=tmp_path / "tmp")
    assert r.returncode == 0 and r.stdout.splitlines()[1].startswith("golden@latest"), r.stderr


def test_a_dribbled_download_stops_at_its_deadline(site: Site, tmp_path: Path) -> None:
    """One byte every 0.25 s: each read is quick, the whole never ends; the deadline (1 s here) does."""
    site.fault(f"/slow/{INDEX}", "slow", size=400, chunk=1, delay=0.25)
    r = pull("--list", "--from", site.url("/slow/"), tmp=tmp_path / "tmp", deadline="1")
    assert r.returncode == 1, r.stdout
    assert "took longer than 1 s (the deadline of one download; $DOCBUNDLE_PULL_DEADLINE" in r.stderr
    assert "Traceback" not in r.stderr
    (sent,) = [q.sent for q in site.requests if q.path == f"/slow/{INDEX}"]
    assert sent < 400  # stopped, not read to the end

    r = pull("--list", "--from", site.url("/slow/"), tmp=tmp_path / "tmp", deadline="soon")
    assert r.returncode == 1 and "must be a positive number of seconds" in r.stderr, r.stderr


@pytest.mark.parametrize("args", [["--list"], ["golden"]])
def test_a_deeply_nested_index_gets_a_clear_error(args: list[str], site: Site, tmp_path: Path) -> None:
    # Nested inside the object: a bare "[[[..." is refused at its first byte (an index is an object).
    site.add(f"/deep/{INDEX}", '{"bundles": ' + "[" * 200_000, content_type="application/json")
    r = pull(*args, "--from", site.url("/deep/"), "--bundles", str(tmp_path / "b"), tmp=tmp_path / "tmp")
    assert r.returncode == 1, r.stdout
    assert "is not a docbundle release index: its JSON is nested too deeply" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize(
    "field",
    [
        "library",
        "version",
        "build_id",
        "content_hash",
        "manifest_sha256",
        "sha256",
        "release",
        "status",
        "built_at",
    ],
)
def test_an_index_field_with_a_trailing_newline_is_refused(
    field: str, site: Site, release: Path, tmp_path: Path
) -> None:
    # "$" also matches before a final newline: `pull --list` printed it raw and a tag `r1\n` was fetched
    # as `/r1%0A/` (issue 31, item 14). Every pattern ends in \Z now.
    index = json.loads((release / INDEX).read_text())
    (entry,) = index["bundles"]
    if field == "release":
        index["version"] = 2
        entry["release"] = "r1"
    entry[field] += "\n"
    site.add(f"/nl/{INDEX}", json.dumps(index), content_type="application/json")
    for args in (["--list"], [entry["library"].strip()]):
        r = pull(*args, "--from", site.url("/nl/"), "--bundles", str(tmp_path / "b"), tmp=tmp_path / "tmp")
        assert r.returncode == 1, (args, r.stdout)
        assert "is malformed" in r.stderr and f"`$.bundles[0].{field}`" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and r.stdout == ""
    assert not [q.path for q in site.requests if q.path != f"/nl/{INDEX}"]
