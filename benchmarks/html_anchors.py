"""How many sections of the HTML corpora a hit can cite with an anchor (``url#id``, docs/html.md "Anchors").

Usage::

    python benchmarks/html_anchors.py --corpora ../shared/corpora [--sets html-python ...]

For each corpus folder (``html-python``, ``html-rustbook``, ``html-postgres`` by default) it prepares every
``*.html`` page as a build does (``prepare_page``: converted, chunked with the default chunking) and
prints the chunks, those with an anchor, those without one by why (no heading path at all; under the
page's top heading only; deeper), and a digest of the converted markdown and titles, which an unchanged
converter keeps (compare it across commits). It prints figures only and asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from docbundle.indexer.pipeline.html import decode_html
from docbundle.indexer.pipeline.prepare import PageJob, prepare_page

DEFAULT_SETS = ("html-python", "html-rustbook", "html-postgres")
# The default chunking of a library (docs/configuration.md): max_depth, min_words, max_words.
MAX_DEPTH, MIN_WORDS, MAX_WORDS = 3, 60, 500


def measure(folder: Path) -> str:
    digest = hashlib.sha256()
    pages = chunks = anchored = pathless = top_only = deeper = 0
    for path in sorted(folder.rglob("*.html")):
        url = f"https://docs.example.org/{folder.name}/{path.relative_to(folder).as_posix()}"
        html = decode_html(path.read_bytes(), None)
        job = PageJob(html, False, "", "", "", True, MAX_DEPTH, MIN_WORDS, MAX_WORDS, html=True, url=url)
        prepared = prepare_page(job)
        pages += 1
        digest.update(prepared.title.encode() + b"\0")
        for chunk in prepared.chunks:
            digest.update(chunk.text.encode())
            chunks += 1
            if chunk.anchor:
                anchored += 1
            elif not chunk.heading_path:
                pathless += 1
            elif len(chunk.heading_path) == 1:
                top_only += 1
            else:
                deeper += 1
    share = 100 * anchored / max(chunks, 1)
    return (
        f"{folder.name}: {pages} pages, {chunks} chunks, {anchored} with an anchor ({share:.1f}%); without: "
        f"{pathless} no heading path, {top_only} under the top heading only, {deeper} deeper; "
        f"text+titles sha256 {digest.hexdigest()[:16]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, required=True)
    parser.add_argument("--sets", nargs="+", default=list(DEFAULT_SETS))
    args = parser.parse_args()
    for name in args.sets:
        folder = args.corpora / name
        if not folder.is_dir():
            print(f"{name}: no folder at {folder}, skipped")
            continue
        print(measure(folder), flush=True)


if __name__ == "__main__":
    main()
