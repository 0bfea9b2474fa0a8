"""noxfile.py loaded with a stand-in for nox (the test environment need not import nox to read it): each
session function keeps the keyword arguments of its ``@nox.session`` in ``nox_session``."""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def load_noxfile() -> types.ModuleType:
    """noxfile.py as a module, its ``nox.options`` a plain namespace."""
    fake = types.ModuleType("nox")

    def session(*_args: Any, **kwargs: Any) -> Callable[[Any], Any]:
        def register(func: Any) -> Any:
            func.nox_session = kwargs
            return func

        return register

    fake.session = session  # type: ignore[attr-defined]
    fake.options = types.SimpleNamespace()  # type: ignore[attr-defined]
    fake.Session = object  # type: ignore[attr-defined]
    saved = sys.modules.get("nox")
    sys.modules["nox"] = fake
    try:
        spec = importlib.util.spec_from_file_location("docbundle_noxfile", ROOT / "noxfile.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        if saved is None:
            del sys.modules["nox"]
        else:
            sys.modules["nox"] = saved
