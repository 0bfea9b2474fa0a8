"""``docbundle serve`` over stdio as a real subprocess: every line gets an answer, and the server exits
when its client does (issue 9 items 3 and 11).

Some servers here run under ``attackkit.LONG_BUDGET``, the real CLI with the search time budget raised,
so that the heaviest accepted search on the ``repeat`` bundle is still running when the client leaves.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import IO, Any

import pytest
from attackkit import (
    LONG_BUDGET,
    REPEAT_TREE,
    SEARCH_STARTED,
    cli_script,
    phrase_query,
    wait_for_search,
)
from serverkit import initialize
from treekit import build

# The longest query the server accepts (service.MAX_QUERY_CHARS), spelled out so that the attack
# is the same against code without the bound.
QUERY_CHARS = 2000
EXIT_GUARD = 30  # seconds: "exits instead of hanging" (the drain is a few seconds)
INIT = initialize("t")


@pytest.fixture(scope="module")
def repeat_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("repeat-stdio")
    return build(base / "site" / "repeat.toml", base / "bundles", REPEAT_TREE).root


def heavy_call(request_id: int) -> dict[str, Any]:
    """The heaviest search the bounds accept on the ``repeat`` bundle."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {
            "name": "search_documents",
            "arguments": {"query": phrase_query(QUERY_CHARS), "libraryId": "repeat"},
        },
    }


# The CLI with the search time budget raised to argv[1] seconds and the drain after the client leaves
# cut to half a second, so that the heavy search outlasts the drain however fast the engine gets.
SHORT_DRAIN = cli_script("import docbundle.server.stdio as stdio", "stdio.DRAIN_SECONDS = 0.5")


def serve(
    bundles: Path, *, budget: float | None = None, script: str = LONG_BUDGET, started: Path | None = None
) -> subprocess.Popen[bytes]:
    """``docbundle serve`` (stdio) on ``bundles``, logging at INFO on stderr; with a ``budget``, run by
    ``script``, which creates ``started`` as a search begins."""
    args = ["serve", "--bundles", str(bundles), "--log-level", "info"]
    cmd = [sys.executable, "-c", script, str(budget), *args] if budget else [
        sys.executable, "-m", "docbundle.server", *args
    ]  # fmt: skip
    env = {**os.environ, **({SEARCH_STARTED: str(started)} if started else {})}
    return subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )


def send(stdin: IO[bytes], message: dict[str, Any] | bytes) -> None:
    data = message if isinstance(message, bytes) else json.dumps(message).encode()
    stdin.write(data + b"\n")
    stdin.flush()


def receive(stdout: IO[bytes], timeout: float = 20) -> dict[str, Any]:
    """The next reply line, waiting at most ``timeout`` seconds (an answer instead of silence)."""
    ready, _, _ = select.select([stdout], [], [], timeout)
    assert ready, f"no reply within {timeout} s"
    line = stdout.readline()
    assert line, "the server closed stdout"
    reply: dict[str, Any] = json.loads(line)
    return reply


def finish(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    """Wait (bounded) for the server to exit; its exit code and stderr."""
    try:
        code = proc.wait(timeout=EXIT_GUARD)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(
            f"the stdio server was still running {EXIT_GUARD} s after its client left"
        ) from None
    assert proc.stderr is not None and proc.stdout is not None
    stderr = proc.stderr.read().decode("utf-8", "replace")
    proc.stderr.close()
    proc.stdout.close()
    return code, stderr


def test_every_bad_line_gets_an_answer_and_serving_goes_on(golden_root: Path) -> None:
    proc = serve(golden_root)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        send(proc.stdin, INIT)
        assert receive(proc.stdout)["id"] == 1
        send(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        bad: list[tuple[bytes, int]] = [
            (b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{"q":"\\ud800"}}}', -32700),
            (b'{"jsonrpc":"2.0","id":3,"method":"tools/li', -32700),  # truncated JSON
            (b"\xff\xfe not utf-8 \xed\xa0\x80", -32700),  # invalid UTF-8, an encoded lone surrogate
            (b'{"id": 4, "hello": "world"}', -32600),  # JSON, but no JSON-RPC message
        ]  # fmt: skip
        for line, code in bad:
            send(proc.stdin, line)
            answer = receive(proc.stdout)
            assert answer["error"]["code"] == code, (line, answer)
            assert answer["id"] == (4 if code == -32600 else None)
        send(
            proc.stdin,
            {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "list_libraries"}},
        )
        answer = receive(proc.stdout)
        assert answer["id"] == 5 and "golden" in answer["result"]["content"][0]["text"]
    finally:
        proc.stdin.close()
        code, _ = finish(proc)
    assert code == 0


def test_closing_stdin_mid_search_ends_the_server(repeat_root: Path, tmp_path: Path) -> None:
    started = tmp_path / "search-started"
    proc = serve(repeat_root, budget=600, script=SHORT_DRAIN, started=started)
    assert proc.stdin is not None and proc.stdout is not None
    send(proc.stdin, INIT)
    assert receive(proc.stdout)["id"] == 1
    send(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    send(proc.stdin, heavy_call(2))
    wait_for_search(started, proc)  # it would run for the 600 s budget
    proc.stdin.close()
    code, stderr = finish(proc)
    assert code == 0
    # The drain ran out and the search was cancelled: the engine saw the cancel and stopped.
    assert "cancelled by its caller" in stderr, stderr[-2000:]


CLIENT = """
import json, subprocess, sys, time
server = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
print(server.pid, flush=True)
for message in ({init}, {{"jsonrpc": "2.0", "method": "notifications/initialized"}}, {call}):
    server.stdin.write(json.dumps(message).encode() + b"\\n")
    server.stdin.flush()
time.sleep(600)
"""


def test_a_killed_client_takes_its_server_down(repeat_root: Path, tmp_path: Path) -> None:
    started = tmp_path / "search-started"
    server_cmd = [sys.executable, "-c", LONG_BUDGET, "600", "serve", "--bundles", str(repeat_root)]
    script = textwrap.dedent(CLIENT).format(init=repr(INIT), call=repr(heavy_call(2)))
    client = subprocess.Popen(
        [sys.executable, "-c", script, *server_cmd],
        stdout=subprocess.PIPE,
        env={**os.environ, SEARCH_STARTED: str(started)},  # the server inherits it
    )
    assert client.stdout is not None
    server_pid = int(client.stdout.readline())
    wait_for_search(started, client)  # initialised and searching
    client.send_signal(signal.SIGKILL)
    client.wait(timeout=10)
    client.stdout.close()
    _assert_exits(server_pid, "its killed client")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie counts as gone: it has exited, its parent is just not reaping)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _assert_exits(pid: int, outlived: str) -> None:
    """Wait (at most ``EXIT_GUARD`` seconds) for the stdio server ``pid`` to exit; if it does not, kill it
    and fail, saying it outlived ``outlived``."""
    deadline = time.monotonic() + EXIT_GUARD
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"the stdio server outlived {outlived} by {EXIT_GUARD} s")


MIDDLE = """\
import subprocess, sys
stdin, stdout = int(sys.argv[1]), int(sys.argv[2])
server = subprocess.Popen(sys.argv[3:], stdin=stdin, stdout=stdout, pass_fds=(stdin, stdout))
print(server.pid, flush=True)
server.wait()
"""


def test_a_server_whose_parent_died_exits_though_its_stdin_stays_open(repeat_root: Path) -> None:
    # Its stdin is a pipe this test holds open, so no end of file tells it: only its parent's death
    # (``process.watch_parent``) does.
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    serve = [sys.executable, "-c", "import sys; from docbundle.server.cli import main; sys.exit(main())"]
    fds = [str(stdin_r), str(stdout_w)]
    middle = subprocess.Popen(
        [sys.executable, "-c", MIDDLE, *fds, *serve, "serve", "--bundles", str(repeat_root)],
        stdout=subprocess.PIPE,
        pass_fds=(stdin_r, stdout_w),
    )
    os.close(stdin_r)
    os.close(stdout_w)
    try:
        assert middle.stdout is not None
        server_pid = int(middle.stdout.readline())
        os.write(stdin_w, json.dumps(INIT).encode() + b"\n")
        ready, _, _ = select.select([stdout_r], [], [], EXIT_GUARD)
        assert ready and b'"result"' in os.read(stdout_r, 65536)  # it serves: its parent is watched
        middle.kill()
        middle.wait(timeout=10)
        _assert_exits(server_pid, "its parent")
    finally:
        os.close(stdin_w)
        os.close(stdout_r)
        if middle.stdout is not None:
            middle.stdout.close()
