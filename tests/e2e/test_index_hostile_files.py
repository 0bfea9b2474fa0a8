"""Issue 31, items 1 and 3, for ``docbundle-index``: the files it reads back from a bundles folder or a
nightly's inputs may be FIFOs or JSON nested 5,000 deep (msgspec raises ``RecursionError`` on it).

``build`` reads ``catalog.json`` after it publishes, to update its entry: a hostile one is rebuilt from the
manifests and the build succeeds (it used to publish and then exit 1 with a traceback). ``nightly --plan``
reads last night's ``timings.json``: a hostile one is refused with what is wrong, no traceback, no hang.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from clikit import index_cli
from docbundle.bundle.layout import read_current
from docbundle.bundle.summary import SUMMARY_NAME, read_summary
from treekit import write_site

# A run that hangs on a planted file fails after this long (a hang guard, not a timing).
HANG_GUARD = 120
NESTED = b'{"format_version": 1, "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"


def _plant(path: Path, kind: str) -> None:
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(NESTED)


def _config(tmp_path: Path) -> Path:
    page = "# Lanterns\n\nHow lanterns are lit and trimmed.\n"
    write_site(tmp_path / "site", {"page.md": page}, "# Lanterns\n\n## Docs\n\n- [Lanterns](page.md)\n")
    config = tmp_path / "libraries.toml"
    config.write_text(
        '[[library]]\nid = "lanterns"\nllms_txt = "site/llms.txt"\n[library.chunking]\nmin_words = 3\n',
        encoding="utf-8",
    )
    return config


@pytest.mark.parametrize("kind", ["nested", "fifo"])
def test_build_over_a_hostile_catalog_json_publishes_and_rebuilds_it(tmp_path: Path, kind: str) -> None:
    config, out = _config(tmp_path), tmp_path / "bundles"
    out.mkdir()
    _plant(out / SUMMARY_NAME, kind)
    r = index_cli("build", "--config", str(config), "--out", str(out), "--no-cache", timeout=HANG_GUARD)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert SUMMARY_NAME in r.stderr and "rebuilt from the manifests" in r.stderr, r.stderr
    build = read_current(out / "lanterns" / "latest")
    assert build is not None
    assert {e.key: e.build_id for e in read_summary(out) or []} == {("lanterns", "latest"): build}


@pytest.mark.parametrize("kind", ["nested", "fifo"])
def test_nightly_plan_refuses_hostile_timings_with_what_is_wrong(tmp_path: Path, kind: str) -> None:
    config = _config(tmp_path)
    timings = tmp_path / "timings.json"
    _plant(timings, kind)
    r = index_cli(
        "nightly", "--config", str(config), "--out", str(tmp_path / "bundles"), "--plan",
        "--timings", str(timings), timeout=HANG_GUARD,
    )  # fmt: skip
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    reason = "nested too deeply" if kind == "nested" else "FIFO"
    assert str(timings) in r.stderr and reason in r.stderr, r.stderr


def test_build_names_a_fifo_planted_as_a_lock_file(tmp_path: Path) -> None:
    """A FIFO as ``catalog.lock`` read as "held by another writer" (each publish waited 10 s for it) and
    one as a version's ``.lock`` as "another build is running": each is named for what it is now. The
    build publishes past the first (the summary is left for readers to rebuild) and refuses the second."""
    config, out = _config(tmp_path), tmp_path / "bundles"
    out.mkdir()
    os.mkfifo(out / "catalog.lock")
    r = index_cli("build", "--config", str(config), "--out", str(out), "--no-cache", timeout=HANG_GUARD)
    assert r.returncode == 0, r.stderr
    assert "catalog.lock is a FIFO, not a regular file" in r.stderr, r.stderr
    assert read_current(out / "lanterns" / "latest") is not None
    (out / "catalog.lock").unlink()
    vlock = out / "lanterns" / "latest" / ".lock"
    vlock.unlink()
    os.mkfifo(vlock)
    r = index_cli("build", "--config", str(config), "--out", str(out), "--no-cache", timeout=HANG_GUARD)
    said = r.stdout + r.stderr
    assert r.returncode == 1, said
    assert ".lock is a FIFO, not a regular file" in said and "Traceback" not in said, said
