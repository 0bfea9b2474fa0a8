"""Both distributions as a user gets them: sdists and wheels built, their metadata checked, installed into
a clean virtual environment and run (``--version``, a build, a search over MCP).

The build runs the project's own backend (hatchling) without isolation, and the wheel is built from the
unpacked sdist, as an installer does, so a file the sdist forgets fails here. The install is offline: the
two wheels go into a new venv with pip (``--no-index --no-deps``); their dependencies come from this test
environment's site-packages through a ``.pth`` line (which does not run that folder's own ``.pth`` files,
so the editable checkout stays invisible), and every ``Requires-Dist`` is checked against them.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from email.message import Message
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
DISTS = {"docbundle-server": ROOT / "server", "docbundle-indexer": ROOT / "indexer"}
SCRIPTS = {"docbundle-server": "docbundle", "docbundle-indexer": "docbundle-index"}

pytest.importorskip("hatchling.build", reason="the build backend (hatchling) is not installed here")


def _run(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 180
) -> str:
    r = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout, check=False
    )
    assert r.returncode == 0, f"{args}: {r.stdout}\n{r.stderr}"
    return r.stdout


def _hatchling(kind: str, project: Path, out: Path) -> Path:
    code = f"import sys, hatchling.build as b; print(b.build_{kind}(sys.argv[1]))"
    name = _run(sys.executable, "-c", code, out, cwd=project).strip().splitlines()[-1]
    return out / name


def _metadata(text: str) -> Message:
    return email.parser.Parser(policy=email.policy.compat32).parsestr(text)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """``{distribution: (sdist, wheel built from that sdist)}``."""
    out = tmp_path_factory.mktemp("dist")
    result = {}
    for dist, project in DISTS.items():
        sdist = _hatchling("sdist", project, out)
        unpacked = out / "unpacked"
        with tarfile.open(sdist) as tar:
            tar.extractall(unpacked, filter="data")
        (source,) = unpacked.glob(f"{dist.replace('-', '_')}-*")
        result[dist] = (sdist, _hatchling("wheel", source, out / "wheels"))
    return result


def test_one_version_and_the_metadata_an_index_shows(built: dict[str, tuple[Path, Path]]) -> None:
    version = tomllib.loads((ROOT / "server" / "pyproject.toml").read_text())["project"]["version"]
    for dist, (sdist, wheel) in built.items():
        with zipfile.ZipFile(wheel) as whl:
            info = f"{dist.replace('-', '_')}-{version}.dist-info"
            meta = _metadata(whl.read(f"{info}/METADATA").decode())
            names = whl.namelist()
            scripts = whl.read(f"{info}/entry_points.txt").decode()
        with tarfile.open(sdist) as tar:
            member = tar.extractfile(f"{dist.replace('-', '_')}-{version}/PKG-INFO")
            assert member is not None
            pkg_info = _metadata(member.read().decode())
        assert (meta["Name"], meta["Version"]) == (dist, version)
        assert (pkg_info["Name"], pkg_info["Version"]) == (dist, version)
        assert meta["Requires-Python"] == ">=3.11"
        assert meta["License-Expression"] == "Apache-2.0" and meta["License-File"] == "LICENSE"
        assert f"{info}/licenses/LICENSE" in names
        assert (DISTS[dist] / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
        assert meta["Description-Content-Type"] == "text/markdown"
        readme = (DISTS[dist] / "README.md").read_text(encoding="utf-8")
        assert meta.get_payload().strip() == readme.strip()
        urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
        assert {"Homepage", "Documentation", "Changelog", "Issues"} <= set(urls)
        assert all(u.startswith("https://") for u in urls.values())
        classifiers = meta.get_all("Classifier")
        assert "Programming Language :: Python :: 3.11" in classifiers and len(classifiers) >= 8
        assert f"{SCRIPTS[dist]} = docbundle." in scripts
        assert "docbundle/__init__.py" not in names  # a namespace shared by the two distributions
        own = {
            "docbundle-server": ("docbundle/common/", "docbundle/bundle/", "docbundle/server/"),
            "docbundle-indexer": ("docbundle/indexer/",),
        }
        code = [n for n in names if n.startswith("docbundle/")]
        assert code and all(n.startswith(own[dist]) for n in code), dist
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    with zipfile.ZipFile(built["docbundle-server"][1]) as whl:
        page = {n.rsplit("/", 1)[1] for n in whl.namelist() if n.startswith("docbundle/server/http/page/")}
    assert page == {"index.html", "page.js", "page.css", "icon.svg"}  # the operator page (GET /) ships
    with zipfile.ZipFile(built["docbundle-indexer"][1]) as whl:
        requires = _metadata(whl.read(f"docbundle_indexer-{version}.dist-info/METADATA").decode())
    assert f"docbundle-server=={version}" in requires.get_all("Requires-Dist")


def test_the_readmes_render_on_an_index_page() -> None:
    """Markdown with no relative links or images (an index page cannot resolve them)."""
    from markdown_it import MarkdownIt

    for project in DISTS.values():
        tokens = MarkdownIt().parse((project / "README.md").read_text(encoding="utf-8"))
        inline = [c for t in tokens if t.children for c in t.children]
        targets = [
            c.attrs.get("href") or c.attrs.get("src") for c in inline if c.type in ("link_open", "image")
        ]
        assert targets and all(str(t).startswith("https://") for t in targets), targets
        assert (tokens[0].type, tokens[1].content) == ("heading_open", f"docbundle-{project.name}")


def test_installed_into_a_clean_venv_it_runs_the_demo(
    built: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    wheels = [wheel for _, wheel in built.values()]
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "--no-deps", *wheels)
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz_test_dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(here)))

    # Every declared dependency is met, and the code runs from the wheels, not from the checkout.
    check = (
        "import importlib.metadata as m, docbundle.server.cli as s, docbundle.indexer.cli as i\n"
        "from packaging.requirements import Requirement\n"
        "bad = [str(r) for d in ('docbundle-server', 'docbundle-indexer') for r in map(Requirement, m.requires(d))\n"
        "       if not r.marker and m.version(r.name) not in r.specifier]\n"
        "print(bad, s.__file__, i.__file__)"
    )
    # A clean environment: no PYTHONPATH (it would put another copy first), no DOCBUNDLE_* settings
    # (but embedding off for the build, set below).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCBUNDLE_", "PYTHON"))}
    out = _run(python, "-c", check, env=env)
    assert out.startswith("[] ") and out.count(str(site)) == 2, out

    env |= {
        # The build below would otherwise embed every chunk of docs/ with the real model (minutes on two
        # busy cores); embedding from the wheels is the semantic tests' concern, not this one's.
        "DOCBUNDLE_EMBED": "0",
        "HOME": str(tmp_path / "home"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
    }
    version = built["docbundle-server"][1].name.split("-")[1]
    bin_dir = venv / "bin"
    assert _run(bin_dir / "docbundle", "--version", env=env).strip() == f"docbundle {version}"
    assert _run(bin_dir / "docbundle-index", "--version", env=env).strip() == f"docbundle-index {version}"

    bundles = tmp_path / "bundles"
    config = ROOT / "bundles" / "libraries.toml"
    _run(
        bin_dir / "docbundle-index",
        "build",
        "--config",
        config,
        "--library",
        "docbundle",
        "--out",
        bundles,
        "--quiet",
        env=env,
    )
    hits = json.loads(
        _run(
            bin_dir / "docbundle",
            "search",
            "docbundle",
            "restricted unpickler",
            "--json",
            "--bundles",
            bundles,
            env=env,
        )
    )["hits"]
    assert "security.md" in [h["documentId"] for h in hits[:3]]
    anyio.run(_search_over_mcp, bin_dir / "docbundle", bundles, env)


async def _search_over_mcp(docbundle: Path, bundles: Path, env: dict[str, str]) -> None:
    params = StdioServerParameters(command=str(docbundle), args=["serve", "--bundles", str(bundles)], env=env)
    with anyio.fail_after(60):
        async with Client(params) as client:
            result = await client.call_tool(
                "search_documents", {"query": "restricted unpickler", "libraryId": "docbundle"}
            )
    hits = result.structured_content["hits"]  # type: ignore[index]
    assert "security.md" in [h["documentId"] for h in hits[:3]]
