"""The work after a publish happens in one place (issue 33): ``docbundle.bundle.publish`` keeps the summary
and the route index of the bundles folder current, whoever publishes, with no second step for the caller."""

from __future__ import annotations

from pathlib import Path

from docbundle.bundle.routeindex import load_index
from treekit import build, write_site

CONFIG = '[[library]]\nid = "demo"\nllms_txt = "site/llms.txt"\n'


def test_a_build_leaves_the_route_index_current_without_a_second_step(tmp_path: Path) -> None:
    """Before, ``docbundle-index build`` refreshed ``routing.idx`` after calling ``build_target``, so a
    program calling ``build_target`` (the nightly job, ``add``, tests) left it naming the old build: a
    server over the folder then routed cross-library questions by the old content until it rebuilt it."""
    write_site(
        tmp_path / "site",
        {"a.md": "# Alpha\n\nRotate the webhook signing secret.\n"},
        "# Demo\n\n- [A](a.md)\n",
    )
    config, out = tmp_path / "libraries.toml", tmp_path / "out"
    config.write_text(CONFIG, encoding="utf-8")
    first = build(config, out)
    index = load_index(out)
    assert index is not None and index.builds() == {("demo", "latest"): first.build_id}

    (tmp_path / "site" / "a.md").write_text("# Alpha\n\nRefund an invoice from billing.\n", encoding="utf-8")
    second = build(config, out)
    assert second.build_id != first.build_id
    index = load_index(out)
    assert index is not None and index.builds() == {("demo", "latest"): second.build_id}
