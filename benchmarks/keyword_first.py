"""Keyword search first, meaning after, and an interrupted embedding resumed (issue 32, item 4), timed on a
real corpus as a user meets it.

Usage::

    python benchmarks/keyword_first.py --corpora DIR [--corpus html-postgres] [--query "..."]

Needs the semantic extra. The corpus is served by the corpora's own ``../tools/serve_site.py`` on
127.0.0.1, as a docs host serves it. Then:

1. **keyword first**: ``docbundle-index add URL --build`` starts, and at the same moment a stdio server
   (``docbundle serve``, live reload every 0.5 s) over the empty bundles folder, asked every 0.5 s
   through the MCP SDK client for ``--query`` in ``hybrid`` mode. Printed: seconds from the start to the
   first answer with hits (keyword search, ``mode`` balanced) and to the first ``hybrid`` one, with no
   restart; the build's embedded count, seconds and passages/s;
2. **resume**: the same library built into a second bundles folder with ``docbundle-index build``,
   SIGKILLed once its progress line shows half the chunks embedded (and the checkpoint written since),
   then built again: the rows the second run embedded and took from the checkpoint, and whether its
   ``vectors.bin`` is byte-identical to the first part's.

It prints figures and asserts nothing. The load average is printed: the figures mean something only on
a quiet machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from build_speed import Served  # noqa: E402  (benchmarks/ is not a package)

LIBRARY = "pg"
POLL_SECONDS = 0.5
PROGRESS = re.compile(r"embedded (\d+)/(\d+) chunks")


def index_argv(*args: str) -> list[str]:
    """``docbundle-index ARGS`` with this interpreter (the code on its path, not a console script's)."""
    return [sys.executable, "-m", "docbundle.indexer.cli", *args]


class Lines:
    """A subprocess's stderr lines, read in a thread, each with its time since ``t0``."""

    def __init__(self, proc: subprocess.Popen[str], t0: float) -> None:
        self.lines: list[tuple[float, str]] = []
        self._thread = threading.Thread(target=self._read, args=(proc, t0), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str], t0: float) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.lines.append((time.perf_counter() - t0, line.rstrip("\n")))

    def embedded(self) -> tuple[int, int]:
        """The last progress line's embedded chunks and total, (0, 0) before one."""
        for _, line in reversed(self.lines):
            if m := PROGRESS.search(line):
                return int(m[1]), int(m[2])
        return 0, 0


async def watch(out: Path, query: str, build: subprocess.Popen[str], t0: float) -> dict[str, float]:
    """Ask a live stdio server over ``out`` for ``query`` until it answers in hybrid mode (or the build
    ended and the answer still is not hybrid after a reload)."""
    import anyio
    from mcp import Client, StdioServerParameters

    serve = ["-m", "docbundle.server", "serve", "--bundles", str(out), "--reload-interval", str(POLL_SECONDS)]
    params = StdioServerParameters(command=sys.executable, args=serve, env=dict(os.environ))
    seen: dict[str, float] = {}
    ended_at: float | None = None
    async with Client(params) as client:
        while True:
            result = await client.call_tool(
                "search_documents", {"query": query, "libraryId": LIBRARY, "mode": "hybrid"}
            )
            now = time.perf_counter() - t0
            data: dict[str, Any] = result.structured_content or {}
            if not result.is_error and data.get("hits"):
                seen.setdefault("keyword", now)
                if data.get("mode") == "hybrid":
                    seen["hybrid"] = now
                    return seen
            if build.poll() is not None:
                ended_at = ended_at if ended_at is not None else now
                if now - ended_at > 10 * POLL_SECONDS:
                    return seen
            await anyio.sleep(POLL_SECONDS)


def keyword_first(base: str, work: Path, query: str) -> Path:
    """Part 1; returns the bundle built."""
    import anyio

    config, out = work / "libraries.toml", work / "out"
    out.mkdir()
    t0 = time.perf_counter()
    add = index_argv(
        "add",
        f"{base}/llms.txt",
        "--config",
        str(config),
        "--id",
        LIBRARY,
        "--probe",
        "0",
        "--build",
        "--out",
        str(out),
    )
    build = subprocess.Popen(add, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = Lines(build, t0)
    seen = anyio.run(watch, out, query, build, t0)
    stdout, _ = build.communicate()
    wall = time.perf_counter() - t0
    print(f"keyword first: add --build exited {build.returncode} after {wall:.1f} s")
    print(f"  first keyword answer {seen.get('keyword', float('nan')):.1f} s after the start (target 30 s)")
    print(f"  first hybrid answer {seen.get('hybrid', float('nan')):.1f} s after the start, no restart")
    for _, line in lines.lines:
        if "will take about" in line or "keyword search is served now" in line:
            print(f"  stderr: {line}")
    for line in stdout.splitlines():
        if "vectors:" in line or "keyword search served first" in line or " built " in line:
            print(f"  {line.strip()}")
    if m := re.search(r"vectors: (\d+) embedded.*\(([\d.]+) s\)", stdout):
        print(f"  embedding (cut and embed): {int(m[1]) / max(float(m[2]), 1e-9):.2f} passages/s")
    from docbundle.bundle.layout import current_bundle

    return current_bundle(out / LIBRARY / "latest")


def resume(work: Path, whole: Path) -> None:
    """Part 2: kill a build halfway through its embedding, build again."""
    config, out = work / "libraries.toml", work / "out-resumed"
    t0 = time.perf_counter()
    build = subprocess.Popen(
        index_argv("build", "--config", str(config), "--out", str(out), "--library", LIBRARY),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DOCBUNDLE_EMBED_CHECKPOINT_SECONDS": "0"},
    )
    lines = Lines(build, t0)
    while True:
        done, total = lines.embedded()
        if (total and done >= total // 2) or build.poll() is not None:
            break
        time.sleep(0.2)
    build.send_signal(signal.SIGKILL)
    build.wait()
    done, total = lines.embedded()
    print(
        f"resume: first build SIGKILLed after {time.perf_counter() - t0:.1f} s, at {done}/{total} chunks embedded"
    )
    t1 = time.perf_counter()
    again = subprocess.run(
        index_argv("build", "--config", str(config), "--out", str(out), "--library", LIBRARY, "--json"),
        capture_output=True,
        text=True,
        check=False,
    )
    (lib,) = json.loads(again.stdout)["libraries"]
    print(
        f"  second build: {lib['status']} in {time.perf_counter() - t1:.1f} s; {lib['embedded']} embedded, "
        f"{lib['resumed']} kept from the interrupted build, {lib['reused']} reused (of {lib['chunks']} chunks)"
    )
    from docbundle.bundle.layout import current_bundle

    mine = current_bundle(out / LIBRARY / "latest") / "vectors.bin"
    same = (
        hashlib.sha256(mine.read_bytes()).digest()
        == hashlib.sha256((whole / "vectors.bin").read_bytes()).digest()
    )
    print(f"  vectors.bin byte-identical to the uninterrupted build's: {'yes' if same else 'NO'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", type=Path, required=True, help="the shared corpora folder")
    ap.add_argument("--corpus", default="html-postgres")
    ap.add_argument("--query", default="how do I add a column to an existing table")
    ap.add_argument("--skip-resume", action="store_true")
    args = ap.parse_args()
    folder, serve = args.corpora / args.corpus, args.corpora.parent / "tools" / "serve_site.py"
    print(f"{args.corpus}; load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with Served(serve, folder) as base, tempfile.TemporaryDirectory(prefix="docbundle-keyword-first-") as tmp:
        whole = keyword_first(base, Path(tmp), args.query)
        if not args.skip_resume:
            resume(Path(tmp), whole)
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
