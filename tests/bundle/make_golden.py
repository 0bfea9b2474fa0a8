"""Regenerate the golden bundle of the current format version from tests/fixtures/golden-site.

Run only when the bundle format changes (and bump FORMAT_VERSION; keep the old golden bundles):

    SOURCE_DATE_EPOCH=1767225600 python tests/bundle/make_golden.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from docbundle.bundle.manifest import FORMAT_VERSION
from docbundle.indexer.config import load_config
from docbundle.indexer.pipeline.build import build_target

HERE = Path(__file__).resolve().parent
CONFIG = HERE.parent / "fixtures" / "golden.toml"


def build_golden(out: Path) -> Path:
    """Build the golden fixture site into ``out``; returns the bundle directory."""
    catalogue = load_config(CONFIG)
    (target,) = catalogue.targets(catalogue.libraries[0])
    outcome = build_target(target, out)
    if outcome.status != "built" or outcome.bundle is None:
        raise SystemExit(f"golden build failed: {outcome.message}")
    return Path(outcome.bundle)


def main() -> int:
    """Rebuild tests/bundle/golden/v<FORMAT_VERSION>."""
    dest = HERE / "golden" / f"v{FORMAT_VERSION}"
    with tempfile.TemporaryDirectory() as tmp:
        bundle = build_golden(Path(tmp))
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(bundle, dest)
    print(f"wrote {dest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
