"""docs/configuration.md shows configuration errors: each must be what ``docbundle-index`` really prints.

The doc's "Errors look like this" block holds whole lines, compared with the lines the CLI prints for the
configs below; its inline samples (a code span starting ``library '`` with a ``key '``) must each be
part of one of them. A sample added to the doc without a config here, or a message that changes without
its sample, fails.
"""

from __future__ import annotations

import re
from pathlib import Path

from clikit import index_cli

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"

_ATMOS = 'llms_txt = "https://atmos.tools/llms.txt"\n'

#: One config per sample error of the doc, each with exactly one problem.
CONFIGS = [
    '[[library]]\nid = "atmos"\nllm_txt = "https://atmos.tools/llms.txt"\n',
    '[[library]]\nid = "a"\n'
    + _ATMOS
    + '[[library]]\nid = "b"\n'
    + _ATMOS
    + '[[library]]\nid = ""\n'
    + _ATMOS,
    '[[library]]\nid = "toss"\nllms_txt = "https://docs.tosspayments.com/llms.txt"\ncrawl = { timeout = "20" }\n',
    'id = "atmos"\n\n[defaults]\nkeep = 3\n',
    '[[library]]\nid = "internal-sdk"\nllms_txt = "https://docs.internal:8443/llms.txt"\n'
    'allow_hosts = ["api-docs.internal:8443", "http://x"]\n',
    '[[library]]\nid = "mylib"\nllms_txt = "https://mylib.example/llms.txt"\nfollow = { depth = 7 }\n',
]


def _doc_samples() -> tuple[list[str], list[str]]:
    """The lines of the "Errors look like this" block, and the inline samples elsewhere in the page."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Errors look like this") :]
    block = re.search(r"^```\n(.*?)^```$", section, re.S | re.M)
    assert block is not None, "no sample block under 'Errors look like this'"
    lines = block.group(1).splitlines()
    prose = re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)
    spans = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]  # a span may wrap a line
    inline = [s for s in spans if s.startswith("library '") and "key '" in s]
    return lines, inline


def _printed(tmp_path: Path, config: str) -> str:
    """What ``build`` prints for ``config`` saved as bundles/libraries.toml (the path the doc shows)."""
    (tmp_path / "bundles").mkdir(exist_ok=True)
    (tmp_path / "bundles" / "libraries.toml").write_text(config, encoding="utf-8")
    r = index_cli("build", "--config", "bundles/libraries.toml", "--out", "out", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "", (config, r.stdout, r.stderr)
    assert not (tmp_path / "out").exists()  # refused before anything was fetched or written
    return r.stderr.rstrip("\n")


def test_the_sample_errors_of_the_configuration_page_are_the_printed_ones(tmp_path: Path) -> None:
    lines, inline = _doc_samples()
    printed = [_printed(tmp_path, config) for config in CONFIGS]
    assert len(lines) == 4 and len(inline) == 2
    assert sorted(lines) == sorted(p for p in printed if not any(s in p for s in inline))
    for sample in inline:
        assert [p for p in printed if sample in p], f"no config here prints {sample!r}"


def test_a_library_key_at_the_top_of_the_file_says_it_belongs_in_a_library_table(tmp_path: Path) -> None:
    """Not "unknown key; did you mean 'id'?" (issue 23): every misplaced key is named with its table."""
    err = _printed(
        tmp_path, 'id = "x"\nllms_txt = "https://x.example/llms.txt"\nkeep = 2\n\n[[library]]\nid = "y"\n'
    )
    assert "did you mean" not in err
    assert "bundles/libraries.toml: 3 problems:" in err
    assert "key 'id' belongs inside a [[library]] table, not at the top of the file" in err
    assert "key 'llms_txt' belongs inside a [[library]] table or a [[library.version]] table" in err
    assert "key 'keep' belongs inside a [[library]] table or [defaults], not at the top of the file" in err
    err = _printed(tmp_path, "libary = 3\n")
    assert err.endswith("bundles/libraries.toml: key 'libary': unknown key; did you mean 'library'?")
