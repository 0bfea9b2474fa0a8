"""What one crawl may touch: the local folder it may read and the network addresses it may connect to.

An llms.txt is input from whoever publishes it, so its links are untrusted (issue 9, items 1 and 2):

- **Local files.** A local llms.txt (or a local folder) may link files, but only inside its own folder:
  the path is resolved (a symbolic link leading out is refused), a ``..`` component is refused, and
  only regular files are opened (never a device, FIFO or socket, which could block the build or read
  something that is not documentation). A remote (http(s)) llms.txt may link only http(s) pages.
- **Network addresses.** Every connection, including every redirect hop, is checked on the address
  it goes to: the host name is resolved once, every address is checked, and the connection is made
  to the checked address (so DNS rebinding cannot switch it between the check and the connect; the
  Host header and TLS server name stay the URL's). Loopback, private, link-local (the cloud metadata
  service 169.254.169.254 among them), multicast, unspecified, shared (CGNAT) and reserved addresses,
  and IPv4-mapped, 6to4 and NAT64 forms of those, are refused, except for the llms.txt's own origin
  (scheme, host, port) and the hosts the library's ``allow_hosts`` names. Which addresses are refused is
  decided in ``docbundle.common.netpolicy``, the one policy ``docbundle pull`` uses too.

The origin's exemption covers the addresses its name resolved to the first time (when the llms.txt
was fetched): a name that later resolves to another internal address is refused.

``GuardedTransport`` is the httpx transport that enforces the address policy; ``CrawlScope`` holds
both halves and is built once per library version with ``CrawlScope.for_source``.
"""

from __future__ import annotations

import ipaddress
import os
import select
import socket
import ssl
import stat
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

import anyio
import httpcore
import httpx
from docbundle.common.netpolicy import IPAddress, address_problem, host_key, parse_ip, shown_host

from ..errors import AddressRefused, LocalRefused

__all__ = [
    "AddressGate",
    "AddressRefused",
    "CrawlScope",
    "GuardedTransport",
    "HostRule",
    "LocalRefused",
    "LocalRoot",
    "address_problem",
]

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
#: Looks (host, port) up in DNS: its IP address strings; injectable for tests.
HostLookup = Callable[[str, int], Awaitable[list[str]]]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-._")


@dataclass(frozen=True)
class HostRule:
    """One ``allow_hosts`` entry: a host name, IP address or network, with an optional port.

    A name matches the URL's host as written; an address or network matches the address connected
    to, whatever name led there.
    """

    text: str
    name: str | None = None
    network: IPNetwork | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> HostRule:
        """Parse ``"docs.internal"``, ``"docs.internal:8443"``, ``"10.0.0.5"``, ``"10.0.0.0/8"``, ``"[::1]:8080"``.

        Raises ValueError with a message saying what is accepted.
        """
        usage = (
            f"{text!r} is not a host name, IP address or network with an optional :port "
            '(e.g. "docs.internal:8443", "10.0.0.5" or "10.1.0.0/16")'
        )
        raw = text.strip()
        if not raw or "://" in raw or any(c.isspace() for c in raw):
            raise ValueError(usage)
        host, port = raw, None
        if raw.startswith("["):
            end = raw.find("]")
            if end < 0 or (raw[end + 1 :] and not raw[end + 1 :].startswith(":")):
                raise ValueError(usage)
            host, rest = raw[1:end], raw[end + 1 :]
            if rest:
                port = _port(rest[1:], usage)
        elif raw.count(":") == 1:
            host, _, port_text = raw.partition(":")
            port = _port(port_text, usage)
        try:
            network = ipaddress.ip_network(host, strict=False) if "/" in host or parse_ip(host) else None
        except ValueError:
            raise ValueError(usage) from None
        if network is not None:
            return cls(text, network=network, port=port)
        name = host_key(host)
        if not name or not set(name) <= _HOST_CHARS or "/" in name:
            raise ValueError(usage)
        return cls(text, name=name, port=port)

    def matches(self, host: str, port: int, ip: IPAddress) -> bool:
        """Whether a connection to ``ip`` for ``host:port`` is allowed by this entry."""
        if self.port is not None and self.port != port:
            return False
        if self.name is not None:
            return self.name == host_key(host)
        assert self.network is not None
        return ip.version == self.network.version and ip in self.network


def _port(text: str, usage: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(usage)
    return int(text)


async def _system_lookup(host: str, port: int) -> list[str]:
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[str, None] = {}
    for _family, _type, _proto, _canon, sockaddr in infos:
        seen.setdefault(str(sockaddr[0]), None)
    return list(seen)


@dataclass
class AddressGate:
    """The gate a crawl's connections pass: which addresses it may connect to (the rules are
    ``docbundle.common.netpolicy``'s); ``checked`` looks up and checks one connection."""

    origins: frozenset[tuple[str, str, int]] = frozenset()
    allow: tuple[HostRule, ...] = ()
    lookup: HostLookup = _system_lookup
    # The addresses each origin resolved to the first time: its exemption covers only those.
    pinned: dict[tuple[str, str, int], frozenset[str]] = field(default_factory=dict)

    async def checked(self, scheme: str, host: str, port: int) -> list[str]:
        """Resolve ``host`` once and return its addresses, or raise AddressRefused naming the problem."""
        key = (scheme, host_key(host), port)
        literal = parse_ip(host_key(host))
        addresses = [str(literal)] if literal is not None else await self.lookup(host_key(host), port)
        if not addresses:
            raise OSError(f"{host} did not resolve to any address")
        pinned = self.pinned.get(key)
        shown = shown_host(host, port)
        for text in addresses:
            ip = parse_ip(text)
            if ip is None:
                raise AddressRefused(f"{shown} resolved to {text!r}, which is not an IP address")
            problem = address_problem(ip)
            if problem is None or any(rule.matches(host, port, ip) for rule in self.allow):
                continue
            if key in self.origins and (pinned is None or text in pinned):
                continue
            what = shown if literal is not None else f"{shown} resolves to {ip}, which"
            if key in self.origins:
                raise AddressRefused(
                    f"{what} is {problem}, not one the llms.txt's origin resolved to before "
                    f"({', '.join(sorted(pinned or ()))}); allow it with allow_hosts in the library's config"
                )
            raise AddressRefused(
                f"{what} is {problem}, not the llms.txt's own origin; "
                "allow it with allow_hosts in the library's config"
            )
        if key in self.origins:
            # The first answer wins (the llms.txt fetch, before any page is crawled).
            self.pinned.setdefault(key, frozenset(addresses))
        return addresses


_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)  # Linux only


class _CrawlStream(httpcore.AsyncNetworkStream):
    """A crawler connection: the anyio stream httpcore gets, with two costs taken off.

    - It acknowledges what it receives at once (``TCP_QUICKACK``, Linux, set before every read). A
      server that sends a response's headers and its body in two writes with Nagle's algorithm on
      (Python's ``http.server`` does, and so do other small servers) holds the body back until the
      headers are acknowledged, and on a kept-alive connection Linux delays that acknowledgement by
      about 40 ms: every page after a connection's first then took 44 ms on loopback instead of
      0.4 ms, and a crawl of 8 connections to one host ran at under 200 pages a second. The flag does
      not stick (the kernel leaves quick-ack mode by itself), so it is set again before every read.
    - It answers httpcore's ``is_readable`` (asked of every idle connection each time the pool hands
      out one: 17 times a page) with one ``poll`` of the socket. Through anyio that built the stream's
      whole attribute table each time, a third of the crawl's CPU.
    """

    def __init__(self, inner: httpcore.AsyncNetworkStream, sock: Any) -> None:
        self._inner = inner
        self._sock = sock  # asyncio's TransportSocket (setsockopt, fileno)
        self._quickack = _QUICKACK is not None

    @classmethod
    def wrap(cls, stream: httpcore.AsyncNetworkStream) -> httpcore.AsyncNetworkStream:
        """``stream`` wrapped, or ``stream`` itself when it shows no socket."""
        sock = stream.get_extra_info("socket")
        if not hasattr(sock, "fileno"):
            return stream
        return cls(stream, sock)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Read, acknowledging at once what arrives."""
        if self._quickack:
            assert _QUICKACK is not None
            try:
                self._sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:
                self._quickack = False  # not a TCP socket after all: never asked again
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Write as the wrapped stream does."""
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        """Close the wrapped stream."""
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        """TLS over the same socket, still a crawler connection."""
        return _CrawlStream(await self._inner.start_tls(ssl_context, server_hostname, timeout), self._sock)

    def get_extra_info(self, info: str) -> Any:
        """``is_readable`` and ``socket`` from the socket itself; anything else from the wrapped stream."""
        if info == "is_readable":
            return _readable(self._sock)
        if info == "socket":
            return self._sock
        return self._inner.get_extra_info(info)


def _readable(sock: Any) -> bool:
    """Whether a read of ``sock`` would return at once (data, or the end of a closed connection): what
    httpcore asks to tell whether an idle kept-alive connection is still usable. A socket without a
    descriptor counts as readable, as in httpcore."""
    fd = sock.fileno()
    if fd < 0:
        return True
    poll = getattr(select, "poll", None)
    if poll is None:  # Windows
        ready, _, _ = select.select([fd], [], [], 0)
        return bool(ready)
    p = poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(0))


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Connects only to addresses the policy checked, to the checked address itself."""

    def __init__(self, policy: AddressGate, scheme: str) -> None:
        self._policy = policy
        self._scheme = scheme
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve, check every address, then connect to the first checked address that answers."""
        try:
            with anyio.fail_after(timeout):
                addresses = await self._policy.checked(self._scheme, host, port)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        error: Exception | None = None
        for address in addresses:
            try:
                stream = await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except httpcore.ConnectError as exc:
                error = exc
            else:
                return _CrawlStream.wrap(stream)
        assert error is not None
        raise error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        """Never used by the crawler: refused."""
        raise AddressRefused(f"unix socket {path} refused")

    async def sleep(self, seconds: float) -> None:
        """Sleep on the running event loop."""
        await self._inner.sleep(seconds)


class _GuardedPool(httpcore.AsyncConnectionPool):
    """A connection pool whose connections go through ``_GuardedBackend`` (one per origin scheme)."""

    def __init__(self, policy: AddressGate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._policy = policy

    def create_connection(self, origin: httpcore.Origin) -> httpcore.AsyncConnectionInterface:
        """A direct connection (no proxy) whose connect is checked by the policy."""
        return httpcore.AsyncHTTPConnection(
            origin=origin,
            ssl_context=self._ssl_context,
            keepalive_expiry=self._keepalive_expiry,
            http1=self._http1,
            http2=self._http2,
            retries=self._retries,
            local_address=self._local_address,
            uds=None,
            network_backend=_GuardedBackend(self._policy, origin.scheme.decode("ascii")),
            socket_options=self._socket_options,
        )


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with every connection checked by ``policy``.

    It always connects directly: proxy settings from the environment are not used, because a proxy
    would resolve and connect on its own, out of the policy's sight.
    """

    def __init__(self, policy: AddressGate, *, ssl_context: ssl.SSLContext, limits: httpx.Limits) -> None:
        super().__init__(verify=ssl_context, http1=True, http2=False, limits=limits, trust_env=False)
        self._pool = _GuardedPool(
            policy,
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
        )


@dataclass(frozen=True)
class LocalRoot:
    """The folder local files may be read from: as written (``lexical``) and resolved (``real``).

    That is the llms.txt's own folder (or the source folder), unless the library's ``local_root``
    names a wider one. ``base`` is the llms.txt's folder: messages show paths relative to it, so a
    report never carries the build machine's absolute paths.
    """

    lexical: Path
    real: Path
    base: Path

    @classmethod
    def of(cls, folder: Path, base: Path | None = None) -> LocalRoot:
        """The root for ``folder``; ``base`` (default: the folder) is where the llms.txt is."""
        return cls(
            Path(os.path.abspath(folder)),
            Path(os.path.realpath(folder)),
            Path(os.path.abspath(base or folder)),
        )

    def _shown(self, path: Path) -> str:
        return os.path.relpath(path, self.base)

    def _outside(self) -> str:
        return "the llms.txt's folder" if self.lexical == self.base else "the library's local_root"

    def open(self, path: Path) -> int:
        """Open ``path`` for reading and return the fd, or raise LocalRefused / OSError.

        Refused: a ``..`` component, a path outside the root (as written or once symbolic links are
        resolved), and anything but a regular file (checked before opening, and again on the open fd,
        which is opened non-blocking so even a FIFO swapped in meanwhile cannot stall the build).
        """
        lexical = Path(os.path.abspath(path))
        shown = self._shown(lexical)
        if ".." in path.parts:
            raise LocalRefused(
                f"{shown}: a '..' path component is refused; only files inside {self._outside()} are read"
            )
        if not (lexical.is_relative_to(self.lexical) or lexical.is_relative_to(self.real)):
            raise LocalRefused(f"{shown} is outside {self._outside()}; only files inside it are read")
        real = Path(os.path.realpath(lexical))
        if not real.is_relative_to(self.real):
            raise LocalRefused(
                f"{shown} leads outside {self._outside()} through a symbolic link; only files inside it are read"
            )
        st = os.stat(real)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "is a directory", str(lexical))
        if not stat.S_ISREG(st.st_mode):
            raise LocalRefused(f"{shown} is not a regular file (a device, FIFO or socket); it is not opened")
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(real, flags)
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
                raise LocalRefused(f"{shown} changed while being opened; it is not read")
        except BaseException:
            os.close(fd)
            raise
        return fd


@dataclass(frozen=True)
class CrawlScope:
    """Everything a crawl may touch: ``local`` (None: no local files) and the network ``policy``."""

    policy: AddressGate
    local: LocalRoot | None = None

    @classmethod
    def for_source(
        cls, source: str, allow_hosts: Sequence[str] = (), local_root: str | None = None
    ) -> CrawlScope:
        """The scope of a library version whose llms.txt (or folder) is ``source``.

        An http(s) source gets its origin exempted and no local files; a local one (a path or
        ``file:`` URL of an llms.txt, or a folder) gets its folder, or ``local_root`` when given (an
        absolute path; the config checks that it holds the source), and no exempted origin.
        """
        rules = tuple(HostRule.parse(h) for h in allow_hosts)
        parts = urlsplit(source)
        scheme = parts.scheme.lower()
        if scheme in ("http", "https"):
            try:
                url = httpx.URL(source)
            except httpx.InvalidURL:
                return cls(AddressGate(frozenset(), rules))  # fetching it fails with the reason
            origin = (
                url.scheme,
                host_key(url.raw_host.decode("ascii")),
                url.port or _DEFAULT_PORTS[url.scheme],
            )
            return cls(AddressGate(frozenset({origin}), rules))
        path = Path(url2pathname(parts.path)) if scheme == "file" else Path(source)
        folder = path if path.is_dir() else path.parent
        root = Path(local_root) if local_root is not None else folder
        return cls(AddressGate(frozenset(), rules), LocalRoot.of(root, base=folder))
