"""Every client configuration and code snippet of the docs runs as written (issue 35, finding 4).

A new user copied the VS Code snippet and got a server with 0 libraries (it named
``${workspaceFolder}/bundles`` while the quick start builds into the per-user folder), and Cursor's bare
``"command": "docbundle"`` found no command outside the virtual environment. So each snippet in README.md
and docs/*.md that a client or a person runs carries a marker on the line before its fence,
``<!-- recipe: KIND -->``, and this module runs it with KIND's runner, after the quick start's own build
(``docbundle-index build --config bundles/libraries.toml --library docbundle``) into a fresh home
folder, so the per-user folder case is the real one, with both distributions freshly installed into a
new virtual environment (``_fresh_install``: built from this checkout, offline):

- ``config``: a client's JSON (``mcpServers`` or VS Code's ``servers``). Each server in it is started as
  the client would (``command``, ``args``, ``env``, a ``PATH`` without the virtual environment), or
  reached at its ``url`` with its ``headers`` (the client's ``${env:NAME}`` and ``${input:ID}`` filled
  in), and the MCP SDK's ``Client`` lists the tools, the libraries, and runs one search. Two commands
  cannot run here and get the nearest honest check: ``npx mcp-remote`` (no npm registry offline: the
  header the bridge would send goes to the URL from the SDK's client) and ``docker run`` (its arguments
  after the image go to ``docbundle``, the image's entry point, over the folder its volume would hold;
  ``nox -s image`` runs the image itself).
- ``claude-code``: a ``claude mcp add`` line, its words split by bash as the shell would, then run as
  that server (after ``--``) or reached at that URL with its ``--header``.
- ``python``: the code, as a script, with the test's interpreter (where the SDK is installed).
- ``shell``: each ``$`` command in bash with the virtual environment on ``PATH`` (as when activated), a
  timeout, and ``-f`` curls: exit 0, no JSON-RPC error, and a printed path that exists.

What a snippet leaves to its reader is a placeholder the docs name, filled in here: the command's full
path, the server URL (``http://127.0.0.1:8000``: the no-auth server ``nox -s serve`` starts;
``https://docs.example.com``: a server with keys), and the example key. A snippet still holding
``/path/to/`` or ``example.com`` after that fails, and so does a client snippet without a marker
(``test_every_client_snippet_has_a_runner``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import sysconfig
from collections.abc import Iterator, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpkit
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from serverkit import HttpServerProcess

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The PATH a client started from a desktop has: not the virtual environment's.
CLIENT_PATH = "/usr/bin:/bin"
# Seconds a snippet, a command or a client's calls may take before the test fails: a bound on a hang.
RUN_SECONDS = 60

MARKED = re.compile(r"^<!-- recipe: ([a-z-]+) -->\n```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
FENCED = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"`([^`\n]+)`")
# What makes a snippet a client's: it configures one, is client code, or calls the MCP endpoint.
CLIENT_SNIPPET = re.compile(
    r"mcpServers|context_servers|\"servers\"\s*:|\bfrom mcp\b|\bimport mcp\b|claude mcp |curl [^\n]*/mcp"
    r"|\"command\"\s*:\s*\"[^\"]*docbundle"
)
# Placeholders the docs leave to their reader; anything else of this shape left in a snippet fails.
UNFILLED = re.compile(r"/path/to/|example\.com")
EXAMPLE_KEY = "3f9c0a1b2d4e.q8Zs2d..."
VARIABLE = re.compile(r"\$\{(?:(env|input):)?([\w-]+)\}")
# One search whose answer is in the demo library (docs/bundle-format.md).
SEARCH = {"libraryId": "docbundle", "query": "content hash"}


@dataclass(frozen=True)
class Recipe:
    """One marked snippet: where it is, its runner's kind, and its text."""

    file: str
    line: int
    kind: str
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.kind}"


def _recipes() -> list[Recipe]:
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in MARKED.finditer(text):
            line = text.count("\n", 0, m.start()) + 2
            found.append(Recipe(path.relative_to(ROOT).as_posix(), line, m.group(1), m.group(3)))
    return found


RECIPES = _recipes()


@dataclass(frozen=True)
class Setting:
    """What the runners share: the fresh home's environment, the servers, the key and what fills the
    placeholders."""

    env: dict[str, str]
    bin: Path
    key: str
    bundles: Path
    workspace: Path
    fill: dict[str, str]

    def client_env(self, **more: str) -> dict[str, str]:
        """The environment of a process a client starts: the fresh home, a PATH without the venv."""
        return {**self.env, "PATH": CLIENT_PATH, **more}

    def filled(self, text: str) -> str:
        for placeholder, value in self.fill.items():
            text = text.replace(placeholder, value)
        left = UNFILLED.findall(text)
        assert left == [], f"a placeholder this test does not know: {left} in\n{text}"
        return text


def _fresh_env(home: Path) -> dict[str, str]:
    """This process's environment with a fresh home and none of the folders that would override it."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DOCBUNDLE_", "XDG_")) and k not in {"HOME", "VIRTUAL_ENV", "PYTHONPATH"}
    }
    return env | {"HOME": str(home), "DOCBUNDLE_EMBED": "0"}


def _run(argv: list[str], env: Mapping[str, str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=dict(env), capture_output=True, text=True, timeout=RUN_SECONDS, check=False, **kw
    )


def _fresh_install(venv: Path, env: Mapping[str, str]) -> Path:
    """``pip install ./server ./indexer`` into a new virtual environment; its scripts folder.

    docbundle's two distributions are built from this checkout and installed (no index, no network);
    their dependencies are this test environment's, seen through a ``.pth`` file, so nothing is
    downloaded. The commands, their scripts and their paths are then a user's, not the editable
    install's."""
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    where = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], env)
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    Path(where.stdout.strip(), "dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps"]
    offline = ["--no-index", "--no-build-isolation", "--no-cache-dir"]
    installed = _run([*pip, *offline, str(ROOT / "server"), str(ROOT / "indexer")], env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    imported = _run([str(python), "-c", "import docbundle.server as s; print(s.__file__)"], env)
    assert Path(imported.stdout.strip()).is_relative_to(venv), imported.stdout + imported.stderr
    return venv / "bin"


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setting]:
    """The quick start in a fresh home (the build into the per-user folder, a key), and two servers:
    ``nox -s serve``'s (no keys, in place of port 8000) and a shared one with keys."""
    home = tmp_path_factory.mktemp("home")
    env = _fresh_env(home)
    bin_ = _fresh_install(tmp_path_factory.mktemp("venv"), env)
    build = [
        str(bin_ / "docbundle-index"),
        "build",
        "--config",
        "bundles/libraries.toml",
        "--library",
        "docbundle",
    ]
    built = _run(build, env, cwd=ROOT)
    assert built.returncode == 0, built.stderr
    made = _run([str(bin_ / "docbundle"), "keys", "create", "--name", "recipes"], env)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    # The build's summary names the folder it wrote: the per-user one of the fresh home.
    bundles = Path(re.findall(r"\), in (\S+)$", built.stdout + built.stderr, re.MULTILINE)[-1])
    assert bundles.is_relative_to(home), bundles
    keys = home / ".config" / "docbundle" / "keys.toml"
    # VS Code's ${workspaceFolder}: a clone, whose bundles/ holds the catalogue but no build.
    workspace = tmp_path_factory.mktemp("workspace")
    (workspace / "bundles").mkdir()
    with (
        HttpServerProcess(bundles, "--no-auth") as open_server,
        HttpServerProcess(bundles, "--keys", str(keys)) as keyed,
    ):
        yield Setting(
            env=env,
            bin=bin_,
            key=key,
            bundles=bundles,
            workspace=workspace,
            fill={
                "/path/to/venv/bin/docbundle": str(bin_ / "docbundle"),
                "http://127.0.0.1:8000": open_server.url.removesuffix("/mcp"),
                "https://docs.example.com": keyed.url.removesuffix("/mcp"),
                EXAMPLE_KEY: key,
            },
        )


async def _answers(client: Client) -> None:
    """The tools are listed, the demo library is served, and a search in it finds its page."""
    tools = await client.list_tools()
    assert "search_documents" in [tool.name for tool in tools.tools]
    listed = await client.call_tool("list_libraries", {})
    assert not listed.is_error, listed.content
    assert listed.structured_content is not None
    assert [lib["id"] for lib in listed.structured_content["libraries"]] == ["docbundle"], listed.content
    found = await client.call_tool("search_documents", SEARCH)
    assert not found.is_error, found.content
    assert found.structured_content is not None and found.structured_content["hits"], found.content
    assert found.structured_content["hits"][0]["libraryId"] == "docbundle"


async def _over_stdio(command: str, args: list[str], env: dict[str, str]) -> None:
    server = StdioServerParameters(command=command, args=args, env=env)
    async with asyncio.timeout(RUN_SECONDS), Client(server) as client:
        await _answers(client)


async def _over_http(url: str, headers: Mapping[str, str]) -> None:
    async with asyncio.timeout(RUN_SECONDS), AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpkit.client(headers=headers))
        client = await stack.enter_async_context(Client(streamable_http_client(url, http_client=http)))
        await _answers(client)


def _expand(value: str, env: Mapping[str, str], inputs: Mapping[str, str]) -> str:
    """A client's variables: ``${env:NAME}`` (Cursor, VS Code), ``${input:ID}`` (VS Code's prompt),
    ``${NAME}`` (mcp-remote's, from the entry's ``env``) and ``${workspaceFolder}`` (VS Code)."""

    def one(m: re.Match[str]) -> str:
        scope, name = m.group(1), m.group(2)
        if scope == "input":
            assert name in inputs, f"${{input:{name}}} names no promptString input"
            return inputs[name]
        return env[name]

    return VARIABLE.sub(one, value)


def _run_config(recipe: Recipe, setting: Setting) -> None:
    config = json.loads(setting.filled(recipe.text))
    servers = config.get("mcpServers", config.get("servers"))
    assert isinstance(servers, dict) and servers, "a client configuration with no server"
    # What a person types at VS Code's prompt is the key.
    inputs = {i["id"]: setting.key for i in config.get("inputs", []) if i.get("type") == "promptString"}
    for entry in servers.values():
        env = setting.client_env(
            DOCBUNDLE_KEY=setting.key, workspaceFolder=str(setting.workspace), **entry.get("env", {})
        )
        if "url" in entry:
            headers = {k: _expand(v, env, inputs) for k, v in entry.get("headers", {}).items()}
            asyncio.run(_over_http(_expand(entry["url"], env, inputs), headers))
            continue
        command, args = entry["command"], [_expand(a, env, inputs) for a in entry.get("args", [])]
        if command == "npx":
            _bridge(args)
        elif command == "docker":
            _docker(args, setting)
        else:
            assert entry.get("type", "stdio") == "stdio", entry
            served = setting.client_env(
                **{k: _expand(v, env, inputs) for k, v in entry.get("env", {}).items()}
            )
            asyncio.run(_over_stdio(_expand(command, env, inputs), args, served))


def _bridge(args: list[str]) -> None:
    """``npx -y mcp-remote URL --header NAME:VALUE``: the bridge's URL and headers, sent by the SDK."""
    assert args[:2] == ["-y", "mcp-remote"], args
    url, rest = args[2], args[3:]
    headers = {}
    while rest:
        option, value, *rest = rest
        assert option == "--header", rest
        name, _, text = value.partition(":")
        headers[name.strip()] = text.strip()
    asyncio.run(_over_http(url, headers))


def _docker(args: list[str], setting: Setting) -> None:
    """``docker run -i ... IMAGE ARGS``: stdin kept open (stdio), the bundles volume mounted at /bundles
    (the image's ``DOCBUNDLE_BUNDLES``), and ARGS run by ``docbundle``, the image's entry point."""
    assert args[0] == "run" and "-i" in args, f"stdio needs docker run -i: {args}"
    assert any(a.endswith(":/bundles:ro") or a.endswith(":/bundles") for a in args), args
    image = args.index("docbundle")
    env = setting.client_env(DOCBUNDLE_BUNDLES=str(setting.bundles))
    asyncio.run(_over_stdio(setting.fill["/path/to/venv/bin/docbundle"], args[image + 1 :], env))


def _commands(text: str) -> list[str]:
    """The ``$`` commands of a console block, continuation lines joined."""
    commands: list[str] = []
    for line in text.replace("\\\n", " ").splitlines():
        if line.startswith("$ "):
            commands.append(line[2:])
        else:
            assert commands and not line.strip(), f"output lines are not run: {line!r}"
    return commands


def _run_claude_code(recipe: Recipe, setting: Setting) -> None:
    """``claude mcp add [OPTIONS] NAME (-- COMMAND ARGS | URL)``, its words as bash gives them."""
    for command in _commands(setting.filled(recipe.text)):
        shim = "claude() { printf '%s\\0' \"$@\"; }\n" + command
        split = _run(["bash", "-c", shim], setting.client_env(DOCBUNDLE_KEY=setting.key))
        assert split.returncode == 0, split.stderr
        words = split.stdout.split("\0")[:-1]
        assert words[:2] == ["mcp", "add"], words
        words, tail = words[2:], []
        if "--" in words:
            words, tail = words[: words.index("--")], words[words.index("--") + 1 :]
        options: dict[str, list[str]] = {}
        positional = []
        while words:
            word, *words = words
            if word.startswith("-"):
                value, *words = words
                options.setdefault(word, []).append(value)
            else:
                positional.append(word)
        if tail:
            assert len(positional) == 1 and options.get("--transport", ["stdio"]) == ["stdio"], positional
            asyncio.run(_over_stdio(tail[0], tail[1:], setting.client_env()))
        else:
            _name, url = positional
            assert options.get("--transport") == ["http"], options
            headers = dict(h.split(":", 1) for h in options.get("--header", []))
            asyncio.run(_over_http(url, {k.strip(): v.strip() for k, v in headers.items()}))


def _run_python(recipe: Recipe, setting: Setting, tmp_path: Path) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(setting.filled(recipe.text), encoding="utf-8")
    ran = _run(
        [str(setting.bin / "python"), str(script)],
        setting.client_env(DOCBUNDLE_KEY=setting.key),
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "docbundle" in ran.stdout, ran.stdout


def _no_rpc_error(out: str) -> None:
    """A JSON (or event-stream) answer holds no JSON-RPC error and no tool error."""
    for chunk in (line.removeprefix("data: ") for line in out.splitlines()):
        try:
            answer = json.loads(chunk)
        except ValueError:
            continue
        if isinstance(answer, dict):
            assert "error" not in answer, answer
            assert not answer.get("result", {}).get("isError"), answer


def _run_shell(recipe: Recipe, setting: Setting, tmp_path: Path) -> None:
    env = setting.client_env(DOCBUNDLE_KEY=setting.key, PATH=f"{setting.bin}:{CLIENT_PATH}")
    for command in _commands(setting.filled(recipe.text)):
        ran = _run(["bash", "-c", command], env, cwd=tmp_path)
        assert ran.returncode == 0, f"{command}\n{ran.stdout}{ran.stderr}"
        out = ran.stdout.strip()
        assert out, f"{command} printed nothing"
        if out.startswith("/"):
            assert Path(out).exists(), out
        assert out != "None", command
        _no_rpc_error(out)


RUNNERS = {"config", "claude-code", "python", "shell"}


@pytest.mark.parametrize("recipe", RECIPES, ids=str)
def test_the_recipe_runs_as_written(recipe: Recipe, setting: Setting, tmp_path: Path) -> None:
    if recipe.kind == "config":
        _run_config(recipe, setting)
    elif recipe.kind == "claude-code":
        _run_claude_code(recipe, setting)
    elif recipe.kind == "python":
        _run_python(recipe, setting, tmp_path)
    else:
        assert recipe.kind == "shell", f"{recipe}: no runner for this kind (one of {sorted(RUNNERS)})"
        _run_shell(recipe, setting, tmp_path)


def test_every_client_snippet_has_a_runner() -> None:
    """A client's configuration or code in the docs without a marker would go untested: it fails here,
    and so does a configuration written inline (it cannot be marked: make it a block)."""
    unmarked, inline = [], []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        marked = {m.start(2) - len("```") for m in MARKED.finditer(text)}
        for m in FENCED.finditer(text):
            if CLIENT_SNIPPET.search(m.group(2)) and m.start() not in marked:
                unmarked.append(f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}")
        inline += [
            f"{path.name}: {s}" for s in INLINE.findall(text) if '"mcpServers"' in s or '"servers"' in s
        ]
    assert unmarked == [], f"client snippets with no <!-- recipe: KIND --> marker: {unmarked}"
    assert inline == [], f"client configurations written inline, which no test runs: {inline}"


def test_the_docs_show_each_client_and_each_runner_has_a_recipe() -> None:
    """The recipes the issue asked for are there: each client, Python client code over stdio and HTTP,
    and curl; and no marker names a runner that does not exist."""
    assert {r.kind for r in RECIPES} == RUNNERS, sorted({r.kind for r in RECIPES})
    texts = "\n".join(r.text for r in RECIPES)
    for needle in (
        "mcpServers",
        '"servers"',
        "claude mcp add",
        "StdioServerParameters",
        "streamable_http_client",
    ):
        assert needle in texts, needle
    assert "curl " in texts and '"type": "stdio"' in texts and '"type": "http"' in texts
