"""The nightly workflow keeps each shard's bundles from one night to the next, also on a night when a
library failed (``.github/workflows/nightly.yml``).

The rehearsal (``tests/e2e/test_nightly_rehearsal.py``) showed that every shard of a real catalogue has a
failing library on most nights (a dead site, a rate limit), so ``docbundle-index nightly --shard K`` exits
1 on most nights by design. ``actions/cache`` saves in its post step only when the job succeeded, so with it
no shard's bundles folder would ever be saved: every night would start without previous bundles, crawl
cache and vectors, and rebuild, re-embed and republish the whole catalogue.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

WORKFLOW = Path(__file__).resolve().parents[1] / ".github" / "workflows" / "nightly.yml"


def _build_steps() -> list[dict[str, Any]]:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    steps: list[dict[str, Any]] = workflow["jobs"]["build"]["steps"]
    return steps


def test_a_shard_saves_its_bundles_even_when_a_library_failed() -> None:
    steps = _build_steps()
    uses = [str(s.get("uses", "")) for s in steps]
    # The combined action saves only after a successful job: not usable here.
    assert not any(u.startswith("actions/cache@") for u in uses), uses
    restore = next(i for i, u in enumerate(uses) if u.startswith("actions/cache/restore@"))
    save = next(i for i, u in enumerate(uses) if u.startswith("actions/cache/save@"))
    build = next(i for i, s in enumerate(steps) if "--plan-file" in str(s.get("run", "")))
    assert restore < build < save
    # Saved when the build step exits 1 (a library failed); not after a cancelled or timed-out job, whose
    # new bundles were never packaged (saved, they would be "unchanged" tomorrow and never published).
    assert steps[save].get("if") == "${{ !cancelled() }}"
    assert steps[save]["with"]["path"] == steps[restore]["with"]["path"] == "bundles"
    # The key saved is tonight's; tomorrow's restore finds it by the shard's prefix.
    assert steps[save]["with"]["key"] == "nightly-shard-${{ matrix.shard }}-${{ github.run_id }}"
    assert steps[save]["with"]["key"].startswith(steps[restore]["with"]["restore-keys"])


def test_each_release_publishes_its_attestation_where_its_index_names_it() -> None:
    """The publish job signs the release's archives and uploads the attestation bundle with them, under the
    name ``--merge --release`` writes into every entry of the release's index.json (issue 34)."""
    from docbundle.bundle.releaseindex import ATTESTATION

    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    steps: list[dict[str, Any]] = workflow["jobs"]["publish"]["steps"]
    attest = next(
        i
        for i, s in enumerate(steps)
        if str(s.get("uses", "")).startswith("actions/attest-build-provenance@")
    )
    assert steps[attest]["with"]["subject-path"] == "release/*.tar.gz"
    keep = next(i for i, s in enumerate(steps) if f"release/{ATTESTATION}" in str(s.get("run", "")))
    assert (
        attest < keep
        and steps[keep]["env"]["BUNDLE"] == f"${{{{ steps.{steps[attest]['id']}.outputs.bundle-path }}}}"
    )
    publish = next(i for i, s in enumerate(steps) if "gh release create" in str(s.get("run", "")))
    assert keep < publish and f"release/{ATTESTATION}" in steps[publish]["run"]
