"""The golden query files that check a built library, and the page workers a build starts. (Building
libraries is ``treekit.build``.)"""

from __future__ import annotations

import json
import re

import pytest
from docbundle.indexer.pipeline import prepare
from docbundle.indexer.pipeline.prepare import pool as prepare_pool


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
