"""``docbundle-index diff``: two real builds of a site that changed in every way the report covers."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from clikit import index_cli as _cli
from docbundle.bundle.layout import read_current
from docbundle.bundle.reader import verify_bundle
from docbundle.indexer.release.diff import IntChange, PageState, diff_bundles, encode_diff, render_diff
from treekit import build
from treekit import write_site as _write


def _page(title: str, body: str) -> str:
    return f"# {title}\n\n{body}\n\n## Details\n\nMore about {title.lower()} for careful readers.\n"


OLD_PAGES = {
    "welcome.md": _page("Welcome", "Start here."),
    "guides/install.md": _page("Installation", "Install the SDK with pip."),
    "guides/webhooks.md": _page("Webhooks", "Receive payment events at an endpoint."),
    "guides/faq.md": _page("FAQ", "Answers to common questions."),
    "reference/tables.md": _page("Tables", "Render rows with sap.m.Table."),
    "reference/retries.md": _page("Retries", "Configure max_retry_after."),
    "legacy/old.md": _page("Old API", "The deprecated v1 API."),
}
OLD_LLMS = """# Demo Docs

> Demo documentation.

- [Welcome](welcome.md)

## Guides

- [Installation](guides/install.md)
- [Webhooks](guides/webhooks.md)
- [FAQ](guides/faq.md)
- [Missing](guides/missing.md)

## Reference

- [Tables](reference/tables.md)
- [Retries](reference/retries.md)

## Legacy

- [Old API](legacy/old.md)
"""
# The rebuild: Welcome and Retries move into Guides, Installation gets a new link title, Webhooks new
# text, the missing page appears, the tables page disappears from disk (its link stays), the Legacy
# section goes and an Extras section with a new page comes.
NEW_LLMS = """# Demo Docs

> Demo documentation.

## Guides

- [Welcome](welcome.md)
- [Installing](guides/install.md)
- [Webhooks](guides/webhooks.md)
- [Retries](reference/retries.md)
- [Missing](guides/missing.md)
- [FAQ](guides/faq.md)

## Reference

- [Tables](reference/tables.md)

## Extras

- [New page](extras/new.md)
"""


@dataclass(frozen=True)
class Builds:
    old: Path
    new: Path
    vdir: Path


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    """Build the old site, change it, and build again into the same bundles directory (keep = 5)."""
    root = tmp_path_factory.mktemp("diff")
    site = root / "site"
    config = root / "libraries.toml"
    config.write_text(
        '[[library]]\nid = "demo"\nllms_txt = "site/llms.txt"\nkeep = 5\n[library.chunking]\nmin_words = 3\n',
        encoding="utf-8",
    )
    _write(site, OLD_PAGES, OLD_LLMS)
    old = build(config, root / "bundles").bundle
    (site / "reference" / "tables.md").unlink()
    shutil.rmtree(site / "legacy")
    _write(
        site,
        {
            "guides/webhooks.md": _page("Webhooks", "Receive payment events; verify the signing secret."),
            "guides/missing.md": _page("Missing", "Not missing any more."),
            "extras/new.md": _page("New page", "Brand new."),
        },
        NEW_LLMS,
    )
    new = build(config, root / "bundles").bundle
    assert old.parent == new.parent and old != new and old.is_dir()
    return Builds(old, new, new.parent)


def test_diff_reports_every_kind_of_change(builds: Builds) -> None:
    d = diff_bundles(builds.old, builds.vdir)  # the version directory stands for its CURRENT
    assert read_current(builds.vdir) == builds.new.name == d.new.build_id
    assert d.old.build_id == builds.old.name and not d.same_content
    assert [r.id for r in d.added] == ["guides/missing.md", "extras/new.md"]
    assert [r.id for r in d.removed] == ["reference/tables.md", "legacy/old.md"]
    assert [(c.id, c.changes) for c in d.changed] == [
        ("guides/install.md", ["title"]),
        ("guides/webhooks.md", ["text"]),
    ]
    webhooks = d.changed[1]
    assert webhooks.words.new > webhooks.words.old
    assert [(m.id, m.old, m.new) for m in d.sections.moved] == [
        ("welcome.md", "", "Guides"),
        ("reference/retries.md", "Reference", "Guides"),
    ]
    assert d.unchanged == 1  # the FAQ
    assert (d.sections.added, d.sections.removed) == (["Extras"], ["", "Legacy"])

    old_m, new_m = verify_bundle(builds.old), verify_bundle(builds.new)
    assert d.counts.documents == IntChange(old=old_m.counts.documents, new=new_m.counts.documents)
    assert d.counts.chunks == IntChange(old=old_m.counts.chunks, new=new_m.counts.chunks)
    assert d.counts.words == IntChange(old=old_m.counts.words, new=new_m.counts.words)
    assert d.counts.failed == IntChange(old=1, new=1)
    assert (d.counts.documents.old, d.counts.documents.new) == (7, 7)

    # The link before the first section went away; the relative-link finding only moved a line down,
    # which is not a change.
    assert [(c.code, c.line) for c in d.conformance.removed] == [("link-outside-section", 5)]
    assert d.conformance.added == []
    assert d.conformance.by_code == {"link-outside-section": IntChange(old=1, new=0)}

    errors = {e.id: (e.old, e.new) for e in d.errors}
    assert sorted(errors) == ["guides/missing.md", "reference/tables.md"]
    before, after = errors["guides/missing.md"]
    assert (before.state, before.kind, after) == ("failed", "not-found", PageState(state="indexed"))
    before, after = errors["reference/tables.md"]
    assert (before, after.state, after.kind) == (PageState(state="indexed"), "failed", "not-found")
    assert "reference/tables.md" in (after.error or "")


def test_diff_of_a_bundle_with_itself_reports_nothing(builds: Builds) -> None:
    d = diff_bundles(builds.new, builds.new)
    assert d.same_content and d.unchanged == 7
    assert (d.added, d.removed, d.changed, d.errors) == ([], [], [], [])
    assert (d.sections.added, d.sections.removed, d.sections.moved) == ([], [], [])
    assert (d.conformance.added, d.conformance.removed) == ([], [])
    assert "same content hash" in render_diff(d)


def test_cli_prints_the_readable_report(builds: Builds) -> None:
    r = _cli("diff", str(builds.old), str(builds.new))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith(
        f"docbundle-index diff: demo/latest/{builds.old.name} → demo/latest/{builds.new.name}\n"
    )
    assert "documents: 2 added, 2 removed, 2 changed, 2 moved, 1 unchanged" in out
    for line in (
        "  + extras/new.md  'New page'  [Extras]",
        "  - legacy/old.md  'Old API'  [Legacy]",
        "  > welcome.md  'Welcome'  section (no section) → Guides",
        "  > reference/retries.md  'Retries'  section Reference → Guides",
        "  + Extras",
        "  - Legacy",
        "  - line 5: link-outside-section: links before the first section heading",
    ):
        assert line + "\n" in out, line
    assert "  ~ guides/install.md  'Installing'  (title; chunks " in out
    assert "  ! guides/missing.md: failed (not-found): " in out and " → indexed\n" in out
    assert "  ! reference/tables.md: indexed → failed (not-found): " in out
    old_w, new_w = verify_bundle(builds.old).counts.words, verify_bundle(builds.new).counts.words
    assert old_w != new_w
    width = len(str(max(old_w, new_w)))
    assert f"  words         {old_w:>{width}} → {new_w:>{width}}  ({new_w - old_w:+d})\n" in out
    assert f"  failed pages  {1:>{width}} → {1:>{width}}\n" in out


def test_cli_json_is_the_same_report_as_one_object(builds: Builds) -> None:
    r = _cli("diff", str(builds.old), str(builds.vdir), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data == json.loads(encode_diff(diff_bundles(builds.old, builds.new)))
    assert data["sameContent"] is False and data["new"]["buildId"] == builds.new.name
    assert data["conformance"]["byCode"] == {"link-outside-section": {"old": 1, "new": 0}}
    assert data["errors"][0]["old"] == {
        "state": "failed",
        "kind": "not-found",
        "error": data["errors"][0]["old"]["error"],
    }


def test_unreadable_bundles_exit_1_and_usage_errors_exit_2(builds: Builds, tmp_path: Path) -> None:
    tampered = tmp_path / "tampered"
    shutil.copytree(builds.old, tampered)
    data = bytearray((tampered / "docs.bin").read_bytes())
    data[-1] ^= 0x01
    (tampered / "docs.bin").write_bytes(bytes(data))
    r = _cli("diff", str(tampered), str(builds.new))
    assert r.returncode == 1 and "docs.bin does not match its sha256" in r.stderr and r.stdout == ""
    r = _cli("diff", str(builds.old), str(tmp_path / "nope"))
    assert r.returncode == 1 and "does not exist" in r.stderr
    assert _cli("diff", str(builds.old)).returncode == 2
    assert _cli("diff", str(builds.old), str(builds.new), "--bogus").returncode == 2
