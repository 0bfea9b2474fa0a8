"""``/readyz`` with keys: a server whose every key is revoked is not ready (issue 23).

A real ``docbundle serve --transport http`` on 127.0.0.1 with its own keys file; the keys are revoked
with ``docbundle keys revoke`` (the command an operator runs) while it serves.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from docbundle.server.keys import create_key
from serverkit import HttpServerProcess, readyz


def revoke(keys: Path, key_id: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "docbundle.server", "keys", "revoke", key_id, "--keys", str(keys)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def ready_after_change(port: int, expected: int, timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
    """``/readyz`` once it answers ``expected`` (the keys file is re-read within a second), bounded."""
    end = time.monotonic() + timeout
    while True:
        status, body = readyz(port)
        if status == expected or time.monotonic() > end:
            return status, body
        time.sleep(0.1)


def test_readyz_is_unavailable_once_no_key_can_authenticate(bundles_root: Path, tmp_path: Path) -> None:
    keys = tmp_path / "keys.toml"
    first, _ = create_key(keys, "one")
    second, _ = create_key(keys, "two")
    with HttpServerProcess(bundles_root, "--keys", str(keys)) as srv:
        assert readyz(srv.port)[0] == 200
        revoke(keys, first.id)
        revoke(keys, second.id)
        status, body = ready_after_change(srv.port, 503)
        assert status == 503
        assert body == {
            "status": "unavailable",
            "reason": "no API key can authenticate: every key is revoked or expired",
            "libraries": ["cjk", "demo", "golden"],
            "failed": [],
        }
        # A new key makes it ready again, without a restart.
        create_key(keys, "three")
        status, body = ready_after_change(srv.port, 200)
        assert (status, body["status"]) == (200, "ready")
