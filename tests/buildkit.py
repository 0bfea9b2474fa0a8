"""Build libraries for real in a test: write the config, build every library version it lists, and insist
each was built (``build_target``, in this process)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from docbundle.indexer.config import load_config
from docbundle.indexer.pipeline.build import Outcome, build_target


def write_site(site: Path, pages: dict[str, str], llms: str) -> None:
    """A local documentation site: ``pages`` (relative path -> markdown) and its ``llms.txt``."""
    for rel, text in pages.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text, encoding="utf-8")
    (site / "llms.txt").write_text(llms, encoding="utf-8")


def write_sized_site(
    root: Path, head: list[str], min_bytes: float, page: Callable[[int], tuple[str, str, str]]
) -> Path:
    """A local site ``root/site`` of pages ``page(i)`` for i = 0, 1, ... until their text passes
    ``min_bytes``: each gives (file name under ``pages/``, its text, its llms.txt line); ``head``
    opens the llms.txt."""
    site = root / "site"
    (site / "pages").mkdir(parents=True)
    lines = list(head)
    size = i = 0
    while size <= min_bytes:
        name, text, link = page(i)
        (site / "pages" / name).write_text(text, encoding="utf-8")
        lines.append(link)
        size += len(text.encode())
        i += 1
    (site / "llms.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return site


def build_config(config: Path, out: Path, text: str | None = None) -> list[Outcome]:
    """Build every library version ``config`` lists into ``out`` (writing ``text`` to ``config`` first
    when given); the test fails unless each one was built."""
    if text is not None:
        config.write_text(text, encoding="utf-8")
    catalogue = load_config(config)
    outcomes = []
    for lib in catalogue.libraries:
        for target in catalogue.targets(lib):
            outcome = build_target(target, out)
            assert outcome.status == "built", outcome.message
            outcomes.append(outcome)
    return outcomes


def build_bundle(config: Path, out: Path, text: str | None = None) -> Path:
    """``build_config`` for a config of one library version: the bundle folder it built."""
    (outcome,) = build_config(config, out, text)
    assert outcome.bundle is not None
    return Path(outcome.bundle)
