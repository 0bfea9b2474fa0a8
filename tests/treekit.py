"""The one way a test builds a bundle tree: ``build`` (issue 33, item 9).

``build(config, out, tree)`` builds every library version a config lists into the bundles folder ``out``
and, unless told otherwise, insists each one was built. What it builds is a ``Tree``: the config's text,
the local sites it reads (written beside the config first), and the options a test may need: vectors
made with a real embedder (``vectors``), the route index the indexer's CLI leaves after a build
(``route_index``). Many libraries are many ``[[library]]`` tables of one config; an HTML site is a site
whose pages are ``.html``. The trees several tests share are named presets of it: ``one_page`` here,
``serverkit.SERVER_TREE``, ``semkit.SEMANTIC_TREE``, ``attackkit.REPEAT_TREE`` and
``routekit.subjects_tree``.

Built in this process (``build_target``) by default; ``fresh=FreshProcess(...)`` runs ``docbundle-index
build`` in a fresh process with a fixed hash seed, worker count and epoch instead, for the tests that
compare bytes across runs (reproducibility).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from clikit import index_cli
from docbundle.bundle.embed import PASSAGE_RECIPE, Embedder, EmbedderIdentity, passage_text
from docbundle.bundle.layout import BUILD_ID_RE
from docbundle.bundle.manifest import MANIFEST_NAME, EmbedderInfo, FileEntry, VectorsInfo, encode_manifest
from docbundle.bundle.reader import open_bundle
from docbundle.bundle.routeindex import update_index
from docbundle.bundle.summary import SUMMARY_NAME
from docbundle.bundle.vectors import VECTORS_FILE, write_vectors
from docbundle.indexer.config import load_config
from docbundle.indexer.pipeline.build import Outcome, build_target
from docbundle.indexer.pipeline.cache import CrawlCache

# The build epoch of a fresh-process build: fixed, so two builds of the same inputs give the same bytes.
FRESH_EPOCH = "1767225600"
# A fresh-process build of a test's site takes well under a minute; a hung one fails the test after this.
FRESH_TIMEOUT = 300


@dataclass(frozen=True)
class Site:
    """A local documentation site: ``pages`` (relative path -> text) and its ``llms.txt``."""

    pages: Mapping[str, str]
    llms: str

    def write(self, folder: Path) -> None:
        """Write the site into ``folder``."""
        write_site(folder, dict(self.pages), self.llms)


@dataclass(frozen=True)
class Tree:
    """What ``build`` builds: a config's text and what it needs.

    ``sites``: the local sites the config reads, by folder relative to the config's. ``vectors``: the
    libraries whose bundles get ``vectors.bin`` (``add_vectors``), each with the embedder version the
    file claims (None: the embedder's own; another makes them stale). ``route_index``: write the route
    index afterwards, as ``docbundle-index build`` leaves it (``build_target`` alone does not).
    """

    config: str
    sites: Mapping[str, Site] = field(default_factory=dict)
    vectors: Mapping[str, str | None] = field(default_factory=dict)
    route_index: bool = False


@dataclass(frozen=True)
class FreshProcess:
    """Build with ``docbundle-index build`` in a fresh process, with this hash seed and worker count."""

    hash_seed: str
    workers: str


# The two fresh-process builds a reproducibility test compares: everything in one process with one hash
# seed, and pages prepared in worker processes with another.
IN_ONE_PROCESS = FreshProcess(hash_seed="1", workers="0")
IN_WORKERS = FreshProcess(hash_seed="2", workers="2")


@dataclass(frozen=True)
class Built:
    """What ``build`` built: the bundles folder and one outcome per library version (none when built in
    a fresh process, whose outcomes stay in it)."""

    root: Path
    outcomes: list[Outcome]

    @property
    def outcome(self) -> Outcome:
        """The outcome of a config of one library version."""
        (outcome,) = self.outcomes
        return outcome

    @property
    def bundle(self) -> Path:
        """The bundle folder a config of one library version built."""
        assert self.outcome.bundle is not None, self.outcome.message
        return Path(self.outcome.bundle)

    @property
    def build_id(self) -> str:
        """The build id of a config of one library version (the one its CURRENT now names)."""
        assert self.outcome.build_id is not None, self.outcome.message
        return self.outcome.build_id


def build(
    config: Path,
    out: Path,
    tree: Tree | str | None = None,
    *,
    library: str | None = None,
    cache: Path | None = None,
    check: bool = True,
    embedder: Embedder | None = None,
    fresh: FreshProcess | None = None,
) -> Built:
    """Build the library versions ``config`` lists into ``out``.

    ``tree``: what to write first (a ``Tree``, or the config's text alone; None: ``config`` is written
    already). ``library``: build only that library's versions. ``cache``: the crawl cache folder (None:
    none). ``check``: fail the test unless every version was built (False: the test reads the outcome).
    ``embedder``: makes the vectors the tree asks for. ``fresh``: build in a fresh process instead.
    """
    if isinstance(tree, str):
        tree = Tree(tree)
    if tree is not None:
        config.parent.mkdir(parents=True, exist_ok=True)
        for folder, site in tree.sites.items():
            site.write(config.parent / folder)
        config.write_text(tree.config, encoding="utf-8")
    if fresh is not None:
        vectors = tree is not None and bool(tree.vectors)
        assert not (library or cache or vectors), "a fresh-process build takes the config whole, uncached"
        _build_fresh(config, out, fresh)
        return Built(out, [])
    catalogue = load_config(config)
    crawl_cache = CrawlCache(cache) if cache is not None else None
    outcomes = []
    for lib in catalogue.libraries if library is None else [catalogue.get(library)]:
        for target in catalogue.targets(lib):
            outcome = build_target(target, out, cache=crawl_cache)
            assert not check or outcome.status == "built", outcome.message
            outcomes.append(outcome)
    if tree is not None and tree.vectors:
        assert embedder is not None, "a tree with vectors needs an embedder"
        for outcome in outcomes:
            if outcome.library in tree.vectors and outcome.bundle is not None:
                version = tree.vectors[outcome.library]
                claimed = dataclasses.replace(embedder.identity, version=version) if version else None
                add_vectors(Path(outcome.bundle), embedder, claimed)
    if tree is not None and tree.route_index:
        update_index(out)
    return Built(out, outcomes)


def _build_fresh(config: Path, out: Path, fresh: FreshProcess) -> None:
    """``docbundle-index build`` in a fresh process with a fixed hash seed, worker count and epoch."""
    env = {
        **os.environ,
        "PYTHONHASHSEED": fresh.hash_seed,
        "DOCBUNDLE_WORKERS": fresh.workers,
        "SOURCE_DATE_EPOCH": FRESH_EPOCH,
    }
    r = index_cli(
        "build", "--config", str(config), "--out", str(out), "--no-cache", "--quiet",
        timeout=FRESH_TIMEOUT, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr


def one_page(library: str, word: str, *, keep: int = 3) -> Tree:
    """``library``: one page, "Guide to <word>", about ``word`` only, so a search for it tells which
    build answered (tests of what a server does when builds come and go). ``keep = 1`` makes a build's
    prune want every older build gone. Its config goes in ``<library>.toml``."""
    page = f"# Guide to {word}\n\nThis page explains {word} in detail, with {word} examples.\n"
    site = Site({"page.md": page}, f"# {library}\n\n## Docs\n\n- [Guide to {word}](page.md)\n")
    config = (
        f'[[library]]\nid = "{library}"\nllms_txt = "{library}/llms.txt"\nkeep = {keep}\n'
        "[library.chunking]\nmin_words = 3\n"
    )
    return Tree(config, {library: site})


def builds(vdir: Path) -> set[str]:
    """The build directories under a version directory."""
    return {p.name for p in vdir.iterdir() if BUILD_ID_RE.fullmatch(p.name)}


def write_site(site: Path, pages: dict[str, str], llms: str) -> None:
    """A local documentation site: ``pages`` (relative path -> text) and its ``llms.txt``."""
    for rel, text in pages.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text, encoding="utf-8")
    (site / "llms.txt").write_text(llms, encoding="utf-8")


def write_sized_site(
    root: Path, head: list[str], min_bytes: float, page: Callable[[int], tuple[str, str, str]]
) -> Path:
    """A local site ``root/site`` of pages ``page(i)`` for i = 0, 1, ... until their text passes
    ``min_bytes``: each gives (file name under ``pages/``, its text, its llms.txt line); ``head``
    opens the llms.txt."""
    site = root / "site"
    (site / "pages").mkdir(parents=True)
    lines = list(head)
    size = i = 0
    while size <= min_bytes:
        name, text, link = page(i)
        (site / "pages" / name).write_text(text, encoding="utf-8")
        lines.append(link)
        size += len(text.encode())
        i += 1
    (site / "llms.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return site


def add_vectors(bundle: Path, embedder: Embedder, identity: EmbedderIdentity | None = None) -> None:
    """Embed every section of ``bundle`` the way the indexer does (``passage_text`` in index order),
    write ``vectors.bin`` and list it in the manifest (``files`` and ``vectors``), so the reader's
    verification covers it.

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
