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
    decode_manifest,
    encode_manifest,
)
from docbundle.bundle.reader import open_bundle
from docbundle.bundle.summary import SUMMARY_NAME
from docbundle.bundle.vectors import HEADER_SIZE, VECTORS_FILE, write_vectors
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


def rewrite_manifest_hash(bundle: Path, rel: str) -> None:
    """List ``rel``'s current size and sha256 in the manifest (what an attacker who rewrites one does)."""
    m = decode_manifest((bundle / MANIFEST_NAME).read_bytes())
    data = (bundle / rel).read_bytes()
    files = [
        FileEntry(path=f.path, size=len(data), sha256=hashlib.sha256(data).hexdigest())
        if f.path == rel
        else f
        for f in m.files
    ]
    (bundle / MANIFEST_NAME).write_bytes(encode_manifest(msgspec.structs.replace(m, files=files)))


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


def to_float16(bundle: Path) -> None:
    """Rewrite ``bundle``'s vectors as float16 rows (a format the reader accepts and the indexer can meet in
    a previous bundle), listing the new file in the manifest as a build would."""
    from docbundle.bundle.vectors import VectorFile

    path = bundle / VECTORS_FILE
    with VectorFile(path) as vf:
        matrix, key = vf.matrix(), vf.header.embedder_key
    path.chmod(0o644)
    write_vectors(path, matrix, key, "float16")
    rewrite_manifest_hash(bundle, VECTORS_FILE)
    m = decode_manifest((bundle / MANIFEST_NAME).read_bytes())
    assert m.vectors is not None
    vectors = msgspec.structs.replace(m.vectors, dtype="float16")
    (bundle / MANIFEST_NAME).write_bytes(encode_manifest(msgspec.structs.replace(m, vectors=vectors)))


#: Planted values that pass the sha256 of a rewritten manifest, by name: (value type, what is planted).
PLANTS = {
    "float16 NaN": ("float16", float("nan")),
    "float16 infinity": ("float16", float("-inf")),
    "int8 scale 1e30": ("int8", 1e30),
}


def plant(bundle: Path, name: str, row: int) -> None:
    """Plant ``PLANTS[name]`` in row ``row`` of ``bundle``'s vectors and rewrite the manifest to match (what
    an attacker with write access to the folder does); a float16 plant rewrites the file as float16 first."""
    import struct

    from docbundle.bundle.vectors import VectorFile

    dtype, value = PLANTS[name]
    if dtype == "float16":
        to_float16(bundle)
    path = bundle / VECTORS_FILE
    with VectorFile(path) as vf:
        rows, dims = vf.rows, vf.dims
    data = bytearray(path.read_bytes())
    if dtype == "float16":
        struct.pack_into("<e", data, HEADER_SIZE + 2 * (row * dims + 5), value)  # dimension 5
    else:
        struct.pack_into("<f", data, HEADER_SIZE + rows * dims + 4 * row, value)
    path.chmod(0o644)
    path.write_bytes(bytes(data))
    rewrite_manifest_hash(bundle, VECTORS_FILE)
    (bundle.parents[2] / SUMMARY_NAME).unlink(missing_ok=True)  # as add_vectors: the summary is rebuilt
