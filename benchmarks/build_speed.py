"""Build throughput: pages/s by wall clock and CPU seconds per page, per corpus, and the fixed cost of
a library when one run builds many.

Usage::

    python benchmarks/build_speed.py --corpora ../shared/corpora [--sets large-en html-python ...]
                                     [--libraries N] [--workers N] [--profile DIR]

For each corpus it serves the folder with the corpora's own ``../tools/serve_site.py`` on 127.0.0.1 (a
subprocess, so its CPU is not counted), runs ``docbundle-index build --no-cache --no-embed --json`` on a
one-library config (cold: no cache, no previous bundle) and prints:

* documents and chunks built;
* crawl and index seconds (the build report's: pages are prepared while the crawl runs, and the line
  says how many, so "index" is what is left after the crawl) and the index rate in pages/s;
* the whole run's wall seconds and pages/s;
* the indexer's CPU seconds (user + sys of the process and all its descendants, the page workers
  included: it runs under a subreaper that waits for them all) and CPU milliseconds per page.

Then it generates ``--libraries`` tiny libraries (6 short pages each) under one served folder, builds
them with one ``docbundle-index build`` of an N-entry config, does the same for one library, and prints
the per-library cost of the N-library run beyond the one-library run: wall and CPU seconds per library.

Wall-clock figures mean something only on a quiet machine; CPU figures are what to compare on a loaded
one. ``--workers 0`` prepares pages in the indexer's own process (``DOCBUNDLE_WORKERS=0``);
``--profile DIR`` also runs the indexer under cProfile (``DIR/<corpus>.prof``, ``DIR/tiny-N.prof``; best
with ``--workers 0``).
It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from process import stop

DEFAULT_SETS = ("large-en", "html-python", "html-rustbook", "html-postgres")
PAGES_PER_LIBRARY = 6


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of asking."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def indexer_command() -> list[str]:
    """``docbundle-index`` beside this interpreter, else on PATH."""
    beside = Path(sys.executable).with_name("docbundle-index")
    found = str(beside) if beside.exists() else shutil.which("docbundle-index")
    if found is None:
        raise SystemExit("build_speed: docbundle-index not found (install the indexer package)")
    return [found]


class Served:
    """``serve_site.py FOLDER PORT`` in a subprocess, stopped on exit."""

    def __init__(self, serve: Path, folder: Path) -> None:
        self.base = f"http://127.0.0.1:{free_port()}"
        port = self.base.rsplit(":", 1)[1]
        self.proc = subprocess.Popen(
            [sys.executable, str(serve), str(folder), port],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def __enter__(self) -> str:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve_site.py exited with status {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"{self.base}/llms.txt", timeout=2):
                    return self.base
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("serve_site.py did not answer within 20 s")

    def __exit__(self, *_: object) -> None:
        stop(self.proc, 10)


# Runs the command as a child subreaper (Linux prctl PR_SET_CHILD_SUBREAPER) and waits for every
# descendant before it exits: the page workers' forkserver is never waited for by the indexer, so
# without this their CPU time would be missing from RUSAGE_CHILDREN.
_REAPER = """
import ctypes, os, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
code = subprocess.run(sys.argv[1:], check=False).returncode
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
sys.exit(code)
"""


def measured(
    config: Path, out: Path, workers: int | None, profile: Path | None
) -> tuple[dict[str, Any], float, float]:
    """One ``docbundle-index build``: its JSON report, wall seconds, and the CPU seconds (user + sys) of
    its process tree (the reaped children's rusage, taken around the run)."""
    env = dict(os.environ, DOCBUNDLE_EMBED="0")
    if workers is not None:
        env["DOCBUNDLE_WORKERS"] = str(workers)
    cmd = [*indexer_command(), "build", "--config", str(config), "--out", str(out), "--no-cache", "--json"]
    cmd.append("--quiet")
    if profile is not None:
        cmd = [sys.executable, "-m", "cProfile", "-o", str(profile), *cmd]
    cmd = [sys.executable, "-c", _REAPER, *cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        report: dict[str, Any] = json.loads(stdout)
    except json.JSONDecodeError:
        tail = (stderr.decode(errors="replace").strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"build_speed: the build printed no report: {tail}") from None
    return report, wall, cpu


def corpus(corpora: Path, name: str, work: Path, workers: int | None, profile: Path | None) -> None:
    """Build one corpus cold and print its figures."""
    folder = corpora / name
    serve = corpora.parent / "tools" / "serve_site.py"
    if not (folder / "llms.txt").is_file() or not serve.is_file():
        print(f"{name}: skipped ({folder}/llms.txt or {serve} not found)")
        return
    with Served(serve, folder) as base:
        config = work / f"{name}.toml"
        config.write_text(f'[[library]]\nid = "{name}"\nllms_txt = "{base}/llms.txt"\n', encoding="utf-8")
        prof = profile / f"{name}.prof" if profile else None
        report, wall, cpu = measured(config, work / f"out-{name}", workers, prof)
    (o,) = report["libraries"]
    docs = max(int(o["documents"]), 1)
    crawl, build = float(o["crawl_seconds"]), float(o["build_seconds"])
    print(
        f"{name:<14} {o['status']:<7} docs={o['documents']:5d} chunks={o['chunks']:6d} | "
        f"crawl {crawl:6.2f} s ({o.get('prepared_ahead', 0)} pages prepared meanwhile), "
        f"index {build:6.2f} s = {docs / max(build, 1e-9):6.1f} pages/s | "
        f"run {wall:6.2f} s wall = {docs / wall:6.1f} pages/s | "
        f"CPU {cpu:6.2f} s = {1000 * cpu / docs:5.2f} ms/page"
        + (f" | {o['message']}" if o["status"] != "built" else "")
    )


def tiny_libraries(root: Path, n: int) -> None:
    """``n`` libraries of ``PAGES_PER_LIBRARY`` short markdown pages each, under ``root/libNNNN/``."""
    for i in range(n):
        lib = root / f"lib{i:04d}"
        lib.mkdir(parents=True)
        links = []
        for p in range(PAGES_PER_LIBRARY):
            (lib / f"page{p}.md").write_text(
                f"# Page {p} of library {i}\n\nLibrary {i} explains topic {p}: how to install it, configure "
                f"the `option_{p}` setting and call `lib{i}.run({p})`.\n\n## Usage\n\nRun it with the "
                f"defaults first, then change one setting at a time.\n\n```python\nimport lib{i}\n"
                f"lib{i}.run({p})\n```\n",
                encoding="utf-8",
            )
            links.append(f"- [Page {p}](page{p}.md): topic {p}")
        (lib / "llms.txt").write_text(
            f"# Library {i}\n\n> Tiny generated library {i}.\n\n## Docs\n\n" + "\n".join(links) + "\n",
            encoding="utf-8",
        )
    (root / "llms.txt").write_text("# Tiny libraries\n", encoding="utf-8")  # the server's readiness probe


def per_library(corpora: Path, n: int, work: Path, workers: int | None, profile: Path | None) -> None:
    """The cost of one more library in a run that builds ``n`` of them."""
    serve = corpora.parent / "tools" / "serve_site.py"
    if not serve.is_file():
        print(f"per-library: skipped ({serve} not found)")
        return
    root = work / "tiny"
    tiny_libraries(root, n)
    with Served(serve, root) as base:
        figures = []
        for count in (1, n):
            config = work / f"tiny-{count}.toml"
            config.write_text(
                "".join(
                    f'[[library]]\nid = "lib{i:04d}"\nllms_txt = "{base}/lib{i:04d}/llms.txt"\n\n'
                    for i in range(count)
                ),
                encoding="utf-8",
            )
            prof = profile / f"tiny-{count}.prof" if profile and count > 1 else None
            report, wall, cpu = measured(config, work / f"out-tiny-{count}", workers, prof)
            if report["built"] != count:
                print(f"per-library: {report['built']}/{count} libraries built; {report['libraries'][0]}")
                return
            figures.append((count, wall, cpu))
    (_, wall1, cpu1), (_, walln, cpun) = figures
    print(
        f"per-library    1 library: {wall1:5.2f} s wall, {cpu1:5.2f} s CPU | {n} libraries: {walln:6.2f} s wall, "
        f"{cpun:6.2f} s CPU | each further library ({PAGES_PER_LIBRARY} pages): "
        f"{(walln - wall1) / (n - 1):.3f} s wall, {(cpun - cpu1) / (n - 1):.3f} s CPU"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the corpora, then the per-library figure."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", type=Path, required=True, help="folder holding the corpus folders")
    ap.add_argument("--sets", nargs="*", default=list(DEFAULT_SETS), help="corpus folder names")
    ap.add_argument("--libraries", type=int, default=100, help="tiny libraries in one run (0: skip)")
    ap.add_argument("--workers", type=int, default=None, help="DOCBUNDLE_WORKERS for the builds")
    ap.add_argument("--profile", type=Path, default=None, help="write a cProfile file per corpus here")
    args = ap.parse_args(argv)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    print(
        f"workers: {'default' if args.workers is None else args.workers}; CPU = user + sys of the indexer's processes"
    )
    with tempfile.TemporaryDirectory(prefix="docbundle-build-speed-") as tmp:
        work = Path(tmp)
        for name in args.sets:
            corpus(args.corpora, name, work, args.workers, args.profile)
        if args.libraries > 1:
            per_library(args.corpora, args.libraries, work, args.workers, args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
