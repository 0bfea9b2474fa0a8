"""A bundle's name in exports and reports: ``<libraryId>/<version>/<buildId>``."""

from __future__ import annotations

from docbundle.bundle.manifest import Manifest


def bundle_label(manifest: Manifest) -> str:
    """``<libraryId>/<version>/<buildId>``: the bundle's name in exports and reports."""
    return f"{manifest.library.id}/{manifest.version.name}/{manifest.build.build_id}"
