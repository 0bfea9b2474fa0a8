"""How much of the text a model receives is link targets: the share of the characters of each bundle's
documents (the chunks tile them, so this is the share of hit text) that are the ``(target "title")`` of
a markdown link or image.

Usage::

    python benchmarks/link_share.py --corpora ../shared/corpora [--bundles DIR]
                                    [--sets html-python html-rustbook html-postgres]

Each corpus is served on 127.0.0.1 and built with the indexer's own ``build_target``, as
``benchmarks/quality.py`` does (``--bundles DIR`` keeps the bundles; one already there is reused, so
point it at a fresh folder after changing the converter). Prints, per corpus, the share over all
documents and over the converted (HTML) documents alone, and the three documents with the highest
share. The goal of issue 23 is at most 5%. It asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality import default_corpora, ensure_bundles

SETS = ("html-python", "html-rustbook", "html-postgres")
# ](target) or ](target "title"): one level of parentheses inside the target (Wikipedia-style URLs).
_TARGET = re.compile(r"\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"]*\"|\s+'[^']*')?\)")


def target_chars(text: str) -> int:
    """The number of characters of ``text`` inside link and image targets, parentheses included."""
    return sum(len(m.group(0)) - 1 for m in _TARGET.finditer(text))


def measure(bundle: Path) -> tuple[int, int, int, int, list[tuple[float, str]]]:
    """(target chars, chars, converted target chars, converted chars, worst documents) of a bundle."""
    from docbundle.bundle.reader import open_bundle, verify_bundle

    manifest = verify_bundle(bundle)
    converted = {d.path for d in manifest.documents if d.obtained == "html"}
    opened = open_bundle(bundle)
    try:
        total = links = html_total = html_links = 0
        per_doc: list[tuple[float, str]] = []
        for doc in manifest.documents:
            number = opened.store.number_of(doc.path)
            if number is None:
                continue
            text = opened.store.get(number).text
            n, t = len(text), target_chars(text)
            total, links = total + n, links + t
            if doc.path in converted:
                html_total, html_links = html_total + n, html_links + t
            if n:
                per_doc.append((t / n, doc.path))
    finally:
        opened.close()
    per_doc.sort(reverse=True)
    return links, total, html_links, html_total, per_doc[:3]


def main() -> None:
    """Build (or reuse) the bundles and print the share of link targets per corpus."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", type=Path, default=default_corpora(), help="the corpora folder")
    parser.add_argument(
        "--bundles", type=Path, help="where the bundles are built (default: a temporary folder)"
    )
    parser.add_argument("--sets", nargs="+", default=list(SETS), help="corpora to measure")
    args = parser.parse_args()
    if args.corpora is None:
        parser.error("--corpora is required (or set DOCBUNDLE_SHARED)")
    with tempfile.TemporaryDirectory(prefix="docbundle-links-") as tmp:
        bundles = args.bundles or Path(tmp)
        found = ensure_bundles(args.corpora, bundles, args.sets)
        for name in args.sets:
            if name not in found:
                print(f"{name}: no bundle")
                continue
            links, total, html_links, html_total, worst = measure(found[name])
            share = links / total if total else 0.0
            html_share = html_links / html_total if html_total else 0.0
            print(
                f"{name}: link targets {share:.1%} of {total:,} characters; "
                f"converted pages {html_share:.1%} of {html_total:,}"
            )
            for doc_share, path in worst:
                print(f"    {doc_share:6.1%}  {path}")


if __name__ == "__main__":
    main()
