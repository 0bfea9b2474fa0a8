"""The segment write alone: ``SegmentBuilder`` add + commit on the pages of a real build, timed apart.

Usage::

    python benchmarks/segment_write.py --corpora ../shared/corpora [--sets large-en html-python]
                                       [--runs 3] [--mode forked serial]

For each corpus it builds it once, cold and without embedding, in this process (served by the corpora's
own ``../tools/serve_site.py``), recording what the build gives the index writer (every chunk's analysed
fields and stored values). Then, ``--runs`` times per ``--mode``, it writes that index again with a
fresh ``SegmentBuilder`` and prints the wall and CPU seconds of adding the documents and of ``commit``
(CPU of this process, and of this process plus its waited-for children: the forked block encoder), and
a sha256 over the index files, which must be the same for every run and mode.

``forked`` is what a build does (half the terms encoded in a forked child when the process is
single-threaded and the segment has ``whooshio.encoding.PARALLEL_MIN_POSTINGS`` postings); ``serial`` encodes
every term in this process. To time another checkout's writer, put its ``server/src`` first on
``PYTHONPATH`` (it runs as ``serial`` whatever the mode, if it has no forked encoder).
Wall figures mean something only on a quiet machine. It asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_speed import Served
from docbundle.bundle import whooshio
from docbundle.bundle.schema import INDEX_NAME, make_schema

Recorded = list[tuple[Mapping[str, Any], Mapping[str, object]]]


def record(corpora: Path, name: str, work: Path) -> Recorded:
    """Build ``name`` once in this process and return what its ``SegmentBuilder`` was given."""
    from docbundle.indexer.cli import main

    calls: Recorded = []
    add = whooshio.SegmentBuilder.add

    def recording(self: whooshio.SegmentBuilder, analysed: Any, stored: Any) -> None:
        calls.append((analysed, stored))
        add(self, analysed, stored)

    whooshio.SegmentBuilder.add = recording  # type: ignore[method-assign]
    os.environ["DOCBUNDLE_EMBED"] = "0"
    try:
        with Served(corpora.parent / "tools" / "serve_site.py", corpora / name) as base:
            config = work / f"{name}.toml"
            config.write_text(f'[[library]]\nid = "{name}"\nllms_txt = "{base}/llms.txt"\n', encoding="utf-8")
            main(
                [
                    "build",
                    "--config",
                    str(config),
                    "--out",
                    str(work / f"out-{name}"),
                    "--no-cache",
                    "--quiet",
                ]
            )
    finally:
        whooshio.SegmentBuilder.add = add  # type: ignore[method-assign]
    return calls


def cpu() -> tuple[float, float]:
    """CPU seconds (user + sys) of this process, and of this process plus its waited-for children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = me.ru_utime + me.ru_stime
    return own, own + kids.ru_utime + kids.ru_stime


def write_once(calls: Recorded, work: Path) -> str:
    """Write the index of ``calls`` once; print its figures; return the files' digest."""
    directory = Path(tempfile.mkdtemp(dir=work))
    builder = whooshio.SegmentBuilder(directory, make_schema(), INDEX_NAME, "benchmark")
    t0, (c0, _) = time.perf_counter(), cpu()
    for analysed, stored in calls:
        builder.add(analysed, stored)
    t1, (c1, a1) = time.perf_counter(), cpu()
    builder.commit()
    t2, (c2, a2) = time.perf_counter(), cpu()
    digest = hashlib.sha256()
    for path in sorted(directory.iterdir()):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
        path.unlink()
    directory.rmdir()
    print(
        f"  add {t1 - t0:5.2f} s wall {c1 - c0:5.2f} s CPU | commit {t2 - t1:5.2f} s wall, "
        f"{c2 - c1:5.2f} s CPU here, {a2 - a1:5.2f} s with children | {digest.hexdigest()[:16]}",
        flush=True,
    )
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", type=Path, required=True, help="the shared corpora folder")
    parser.add_argument("--sets", nargs="+", default=["large-en", "html-python"], help="corpora to build")
    parser.add_argument("--runs", type=int, default=3, help="writes per corpus and mode")
    parser.add_argument("--mode", nargs="+", choices=["forked", "serial"], default=["forked", "serial"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in args.sets:
            calls = record(args.corpora, name, work)
            print(f"{name}: {len(calls)} chunks recorded", flush=True)
            # the encoder's module: whooshio.encoding since issue 33, whooshio itself in older checkouts
            encoder: Any = getattr(whooshio, "encoding", whooshio)
            limit = getattr(encoder, "PARALLEL_MIN_POSTINGS", None)
            for mode in args.mode:
                single = getattr(encoder, "_single_threaded", lambda: False)()
                print(f" {mode}:" + ("" if single or mode == "serial" else " (threads running: serial)"))
                if limit is not None:
                    encoder.PARALLEL_MIN_POSTINGS = limit if mode == "forked" else 10**18
                digests = {write_once(calls, work) for _ in range(args.runs)}
                if len(digests) != 1:
                    print(f"  the index bytes differ between runs: {sorted(d[:16] for d in digests)}")
            if limit is not None:
                encoder.PARALLEL_MIN_POSTINGS = limit


if __name__ == "__main__":
    main()
