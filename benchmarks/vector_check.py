"""What checking a vector file's values costs (issue 31): ``vectors.check_values``, which ``verify``,
``install`` and every open of a bundle with vectors now run, on int8 and float16 files of growing size.

Usage::

    python benchmarks/vector_check.py [--rows 5544 50000 200000] [--dims 384]

Writes each file once into a temporary folder (unit rows, as an embedder gives them; needs numpy), then
times ``check_values`` through an open descriptor, best of three, and prints seconds, MB/s and the ratio
to the previous size (linear code: the ratio of the sizes). It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    import numpy as np
    from docbundle.bundle.vectors import HEADER_SIZE, check_values, parse_header, write_vectors

    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rows", type=int, nargs="*", default=[5544, 50000, 200000], help="rows per file")
    ap.add_argument("--dims", type=int, default=384, help="dimensions (the model's: 384)")
    args = ap.parse_args()
    key = hashlib.sha256(b"benchmark").hexdigest()
    rng = np.random.default_rng(1)
    print(f"{'dtype':<8} {'rows':>8} {'MB':>8} {'seconds':>9} {'MB/s':>8} {'x prev':>7}")
    with tempfile.TemporaryDirectory(prefix="vector-check-") as tmp:
        for dtype in ("int8", "float16"):
            previous = None
            for rows in args.rows:
                m = rng.standard_normal((rows, args.dims)).astype(np.float32)
                m /= np.linalg.norm(m, axis=1, keepdims=True)
                path = Path(tmp) / f"{dtype}-{rows}.bin"
                size = write_vectors(path, m, key, dtype)  # type: ignore[arg-type]
                fd = os.open(path, os.O_RDONLY)
                try:
                    header = parse_header(os.pread(fd, HEADER_SIZE, 0), size)
                    best = float("inf")
                    for _ in range(3):
                        t0 = time.perf_counter()
                        check_values(fd, header)
                        best = min(best, time.perf_counter() - t0)
                finally:
                    os.close(fd)
                ratio = f"{best / previous:7.2f}" if previous else ""
                print(
                    f"{dtype:<8} {rows:>8} {size / 1e6:8.2f} {best:9.4f} {size / 1e6 / best:8.0f} {ratio:>7}"
                )
                previous = best
                path.unlink()


if __name__ == "__main__":
    main()
