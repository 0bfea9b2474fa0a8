"""``docbundle-index export``: each format read back by its real consumer, and the refusals."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml
from clikit import index_cli as _cli
from docbundle.bundle.layout import read_current
from docbundle.bundle.manifest import Manifest
from docbundle.bundle.reader import verify_bundle
from docbundle.bundle.store import DocRecord, DocStore
from docbundle.indexer.errors import ExportError, OutputExistsError
from docbundle.indexer.release import export
from docbundle.indexer.release.export import EXPORT_VERSION, export_bundle, markdown_paths
from treekit import build

GOLDEN = Path(__file__).resolve().parents[1] / "bundle" / "golden" / "v1"

PAGES = {
    "index.md": "# Welcome\n\nStart here: install the SDK, then register a webhook.\n",
    "guides/install.md": "---\ntitle: Installation\ndescription: Get the SDK\n---\n\n# Installation\n\n"
    "Install the widget SDK with pip.\n\n## Configure\n\nSet the API key in the environment.\n",
    "guides/setup guide.md": "# Setup guide\n\nA page whose file name has a space in it.\n",
    "guides/webhooks.md": "# Webhooks\n\nReceive payment events at an endpoint.\n\n## Signing secret\n\n"
    "Verify each delivery with the signing secret before trusting it.\n",
    "reference/api.mdx": "import X from './x'\n\n# API\n\nThe `Client.pay()` method charges a card.\n",
    "ko/widget.md": "# 결제위젯 연동하기\n\n결제위젯을 연동하는 방법을 알아봅니다.\n\n## 결제 요청\n\n승인 과정을 거칩니다.\n",
}
LLMS = """# Export Docs

> Documentation for the export tests.

- [Welcome](index.md)

## Guides

- [Installation](guides/install.md): install and configure
- [Setup "quoted": guide](guides/setup%20guide.md)
- [Webhooks](guides/webhooks.md)
- [Missing page](guides/missing.md)

## Reference

- [API](reference/api.mdx)

## Optional

- [결제위젯](ko/widget.md)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle built from a local site with odd ids, a CJK page, an MDX page and one missing page."""
    root = tmp_path_factory.mktemp("export")
    for rel, text in PAGES.items():
        (root / "site" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "site" / rel).write_text(text, encoding="utf-8")
    (root / "site" / "llms.txt").write_text(LLMS, encoding="utf-8")
    return build(
        root / "libraries.toml",
        root / "bundles",
        '[[library]]\nid = "exp"\nname = "Export"\nllms_txt = "site/llms.txt"\n[library.chunking]\nmin_words = 3\n',
    ).bundle


def _store(bundle: Path) -> list[DocRecord]:
    with DocStore(bundle) as store:
        return list(store)


def _tampered(tmp_path: Path) -> Path:
    copy = tmp_path / "tampered"
    shutil.copytree(GOLDEN, copy)
    data = bytearray((copy / "docs.bin").read_bytes())
    data[10] ^= 0x01
    (copy / "docs.bin").write_bytes(bytes(data))
    return copy


def test_the_fixture_bundle_has_the_cases_the_tests_rely_on(built: Path) -> None:
    m = verify_bundle(built)
    failed = [d.path for d in m.documents if d.error]
    assert failed == ["guides/missing.md"]
    assert [d.id for d in _store(built)] == [
        "index.md",
        "guides/install.md",
        "guides/setup guide.md",
        "guides/webhooks.md",
        "reference/api.mdx",
        "ko/widget.md",
    ]


# -- json ---------------------------------------------------------------------------------------------


def test_json_export_reads_back_with_json_and_equals_the_store(built: Path, tmp_path: Path) -> None:
    out = tmp_path / "exp.json"
    r = _cli("export", str(built), "--format", "json", "--out", str(out))
    assert r.returncode == 0, r.stderr
    m = verify_bundle(built)
    assert f"exported {m.library.id}/latest/{m.build.build_id} (6 documents," in r.stdout
    data = json.loads(out.read_text(encoding="utf-8"))
    assert list(data)[:2] == ["format", "exportVersion"]
    assert (data["format"], data["exportVersion"]) == ("docbundle-export", EXPORT_VERSION)
    # No description in the config: the build takes the llms.txt summary line (issue 32).
    assert data["library"] == {
        "id": "exp",
        "name": "Export",
        "description": "Documentation for the export tests.",
        "category": "",
    }
    assert data["version"]["name"] == "latest"
    assert data["source"]["llmsTxt"] == "site/llms.txt"
    build = data["build"]
    assert (build["buildId"], build["contentHash"]) == (m.build.build_id, m.build.content_hash)
    assert build["bundle"] == f"exp/latest/{m.build.build_id}"
    docs = data["documents"]
    assert len(docs) == m.counts.documents == build["documents"]
    assert sum(len(d["chunks"]) for d in docs) == m.counts.chunks == build["chunks"]
    for got, want in zip(docs, _store(built), strict=True):
        assert {k: got[k] for k in ("id", "url", "title", "description", "section", "optional")} == {
            "id": want.id,
            "url": want.url,
            "title": want.title,
            "description": want.description,
            "section": want.section,
            "optional": want.optional,
        }
        assert got["text"] == want.text == "".join(c["text"] for c in got["chunks"])
        assert [
            (c["id"], c["headingPath"], c["text"], c["startLine"], c["endLine"]) for c in got["chunks"]
        ] == [(i, c.heading_path, c.text, c.start_line, c.end_line) for i, c in enumerate(want.chunks)]
    assert "guides/missing.md" not in {d["id"] for d in docs}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.json"], "no temporary file left behind"


# -- sqlite -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def db(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sqlite") / "docs.sqlite"
    result = export_bundle(built, "sqlite", out)
    assert result.out == out and result.documents == 6
    return out


def test_sqlite_export_has_the_tables_and_version_a_user_sees(db: Path) -> None:
    with closing(sqlite3.connect(db)) as conn:
        names = {
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'chunks_fts_%'"
            )
        }
        assert names == {"libraries", "documents", "chunks", "chunk_search", "chunks_fts"}
        assert conn.execute("PRAGMA user_version").fetchone() == (EXPORT_VERSION,)
        fts_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()[0]
        assert "USING fts5" in fts_sql
        fks = {
            table: [(row[2], row[3], row[4]) for row in conn.execute(f"PRAGMA foreign_key_list({table})")]
            for table in ("documents", "chunks")
        }
        assert fks == {
            "documents": [("libraries", "library", "id")],
            "chunks": [("documents", "document", "id")],
        }
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert not list(db.parent.glob("*-journal")) and sorted(p.name for p in db.parent.iterdir()) == [
        "docs.sqlite"
    ]


def test_sqlite_export_holds_exactly_the_bundle(db: Path, built: Path) -> None:
    m: Manifest = verify_bundle(built)
    with closing(sqlite3.connect(db)) as conn:
        lib = conn.execute(
            "SELECT id, library_id, version, build_id, content_hash, bundle, source FROM libraries"
        ).fetchall()
        assert lib == [
            (
                1,
                "exp",
                "latest",
                m.build.build_id,
                m.build.content_hash,
                f"exp/latest/{m.build.build_id}",
                "site/llms.txt",
            )
        ]
        (documents,) = conn.execute("SELECT count(*) FROM documents WHERE library = 1").fetchone()
        (chunks,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
        assert (documents, chunks) == (m.counts.documents, m.counts.chunks)
        rows = conn.execute(
            "SELECT id, doc_id, url, title, description, section, optional, text FROM documents ORDER BY position"
        ).fetchall()
        for (row_id, *fields, text), want in zip(rows, _store(built), strict=True):
            assert fields == [
                want.id,
                want.url,
                want.title,
                want.description,
                want.section,
                int(want.optional),
            ]
            assert text == want.text
            parts = conn.execute(
                "SELECT chunk_no, heading_path, headings, text, start_line, end_line FROM chunks "
                "WHERE document = ? ORDER BY chunk_no",
                (row_id,),
            ).fetchall()
            assert [(n, json.loads(hp), h, t, s, e) for n, hp, h, t, s, e in parts] == [
                (i, c.heading_path, " › ".join(c.heading_path), c.text, c.start_line, c.end_line)
                for i, c in enumerate(want.chunks)
            ]


def test_sqlite_full_text_search_finds_a_known_chunk(db: Path) -> None:
    with closing(sqlite3.connect(db)) as conn:
        # The index must agree with its content view, row for row.
        conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")
        hits = conn.execute(
            "SELECT d.doc_id, c.headings, snippet(chunks_fts, 2, '[', ']', '…', 6) FROM chunks_fts "
            "JOIN chunks AS c ON c.id = chunks_fts.rowid JOIN documents AS d ON d.id = c.document "
            "WHERE chunks_fts MATCH ? ORDER BY rank",
            ("signing secret",),
        ).fetchall()
        assert [(doc, headings) for doc, headings, _ in hits] == [
            ("guides/webhooks.md", "Webhooks › Signing secret")
        ]
        assert "## [Signing] [secret]" in hits[0][2]
        # porter stemming: "trusting" is found by "trust"; a column filter on the headings.
        assert conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'trust'").fetchone() == (
            1,
        )
        by_heading = conn.execute(
            "SELECT c.headings FROM chunks_fts JOIN chunks AS c ON c.id = chunks_fts.rowid "
            "WHERE chunks_fts MATCH 'headings : configure'"
        ).fetchall()
        assert by_heading == [("Installation › Configure",)]
        by_title = conn.execute(
            "SELECT DISTINCT d.doc_id FROM chunks_fts JOIN chunks AS c ON c.id = chunks_fts.rowid "
            "JOIN documents AS d ON d.id = c.document WHERE chunks_fts MATCH 'title : installation'"
        ).fetchall()
        assert by_title == [("guides/install.md",)]
        assert conn.execute(
            "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'nonexistentword'"
        ).fetchone() == (0,)


def test_sqlite_export_fails_clearly_without_fts5(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export, "fts5_available", lambda: False)
    with pytest.raises(ExportError, match="built without FTS5"):
        export_bundle(built, "sqlite", tmp_path / "x.sqlite")
    assert list(tmp_path.iterdir()) == []


# -- markdown -----------------------------------------------------------------------------------------


def _split(page: str) -> tuple[dict[str, object], str]:
    assert page.startswith("---\n")
    head, body = page[4:].split("\n---\n", 1)
    meta = yaml.safe_load(head)
    assert isinstance(meta, dict)
    return meta, body


def test_markdown_export_mirrors_the_documents(built: Path, tmp_path: Path) -> None:
    out = tmp_path / "md"
    r = _cli("export", str(built), "--format", "markdown", "--out", str(out))
    assert r.returncode == 0, r.stderr
    m = verify_bundle(built)
    label = f"exp/latest/{m.build.build_id}"
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == sorted(
        [
            "index.md",
            "index~2.md",  # the page "index.md" steps aside for the table of contents
            "guides/install.md",
            "guides/setup guide.md",
            "guides/webhooks.md",
            "reference/api.mdx.md",
            "ko/widget.md",
        ]
    )
    by_id = {}
    for rel in files:
        if rel == "index.md":
            continue
        meta, body = _split((out / rel).read_text(encoding="utf-8"))
        assert meta["bundle"] == label
        by_id[meta["document"]] = (rel, meta, body)
    store = _store(built)
    assert sorted(by_id) == sorted(d.id for d in store)
    for doc in store:
        rel, meta, body = by_id[doc.id]
        assert body == doc.text
        assert (meta["title"], meta["url"], meta["section"], meta["optional"]) == (
            doc.title,
            doc.url,
            doc.section,
            doc.optional,
        )
        assert meta.get("description", "") == doc.description
    assert by_id["guides/setup guide.md"][1]["title"] == 'Setup "quoted": guide'

    index_meta, index_body = _split((out / "index.md").read_text(encoding="utf-8"))
    assert index_meta["format"] == "docbundle-export" and index_meta["exportVersion"] == EXPORT_VERSION
    assert (index_meta["bundle"], index_meta["contentHash"]) == (label, m.build.content_hash)
    assert index_body.startswith(
        "\n# Export Docs\n\n> Documentation for the export tests.\n\n- [Welcome](index~2.md)\n\n## Guides\n"
    )
    headings = re.findall(r"^## (.+)$", index_body, flags=re.MULTILINE)
    assert headings == ["Guides", "Reference", "Optional"]
    links = [unquote(t) for t in re.findall(r"^- \[.*\]\(([^)]+)\)", index_body, flags=re.MULTILINE)]
    assert sorted(links) == sorted(f for f in files if f != "index.md")
    assert '- [Setup "quoted": guide](guides/setup%20guide.md)' in index_body
    # Sections list their own pages: the webhooks page sits under Guides, the CJK page under Optional.
    guides = index_body.split("## Guides", 1)[1].split("## Reference", 1)[0]
    assert "(guides/webhooks.md)" in guides and "ko/widget.md" not in guides


def test_markdown_paths_are_safe_unique_and_readable() -> None:
    ids = [
        "guides/a.md",
        "guides/A.md",  # the same file on a case-insensitive disk
        "index.md",
        "api?v=2",
        "../../etc/passwd",
        "docs.md/child",  # a folder named like a page file
        "docs.md",
        "example.com/x:y",
        "a" * 300,
    ]
    paths = markdown_paths(ids)
    assert paths[:8] == [
        "guides/a.md",
        "guides/A~2.md",
        "index~2.md",
        "api_v=2.md",
        "__/__/etc/passwd.md",
        "docs.md_/child.md",
        "docs.md",
        "example.com/x_y.md",
    ]
    assert len(paths[8].encode()) <= 210 and paths[8].endswith(".md")
    assert len({p.casefold() for p in paths}) == len(paths) and "index.md" not in paths


def test_front_matter_strings_survive_yaml() -> None:
    tricky = [
        'a "quoted": value',
        "back\\slash",
        "- list?",
        "tab\there",
        "nel\x85line",
        "sep\u2028x",
        "null",
        "#",
    ]
    fields: dict[str, str | bool | int] = {f"k{i}": s for i, s in enumerate(tricky)}
    meta, body = _split(export._front_matter(fields) + "body\n")
    assert meta == fields and body == "body\n"


# -- inputs, refusals and exit codes ------------------------------------------------------------------


def test_a_version_directory_exports_its_current_bundle(built: Path, tmp_path: Path) -> None:
    vdir = built.parent
    result = export_bundle(vdir, "json", tmp_path / "v.json")
    assert result.bundle.endswith("/" + (read_current(vdir) or "?"))


def test_tampered_bundles_are_refused_with_the_reason(tmp_path: Path) -> None:
    tampered = _tampered(tmp_path)
    out = tmp_path / "t.json"
    r = _cli("export", str(tampered), "--format", "json", "--out", str(out))
    assert r.returncode == 1
    assert "docs.bin does not match its sha256 in the manifest" in r.stderr
    assert not out.exists()

    extra = tmp_path / "extra"
    shutil.copytree(GOLDEN, extra)
    (extra / "index" / "evil.pkl").write_bytes(b"x")
    r = _cli("export", str(extra), "--format", "sqlite", "--out", str(out))
    assert r.returncode == 1 and "unexpected file(s) not in the manifest: index/evil.pkl" in r.stderr
    assert not out.exists() and not list(tmp_path.glob(".t.json*"))


def test_an_existing_out_is_replaced_only_with_force(built: Path, tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    out.write_text("precious", encoding="utf-8")
    r = _cli("export", str(built), "--format", "json", "--out", str(out))
    assert r.returncode == 2 and "pass --force" in r.stderr
    assert out.read_text(encoding="utf-8") == "precious"
    r = _cli("export", str(built), "--format", "json", "--out", str(out), "--force")
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["format"] == "docbundle-export"

    folder = tmp_path / "folder"
    (folder / "keep").mkdir(parents=True)
    with pytest.raises(OutputExistsError, match="is a directory"):
        export_bundle(built, "sqlite", folder, force=True)
    with pytest.raises(OutputExistsError, match="not an earlier markdown export"):
        export_bundle(built, "markdown", folder, force=True)
    assert (folder / "keep").is_dir()

    md = tmp_path / "md"
    export_bundle(built, "markdown", md)
    (md / "stale.md").write_text("left over", encoding="utf-8")
    export_bundle(built, "markdown", md, force=True)
    assert not (md / "stale.md").exists() and (md / "guides" / "install.md").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.json", "folder", "md"]


def test_an_out_inside_the_bundle_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "golden"
    shutil.copytree(GOLDEN, copy)
    r = _cli("export", str(copy), "--format", "json", "--out", str(copy / "export.json"))
    assert r.returncode == 2 and "inside the bundle" in r.stderr
    verify_bundle(copy)


def test_usage_errors_exit_2_and_unreadable_bundles_exit_1(built: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "o.json")
    assert _cli("export", str(built), "--out", out).returncode == 2  # --format is required
    assert _cli("export", str(built), "--format", "csv", "--out", out).returncode == 2
    assert _cli("export", "--format", "json", "--out", out).returncode == 2
    r = _cli("export", str(tmp_path / "nope"), "--format", "json", "--out", out)
    assert r.returncode == 1 and "does not exist" in r.stderr
    r = _cli("export", str(tmp_path), "--format", "json", "--out", out)
    assert r.returncode == 1 and "neither a bundle" in r.stderr
    assert not Path(out).exists()
