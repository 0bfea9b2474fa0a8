"""A one-page library built for real (``build_target`` over a local site): for tests of what a server
does when builds come and go (live reload, leases, pruning)."""

from __future__ import annotations

from pathlib import Path

from buildkit import build_bundle
from docbundle.bundle.layout import BUILD_ID_RE, read_current


def build_one_page(root: Path, work: Path, library: str, word: str, *, keep: int = 3) -> str:
    """Build ``library`` (one page, "Guide to <word>") into ``root``; returns the build id CURRENT names.

    The page's text is about ``word`` only, so a search for it tells which build answered. ``keep = 1``
    makes the build's prune want every older build gone.
    """
    site = work / library
    site.mkdir(parents=True, exist_ok=True)
    (site / "page.md").write_text(
        f"# Guide to {word}\n\nThis page explains {word} in detail, with {word} examples.\n", encoding="utf-8"
    )
    (site / "llms.txt").write_text(
        f"# {library}\n\n## Docs\n\n- [Guide to {word}](page.md)\n", encoding="utf-8"
    )
    config_text = (
        f'[[library]]\nid = "{library}"\nllms_txt = "{library}/llms.txt"\nkeep = {keep}\n'
        "[library.chunking]\nmin_words = 3\n"
    )
    build_bundle(work / f"{library}.toml", root, config_text)
    build = read_current(root / library / "latest")
    assert build is not None
    return build


def builds(vdir: Path) -> set[str]:
    """The build directories under a version directory."""
    return {p.name for p in vdir.iterdir() if BUILD_ID_RE.fullmatch(p.name)}
