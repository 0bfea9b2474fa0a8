"""The manifest fields that identify a bundle in a report (``manifest_header``).

The bundle's name in exports and reports, ``<libraryId>/<version>/<buildId>``, is
``docbundle.bundle.release.bundle_label`` (the root of the bundle's release archive too).
"""

from __future__ import annotations

from typing import TypedDict

from docbundle.bundle.manifest import Manifest


class ManifestHeader(TypedDict):
    """The manifest fields a report names its bundle by (``audit``, ``diff``)."""

    library: str
    version: str
    build_id: str
    content_hash: str
    built_at: str


def manifest_header(manifest: Manifest) -> ManifestHeader:
    """Library id, version, buildId, content hash and build time: the bundle a report is about."""
    return ManifestHeader(
        library=manifest.library.id,
        version=manifest.version.name,
        build_id=manifest.build.build_id,
        content_hash=manifest.build.content_hash,
        built_at=manifest.build.built_at,
    )
