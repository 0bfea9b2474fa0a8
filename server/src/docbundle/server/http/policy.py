"""Which ``Host`` and ``Origin`` headers the HTTP transport accepts (DNS-rebinding protection), and the
CORS headers an allowed browser origin gets.

``HostPolicy`` is checked by ``HttpApp`` before anything else and handed to the MCP SDK app as its
``TransportSecuritySettings``, so both layers check the same explicit lists. ``cors_headers`` go on
every answer to an allowed ``Origin``; ``preflight_headers`` on the answer to its preflight.
"""

from __future__ import annotations

from mcp.server.transport_security import TransportSecuritySettings

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
# What a browser client of MCP over streamable HTTP sends and must be able to read. No cookies are
# involved (keys travel in headers), so credentials are never allowed.
CORS_METHODS = "GET, POST, DELETE, OPTIONS"
CORS_REQUEST_HEADERS = (
    "Content-Type, Accept, Authorization, X-API-Key, Mcp-Session-Id, MCP-Protocol-Version, "
    "Last-Event-ID, X-Request-Id"
)
CORS_EXPOSED_HEADERS = "Mcp-Session-Id, MCP-Protocol-Version, X-Request-Id, Retry-After, WWW-Authenticate"
CORS_MAX_AGE = 600  # seconds a browser may reuse a preflight answer
WILDCARD_BINDS = ("0.0.0.0", "::", "")


def _split_host(value: str) -> tuple[str, str | None]:
    """``(hostname, port)`` of a Host header value: ``name``, ``name:port``, ``[v6]`` or ``[v6]:port``."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, None
        rest = value[end + 1 :]
        return value[1:end], (rest[1:] if rest.startswith(":") else None)
    if value.count(":") == 1:
        name, port = value.split(":")
        return name, port
    return value, None  # a bare IPv6 address (only in options) or a name


def _bracket(name: str) -> str:
    return f"[{name}]" if ":" in name else name


class HostPolicy:
    """Which ``Host`` and ``Origin`` values are accepted.

    Hosts: the loopback names, the bind address (unless a wildcard) and every ``--allowed-host``
    (``name`` for any port, ``name:port`` for one port, ``*`` for any host). Origins: ``http`` and
    ``https`` on any allowed host name, plus every ``--allowed-origin`` (``scheme://host[:port]``,
    ``scheme://host:*`` for any port, ``*`` for any origin). No ``Origin`` header (not a browser) is
    always accepted.
    """

    def __init__(
        self, bind_host: str, allowed_hosts: tuple[str, ...], allowed_origins: tuple[str, ...]
    ) -> None:
        self.any_host = "*" in allowed_hosts
        self.any_origin = "*" in allowed_origins
        names: dict[str, str | None] = {}  # hostname -> port, or None for any port
        bind = bind_host.strip("[]").lower()
        for entry in [*LOOPBACK_NAMES, *([bind] if bind not in WILDCARD_BINDS else [])]:
            names[entry] = None
        self._ports: dict[str, set[str]] = {}
        for entry in allowed_hosts:
            if entry == "*":
                continue
            name, port = _split_host(entry) if not _is_bare_ipv6(entry) else (entry.lower(), None)
            if port is None:
                names[name] = None
                self._ports.pop(name, None)
            elif name not in names:
                self._ports.setdefault(name, set()).add(port)
        self.names = names
        self._origins: set[str] = set()
        self._origin_any_port: set[str] = set()
        for name in [*names, *self._ports]:
            for scheme in ("http", "https"):
                self._origin_any_port.add(f"{scheme}://{_bracket(name)}")
        for entry in allowed_origins:
            if entry == "*":
                continue
            origin = entry.strip().rstrip("/").lower()
            if origin.endswith(":*"):
                self._origin_any_port.add(origin[:-2])
            else:
                self._origins.add(origin)

    def host_ok(self, header: str | None) -> bool:
        """Whether a request's ``Host`` header names this server."""
        if self.any_host:
            return True
        if not header:
            return False
        name, port = _split_host(header)
        if name in self.names:
            return True
        return port is not None and port in self._ports.get(name, set())

    def origin_ok(self, header: str | None) -> bool:
        """Whether a request's ``Origin`` header (absent for non-browser clients) is allowed."""
        if header is None or self.any_origin:
            return True
        origin = header.strip().lower()
        if origin in self._origins:
            return True
        scheme, sep, rest = origin.partition("://")
        if not sep:
            return False
        name, _port = _split_host(rest)
        return f"{scheme}://{_bracket(name)}" in self._origin_any_port

    def transport_security(self) -> TransportSecuritySettings:
        """The same policy for the SDK, always explicit (its defaults depend on the bind address)."""
        hosts: list[str] = []
        for name in self.names:
            hosts += [_bracket(name), f"{_bracket(name)}:*"]
        for name, ports in self._ports.items():
            hosts += [f"{_bracket(name)}:{p}" for p in sorted(ports)]
        origins = sorted(self._origins) + [f"{o}:*" for o in sorted(self._origin_any_port)]
        origins += sorted(self._origin_any_port)
        return TransportSecuritySettings(
            # The SDK cannot express "any host" or "any origin"; this layer has checked them already.
            enable_dns_rebinding_protection=not (self.any_host or self.any_origin),
            allowed_hosts=hosts,
            allowed_origins=origins,
        )


def _is_bare_ipv6(value: str) -> bool:
    return value.count(":") > 1 and not value.startswith("[")


def cors_headers(origin: str) -> list[tuple[bytes, bytes]]:
    """Headers that let a page on ``origin`` (already allowed) read an answer: always that one origin."""
    return [
        (b"access-control-allow-origin", origin.strip().encode("latin-1")),
        (b"access-control-expose-headers", CORS_EXPOSED_HEADERS.encode()),
        (b"vary", b"Origin"),
    ]


def preflight_headers() -> list[tuple[bytes, bytes]]:
    """The rest of a preflight's answer: the methods and request headers MCP uses, and for how long."""
    return [
        (b"access-control-allow-methods", CORS_METHODS.encode()),
        (b"access-control-allow-headers", CORS_REQUEST_HEADERS.encode()),
        (b"access-control-max-age", str(CORS_MAX_AGE).encode()),
    ]
