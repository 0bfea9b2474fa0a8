"""Budgets of the HTTP transport: requests per key (``RateLimiter``) and key checks per client (``AuthBudget``).

Both are token buckets used from the event loop only. ``client_key`` says who a request comes from for
them: its IP address, IPv6 counted by /64; ``is_loopback_client`` whether that address is the machine's own.
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict
from collections.abc import Callable, MutableMapping
from typing import Any

# Budgets for the scrypts (~65 ms and 16 MiB each) that keys not proven yet cost: secrets that passed
# their key's check, and any secret for a key without a check (wrong secrets for a key with a check are
# refused before, for free). Two lanes, one for each kind, each counted by client address and over all
# clients, never by key id; a scrypt whose secret was right is given back. A client over budget waits
# for its turn up to AUTH_MAX_WAIT seconds, else gets 429.
AUTH_CLIENT_BURST = 10  # checks a client address may have at once
AUTH_CLIENT_RATE = 1.0  # then this many per second (about 6 % of a core per guessing address)
AUTH_GLOBAL_BURST = 30  # checks all clients together may have at once
AUTH_GLOBAL_RATE = 3.0  # then this many per second (about 20 % of a core, however many addresses guess)
AUTH_MAX_WAIT = 2.0
# Clients tracked by the key-check budget; over it, the least recently seen are forgotten.
AUTH_MAX_CLIENTS = 10_000
# IPv6 clients are counted per /64: one host usually holds a whole /64.
IPV6_CLIENT_PREFIX = 64


class RateLimiter:
    """Token buckets by key: ``rate`` tokens per second up to ``burst``; used from the event loop only."""

    def __init__(
        self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic, max_keys: int = 10_000
    ) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    def _tokens(self, key: str, now: float) -> float:
        tokens, at = self._buckets.get(key, (self.burst, now))
        return min(self.burst, tokens + (now - at) * self.rate)

    def wait_time(self, key: str) -> float:
        """Seconds until ``key`` has a token (0 when it has one now); consumes nothing."""
        tokens = self._tokens(key, self._clock())
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def take(self, key: str) -> float:
        """Consume a token of ``key``: 0 when allowed, else the seconds until one is available."""
        now = self._clock()
        tokens = self._tokens(key, now)
        if tokens < 1:
            self._buckets[key] = (tokens, now)
            return (1 - tokens) / self.rate
        self._buckets[key] = (tokens - 1, now)
        if len(self._buckets) > self._max_keys:
            self._prune(now)
        return 0.0

    def _prune(self, now: float) -> None:
        # A bucket that has refilled is the same as no bucket: forget it (bounds memory per client).
        for k in [k for k in self._buckets if self._tokens(k, now) >= self.burst]:
            del self._buckets[k]


class AuthBudget:
    """How many key checks (scrypts) each client address, and all of them together, may cause.

    Two token buckets, one per client and one global, that may run into debt: ``admit`` books a check
    in both and says how long the caller must wait for it (0 while within the bursts), or None when
    that wait would exceed ``max_wait`` (then nothing is booked: the caller refuses with 429).
    ``give_back`` returns the booking of a check whose secret was right, so legitimate first uses
    never count as failures. A client whose earlier requests have all been answered always gets a
    turn (its debt has been paid by then), so a client asking one thing at a time is slowed, never
    refused. Used from the event loop only.
    """

    def __init__(
        self,
        *,
        client_rate: float = AUTH_CLIENT_RATE,
        client_burst: int = AUTH_CLIENT_BURST,
        global_rate: float = AUTH_GLOBAL_RATE,
        global_burst: int = AUTH_GLOBAL_BURST,
        max_wait: float = AUTH_MAX_WAIT,
        max_clients: int = AUTH_MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client_rate, self.client_burst = client_rate, float(client_burst)
        self.global_rate, self.global_burst = global_rate, float(global_burst)
        self.max_wait = max_wait
        self._max_clients = max_clients
        self._clock = clock
        self._clients: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client -> (tokens, at)
        self._global = (self.global_burst, clock())

    def _client_tokens(self, client: str, now: float) -> float:
        tokens, at = self._clients.get(client, (self.client_burst, now))
        return min(self.client_burst, tokens + (now - at) * self.client_rate)

    def _global_tokens(self, now: float) -> float:
        tokens, at = self._global
        return min(self.global_burst, tokens + (now - at) * self.global_rate)

    def _wait(self, client: str, now: float) -> float:
        mine, everyone = self._client_tokens(client, now), self._global_tokens(now)
        return max(
            0.0 if mine >= 1 else (1 - mine) / self.client_rate,
            0.0 if everyone >= 1 else (1 - everyone) / self.global_rate,
        )

    def admit(self, client: str) -> float | None:
        """Book a check for ``client``: the seconds to wait before running it, or None (refuse)."""
        now = self._clock()
        wait = self._wait(client, now)
        if wait > self.max_wait:
            return None
        self._clients[client] = (self._client_tokens(client, now) - 1, now)
        self._clients.move_to_end(client)
        self._global = (self._global_tokens(now) - 1, now)
        while len(self._clients) > self._max_clients:
            self._clients.popitem(last=False)  # the global budget still holds for a forgotten client
        return wait

    def retry_after(self, client: str) -> float:
        """Seconds until ``admit`` would accept ``client`` again."""
        return max(0.0, self._wait(client, self._clock()) - self.max_wait)

    def give_back(self, client: str) -> None:
        """Return a booking: the check it paid for proved a real secret."""
        now = self._clock()
        if client in self._clients:
            self._clients[client] = (min(self.client_burst, self._client_tokens(client, now) + 1), now)
        self._global = (min(self.global_burst, self._global_tokens(now) + 1), now)


def is_loopback_client(scope: MutableMapping[str, Any]) -> bool:
    """Whether a request comes from this machine (127.0.0.0/8, ::1, or their IPv4-mapped forms).

    After uvicorn's proxy-headers middleware, so a ``--trusted-proxy``'s forwarded clients are judged
    by their own address, not the proxy's.
    """
    client = scope.get("client")
    try:
        ip = ipaddress.ip_address(str(client[0])) if client else None
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip is not None and ip.is_loopback


def client_key(scope: MutableMapping[str, Any]) -> str:
    """Who a request comes from, for budgets: its IP address (IPv6 by /64), as uvicorn reports it."""
    client = scope.get("client")
    host = str(client[0]) if client else "?"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host[:64]  # not an IP (a unix socket, or what a trusted proxy sent): bounded anyway
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, IPV6_CLIENT_PREFIX), strict=False))
    return str(ip)
