"""The catalogue as one package with one read model (issue 33, items 1 and 7), and the rules that keep it so.

Behaviour: a reload swaps the snapshot whole (its views made again, the old one untouched); the page's
filter and ``list_libraries`` match by one rule; a build time reads the same everywhere. Structure, read
from the source (nothing runs): settings are given at load and never set after; no consumer keeps a
catalogue generation; one reload loop and one start of the query encoder for stdio and HTTP; the
collector frozen by both transports.
"""

from __future__ import annotations

import ast
import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest
from docbundle.bundle.times import parse_time, seconds_since
from docbundle.indexer.release.audit import _age_days
from docbundle.server import catalog as catalog_package
from docbundle.server.catalog import Catalog, CatalogSettings, Snapshot
from docbundle.server.http.page import library_rows
from docbundle.server.libraries import library_list
from treekit import build, one_page

SERVER = Path(catalog_package.__file__).resolve().parents[1]
SETTINGS = {f.name for f in dataclasses.fields(CatalogSettings)} | {"evict_after"}


def _trees() -> dict[str, ast.Module]:
    """Every module of docbundle.server by its path under the package."""
    return {
        str(p.relative_to(SERVER)): ast.parse(p.read_text(encoding="utf-8"))
        for p in sorted(SERVER.rglob("*.py"))
    }


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    """The calls of a function or method named ``name`` (``f(...)`` or ``x.f(...)``)."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == name)
            or (isinstance(node.func, ast.Name) and node.func.id == name)
        )
    ]


# -- behaviour -----------------------------------------------------------------------------------------


def test_a_reload_swaps_the_snapshot_and_its_views_whole(tmp_path: Path) -> None:
    root, work = tmp_path / "bundles", tmp_path / "work"
    build(work / "alpha.toml", root, one_page("alpha", "aardvarks"))
    catalog = Catalog.load(root)
    made: list[Snapshot] = []

    def view(snapshot: Snapshot) -> list[str]:
        made.append(snapshot)
        return snapshot.ids()

    try:
        before = catalog.snapshot()
        assert before.view("ids", view) == ["alpha"] and before.view("ids", view) == ["alpha"]
        assert made == [before]  # made once per snapshot
        build(work / "beta.toml", root, one_page("beta", "beetles"))
        assert catalog.refresh().added == ("beta",)
        after = catalog.snapshot()
        assert after is not before
        assert after.view("ids", view) == ["alpha", "beta"] and made == [before, after]
        assert before.ids() == ["alpha"]  # a request holding the old snapshot sees what it started with
    finally:
        catalog.close()


@pytest.mark.parametrize("query", ["sdk demo", "payments", "korean pages", "golden", "no such words"])
def test_the_page_filter_and_list_libraries_match_by_one_rule(catalog: Catalog, query: str) -> None:
    """docs/server.md's rule: every word in the id, name, category or description, ignoring case (the
    page matched a substring of the id, name or description only)."""
    rows = library_rows(catalog, f"q={query.replace(' ', '+')}".encode())
    listed = library_list(catalog, None, query)
    assert [r["id"] for r in rows["libraries"]] == [lib.id for lib in listed.libraries]
    assert rows["matched"] == listed.total


def test_a_build_time_reads_the_same_everywhere() -> None:
    """One parser: a time without a zone is UTC (the page read it as the server's local time), and the
    audit reads what the server reads (it took only one spelling)."""
    now = datetime(2026, 1, 2, tzinfo=UTC)
    for text in ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00", "2026-01-01T01:00:00+01:00"):
        assert parse_time(text) == datetime(2026, 1, 1, tzinfo=UTC), text
        assert seconds_since(text, now.timestamp()) == 86400.0, text
        assert _age_days(text, now) == 1.0, text
    assert parse_time("yesterday") is None and seconds_since("yesterday", 0.0) is None
    assert _age_days("yesterday", now) == -1.0


# -- structure -----------------------------------------------------------------------------------------


def test_settings_are_given_at_load_and_never_set_after() -> None:
    settings = CatalogSettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.max_open = 2  # type: ignore[misc]
    assigned = [
        f"{path}:{target.lineno} .{target.attr}"
        for path, tree in _trees().items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute) and target.attr in SETTINGS
    ]
    assert assigned == []


def test_no_consumer_keeps_a_catalogue_generation() -> None:
    """Whatever is derived from the libraries is a view of a snapshot (``Snapshot.view``)."""
    consumers = ("resolve.py", "routing.py", "libraries.py", "http/page.py", "http/metrics.py")
    trees = _trees()
    found = [
        f"{path}:{node.lineno}"
        for path in consumers
        for node in ast.walk(trees[path])
        if isinstance(node, ast.Attribute) and "generation" in node.attr
    ]
    assert found == [] and not hasattr(Catalog, "generation")


def test_one_reload_loop_and_one_start_of_the_encoder_for_both_transports() -> None:
    trees = _trees()
    threads = {
        path
        for path, tree in trees.items()
        for call in _calls(tree, "Thread")
        if any(
            k.arg == "name" and getattr(k.value, "value", None) == "docbundle-reload" for k in call.keywords
        )
    }
    assert threads == {"catalog/watch.py"}
    starts = {path for path, tree in trees.items() if _calls(tree, "start_encoder")}
    # watch.serving when a process serves; the catalogue again after a reload that brings vectors.
    assert starts == {"catalog/watch.py", "catalog/__init__.py"}
    assert _calls(trees["http/app.py"], "serving")  # HTTP: in its lifespan
    stdio = next(
        n
        for n in ast.walk(trees["cli/serve.py"])
        if isinstance(n, ast.FunctionDef) and n.name == "_serve_stdio"
    )
    assert any(
        isinstance(n, ast.Name) and n.id == "watch_bundles" for n in ast.walk(stdio)
    )  # beside its session


def test_both_transports_freeze_the_collector_after_loading_the_catalogue() -> None:
    """The collector's settings are the same over stdio and HTTP (``docbundle.common.process`` holds
    them; its own test keeps every gc call there)."""
    functions = {
        node.name: node for node in ast.walk(_trees()["cli/serve.py"]) if isinstance(node, ast.FunctionDef)
    }
    assert _calls(functions["_serve_stdio"], "freeze_collector")
    assert _calls(functions["_serve_http"], "freeze_collector")
