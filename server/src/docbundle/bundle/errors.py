"""Errors raised while reading or verifying a bundle.

The hierarchy::

    BundleError
    ├── BundleNotFoundError            no bundle (or no CURRENT) where one was expected
    ├── BundleFormatError              a file is malformed (manifest, docs store, CURRENT)
    │   ├── UnsupportedFormatVersionError   format_version not in SUPPORTED_FORMAT_VERSIONS
    │   └── UnsafePickleError          an index pickle names a global no index holds (safepickle)
    ├── BundleIntegrityError           a file is missing, extra, or its size / sha256 does not match
    └── VersionLockedError             a build or an install of that version is running
"""

from __future__ import annotations

import pickle


class BundleError(Exception):
    """Base class of every bundle error."""


class BundleNotFoundError(BundleError):
    """No bundle where one was expected."""


class BundleFormatError(BundleError):
    """A bundle file is malformed."""


class UnsupportedFormatVersionError(BundleFormatError):
    """The bundle's format_version is not one this reader supports."""


class UnsafePickleError(BundleFormatError, pickle.UnpicklingError):
    """A pickle in a bundle's index names a global that a docbundle index never holds (safepickle)."""


class BundleIntegrityError(BundleError):
    """A bundle file is missing, unexpected, or does not match the manifest."""


class VersionLockedError(BundleError):
    """Another build or install holds the version directory's lock."""
