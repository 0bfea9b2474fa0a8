"""The benchmark scripts under ``benchmarks/`` as modules, for the tests of what they share with the suite
(``quality.py``'s set reader, ``judge_pool.py``'s worksheets): one loader, so each script is imported once
per process under one name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(stem: str) -> ModuleType:
    """``benchmarks/<stem>.py`` as the module ``bench_<stem>`` (loaded once; its dataclasses look their
    module up in ``sys.modules``, so it is registered there before it runs)."""
    name = f"bench_{stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{stem}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
