"""Bundles with semantic vectors for the server tests: built with the indexer, embedded with the real model.

``add_vectors`` embeds every section of a built bundle the way the indexer does (``passage_text`` in
index order), writes ``vectors.bin`` and lists it in the manifest (``files`` and ``vectors``), so the
reader's verification covers it. ``build_semantic_tree`` makes::

    <root>/pay/latest/<build>/       six short payment pages, with vectors
    <root>/garden/latest/<build>/    three gardening pages, with vectors
    <root>/stale/latest/<build>/     the pay pages, vectors made by "another embedder" (an older version)
    <root>/golden/latest/<build>/    the golden bundle: no vectors

The question ``PARAPHRASE`` shares no word with the page that answers it (``pay``'s refunds page), while
``send`` matches two other pages: keyword search finds those, meaning finds the refunds page.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import msgspec
from buildkit import build_config, write_site
from docbundle.bundle.embed import PASSAGE_RECIPE, Embedder, EmbedderIdentity, passage_text
from docbundle.bundle.manifest import (
    MANIFEST_NAME,
    EmbedderInfo,
    FileEntry,
    VectorsInfo,
    encode_manifest,
)
from docbundle.bundle.reader import open_bundle
from docbundle.bundle.summary import SUMMARY_NAME
from docbundle.bundle.vectors import VECTORS_FILE, write_vectors
from serverkit import install_golden

PARAPHRASE = "send cash back to a customer who was billed twice"
ANSWER = "refunds.md"

PAY = {
    "refunds.md": "# Refunds\n\nCall the refund endpoint with the charge id to reverse a charge. Partial refunds "
    "are allowed until the full amount has been reversed.\n",
    "webhooks.md": "# Webhooks\n\nRegister an HTTPS endpoint and the platform posts an event to it whenever a "
    "charge changes state. Verify the signature header of each event.\n",
    "limits.md": "# Rate limits\n\nEach API key may send 100 requests per second. Over that, the API answers "
    "with status 429 and a Retry-After header.\n",
    "auth.md": "# Authentication\n\nSend your secret key in the Authorization header of every request. Never "
    "embed the secret key in a mobile app.\n",
    "pagination.md": "# Pagination\n\nList endpoints return at most 50 objects. Pass the cursor of the "
    "previous page to fetch the next one.\n",
    "payouts.md": "# Payouts\n\nMoney you earn is paid out to your bank account every day. A buyer's card "
    "payment reaches your balance after two days.\n",
}
GARDEN = {
    "watering.md": "# Watering\n\nSoak the soil each morning until it is damp; ferns like it wetter than cacti.\n",
    "pruning.md": "# Pruning\n\nCut dead stems in early spring, just above a healthy bud.\n",
    "compost.md": "# Compost\n\nLayer kitchen scraps with dry leaves and turn the heap every week.\n",
}
CONFIG = """
[[library]]
id = "pay"
name = "Pay API"
llms_txt = "pay/llms.txt"
[library.chunking]
min_words = 3

[[library]]
id = "stale"
name = "Pay API (stale vectors)"
llms_txt = "pay/llms.txt"
[library.chunking]
min_words = 3

[[library]]
id = "garden"
name = "Garden guide"
llms_txt = "garden/llms.txt"
[library.chunking]
min_words = 3
"""


def _llms(title: str, pages: dict[str, str]) -> str:
    links = "".join(f"- [{text.splitlines()[0][2:]}]({rel})\n" for rel, text in pages.items())
    return f"# {title}\n\n> {title} docs.\n\n## Docs\n\n{links}"


def add_vectors(bundle: Path, embedder: Embedder, identity: EmbedderIdentity | None = None) -> None:
    """Embed every section of ``bundle`` and list ``vectors.bin`` in its manifest.

    ``identity`` (default: the embedder's) is what the file and the manifest say made the vectors.
    """
    opened = open_bundle(bundle)
    try:
        manifest = opened.manifest
        passages = [
            passage_text(rec.title, c.heading_path, c.text, embedder.token_count)
            for rec in opened.store
            for c in rec.chunks
        ]
    finally:
        opened.close()
    ident = identity or embedder.identity
    path = bundle / VECTORS_FILE
    size = write_vectors(path, embedder.passages(passages), ident.key())
    info = VectorsInfo(
        rows=len(passages),
        dims=ident.dimensions,
        embedder=EmbedderInfo(**dataclasses.asdict(ident), key=ident.key()),
        passage=PASSAGE_RECIPE,
        embedded=len(passages),
    )
    entry = FileEntry(path=VECTORS_FILE, size=size, sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    files = sorted([f for f in manifest.files if f.path != VECTORS_FILE] + [entry], key=lambda f: f.path)
    manifest = msgspec.structs.replace(manifest, files=files, vectors=info)
    (bundle / MANIFEST_NAME).write_bytes(encode_manifest(manifest))
    # The manifest changed after its build was published, as no real publish does: the catalogue summary
    # still describes the old one (a server would refuse the bundle), so it goes, to be rebuilt at start.
    (bundle.parents[2] / SUMMARY_NAME).unlink(missing_ok=True)


def build_semantic_tree(root: Path, work: Path, embedder: Embedder) -> Path:
    """Build the tree the module docstring draws into ``root``; returns ``root``."""
    write_site(work / "pay", PAY, _llms("Pay API", PAY))
    write_site(work / "garden", GARDEN, _llms("Garden guide", GARDEN))
    outcomes = build_config(work / "libraries.toml", root, CONFIG)
    older = dataclasses.replace(embedder.identity, version="0.0.1")
    for outcome in outcomes:
        assert outcome.bundle is not None
        bundle = Path(outcome.bundle)
        add_vectors(bundle, embedder, older if bundle.parent.parent.name == "stale" else None)
    install_golden(root)
    return root
