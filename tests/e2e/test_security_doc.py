"""docs/security.md names the test that holds each defence: every name it gives must exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_named_in_the_security_page_exists() -> None:
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    defined = {
        m.group(1)
        for path in (ROOT / "tests").rglob("test_*.py")
        for m in re.finditer(r"^(?:async )?def (test_\w+)", path.read_text(encoding="utf-8"), re.M)
    }
    modules = {p.stem for p in (ROOT / "tests").rglob("test_*.py")}
    named = set(re.findall(r"\b(test_\w+)", text))
    assert len(named) > 30
    assert sorted(named - defined - modules) == []
