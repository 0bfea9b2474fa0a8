"""A bundle's name in exports and reports: ``<libraryId>/<version>/<buildId>``, and the manifest fields
that identify it in a report (``manifest_header``)."""

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


def bundle_label(manifest: Manifest) -> str:
    """``<libraryId>/<version>/<buildId>``: the bundle's name in exports and reports."""
    return f"{manifest.library.id}/{manifest.version.name}/{manifest.build.build_id}"


def manifest_header(manifest: Manifest) -> ManifestHeader:
    """Library id, version, buildId, content hash and build time: the bundle a report is about."""
    return ManifestHeader(
        library=manifest.library.id,
        version=manifest.version.name,
        build_id=manifest.build.build_id,
        content_hash=manifest.build.content_hash,
        built_at=manifest.build.built_at,
    )
