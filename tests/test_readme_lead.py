"""The README leads with a command that works from a clone today (issue 23).

``uvx --from docbundle-server`` works only once the distributions are published; until then a newcomer's
first command must be one that runs: ``nox -s serve``, a session the noxfile defines.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```console\n(.*?)```", re.DOTALL)


def test_the_first_command_works_from_a_clone_and_the_published_one_says_so() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = BLOCK.findall(readme)
    first = blocks[0].strip().splitlines()[0]
    assert first.startswith("nox -s serve"), first
    assert "def serve(" in (ROOT / "noxfile.py").read_text(encoding="utf-8")
    for line in (line for block in blocks for line in block.splitlines()):
        if line.startswith(("uvx ", "pipx ")):
            assert "once published" in line, line
