"""Fixture bundles for the server tests: a generated site built with the indexer, and broken copies.

The tree ``SERVER_TREE`` (built by ``treekit.build``), with ``install_golden`` beside it, makes::

    <root>/golden/latest/<build>/   the committed early golden bundle (tests/bundle/golden/v1-early)
    <root>/demo/2.x/<build>/        demo site, version 2.x (latest): identifiers, a long handbook page,
    <root>/demo/1.x/<build>/        an Optional section, a listed page that does not exist; 1.x deprecated, LTS
    <root>/cjk/latest/<build>/      Korean, Chinese and Japanese pages

``HttpServerProcess`` runs ``docbundle serve --transport http`` as a subprocess for the HTTP tests;
``initialize`` is the raw MCP handshake request the wire-level tests send.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec
from clikit import serve_http_argv
from docbundle.bundle.manifest import MANIFEST_NAME, decode_manifest, encode_manifest
from docbundle.server.catalog import Catalog
from docbundle.server.mcp.server import create_server
from httpkit import request
from mcp import Client
from treekit import Site, Tree

HERE = Path(__file__).resolve().parent
# A v1 bundle built before optional manifest fields (routing, converter, obtained) existed, so every server
# test also checks that such a bundle keeps serving.
GOLDEN = HERE.parent / "bundle" / "golden" / "v1-early"
GOLDEN_BUILD = "20260101-573833773b18"
GOLDEN_HASH = "573833773b1832a0e0da030caf02aec1c937e203115dd83bc42a336a74f803b7"

# The damaged libraries of the ``broken_root`` fixture, and what the refusal says about each.
BROKEN = {
    "flipped": "does not match its sha256",
    "missing": "missing file(s) listed in the manifest",
    "extra": "unexpected file(s) not in the manifest",
    "future": "format_version 99 is not supported",
    "nocurrent": "no CURRENT file",
}

HANDBOOK_TOPICS = [
    "authentication", "pagination", "webhooks", "idempotency", "versioning", "sandbox", "refunds",
    "disputes", "payouts", "invoices", "subscriptions", "coupons", "taxes", "currencies", "receipts",
    "metadata", "logging", "testing", "migration", "security",
]  # fmt: skip


def handbook() -> str:
    """A long page: one section per topic, each a few paragraphs, some with code."""
    parts = ["# Handbook\n\nEverything about running the demo SDK in production.\n"]
    for i, topic in enumerate(HANDBOOK_TOPICS):
        body = (
            f"The {topic} settings control how the client behaves. "
            + f"Careful operators review {topic} before every release and document the choice. " * 6
        )
        parts.append(f"## {topic.capitalize()}\n\n{body}\n")
        if i % 4 == 0:
            parts.append(f"```python\nclient.configure({topic}=True)  # {topic}\n```\n")
        parts.append(f"### {topic.capitalize()} notes\n\n" + f"Further notes on {topic}. " * 8 + "\n")
    return "\n".join(parts)


def topic_page(topic: str) -> str:
    """A medium-sized page about one topic (the budget tests need many matching documents)."""
    lead = f"How the demo SDK handles {topic}, and which settings operators review. " * 10
    more = f"Settings for {topic} are read at start-up; operators change them with care. " * 10
    return f"# {topic.capitalize()}\n\n{lead}\n\n## {topic.capitalize()} settings\n\n{more}\n"


TOPIC_PAGES = HANDBOOK_TOPICS[:10]

DEMO_V2 = {
    "guides/install.md": "# Installation\n\nInstall the widget SDK with pip and configure the API key.\n\n"
    "## Configure the API key\n\nSet the WIDGET_API_KEY environment variable before the client starts.\n",
    "guides/hooks.md": "# Hooks\n\nUse the useEffect hook to synchronise a component with an external system.\n\n"
    "## Cleanup\n\nReturn a cleanup function from the effect so it can unsubscribe.\n\n"
    "```js\nuseEffect(() => {\n  const id = subscribe();\n  return () => unsubscribe(id);\n}, []);\n```\n",
    "guides/handbook.md": handbook(),
    "reference/tables.md": "# Tables\n\nRender rows with sap.m.Table and bind them to a JSON model.\n\n"
    "## Columns\n\nEach column of the sap.m.Table has a header and a cell template.\n",
    "reference/retries.md": "# Retries\n\nSet max_retry_after to cap how long the client waits between attempts.\n\n"
    "## Backoff\n\nThe delay doubles after every failed attempt until max_retry_after is reached.\n",
    "changelog.md": "# Changelog\n\n## 2.0\n\nThe hooks guide now covers useEffect cleanup in detail.\n",
    **{f"topics/{t}.md": topic_page(t) for t in TOPIC_PAGES},
}
DEMO_V2_LLMS = (
    """# Demo SDK

> The demo payment SDK.

## Guides

- [Installation](guides/install.md): install and configure
- [Hooks](guides/hooks.md): effects and their cleanup
- [Handbook](guides/handbook.md): running in production

## Reference

- [Tables](reference/tables.md): sap.m.Table rows
- [Retries](reference/retries.md)
- [Missing page](reference/missing.md): listed, but the file does not exist

## Topics

"""
    + "".join(f"- [{t.capitalize()}](topics/{t}.md)\n" for t in TOPIC_PAGES)
    + """
## Optional

- [Changelog](changelog.md)
"""
)
DEMO_V1 = {
    "guides/install.md": "# Installation\n\nRun the legacyInstaller script to install version one of the SDK.\n\n"
    "## Requirements\n\nVersion one needs the componentDidMount lifecycle of class components.\n",
}
DEMO_V1_LLMS = "# Demo SDK 1\n\n> Version one.\n\n## Guides\n\n- [Installation](guides/install.md)\n"
CJK = {
    "ko/widget.md": "# 결제위젯 연동하기\n\n결제위젯을 연동하는 방법을 알아봅니다. 결제 요청과 승인 과정을 설명합니다.\n\n"
    "## 결제 요청\n\n결제 요청 후 승인 과정을 거칩니다.\n",
    "zh/database.md": "# 数据库连接\n\n本文介绍如何配置数据库连接。连接池可以提高性能。\n\n## 连接池\n\n设置最大连接数。\n",
    "ja/widget.md": "# 決済ウィジェット\n\n決済ウィジェットを連携する方法を説明します。\n\n"
    "## 設定\n\nクライアントキーを設定します。\n",
}
CJK_LLMS = """# CJK Docs

> Pages in Korean, Chinese and Japanese.

## 한국어

- [결제위젯 연동하기](ko/widget.md)

## 中文

- [数据库连接](zh/database.md)

## 日本語

- [決済ウィジェット](ja/widget.md)
"""
CONFIG = """
[[library]]
id = "demo"
name = "Demo SDK"
description = "The demo payment SDK"
category = "payments"

[library.chunking]
min_words = 5

[[library.version]]
name = "2.x"
llms_txt = "demo-v2/llms.txt"
latest = true

[[library.version]]
name = "1.x"
llms_txt = "demo-v1/llms.txt"
status = "deprecated"
lts = true

[[library]]
id = "cjk"
name = "CJK Docs"
description = "Korean, Chinese and Japanese pages"
category = "i18n"
llms_txt = "cjk/llms.txt"

[library.chunking]
min_words = 3
"""

# The fixture tree the module docstring draws (the golden copy aside): its config and the sites it reads.
SERVER_TREE = Tree(
    CONFIG,
    {
        "demo-v2": Site(DEMO_V2, DEMO_V2_LLMS),
        "demo-v1": Site(DEMO_V1, DEMO_V1_LLMS),
        "cjk": Site(CJK, CJK_LLMS),
    },
)


def initialize(client: str) -> dict[str, Any]:
    """An MCP ``initialize`` request (id 1) from the client named ``client``, as a raw JSON-RPC message."""
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params(client)}


def init_params(client: str) -> dict[str, Any]:
    """The params of an ``initialize`` request from the client named ``client``."""
    return {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": client, "version": "1"},
    }


@asynccontextmanager
async def connect(catalog: Catalog, mode: Literal["auto", "legacy"] = "auto") -> AsyncIterator[Client]:
    """An in-memory client session on a server over ``catalog``; the whole test is time-boxed."""
    with anyio.fail_after(30):
        async with Client(create_server(catalog), mode=mode) as client:
            yield client


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    """Call a tool that must succeed; returns its structured content."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def catalog_over(root: Path) -> Iterator[Catalog]:
    """A fresh catalogue over ``root`` (nothing opened yet), closed when the fixture that yields from it
    (``yield from catalog_over(root)``) is torn down."""
    cat = Catalog.load(root)
    try:
        yield cat
    finally:
        cat.close()


def install_golden(root: Path, library_id: str = "golden", **library: str) -> Path:
    """Copy the golden bundle under ``root/<library_id>/latest/`` (relabelled when another id)."""
    vdir = root / library_id / "latest"
    bundle = vdir / GOLDEN_BUILD
    shutil.copytree(GOLDEN, bundle)
    (vdir / "CURRENT").write_text(GOLDEN_BUILD + "\n", encoding="ascii")
    if library_id != "golden" or library:
        # manifest.json is not in its own file list, so relabelling it keeps the bundle verifiable.
        # ``library``: other LibraryInfo fields to relabel (name, description, category).
        m = decode_manifest((bundle / MANIFEST_NAME).read_bytes())
        m = msgspec.structs.replace(m, library=msgspec.structs.replace(m.library, id=library_id, **library))
        (bundle / MANIFEST_NAME).write_bytes(encode_manifest(m))
    return bundle


def private_copy(tree: Path, tmp_path: Path) -> Path:
    """A copy of a module's bundles tree, ``tmp_path/bundles``, that one test may change."""
    root = tmp_path / "bundles"
    shutil.copytree(tree, root)
    return root


async def search_text(client: Any, **args: Any) -> tuple[dict[str, Any], str]:
    """Call search_documents (it must succeed) on an MCP SDK client: its structured content and text."""
    r = await client.call_tool("search_documents", args)
    assert not r.is_error, r.content
    assert isinstance(r.structured_content, dict)
    (block,) = r.content
    assert block.type == "text"
    return r.structured_content, block.text


def flip_byte(path: Path, offset: int = 100) -> None:
    """Change one byte of a file in place (same size, different sha256)."""
    data = bytearray(path.read_bytes())
    data[offset % len(data)] ^= 0xFF
    path.write_bytes(bytes(data))


def set_format_version(bundle: Path, version: int) -> None:
    """Rewrite a bundle's manifest with another format_version."""
    path = bundle / MANIFEST_NAME
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace('"format_version": 1,', f'"format_version": {version},', 1), encoding="utf-8"
    )


class HttpServerProcess:
    """``docbundle serve --transport http --port 0`` as a subprocess, its stderr lines collected.

    Use as a context manager: entering starts the server and waits (bounded) for the line that gives
    its URL; leaving stops it with SIGINT and checks it exited cleanly.
    """

    def __init__(self, bundles: Path, *options: str, startup_timeout: float = 30) -> None:
        self.cmd = serve_http_argv(bundles, *options)
        self.startup_timeout = startup_timeout
        self.url = ""
        self.returncode: int | None = None
        self._lines: list[str] = []
        self._cond = threading.Condition()
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self.url.split(":")[2].split("/")[0])

    def __enter__(self) -> HttpServerProcess:
        self._proc = subprocess.Popen(self.cmd, stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()
        try:
            line = self.wait_for(lambda s: "over streamable HTTP at " in s, self.startup_timeout)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.url = line.split(" at ")[1].split()[0]
        return self

    def _pump(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            with self._cond:
                self._lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def lines(self) -> list[str]:
        """Every stderr line so far."""
        with self._cond:
            return list(self._lines)

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 10) -> str:
        """The first stderr line matching ``predicate``, waiting at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = next((x for x in self._lines if predicate(x)), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                exited = self._proc is not None and self._proc.poll() is not None
                if left <= 0 or (exited and not (self._reader and self._reader.is_alive())):
                    tail = "\n".join(self._lines[-20:])
                    raise AssertionError(
                        f"no matching server log line within {timeout} s; last lines:\n{tail}"
                    )
                self._cond.wait(min(left, 0.5))

    def __exit__(self, *exc: object) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
        try:
            self.returncode = self._proc.wait(timeout=15)
        finally:
            if self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait(timeout=5)
            if self._reader is not None:
                self._reader.join(timeout=5)
            if self._proc.stderr is not None:
                self._proc.stderr.close()


def readyz(port: int) -> tuple[int, dict[str, Any]]:
    """``GET /readyz`` on a server at 127.0.0.1:``port``: the status and the JSON body."""
    r = request("GET", port, path="/readyz", timeout=10)
    return r.status_code, r.json()
