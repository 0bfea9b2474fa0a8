"""The Dockerfile, compose.yaml and the Kubernetes example of docs/deployment.md say what the server
really does (issue 34): no docker here, the files are read and their commands parsed by the real
``docbundle`` parser. `nox -s image` (tests/image/smoke.py) builds and runs the image itself."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import subprocess
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest
import yaml
from docbundle.server.cli import _parser
from noxfilekit import load_noxfile

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENT = ROOT / "docs" / "deployment.md"
ROOT_USERS = {"", "0", "root"}


def instructions(text: str) -> list[tuple[str, str]]:
    """A Dockerfile's instructions in order: (INSTRUCTION, its arguments), continuations joined and
    comments dropped."""
    joined = re.sub(r"\\\n(?:[ \t]*(?:#[^\n]*)?\n)*", " ", text)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def runtime_stage() -> list[tuple[str, str]]:
    """The instructions of the Dockerfile's last stage (the image that is published)."""
    steps = instructions((ROOT / "Dockerfile").read_text(encoding="utf-8"))
    last = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[last:]


def build_stages() -> list[tuple[str, str]]:
    """The instructions before the last stage: the global ARGs and the build stage."""
    steps = instructions((ROOT / "Dockerfile").read_text(encoding="utf-8"))
    last = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[:last]


def one(stage: list[tuple[str, str]], word: str) -> str:
    """The arguments of the stage's last ``word`` instruction (the one that counts)."""
    found = [rest for w, rest in stage if w == word]
    assert found, f"the Dockerfile's runtime stage has no {word}"
    return found[-1]


def exposed_port() -> int:
    ports = one(runtime_stage(), "EXPOSE").split()
    assert len(ports) == 1, f"EXPOSE {ports}: the image serves one port"
    return int(ports[0].split("/")[0])


def serve(argv: list[str]) -> Namespace:
    """``argv`` parsed by the real ``docbundle`` parser, as the image's entry point would run it."""
    try:
        return _parser().parse_args(argv)
    except SystemExit as e:
        raise AssertionError(f"docbundle refuses {shlex.join(argv)!r}") from e


def test_the_image_runs_as_its_own_non_root_user() -> None:
    stage = runtime_stage()
    user = one(stage, "USER").split(":")[0]
    assert user not in ROOT_USERS
    made = re.search(r"useradd\b[^&]*--uid (\d+)[^&]* (\w+)\s", one(stage, "RUN") + " ")
    assert made and user in made.groups(), f"USER {user} is not the user the image creates: {made}"


def test_the_default_command_serves_http_on_the_exposed_port_to_other_machines() -> None:
    stage = runtime_stage()
    entry, cmd = json.loads(one(stage, "ENTRYPOINT")), json.loads(one(stage, "CMD"))
    assert entry == ["docbundle"]
    args = serve(cmd)
    assert (args.command, args.transport, args.port) == ("serve", "http", exposed_port())
    assert args.host == "0.0.0.0", "inside a container the server must listen beyond loopback"
    assert not args.no_auth, "the image's default must require API keys"


def test_docker_run_image_serve_is_the_stdio_entry_point() -> None:
    """`docker run -i IMAGE serve` (the entry point plus `serve`) speaks MCP over stdio."""
    assert json.loads(one(runtime_stage(), "ENTRYPOINT")) == ["docbundle"]
    assert serve(["serve"]).transport == "stdio"


def test_the_health_check_asks_healthz_on_the_exposed_port() -> None:
    check = one(runtime_stage(), "HEALTHCHECK")
    assert "/healthz" in check
    assert re.search(rf"'127\.0\.0\.1', {exposed_port()}\b", check), check


def test_bundles_are_a_volume_and_keys_a_folder() -> None:
    """The environment points the server at the volume and at a keys folder (the file is replaced on
    revocation, so a folder is mounted, never the file)."""
    stage = runtime_stage()
    env = dict(
        shlex.split(pair)[0].split("=", 1) for w, rest in stage if w == "ENV" for pair in shlex.split(rest)
        if "=" in pair
    )  # fmt: skip
    assert env["DOCBUNDLE_BUNDLES"] == "/bundles"
    assert env["DOCBUNDLE_KEYS"].startswith("/keys/")
    assert "/bundles" in json.loads(one(stage, "VOLUME"))
    assert "PYTHONDONTWRITEBYTECODE" in env, "a read-only root: Python must not try to write bytecode"


def test_the_semantic_extra_is_a_build_argument_off_by_default() -> None:
    build = build_stages()
    assert ("ARG", 'EXTRAS=""') in build
    extras = re.search(r"^semantic = ", (ROOT / "server" / "pyproject.toml").read_text(), re.M)
    assert extras, "the semantic extra the build argument names is gone from server/pyproject.toml"


def test_pip_settings_stay_in_the_build_stage() -> None:
    """The builder's PIP_* arguments (a mirror, a proxy's host) and pip itself are not in the image."""
    declared = [rest for w, rest in build_stages() if w == "ARG" and rest.startswith("PIP_")]
    assert "PIP_INDEX_URL" in declared
    assert not [rest for w, rest in runtime_stage() if w in ("ARG", "ENV") and "PIP_" in rest]
    assert "--mount=type=secret,id=pip_cert" in " ".join(rest for w, rest in build_stages() if w == "RUN")


def compose_service() -> dict[str, Any]:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    served = [s for s in compose["services"].values() if not s.get("profiles")]
    assert len(served) == 1, "compose.yaml starts one server"
    return served[0]


def test_compose_serves_the_volume_read_only_from_a_read_only_container() -> None:
    service = compose_service()
    assert service["read_only"] is True
    bundles = [v for v in service["volumes"] if isinstance(v, dict) and v["target"] == "/bundles"]
    assert bundles and bundles[0]["read_only"] is True and bundles[0]["type"] == "volume"
    assert [v for v in service["volumes"] if isinstance(v, dict) and v["target"] == "/keys"]
    assert service["cap_drop"] == ["ALL"]
    args = serve(service["command"])
    assert (args.transport, args.port, args.host) == ("http", exposed_port(), "0.0.0.0")
    assert any(p.endswith(f":{exposed_port()}") for p in service["ports"])


def kubernetes_example() -> list[dict[str, Any]]:
    """The Kubernetes manifests of docs/deployment.md (its ```yaml blocks holding a `kind`)."""
    blocks = re.findall(r"```yaml\n(.*?)```", DEPLOYMENT.read_text(encoding="utf-8"), re.S)
    docs = [d for block in blocks for d in yaml.safe_load_all(block) if isinstance(d, dict) and "kind" in d]
    assert docs, "docs/deployment.md shows no Kubernetes manifest"
    return docs


def test_kubernetes_example_runs_replicas_probed_on_healthz_and_readyz() -> None:
    docs = {d["kind"]: d for d in kubernetes_example()}
    deployment, service = docs["Deployment"], docs["Service"]
    assert deployment["spec"]["replicas"] > 1
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    pod = deployment["spec"]["template"]["spec"]
    (server,) = [c for c in pod["containers"] if c["name"] == "docbundle"]
    port = exposed_port()
    assert server["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
    assert server["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}
    assert server["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    mounts = {m["mountPath"]: m for m in server["volumeMounts"]}
    assert mounts["/bundles"]["readOnly"] is True
    keys = {v["name"]: v for v in pod["volumes"]}[mounts["/keys"]["name"]]
    assert "secret" in keys, "the API keys come from a Secret"
    assert pod["initContainers"], "bundles are pulled by an init container"
    args = serve(server.get("command", []) + server["args"])
    assert (args.transport, args.port) == ("http", port)


def test_the_release_scans_the_image_then_publishes_it_with_sbom_and_provenance() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8"))
    job = workflow["jobs"]["image"]
    assert job["needs"] == "build", "the image is published only after the release's tests pass"
    assert {"packages": "write", "id-token": "write", "attestations": "write"}.items() <= job[
        "permissions"
    ].items()
    steps = job["steps"]
    uses = [str(s.get("uses", "")).split("@")[0] for s in steps]
    scan, push = (
        uses.index("anchore/scan-action"),
        next(i for i, s in enumerate(steps) if s.get("id") == "push"),
    )
    assert steps[scan]["with"]["fail-build"] is True
    assert scan < push, "the image is scanned before it is pushed"
    pushed = steps[push]["with"]
    assert (pushed["push"], pushed["sbom"], pushed["provenance"]) == (True, True, "mode=max")
    attest = steps[uses.index("actions/attest-build-provenance")]
    assert attest["with"]["subject-digest"] == "${{ steps.push.outputs.digest }}"
    assert {v["extras"] for v in job["strategy"]["matrix"]["include"]} == {"", "semantic"}


def test_the_docs_point_at_the_dockerfile_instead_of_a_copy() -> None:
    text = DEPLOYMENT.read_text(encoding="utf-8")
    assert "```dockerfile" not in text.lower()
    assert "(../Dockerfile)" in text and "(../compose.yaml)" in text


def test_the_image_session_is_not_a_default_session() -> None:
    """`nox -s image` needs docker and root: never part of `nox` or `nox -s tests`."""
    noxfile = load_noxfile()
    assert callable(noxfile.image)
    assert "image" not in noxfile.nox.options.sessions


@pytest.mark.parametrize(
    "path",
    [
        "server/src/docbundle/server/__init__.py",
        "server/pyproject.toml",
        "requirements/image-semantic.txt",  # the lock the build installs (issue 34)
        "requirements/build.txt",
    ],
)
def test_the_build_context_holds_the_server(path: str) -> None:
    """.dockerignore keeps the context small (no .nox, no built bundles) but lets the server in."""
    rules = [r for r in (ROOT / ".dockerignore").read_text().splitlines() if r and not r.startswith("#")]
    included = False
    for rule in rules:
        negated, pattern = rule.startswith("!"), rule.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            included = negated
    assert included, f".dockerignore leaves {path} out of the build context"


@pytest.mark.parametrize("extras", ["", "semantic", "otel", "semantic,otel"])
def test_every_documented_extras_value_installs_its_lock_with_hashes(extras: str) -> None:
    """EXTRAS=... selects requirements/image[-EXTRA...].txt (docs/deployment.md names these values), which
    the build installs with --require-hashes: the image holds the lock's exact versions (issue 34)."""
    run = " ".join(rest for w, rest in build_stages() if w == "RUN")
    assert "pip install --require-hashes -r /src/requirements/build.txt" in run
    assert 'pip install --require-hashes -r "/src/$lock"' in run
    assert "--no-deps --no-build-isolation" in run and "--no-deps --no-index" in run
    name = "image" + "".join(f"-{e}" for e in extras.split(",") if e)
    assert (ROOT / "requirements" / f"{name}.txt").is_file(), f"EXTRAS={extras!r}: run `nox -s lock`"
    # The file name the Dockerfile's shell computes from EXTRAS.
    shell = re.search(r'lock="(requirements/image\$\(.*?\)\.txt)"', run)
    assert shell, "the Dockerfile no longer picks the lock from EXTRAS"
    made = subprocess.run(
        ["sh", "-c", f'echo "{shell.group(1)}"'], env={"EXTRAS": extras, "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert made.stdout.strip() == f"requirements/{name}.txt"
