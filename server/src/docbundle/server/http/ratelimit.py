"""Budgets of the HTTP transport: requests per key (``RateLimiter``) and key checks per client (``AuthBudget``).

Both are token buckets used from the event loop only, kept in this process (``LocalBuckets``) or, for
worker processes (``docbundle serve --workers N``), in shared memory (``SharedBuckets``).
``client_key`` says who a request comes from for them: its IP address, IPv6 counted by /64;
``is_loopback_client`` whether that address is the machine's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import math
import mmap
import multiprocessing
import struct
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
# Secrets that passed their key's check are almost always right (only someone holding the keys file can
# make one fail): in their lane one address may have as many at once as all addresses together, so the
# first uses of many keys from one machine at once (agents started together, a proxy) get in.
AUTH_CHECKED_CLIENT_BURST = AUTH_GLOBAL_BURST
# Clients tracked by the key-check budget; over it, the least recently seen are forgotten.
AUTH_MAX_CLIENTS = 10_000
# IPv6 clients are counted per /64: one host usually holds a whole /64.
IPV6_CLIENT_PREFIX = 64
# Buckets shared by worker processes (--workers): table size (24 bytes each), slots probed per key, and
# how long a worker waits for the shared lock before going on without it (only if a holder died).
SHARED_SLOTS = 65_536
SHARED_PROBES = 16
SHARED_LOCK_WAIT = 0.5
_EVERYONE = "*"  # the global bucket's key


class LocalBuckets:
    """Token-bucket states (tokens, at) by key in this process; past ``max_keys`` the least recently used
    are forgotten (an active client is recent, so it is never the one forgotten)."""

    def __init__(self, max_keys: int) -> None:
        self._states: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._max_keys = max_keys

    def lock(self) -> contextlib.AbstractContextManager[Any]:
        """Nothing to lock: used from one event loop only."""
        return contextlib.nullcontext()

    def get(self, key: str) -> tuple[float, float] | None:
        return self._states.get(key)

    def put(self, key: str, tokens: float, at: float) -> None:
        self._states[key] = (tokens, at)
        self._states.move_to_end(key)
        while len(self._states) > self._max_keys:
            self._states.popitem(last=False)

    def __len__(self) -> int:
        return len(self._states)


class _SharedLock:
    """A lock between the worker processes forked after it was made; a holder that died (killed while
    holding it for a few microseconds) costs the others ``SHARED_LOCK_WAIT`` once, not a deadlock."""

    def __init__(self) -> None:
        self._lock = multiprocessing.get_context("fork").Lock()
        self._held = False

    def __enter__(self) -> None:
        self._held = self._lock.acquire(timeout=SHARED_LOCK_WAIT)

    def __exit__(self, *exc: object) -> None:
        if self._held:
            self._held = False
            self._lock.release()


class SharedBuckets:
    """Token-bucket states in anonymous shared memory: the same buckets in every worker process forked
    after it was made (``docbundle serve --workers N``).

    A fixed table of ``slots`` entries (key digest, tokens, at), found by open addressing over
    ``SHARED_PROBES`` slots; when those are all taken, the one touched longest ago is reused (it has
    refilled, or is the least active). The clock is ``time.monotonic``, the same in every process.
    """

    _SLOT = struct.Struct("<Qdd")

    def __init__(self, slots: int, lock: _SharedLock | None = None) -> None:
        self._slots = slots
        self._probes = min(SHARED_PROBES, slots)
        self._mem = mmap.mmap(-1, slots * self._SLOT.size)  # MAP_SHARED | MAP_ANONYMOUS
        self._lock = lock or _SharedLock()

    def lock(self) -> contextlib.AbstractContextManager[Any]:
        """Held around a read and write of one bucket, across the worker processes."""
        return self._lock

    def _find(self, key: str) -> tuple[int, int, tuple[float, float] | None]:
        digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        h = int.from_bytes(digest, "little") or 1  # 0 marks an empty slot
        start = h % self._slots
        victim, oldest = start, math.inf
        for i in range(self._probes):
            slot = (start + i) % self._slots
            owner, tokens, at = self._SLOT.unpack_from(self._mem, slot * self._SLOT.size)
            if owner == h:
                return slot, h, (tokens, at)
            if owner == 0:
                return slot, h, None
            if at < oldest:
                victim, oldest = slot, at
        return victim, h, None

    def get(self, key: str) -> tuple[float, float] | None:
        return self._find(key)[2]

    def put(self, key: str, tokens: float, at: float) -> None:
        slot, h, _ = self._find(key)
        self._SLOT.pack_into(self._mem, slot * self._SLOT.size, h, tokens, at)


Buckets = LocalBuckets | SharedBuckets


class RateLimiter:
    """Token buckets by key: ``rate`` tokens per second up to ``burst``; used from the event loop only.

    ``shared``: the buckets live in shared memory, so worker processes forked afterwards share them.
    """

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 10_000,
        shared: bool = False,
    ) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._clock = clock
        self._buckets: Buckets = SharedBuckets(SHARED_SLOTS) if shared else LocalBuckets(max_keys)

    def _tokens(self, key: str, now: float) -> float:
        tokens, at = self._buckets.get(key) or (self.burst, now)
        return min(self.burst, tokens + max(0.0, now - at) * self.rate)

    def wait_time(self, key: str) -> float:
        """Seconds until ``key`` has a token (0 when it has one now); consumes nothing."""
        with self._buckets.lock():
            tokens = self._tokens(key, self._clock())
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def take(self, key: str) -> float:
        """Consume a token of ``key``: 0 when allowed, else the seconds until one is available."""
        now = self._clock()
        with self._buckets.lock():
            tokens = self._tokens(key, now)
            if tokens < 1:
                self._buckets.put(key, tokens, now)
                return (1 - tokens) / self.rate
            self._buckets.put(key, tokens - 1, now)
        return 0.0


class AuthBudget:
    """How many key checks (scrypts) each client address, and all of them together, may cause.

    Two token buckets, one per client and one global, that may run into debt: ``admit`` books a check
    in both and says how long the caller must wait for it (0 while within the bursts), or None when
    that wait would exceed ``max_wait`` (then nothing is booked: the caller refuses with 429).
    ``give_back`` returns the booking of a check whose secret was right, so legitimate first uses
    never count as failures. A client whose earlier requests have all been answered always gets a
    turn (its debt has been paid by then), so a client asking one thing at a time is slowed, never
    refused. Used from the event loop only; ``shared`` puts the buckets in shared memory for worker
    processes forked afterwards.
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
        shared: bool = False,
    ) -> None:
        self.client_rate, self.client_burst = client_rate, float(client_burst)
        self.global_rate, self.global_burst = global_rate, float(global_burst)
        self.max_wait = max_wait
        self._clock = clock
        self._clients: Buckets
        self._everyone: Buckets
        if shared:
            lock = _SharedLock()  # one lock: a booking changes both buckets at once
            self._clients, self._everyone = SharedBuckets(SHARED_SLOTS, lock), SharedBuckets(1, lock)
        else:
            self._clients, self._everyone = LocalBuckets(max_clients), LocalBuckets(1)
        self._everyone.put(_EVERYONE, self.global_burst, clock())

    def _client_tokens(self, client: str, now: float) -> float:
        tokens, at = self._clients.get(client) or (self.client_burst, now)
        return min(self.client_burst, tokens + max(0.0, now - at) * self.client_rate)

    def _global_tokens(self, now: float) -> float:
        tokens, at = self._everyone.get(_EVERYONE) or (self.global_burst, now)
        return min(self.global_burst, tokens + max(0.0, now - at) * self.global_rate)

    def _wait(self, client: str, now: float) -> float:
        mine, everyone = self._client_tokens(client, now), self._global_tokens(now)
        return max(
            0.0 if mine >= 1 else (1 - mine) / self.client_rate,
            0.0 if everyone >= 1 else (1 - everyone) / self.global_rate,
        )

    def admit(self, client: str) -> float | None:
        """Book a check for ``client``: the seconds to wait before running it, or None (refuse)."""
        now = self._clock()
        with self._clients.lock():
            wait = self._wait(client, now)
            if wait > self.max_wait:
                return None
            # Past max_clients the least recently seen are forgotten; the global budget still holds.
            self._clients.put(client, self._client_tokens(client, now) - 1, now)
            self._everyone.put(_EVERYONE, self._global_tokens(now) - 1, now)
        return wait

    def retry_after(self, client: str) -> float:
        """Seconds until ``admit`` would accept ``client`` again."""
        with self._clients.lock():
            return max(0.0, self._wait(client, self._clock()) - self.max_wait)

    def give_back(self, client: str) -> None:
        """Return a booking: the check it paid for proved a real secret."""
        now = self._clock()
        with self._clients.lock():
            if self._clients.get(client) is not None:
                self._clients.put(client, min(self.client_burst, self._client_tokens(client, now) + 1), now)
            self._everyone.put(_EVERYONE, min(self.global_burst, self._global_tokens(now) + 1), now)


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
