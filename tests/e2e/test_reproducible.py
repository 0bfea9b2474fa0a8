"""The same inputs give byte-identical bundles, whatever the hash seed or the number of worker processes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from docbundle.indexer.pipeline import prepare
from docsite import TOPICS, page_markdown


def _site(root: Path) -> Path:
    """A local site big enough (> PARALLEL_MIN_BYTES) that a build may use worker processes."""
    site = root / "site"
    (site / "pages").mkdir(parents=True)
    lines = ["# Repro\n", "> Reproducibility fixture.\n", "## Pages\n"]
    size = i = 0
    while size <= prepare.PARALLEL_MIN_BYTES * 1.2:
        slug, title, lead = TOPICS[i % len(TOPICS)]
        text = page_markdown(f"{slug}-{i}", f"{title} {i}", lead * 20, revision=i)
        (site / "pages" / f"{i}.md").write_text(text, encoding="utf-8")
        lines.append(f"- [{title} {i}](pages/{i}.md): page {i}")
        size += len(text.encode())
        i += 1
    (site / "llms.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return site


def _build(config: Path, out: Path, *, hash_seed: str, workers: str) -> None:
    env = {
        **os.environ,
        "PYTHONHASHSEED": hash_seed,
        "DOCBUNDLE_WORKERS": workers,
        "SOURCE_DATE_EPOCH": "1767225600",
    }
    cmd = [sys.executable, "-m", "docbundle.indexer.cli", "build", "--config", str(config), "--out", str(out)]
    r = subprocess.run([*cmd, "--no-cache", "--quiet"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def _digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def test_two_builds_in_separate_processes_are_byte_identical(tmp_path: Path) -> None:
    _site(tmp_path)
    config = tmp_path / "libraries.toml"
    config.write_text('[[library]]\nid = "repro"\nllms_txt = "site/llms.txt"\n', encoding="utf-8")
    _build(config, tmp_path / "a", hash_seed="1", workers="0")  # one process
    _build(config, tmp_path / "b", hash_seed="2", workers="2")  # worker processes
    a, b = _digests(tmp_path / "a"), _digests(tmp_path / "b")
    assert any(name.endswith(".seg") for name in a)
    assert a == b
