"""Build libraries for real in a test: write the config, build every library version it lists, and insist
each was built (``build_target``, in this process)."""

from __future__ import annotations

from pathlib import Path

from docbundle.indexer.config import load_config
from docbundle.indexer.pipeline.build import Outcome, build_target


def write_site(site: Path, pages: dict[str, str], llms: str) -> None:
    """A local documentation site: ``pages`` (relative path -> markdown) and its ``llms.txt``."""
    for rel, text in pages.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text, encoding="utf-8")
    (site / "llms.txt").write_text(llms, encoding="utf-8")


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
