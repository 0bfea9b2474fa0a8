"""Errors raised by the indexer: one tree, every exception the indexer raises is in it.

The hierarchy::

    IndexerError
    ├── ConfigError          libraries.toml or a golden query file is invalid (names the file, library and key)
    ├── FetchError           a source (llms.txt or a page) could not be fetched; __cause__ keeps the httpx error
    ├── BuildError           a bundle could not be written
    ├── CrawlRefused         the crawl scope refused something (caught by the crawl: the page fails, kind "refused")
    │   ├── AddressRefused   a connection to an address the policy refuses (raised inside the guarded transport)
    │   └── LocalRefused     a local path the crawl may not read
    ├── AttemptFailed        one fetch attempt failed (raised and caught inside pipeline/session.py: retried or recorded)
    ├── EmbeddingDeferred    embedding stopped at the run's deadline (raised in pipeline/semantic.py, caught by
    │                        pipeline/build.py: the keyword-only bundle is published; not a failure)
    └── ExportError          an export could not be written (exit 1)
        └── ExportUsageError the export was asked for something it refuses; nothing was written (exit 2)
            └── OutputExistsError  --out exists and may not be replaced

Errors of other layers pass through unchanged: ``docbundle.bundle.errors.BundleError`` (a bundle cannot be
read or fails verification, or its version is locked) and ``OSError``. ``ValueError`` is raised only where
a library asks for it: in msgspec ``__post_init__`` validation hooks and ``HostRule.parse``, which
``load_config`` turns into ``ConfigError``; the guarded transport raises httpcore's own connect errors.
"""

from __future__ import annotations


class IndexerError(Exception):
    """Base class of every indexer error."""


class ConfigError(IndexerError):
    """The library configuration (or a golden query file) is invalid."""


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


class CrawlRefused(IndexerError):
    """The crawl scope refused a connection or a path; the message says what and why."""


class AddressRefused(CrawlRefused):
    """A connection the address policy refused; the message says what and why."""


class LocalRefused(CrawlRefused):
    """A local path the crawl may not read; the message says why."""


class AttemptFailed(IndexerError):
    """Why one fetch attempt failed; ``__cause__`` keeps the underlying httpx/OS error."""

    def __init__(
        self,
        reason: str,
        *,
        kind: str,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after


class ExportError(IndexerError):
    """An export could not be written."""


class ExportUsageError(ExportError):
    """The export was asked for something it must refuse (nothing was written)."""


class OutputExistsError(ExportUsageError):
    """The output path exists and may not be replaced (no ``--force``, or not a file we wrote)."""


class EmbeddingDeferred(IndexerError):
    """Embedding stopped at its deadline (``semantic.make_vectors``'s ``deadline``: the nightly shard's
    budget), the rows embedded so far saved in the checkpoint for the next run. Not a failure: the build
    publishes the keyword-only bundle of its content (``pipeline/build.py``)."""

    def __init__(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        super().__init__(
            f"embedding deferred at the run's budget: {done} of {total} rows embedded and kept for the next run"
        )
