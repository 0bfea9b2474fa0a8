"""How the HTTP transport is exposed (``HttpOptions``) and the defaults of its limits.

Imports nothing of the web stack: the ``docbundle`` command shows these defaults in ``serve --help``
without loading the MCP SDK, uvicorn or starlette.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog import DEFAULT_RELOAD_SECONDS

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_BURST",
    "DEFAULT_MAX_BODY",
    "DEFAULT_RATE",
    "DEFAULT_WORKERS",
    "HttpOptions",
]

# Requests per second and burst per key (per client address without keys). A rate limit here is about
# one key or address taking more than its share of a shared server, never about one user's clients: an
# MCP connection costs 3 requests before its first call (initialize, initialized, tools/list), so an
# IDE starting several agents, or a test suite opening a connection per case, sends a hundred requests
# in a second or two. 500 at once covers that many times over, and 50 a second is about a third of
# what one process serves (~165 searches/s), so no single key can take the server alone.
DEFAULT_RATE = 50.0
DEFAULT_BURST = 500
DEFAULT_MAX_BODY = 1024 * 1024  # MCP requests to this server are a few hundred bytes
DEFAULT_BODY_TIMEOUT = 10.0
DEFAULT_WORKERS = 1


@dataclass(frozen=True)
class HttpOptions:
    """How the HTTP transport is exposed; the CLI builds it from ``docbundle serve`` options."""

    host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    rate: float | None = DEFAULT_RATE  # None: no rate limit
    burst: int = DEFAULT_BURST
    # Whether anonymous requests from this machine's own addresses are rate limited too. Without keys,
    # a loopback client is the local user (or a proxy not named by --trusted-proxy): the default
    # limits leave it alone; an explicit --rate or --burst applies to it as to everyone.
    limit_loopback: bool = False
    max_body_size: int = DEFAULT_MAX_BODY
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    # Peers whose X-Forwarded-For is believed: IP addresses or networks (``--trusted-proxy``).
    trusted_proxies: tuple[str, ...] = ()
    # Processes serving the port (``--workers``); above 1 the budgets live in shared memory.
    workers: int = DEFAULT_WORKERS
    # Seconds between looks for new builds (``--reload-interval``; 0: never); each worker reloads its own.
    reload_interval: float = DEFAULT_RELOAD_SECONDS
