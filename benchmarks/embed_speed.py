"""How fast a build embeds (issue 32, item 4): passages/s on real corpora, one call on every core's threads
against one lane per core, and whether the rows depend on how the passages are batched.

Usage::

    python benchmarks/embed_speed.py --corpora DIR [--corpus large-en html-postgres] [--sample 128]

For each corpus it builds a keyword-only bundle with ``docbundle-index build --no-embed`` over the corpora's
own ``../tools/serve_site.py`` on 127.0.0.1 (as ``build_speed.py`` does), takes ``--sample`` of its chunks
spread over the whole bundle (every k-th), makes their passages as a build does (``passage_text``: title,
heading path and text cut to 256 tokens) and embeds them in a fresh process per way (the engine reads
its thread count once per process):

- ``threads``: ``load_embedder(threads=CORES)``, each batch in one engine call on every core's threads
  (how builds embedded before issue 32);
- ``lanes``: ``load_embedder(threads=1, lanes=CORES)``, each batch split over one engine call per core
  (how a build embeds now);
- ``lanes, shuffled``: the same, the passages in a random order (other batches, other lane mates).

Each way embeds shortest first in batches of ``semantic.EMBED_BATCH``, as a build does, and prints
passages/s, and the CPU time a passage took (what the cores would give if nothing else ran: the
wall figure on a shared machine is lower); then whether every row is byte-identical across the ways (the rows a build writes must not
depend on batching). The load average is printed before and after: the figures mean something only on a
quiet machine. It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from build_speed import Served, indexer_command  # noqa: E402  (benchmarks/ is not a package)

WAYS = ("threads", "lanes", "lanes, shuffled")
SHUFFLE_SEED = 32


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def load() -> str:
    """The load averages (1, 5, 15 minutes), as ``uptime`` prints them."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def passages(corpora: Path, name: str, work: Path, sample: int) -> list[str] | None:
    """``sample`` passages of the corpus's chunks, spread over the bundle, made as a build makes them."""
    from docbundle.bundle.embed import load_embedder, passage_text
    from docbundle.bundle.layout import current_bundle
    from docbundle.bundle.store import DocStore

    folder, serve = corpora / name, corpora.parent / "tools" / "serve_site.py"
    if not (folder / "llms.txt").is_file() or not serve.is_file():
        print(f"{name}: skipped ({folder}/llms.txt or {serve} not found)")
        return None
    out = work / f"out-{name}"
    with Served(serve, folder) as base:
        config = work / f"{name}.toml"
        config.write_text(f'[[library]]\nid = "{name}"\nllms_txt = "{base}/llms.txt"\n', encoding="utf-8")
        cmd = [
            *indexer_command(),
            "build",
            "--config",
            str(config),
            "--out",
            str(out),
            "--no-embed",
            "--quiet",
        ]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with DocStore(current_bundle(out / name / "latest")) as store:
        chunks = [(d.title, c.heading_path, c.text) for d in store for c in d.chunks]
    step = max(1, len(chunks) // sample)
    count = load_embedder(threads=1).token_count
    picked = [passage_text(*c, count) for c in chunks[::step][:sample]]
    print(f"{name}: {len(chunks)} chunks; {len(picked)} passages, every {step}th")
    return picked


def child(way: str, texts_file: Path, rows_file: Path) -> None:
    """Embed the passages in ``texts_file`` one way, print passages/s, save the rows in input order."""
    import numpy as np
    from docbundle.bundle.embed import by_length, load_embedder
    from docbundle.indexer.pipeline.semantic import EMBED_BATCH

    texts: list[str] = json.loads(texts_file.read_text(encoding="utf-8"))
    n = cores()
    embedder = load_embedder(threads=n) if way == "threads" else load_embedder(threads=1, lanes=n)
    order = by_length(texts)
    if way.endswith("shuffled"):
        random.Random(SHUFFLE_SEED).shuffle(order)
    rows = np.empty((len(texts), embedder.identity.dimensions), dtype=np.float32)
    t0, cpu0 = time.perf_counter(), time.process_time()
    for first in range(0, len(order), EMBED_BATCH):
        part = order[first : first + EMBED_BATCH]
        rows[part] = embedder.passages([texts[i] for i in part])
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    np.save(rows_file, rows)
    print(
        f"  {way:<16} {len(texts) / seconds:5.2f} passages/s ({len(texts)} in {seconds:.1f} s); "
        f"CPU {1000 * cpu / len(texts):.0f} ms a passage, so {n * len(texts) / cpu:.2f}/s on {n} idle cores",
        flush=True,
    )


def corpus(corpora: Path, name: str, work: Path, sample: int) -> None:
    """Embed one corpus's sample every way and compare the rows."""
    import numpy as np

    texts = passages(corpora, name, work, sample)
    if texts is None:
        return
    texts_file = work / f"{name}.json"
    texts_file.write_text(json.dumps(texts), encoding="utf-8")
    rows = {}
    for way in WAYS:
        rows_file = work / f"{name}-{way.replace(', ', '-')}.npy"
        subprocess.run(
            [sys.executable, __file__, "--child", way, str(texts_file), str(rows_file)], check=True
        )
        rows[way] = np.load(rows_file).tobytes()
    same = len(set(rows.values())) == 1
    print(f"  rows byte-identical across {', '.join(WAYS)}: {'yes' if same else 'NO'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", type=Path, help="the shared corpora folder")
    ap.add_argument("--corpus", nargs="+", default=["large-en", "html-postgres"])
    ap.add_argument("--sample", type=int, default=128, help="passages per corpus (default 128)")
    ap.add_argument("--child", nargs=3, metavar=("WAY", "TEXTS", "ROWS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        way, texts_file, rows_file = args.child
        child(way, Path(texts_file), Path(rows_file))
        return
    if args.corpora is None:
        ap.error("--corpora is required")
    print(f"{cores()} cores; load average before: {load()}")
    with tempfile.TemporaryDirectory(prefix="docbundle-embed-speed-") as tmp:
        for name in args.corpus:
            corpus(args.corpora, name, Path(tmp), args.sample)
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
