"""Errors raised by the indexer.

The hierarchy::

    IndexerError
    ├── ConfigError     libraries.toml is invalid (names the library and key)
    ├── FetchError      a source (llms.txt or a page) could not be fetched; __cause__ keeps the httpx error
    └── BuildError      a bundle could not be written
"""

from __future__ import annotations


class IndexerError(Exception):
    """Base class of every indexer error."""


class ConfigError(IndexerError):
    """The library configuration is invalid."""


class FetchError(IndexerError):
    """A source could not be fetched."""

    def __init__(self, url: str, reason: str, *, kind: str = "error", status: int | None = None) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason
        self.kind = kind
        self.status = status


class BuildError(IndexerError):
    """A bundle could not be written."""
