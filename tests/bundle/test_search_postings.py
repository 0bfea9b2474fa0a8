"""Reading posting lists a block at a time gives exactly what whoosh's matcher yields one by one."""

from __future__ import annotations

from array import array
from pathlib import Path

from docbundle.bundle.reader import open_bundle
from docbundle.bundle.search import _read_postings

GOLDEN = Path(__file__).resolve().parents[1] / "bundle" / "golden" / "v1"


def test_block_reads_match_the_matcher() -> None:
    bundle = open_bundle(GOLDEN, use_mmap=False)
    try:
        with bundle.index.reader() as reader:
            checked = 0
            for field, term in reader.all_terms():
                if field not in ("title", "headings", "body", "code"):
                    continue
                fast_ids: array[int] = array("I")
                fast_tfs: array[float] = array("f")
                _read_postings(reader.postings(field, term), fast_ids, fast_tfs)
                m = reader.postings(field, term)
                slow = []
                while m.is_active():
                    slow.append((m.id(), m.weight()))
                    m.next()
                assert list(zip(fast_ids, fast_tfs, strict=True)) == slow
                checked += 1
            assert checked > 50
    finally:
        bundle.close()
