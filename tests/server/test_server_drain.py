"""Requests in flight are answered before the server exits (issue 13 item 4): on the end of stdin and on
SIGTERM over stdio (a subprocess), and on SIGTERM over HTTP (real HTTP on 127.0.0.1).

The slow call is the heaviest search the bounds accept on the ``repeat`` bundle, run by the real CLI
with the search time budget set to ``SLOW`` seconds (``attackkit.LONG_BUDGET``): it is still running
when the client leaves or the signal comes (the signal is sent once the server says a search started),
and answers (``stopped``) well within the drain.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpkit
import httpx2
import pytest
from attackkit import LONG_BUDGET, REPEAT_TREE, SEARCH_STARTED, phrase_query, wait_for_search
from serverkit import HttpServerProcess, install_golden
from test_server_stdio import EXIT_GUARD, INIT, QUERY_CHARS, receive, send
from treekit import build

SLOW = 1.0  # seconds the slow search runs (it would run ~3 s); the drain (stdio.DRAIN_SECONDS) is 3 s
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``repeat`` library (slow searches) beside the golden one (fast ones)."""
    base = tmp_path_factory.mktemp("drain")
    install_golden(base / "bundles")
    return build(base / "site" / "repeat.toml", base / "bundles", REPEAT_TREE).root


def call(request_id: int, library: str) -> dict[str, Any]:
    query = phrase_query(QUERY_CHARS) if library == "repeat" else "install"
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "search_documents", "arguments": {"query": query, "libraryId": library}},
    }


def stdio_cmd(root: Path) -> list[str]:
    return [sys.executable, "-c", LONG_BUDGET, str(SLOW), "serve", "--bundles", str(root)]


def answers(stdout: bytes) -> dict[Any, dict[str, Any]]:
    """The JSON-RPC answers on stdout, by id."""
    out = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    return {a["id"]: a for a in out}


def answered(answer: dict[str, Any] | None) -> bool:
    return answer is not None and "result" in answer and not answer["result"].get("isError")


def test_piped_requests_are_all_answered_when_stdin_ends(root: Path) -> None:
    # printf '<init>\n<initialized>\n<call>\n' | docbundle serve: stdin ends as soon as it is read.
    lines = [INIT, INITIALIZED, call(2, "golden"), call(3, "repeat"), call(4, "golden")]
    piped = b"".join(json.dumps(m).encode() + b"\n" for m in lines)
    done = subprocess.run(stdio_cmd(root), input=piped, capture_output=True, timeout=EXIT_GUARD, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    got = answers(done.stdout)
    assert sorted(got) == [1, 2, 3, 4], (sorted(got), done.stderr[-2000:])
    assert all(answered(got[i]) for i in (2, 3, 4)), got
    assert got[3]["result"]["structuredContent"]["stopped"] is True  # the slow one ran its budget


def test_sigterm_answers_the_running_call_then_exits_over_stdio(root: Path, tmp_path: Path) -> None:
    started = tmp_path / "search-started"
    proc = subprocess.Popen(
        stdio_cmd(root),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, SEARCH_STARTED: str(started)},
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        send(proc.stdin, INIT)
        assert receive(proc.stdout)["id"] == 1
        send(proc.stdin, INITIALIZED)
        send(proc.stdin, call(2, "repeat"))
        wait_for_search(started, proc)  # it runs for SLOW seconds
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=EXIT_GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    assert answered(answers(out).get(2)), (out[-500:], err[-2000:])
    assert b"SIGTERM" in err


def test_sigterm_answers_the_running_call_then_exits_over_http(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = tmp_path / "search-started"
    monkeypatch.setenv(SEARCH_STARTED, str(started))  # the server inherits it
    server = HttpServerProcess(root, "--no-auth")
    server.cmd = [sys.executable, "-c", LONG_BUDGET, str(SLOW), *server.cmd[3:]]
    result: list[httpx2.Response | BaseException] = []

    def slow_call() -> None:
        try:
            result.append(
                httpkit.request(
                    "POST",
                    server.url,
                    content=json.dumps(call(2, "repeat")),
                    headers={
                        "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream",
                    },
                    timeout=60,
                )
            )
        except BaseException as exc:  # the test below says what went wrong
            result.append(exc)

    with server:
        caller = threading.Thread(target=slow_call)
        caller.start()
        assert server._proc is not None
        wait_for_search(started, server._proc)  # it runs for SLOW seconds
        server._proc.send_signal(signal.SIGTERM)
        caller.join(timeout=EXIT_GUARD)
        server._proc.wait(timeout=EXIT_GUARD)
    assert server.returncode == 0
    assert len(result) == 1 and isinstance(result[0], httpx2.Response), result
    response = result[0]
    assert response.status_code == 200, response.text[:300]
    assert response.json()["result"]["structuredContent"]["stopped"] is True
