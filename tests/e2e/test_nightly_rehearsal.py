"""The nightly job rehearsed over two nights on a fake web of 50 generated sites (issue 32, item 2).

Every step of ``.github/workflows/nightly.yml`` runs as its real command (plan, one build per shard,
merge per release, roll the release index; ``tests/rehearsal.py``), against sites on 127.0.0.1 that
misbehave the way real ones do (``tests/fakeweb.py``): each kind of fault must land in its class, and a
library that fails on the second night keeps its first night's bundle, which ``docbundle pull`` still
installs from the rolled release index. The 1,000-library run with the shared corpora is
``benchmarks/nightly_rehearsal.py`` (``nox -s bench -- rehearsal``).
"""

from __future__ import annotations

from pathlib import Path

from fakeweb import BREAKS, KINDS, generated_specs, serve_fakeweb
from rehearsal import (
    check_nothing_lost,
    class_table,
    expected_classes,
    pull_installs,
    two_nights,
)

LIBRARIES = 50
#: Small pages cap, so the llms-full.txt "over the cap" is small too; short timeouts, so the sites that
#: never answer cost seconds (the shipped catalogue waits 20 s, four times).
MAX_BYTES = 256 * 1024
CRAWL = {"timeout": 1.5, "retries": 1, "backoff": 0.1, "max_bytes": MAX_BYTES}
#: 50 libraries estimated at 20 s each (no timings yet) make three shards of at most 6 minutes.
TARGET_MINUTES = 6.0


def test_two_nights_put_every_fault_in_its_class_and_a_failed_library_stays_pullable(tmp_path: Path) -> None:
    work, config = tmp_path / "work", tmp_path / "libraries.toml"
    with serve_fakeweb(max_bytes=MAX_BYTES, pages=(2, 4)) as web:
        for spec in generated_specs(LIBRARIES, seed=32):
            web.add_generated(spec)
        specs = web.specs
        assert {s.kind for s in specs} == set(KINDS)  # every kind of fault is represented
        assert {s.breaks_as for s in specs if s.change == "break"} == set(BREAKS)
        assert any(s.change == "mend" for s in specs) and any(s.change == "edit" for s in specs)

        first, second = two_nights(web, work, config, CRAWL, target_minutes=TARGET_MINUTES)
        assert len(first.shards) == 3

        for night, want in zip((first, second), expected_classes(specs, [first, second]), strict=True):
            table, wrong = class_table(specs, night, want)
            assert wrong == [], f"night {night.number}:\n{table}\n" + "\n".join(wrong)
        assert check_nothing_lost(work, specs, [first, second]) == []
        # robots.txt refused the links a following library found: they were never requested.
        robots = [s for s in specs if s.kind == "robots-disallow"]
        assert robots and all(web.site.hits(p) == 0 for s in robots for p in s.disallowed)
        assert all(s.disallowed for s in robots)

        # A library broken tonight: the release index still names last night's bundle, and pull installs it.
        broken = [s for s in specs if s.change == "break"]
        for spec in broken:
            assert second.reported[spec.library].startswith("failed:")
            installed = pull_installs(web, work, spec.library, tmp_path / "pulled" / spec.library)
            assert installed == first.entries[spec.library]["build_id"], installed
        # A site mended tonight is built and pullable; an edited one gets a new bundle.
        mended = next(s for s in specs if s.change == "mend")
        assert (
            pull_installs(web, work, mended.library, tmp_path / "pulled-mended")
            == (second.entries[mended.library]["build_id"])
        )
        edited = next(s for s in specs if s.change == "edit")
        assert second.entries[edited.library]["build_id"] != first.entries[edited.library]["build_id"]
