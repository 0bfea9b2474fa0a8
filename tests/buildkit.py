"""Build libraries for real in a test: write the config, build every library version it lists, and insist
each was built (``build_target``, in this process); and write the golden query files that check them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from docbundle.indexer.config import load_config
from docbundle.indexer.pipeline import prepare
from docbundle.indexer.pipeline.build import Outcome, build_target
from docbundle.indexer.pipeline.prepare import pool as prepare_pool


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


def golden_query(id: str, text: str, answer: str, **more: object) -> dict[str, object]:
    """One ``[[query]]`` of a golden file: ``answer`` is the page graded 2; ``more`` adds keys (labels,
    ``expect``)."""
    return {"id": id, "text": text, **more, "relevant": {answer: 2}}


def golden_toml(
    queries: list[dict[str, object]], *, library: str | None = None, expect: dict[str, object] | None = None
) -> str:
    """A golden query file: ``library``, the file-wide ``[expect]``, then one ``[[query]]`` per mapping."""
    lines = [f"library = {_toml(library)}"] if library is not None else []
    if expect:
        lines += ["", "[expect]", *(f"{key} = {_toml(value)}" for key, value in expect.items())]
    for query in queries:
        lines += ["", "[[query]]", *(f"{key} = {_toml(value)}" for key, value in query.items())]
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    """``value`` (a string, a number or a mapping of them) as a TOML value; mappings inline."""
    if isinstance(value, dict):
        pairs = (
            f"{k if re.fullmatch(r'[A-Za-z0-9_-]+', k) else json.dumps(k)} = {_toml(v)}"
            for k, v in value.items()
        )
        return "{ " + ", ".join(pairs) + " }"
    return json.dumps(value)


def record_worker_starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids of the page workers ``prepare`` starts from now on (in this test), in start order.

    The workers of this process that an earlier test started are ended first, so that the test sees its
    own start (a pytest-xdist worker runs several test files in one process)."""
    prepare.stop_workers()
    pids: list[int] = []
    start = prepare_pool._Pool._start

    def start_recorded(pool: prepare_pool._Pool) -> prepare_pool._Worker:
        worker = start(pool)
        assert worker.process.pid is not None
        pids.append(worker.process.pid)
        return worker

    monkeypatch.setattr(prepare_pool._Pool, "_start", start_recorded)
    return pids
