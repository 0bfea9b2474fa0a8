"""``docbundle serve --transport http --workers 2``: two processes on one port, over real HTTP on 127.0.0.1
(issue 13, several workers). The rate limit and the key store must hold across them: one key's burst is
one burst whichever worker a connection lands on, and a revoked key is refused by every worker.

Every request below opens a new connection, so the kernel spreads them over both workers; the access
log says which worker answered each, and the tests check that both did.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from docbundle.server.keys import create_key, revoke_key
from httpkit import MCP_HEADERS, request
from serverkit import HttpServerProcess

PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
BURST = 10
REQUESTS = 60


@pytest.fixture
def keyed(tmp_path: Path) -> tuple[Path, str, str]:
    path = tmp_path / "keys.toml"
    record, key = create_key(path, "shared")
    return path, record.id, key


def ping(port: int, key: str, request_id: str) -> int:
    """One request on a new connection; its status."""
    headers = {**MCP_HEADERS, "X-API-Key": key, "X-Request-Id": request_id}
    return request("POST", port, content=PING, headers=headers).status_code


def workers_by_request(server: HttpServerProcess, prefix: str) -> dict[str, int]:
    """Which worker answered each logged request whose id starts with ``prefix``."""
    out: dict[str, int] = {}
    for line in server.lines():
        record = json.loads(line)
        if str(record.get("requestId", "")).startswith(prefix):
            out[record["requestId"]] = record["worker"]
    return out


def serve_two_workers(bundles: Path, keys: Path, *options: str) -> HttpServerProcess:
    return HttpServerProcess(bundles, "--keys", str(keys), "--workers", "2", *options)


def test_two_workers_share_one_rate_limit(bundles_root: Path, keyed: tuple[Path, str, str]) -> None:
    # 1 an hour: nothing refills while the test runs, so exactly the burst is served.
    with serve_two_workers(bundles_root, keyed[0], "--rate", "1/h", "--burst", str(BURST)) as two_workers:
        check_one_burst(two_workers, keyed[2])
    assert two_workers.returncode == 0  # SIGINT to the supervisor: both workers drained and exited


def check_one_burst(two_workers: HttpServerProcess, key: str) -> None:
    statuses = Counter(ping(two_workers.port, key, f"rate-{i:03d}") for i in range(REQUESTS))
    assert statuses == {200: BURST, 429: REQUESTS - BURST}, statuses
    two_workers.wait_for(lambda line: f'"requestId":"rate-{REQUESTS - 1:03d}"' in line)
    served_by = workers_by_request(two_workers, "rate-")
    assert len(served_by) == REQUESTS and set(served_by.values()) == {0, 1}, Counter(served_by.values())


def test_a_revoked_key_is_refused_by_every_worker(bundles_root: Path, keyed: tuple[Path, str, str]) -> None:
    path, key_id, key = keyed
    with serve_two_workers(bundles_root, path) as two_workers:
        check_revocation(two_workers, path, key_id, key)
    assert two_workers.returncode == 0


def check_revocation(two_workers: HttpServerProcess, path: Path, key_id: str, key: str) -> None:
    assert ping(two_workers.port, key, "before") == 200
    revoke_key(path, key_id)
    # Each worker reads the keys file on its own (within a second of a change): wait, bounded, until
    # a whole round of new connections is refused, then check both workers took part in refusing.
    deadline = time.monotonic() + 30
    round_no = 0
    while True:
        round_no += 1
        statuses = [ping(two_workers.port, key, f"revoked-{round_no}-{i:02d}") for i in range(20)]
        if set(statuses) == {403}:
            break
        assert set(statuses) <= {200, 403}, statuses
        assert time.monotonic() < deadline, "the revoked key was still served after 30 s"
        time.sleep(0.2)
    last = f"revoked-{round_no}-"
    two_workers.wait_for(lambda line: f'"requestId":"{last}19"' in line)
    assert set(workers_by_request(two_workers, last).values()) == {0, 1}
