"""Build one library version: fetch llms.txt, crawl its pages, chunk, hash, and write a bundle if changed.

A library whose llms.txt cannot be fetched (or lists nothing) fails as a whole and its previous bundle is
left untouched. A page that fails is recorded in the manifest with its reason and the build goes on; a
build in which no page could be indexed fails (with the failures counted by kind in its message).

A build is one ``BuildRun``: it holds the target, the crawl scope and cache, the progress displays and
the ``Outcome``, and runs the phases in order under the version lock:

1. the crawl, on one event loop through one ``CrawlSession`` (one HTTP client) from the llms.txt
   (``source.py``) through the listed pages to the last follow level and its robots.txt
   (``collect.py``, ``follow.py``), so what the crawler learns about a host lasts for the build;
2. the input hash: equal to the current bundle's, nothing can have changed and the build stops;
3. the pages prepared in worker processes (``prepare.py``, where HTML is converted to markdown) and
   assembled into documents and index chunks (``assemble.py``), and the content hash: equal to the
   current bundle's (and the current bundle has the vectors this build would give it), nothing is
   written;
4. the chunks embedded when the build embeds (``semantic.py``: the vectors of unchanged passages are
   copied from the current bundle, only the others embedded);
5. the bundle written and published (``write.py``), old builds pruned.

Whether a build embeds is decided before the crawl (``semantic.plan_vectors``), so a model that cannot
load fails the library before any page is fetched.

Links to one page under several URL styles (``x``, ``x.html``, ``x/``, ``x/index.html``, with or without
``#fragment``) are fetched and indexed once (``addresses.page_key``), and so are two links that land on
one page (a redirect or a meta refresh to a page also listed).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Literal

import msgspec
from docbundle.bundle import layout
from docbundle.bundle.contenthash import content_hash
from docbundle.bundle.errors import VersionLockedError
from docbundle.bundle.layout import make_build_id, version_dir
from docbundle.bundle.manifest import Manifest, VectorsInfo, obtained_mix
from docbundle.bundle.publish import batch, publish
from docbundle.bundle.store import write_store

from ..config import Target
from ..errors import BuildError, EmbeddingDeferred, FetchError, IndexerError
from . import write
from .addresses import doc_path, is_url, page_key
from .assemble import (
    Assembled,
    assemble,
    chunking_info,
    input_hash,
    iso,
    make_jobs,
    make_manifest,
    nothing_indexed,
    now,
    shared_failure,
    toolchain,
)
from .cache import CrawlCache
from .checkpoint import checkpoint_path, remove_checkpoint
from .collect import CrawledPage, candidates, inline_pages, listed_links, page_ids
from .fetched import FetchResult, Guard
from .follow import FOLLOWED_SECTION, FollowScope, fetch_robots, origin
from .llmstxt import LlmsLink, LlmsTxt
from .prepare import FAILURE_KIND, Ahead, PageJob, Prepared, prepare_all, start_workers
from .progress import Progress, ProgressFactory, QuietProgress
from .scope import CrawlScope
from .semantic import (
    Announce,
    VectorPlan,
    build_hash,
    embedding_requested,
    key_of,
    make_vectors,
    plan_vectors,
)
from .session import CrawlSession
from .source import Source, fetch_source

Status = Literal["built", "unchanged", "failed"]


class PageFailure(msgspec.Struct, frozen=True):
    """A page that was not indexed, and why."""

    url: str
    error: str
    kind: str | None = None


class Outcome(msgspec.Struct, kw_only=True):
    """What building one library version did (the crawl report's unit)."""

    library: str
    version: str
    status: Status
    message: str = ""
    build_id: str | None = None
    content_hash: str | None = None
    bundle: str | None = None
    source: str = ""
    documents: int = 0
    chunks: int = 0
    pages_listed: int = 0
    pages_fetched: int = 0
    pages_not_modified: int = 0
    pages_failed: int = 0
    pages_followed: int = 0  # pages crawled by following links (library ``follow``), in pages_fetched/failed
    failures: list[PageFailure] = []
    obtained: dict[str, int] = {}  # indexed documents by how their text was obtained (markdown, html...)
    conformance: list[str] = []  # the llms.txt's deviations from the spec (informational notes left out)
    pruned: list[str] = []
    crawl_seconds: float = 0.0
    build_seconds: float = 0.0
    prepared_ahead: int = 0  # pages the workers prepared while the crawl ran (``prepare.Ahead``)
    embedded: int = 0  # chunks embedded by this build (semantic vectors)
    reused: int = 0  # chunks whose vector was copied from the previous bundle
    embed_seconds: float = 0.0  # reuse and embedding, within build_seconds
    resumed: int = 0  # of the rows to embed, those kept by an interrupted build (embedded = the others)
    keyword_build: str | None = None  # the keyword-only build published before the vectors (keyword first)
    keyword_seconds: float = 0.0  # from the build's start to that publication
    embed_deferred: str = ""  # why the vectors wait for the next run (``embed_deadline``), when they do
    vectors_note: str = ""  # why the bundle has no vectors ("" when it has them)
    # Why a failed build failed, as data (the nightly's status.json classifies it): the fetch error's
    # kind (``fetched.ERROR_KINDS``, or ``empty``), its HTTP status, or ``build`` when nothing was fetched
    # wrong but the bundle could not be written.
    failure_kind: str = ""
    failure_status: int | None = None


def _tools(plan: VectorPlan, key: str | None, current: Manifest | None) -> dict[str, str]:
    """The toolchain of a bundle of these inputs with ``key``'s vectors (``assemble.toolchain``): the one
    installed, but the embedding tools the current bundle records when this build keeps its vectors
    without embedding (``--no-embed``: it did not make them, and must find that bundle unchanged)."""
    keeps = plan.embedder is None and key is not None and current is not None
    return toolchain(key is not None, current.build.tools if keeps and current is not None else None)


def _same_toolchain(current: Manifest, plan: VectorPlan) -> bool:
    """Whether ``current`` (same content, the vectors ``plan`` wants) names the toolchain this build
    would: a new version of a tool rebuilds unchanged content (its manifest names the new toolchain,
    ``docbundle-index diff`` shows which tool changed, and the vectors are reused by passage text). A
    build that keeps the current bundle's vectors without embedding keeps that bundle as it is: a new
    one would have none."""
    if plan.mode == "skip" and current.vectors is not None:
        return True
    return current.build.tools == toolchain(plan.key is not None)


def build_target(
    target: Target,
    out_dir: Path,
    *,
    cache: CrawlCache | None = None,
    progress: ProgressFactory | None = None,
    embed: bool | None = None,
    keyword_first: bool = False,
    announce: Announce | None = None,
    embed_deadline: float | None = None,
) -> Outcome:
    """Build one library version into ``out_dir``; never raises for a library-level failure.

    ``embed=False`` builds without embedding (``--no-embed``); None follows ``DOCBUNDLE_EMBED``.
    ``keyword_first`` publishes the keyword-only bundle before embedding new content, so a server over
    ``out_dir`` answers keyword searches while the vectors are made (``docbundle-index build`` and ``add
    --build`` do; the nightly job does not: it packages the finished bundle only). ``announce`` prints
    a line for the person watching (the embedding's estimate).

    ``embed_deadline`` (a ``time.monotonic()`` instant, the nightly shard's budget) defers a first
    embedding, one whose current bundle has no vectors of this embedder, that has not finished by then:
    the keyword-only bundle of the content is published (or kept, when it is current already) and the
    rows embedded so far wait in the checkpoint for the next run (``errors.EmbeddingDeferred``). A
    rebuild of a bundle that has vectors embeds its changed rows whatever the deadline: it reuses the
    others, and published without vectors it would lose them."""
    _retired.clear()  # the previous build's index writer is freed now, before this one allocates
    run = BuildRun(target, out_dir, cache=cache, progress=progress, embed=embed)
    run.keyword_first, run.announce, run.embed_deadline = keyword_first, announce, embed_deadline
    with batch(out_dir):  # the route index once, after the build's last publish (``publish.batch``)
        return run.run()


#: The index writer of the last bundle written, kept from its build's end to the next build's start:
#: freeing its postings (hundreds of thousands of small objects) took 45 ms of html-python's build
#: and more of bigger ones. A process that builds once and exits (``cli.console``, ``os._exit``)
#: never pays it; one that builds again pays it then, before the next build allocates its own.
_retired: list[object] = []


class BuildRun:
    """One build of one library version: what it builds, where, with what, and what it did so far.

    Made by ``build_target``, which holds the options' defaults."""

    def __init__(
        self,
        target: Target,
        out_dir: Path,
        *,
        cache: CrawlCache | None,
        progress: ProgressFactory | None,
        embed: bool | None,
    ) -> None:
        lib, version = target.library, target.version
        self.embed = embed
        self.target = target
        self.cache = cache
        self.progress = progress
        self.vdir = version_dir(out_dir, lib.id, version.name)
        # What this build may touch: a remote llms.txt's own origin (plus allow_hosts) and no local
        # files; a local llms.txt's (or folder's) own folder, or the library's local_root.
        self.scope = CrawlScope.for_source(target.source, lib.allow_hosts, target.local_root)
        self.outcome = Outcome(library=lib.id, version=version.name, status="failed", source=target.source)
        self.label = f"{lib.id}@{version.name}"
        self.ahead: Ahead | None = None  # pages prepared while the crawl runs (``_offer``)
        self._source: Source | None = None
        self.keyword_first = False  # publish the keyword-only bundle before embedding (``build_target``)
        self.announce: Announce | None = None
        self.embed_deadline: float | None = None  # defers a first embedding (``build_target``)
        self.checkpoint = checkpoint_path(out_dir, lib.id, version.name)
        self._t0 = time.perf_counter()

    def run(self) -> Outcome:
        """Build under the version lock; a library-level failure is recorded in the outcome, not raised."""
        outcome, vdir = self.outcome, self.vdir
        try:
            with layout.version_lock(vdir):
                layout.remove_stale_temps(vdir)
                try:
                    self._build_locked()
                except BaseException:
                    _unlock_skeleton(vdir)
                    raise
        except (IndexerError, VersionLockedError) as exc:
            outcome.status = "failed"
            outcome.message = str(exc)
            if isinstance(exc, FetchError):
                outcome.failure_kind, outcome.failure_status = exc.kind, exc.status
            else:
                outcome.failure_kind = "build"
        except OSError as exc:
            outcome.status = "failed"
            outcome.message = f"cannot write under {vdir}: {exc}"
            outcome.failure_kind = "build"
        finally:
            # Also when interrupted (Ctrl-C raises KeyboardInterrupt through here, issue 31).
            if outcome.status == "failed":
                # A failed first build leaves no empty version folder behind: readers would list a
                # library with "no bundle built yet" and `docbundle verify` would fail for the folder.
                with contextlib.suppress(OSError):
                    vdir.rmdir()
                    vdir.parent.rmdir()
        return outcome

    @contextlib.contextmanager
    def _display(
        self, total: int, label: str, *, verb: str = "crawled", unit: str = "pages"
    ) -> Iterator[Progress]:
        """The display of one phase, closed when the phase ends however it ends."""
        bar = self.progress(total, label, verb=verb, unit=unit) if self.progress else QuietProgress()
        try:
            yield bar
        finally:
            bar.close()

    def _build_locked(self) -> None:
        """Under the version lock: crawl, and publish a bundle unless nothing changed."""
        target = self.target
        plan = plan_vectors(target.library.semantic, embedding_requested(self.embed))
        t0 = time.perf_counter()
        started = now()
        start_workers()  # a worker starts while the crawl runs (the process keeps it for later builds)
        current = write.current_manifest(self.vdir)
        self.ahead = Ahead()
        try:
            self._crawl_and_write(current, plan, t0, started)
        except BaseException as exc:
            self.ahead.close(now=not isinstance(exc, Exception))  # interrupted: no waiting for a page
            raise
        self.ahead.close()

    def _crawl_and_write(
        self, current: Manifest | None, plan: VectorPlan, t0: float, started: datetime
    ) -> None:
        """The crawl, then the bundle unless nothing changed (``_build_locked``'s body)."""
        target, outcome = self.target, self.outcome
        src, pages = asyncio.run(self._crawl())
        outcome.crawl_seconds = round(time.perf_counter() - t0, 3)

        t1 = time.perf_counter()
        kind = "directory" if src.result is None and not is_url(target.source) else src.llms.kind
        ihash = input_hash(target, kind, pages, _tools(plan, plan.key, current), plan.key)
        if current is not None and current.build.input_hash in {
            input_hash(target, kind, pages, _tools(plan, key, current), key)
            for key in plan.input_keys(current)
        }:
            self._unchanged(current, t1, plan)
            return
        built = self._write_bundle(src, pages, kind, ihash, current, started, plan)
        if built is None:
            assert current is not None
            self._unchanged(current, t1, plan)
            return
        build_id, final, asm = built
        outcome.status = "built"
        outcome.build_id = build_id
        outcome.bundle = str(final)
        outcome.pruned = write.prune(self.vdir, target.keep)
        outcome.build_seconds = round(time.perf_counter() - t1, 3)
        outcome.message = (
            f"built {build_id}: {len(asm.docs)} documents ({describe_mix(outcome.obtained)}), "
            f"{asm.chunks} chunks"
        )
        if not outcome.vectors_note:
            outcome.message += f" ({outcome.embedded} embedded, {outcome.reused} reused)"
        if outcome.pages_followed:
            outcome.message += f", {outcome.pages_followed} page(s) followed"
        if outcome.pages_failed:
            outcome.message += f", {outcome.pages_failed} page(s) failed"
        if outcome.embed_deferred:
            outcome.message += f"; {outcome.embed_deferred}"

    # -- the crawl: one event loop, one session -------------------------------------------------------

    async def _crawl(self) -> tuple[Source, list[CrawledPage]]:
        """Fetch the llms.txt and every page of the build through one crawl session."""
        async with CrawlSession(self.scope, self.target.crawl, self.cache) as session:
            src = await fetch_source(self.target, session)
            self._source = src
            self.outcome.conformance = [
                f"line {i.line}: {i.code}: {i.message}" for i in src.llms.issues if i.deviation
            ]
            if src.llms.kind == "full" and src.llms.inline_docs:
                pages = inline_pages(src)
                self.outcome.pages_listed = len(pages)
            else:
                pages = await self._crawl_listed(session, src.llms)
        return src, pages

    async def _crawl_level(
        self, session: CrawlSession, links: list[LlmsLink], label: str, guard: Guard | None = None
    ) -> list[FetchResult]:
        """Crawl the pages of ``links`` (results in input order) with a progress display, handing each
        page to the workers as it arrives (``_offer``)."""
        by_url = {link.url: link for link in links}

        def arrived(res: FetchResult) -> None:
            bar.update(res)
            link = by_url.get(res.url)
            if link is not None:
                self._offer(link, res)

        with self._display(len(links), label) as bar:
            return await session.crawl([link.url for link in links], on_result=arrived, guard=guard)

    def _offer(self, link: LlmsLink, res: FetchResult) -> None:
        """Give a fetched page to the workers now, with the job it will most likely have (its document
        id before any collision is numbered): the crawl leaves them idle. Not a page revalidated from
        the crawl cache (304): a build in which nothing changed then prepares nothing ahead. A site
        without validators sends every page again, so its pages are prepared ahead and, when nothing
        changed, dropped (``Ahead.close``): CPU that the crawl would have left idle."""
        src = self._source
        if self.ahead is None or src is None or not res.ok or res.text is None or res.not_modified:
            return
        page = CrawledPage(link, res, res.text)
        (job,) = make_jobs(
            [page], [doc_path(link.url, src.base_url)], self.target, src.result is None, src.base_url
        )
        self.ahead.offer(link.url, job)

    async def _crawl_listed(self, session: CrawlSession, llms: LlmsTxt) -> list[CrawledPage]:
        """Crawl the pages the llms.txt links (selected, deduplicated, capped), recording what failed."""
        target, lib = self.target, self.target.library
        links, seen = listed_links(target, llms)
        self.outcome.pages_listed = len(links)
        if len(links) > lib.max_pages:
            links = links[: lib.max_pages]
        if not links:
            raise FetchError(
                target.source, "the llms.txt lists no documents (no links and no inline docs)", kind="empty"
            )
        results = await self._crawl_level(session, links, self.label)
        landed: set[str] = set()
        pages = self._record(links, results, landed)
        if lib.follow is not None:
            pages += await self._follow(session, pages, seen, landed)
        return pages

    def _record(
        self, links: list[LlmsLink], results: list[FetchResult], landed: set[str]
    ) -> list[CrawledPage]:
        """The crawled links as pages, counted in the outcome; a page already landed on is dropped."""
        outcome = self.outcome
        pages = []
        for link, res in zip(links, results, strict=True):
            if res.ok:
                # Two links that landed on one page (a redirect or a meta refresh to a page also listed)
                # give one document, under the first link.
                where = page_key(res.final_url)
                if where in landed:
                    continue
                landed.add(where)
            pages.append(CrawledPage(link, res, res.text if res.ok else None))
            if res.ok:
                outcome.pages_fetched += 1
                outcome.pages_not_modified += int(res.not_modified)
            else:
                outcome.pages_failed += 1
                outcome.failures.append(PageFailure(link.url, res.error or "failed", res.error_kind))
        return pages

    async def _follow(
        self, session: CrawlSession, listed: list[CrawledPage], seen: set[str], landed: set[str]
    ) -> list[CrawledPage]:
        """Breadth-first: crawl the links of the listed pages, then theirs, to ``follow.depth`` levels,
        on the llms.txt's origin under ``follow.prefix``, robots.txt permitting, at most
        ``follow.max_pages`` pages in all (sorted within a level, so two builds crawl the same pages).
        robots.txt is asked only about the URLs that are kept (``FollowScope.pick``), and every redirect
        hop of a followed page is held to the same origin, prefix and robots.txt (``FollowScope.refusal``)."""
        target, outcome = self.target, self.outcome
        lib = target.library
        follow = lib.follow
        home = origin(target.source)
        if follow is None or home is None:
            return []
        reach: FollowScope | None = None
        budget = follow.max_pages
        level = [p for p in listed if p.text is not None]
        out: list[CrawledPage] = []
        for _ in range(follow.depth):
            if budget <= 0 or not level:
                break
            urls = candidates(target, level, home, seen)
            if urls and reach is None:
                reach = FollowScope(home, follow.prefix, await fetch_robots(home, session))
            if reach is not None:
                urls = reach.pick(urls, budget)
            if not urls:
                break
            budget -= len(urls)
            outcome.pages_followed += len(urls)
            guard = reach.refusal if reach is not None else None
            links = [LlmsLink(title="", url=u, section=FOLLOWED_SECTION) for u in urls]
            results = await self._crawl_level(session, links, f"{self.label} followed", guard)
            recorded = self._record(links, results, landed)
            out += recorded
            level = [p for p in recorded if p.text is not None]
        return out

    # -- the bundle: prepared, assembled, hashed, written ---------------------------------------------

    def _write_bundle(
        self,
        src: Source,
        pages: list[CrawledPage],
        kind: str,
        ihash: str,
        current: Manifest | None,
        started: datetime,
        plan: VectorPlan,
    ) -> tuple[str, Path, Assembled] | None:
        """Index, store and publish the pages as a new bundle: its buildId, folder and contents, or None
        (nothing written) when its content hash equals the current bundle's and the current bundle has
        the vectors ``plan`` wants.

        The search index is seeded with the input hash of the keyword-only bundle, whatever the vectors:
        the keyword-only bundle of these inputs (``--no-embed``, or the one published first) and the
        bundle with vectors then hold the same index bytes, and differ only by ``vectors.bin`` and the
        manifest (docs/bundle-format.md)."""
        target, outcome = self.target, self.outcome
        ids = page_ids(pages, src.base_url)
        jobs = make_jobs(pages, ids, target, src.result is None, src.base_url)
        build_id_date = iso(started)
        keyword_hash = input_hash(target, kind, pages, toolchain(False), None)
        tmp = layout.new_temp_dir(self.vdir, f"{build_id_date[:10].replace('-', '')}-pending")
        try:
            index = write.IndexWriter(tmp, seed=keyword_hash)
            try:
                asm = self._assemble(pages, ids, jobs, src.base_url, index)
                chash = outcome.content_hash
                assert chash is not None
                if (
                    current is not None
                    and current.build.content_hash == chash
                    and plan.keeps(current)
                    and _same_toolchain(current, plan)
                ):
                    index.cancel()
                    shutil.rmtree(tmp)
                    return None
                first = self._keyword_first(plan, current, chash)
                vectors = None if first else self._vectors(tmp, asm, current, plan)
            except EmbeddingDeferred as deferred:
                # Only a first embedding is deferred, and one not published first is of the content the
                # current keyword-only bundle holds (``_keyword_first``): that bundle stays.
                index.cancel()
                shutil.rmtree(tmp)
                outcome.vectors_note = outcome.embed_deferred = str(deferred)
                return None
            except BaseException:
                index.cancel()
                raise

            def finish(where: Path, key: str | None, ihash: str, vectors: VectorsInfo | None) -> str:
                """Write the manifest of the bundle in ``where``; its buildId."""
                build_id = make_build_id(build_id_date, build_hash(chash, key))
                tools = toolchain(key is not None)
                manifest = make_manifest(
                    target, src, kind, started, build_id, chash, ihash, asm, tools, vectors
                )
                write.finish_manifest(where, msgspec.structs.replace(manifest, routing=routing))
                return build_id

            with self._display(3, self.label, verb="wrote", unit="parts") as bar:
                try:
                    index.commit()
                except BaseException:
                    index.cancel()
                    raise
                bar.advance(note="search index")
                routing = write.write_routing(tmp, index.routing_record(asm.chunks))
                (tmp / "llms.txt").write_text(src.text, encoding="utf-8")
                write_store(tmp, asm.docs)
                bar.advance(note="document store")
                if first:  # the keyword-only bundle is published now, the bundle with vectors below
                    self._publish_keyword(tmp, lambda where: finish(where, None, keyword_hash, None))
                else:
                    build_id = finish(tmp, plan.key, ihash, vectors)
                bar.advance(note="manifest, files hashed")
            if first:
                try:
                    vectors = self._vectors(tmp, asm, current, plan)
                except EmbeddingDeferred as deferred:  # the keyword-only bundle published above stays
                    shutil.rmtree(tmp)
                    outcome.vectors_note = outcome.embed_deferred = str(deferred)
                    assert outcome.keyword_build is not None
                    return outcome.keyword_build, self.vdir / outcome.keyword_build, asm
                with self._display(1, self.label, verb="wrote", unit="parts") as bar:
                    build_id = finish(tmp, plan.key, ihash, vectors)
                    bar.advance(note="manifest, files hashed")
            final, _ = publish(self.vdir, tmp, build_id)
            _retired.append(index)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if vectors is not None:
            remove_checkpoint(self.checkpoint)  # its rows are in the published bundle now
            # The keyword-only bundle of this content (published first, by this build or by the one it
            # resumed) is this bundle without its vectors: nothing to roll back to, so it goes now.
            if current is not None and current.vectors is None and current.build.content_hash == chash:
                write.discard(self.vdir, current.build.build_id)
            if outcome.keyword_build is not None:
                write.discard(self.vdir, outcome.keyword_build)
        return build_id, final, asm

    def _keyword_first(self, plan: VectorPlan, current: Manifest | None, chash: str) -> bool:
        """Whether to publish the keyword-only bundle before embedding: asked for (``build_target``), the
        build embeds, and the current bundle neither serves vectors of this embedder (a rebuild whose
        current bundle answers hybrid searches keeps it until the new one is complete: it reuses most
        rows) nor holds this content already (the keyword-only bundle of a build interrupted while it
        embedded, which the build resumes)."""
        if not self.keyword_first or plan.embedder is None:
            return False
        return current is None or (key_of(current) != plan.key and current.build.content_hash != chash)

    def _publish_keyword(self, tmp: Path, finish: Callable[[Path], str]) -> None:
        """Publish the files written so far in ``tmp`` (linked, not copied) with a keyword-only manifest,
        as the version's CURRENT: what a ``--no-embed`` build of these inputs publishes."""
        ktmp = layout.new_temp_dir(self.vdir, f"{tmp.name.removeprefix(layout.TMP_PREFIX)}-keyword")
        try:
            write.link_tree(tmp, ktmp)
            build_id = finish(ktmp)
            publish(self.vdir, ktmp, build_id)
        except BaseException:
            shutil.rmtree(ktmp, ignore_errors=True)
            raise
        self.outcome.keyword_build = build_id
        self.outcome.keyword_seconds = round(time.perf_counter() - self._t0, 3)
        if self.announce is not None:
            self.announce(
                f"{self.label}: keyword search is served now (build {build_id}); hybrid search once the "
                "vectors are embedded"
            )

    def _assemble(
        self,
        pages: list[CrawledPage],
        ids: list[str],
        jobs: list[PageJob],
        base_url: str,
        index: write.IndexWriter,
    ) -> Assembled:
        """Prepare every page into ``index`` (not yet committed) and hash the content into the outcome."""
        target, outcome = self.target, self.outcome
        lib = target.library
        keys = [page.link.url for page in pages if page.text is not None]  # make_jobs's pages
        prepared = self.ahead.results(list(zip(keys, jobs, strict=True))) if self.ahead else prepare_all(jobs)
        with self._display(len(jobs), self.label, verb="indexed") as bar:
            asm = assemble(pages, ids, _counted(prepared, bar), target, base_url, index)
        if self.ahead is not None:
            outcome.prepared_ahead = self.ahead.taken
            self.ahead.close()  # its thread ends: the segment write may fork only a one-thread process
        outcome.obtained = obtained_mix(asm.sources)
        for s in asm.sources:
            if s.error_kind == FAILURE_KIND:
                outcome.pages_failed += 1
                outcome.failures.append(PageFailure(s.url, s.error or "failed", s.error_kind))
        if not asm.docs:
            raise FetchError(target.source, nothing_indexed(asm.sources), kind=shared_failure(asm.sources))
        outcome.content_hash = content_hash(
            lib.info(), target.version, chunking_info(target), lib.search(), asm.docs
        )
        outcome.documents = len(asm.docs)
        outcome.chunks = asm.chunks
        return asm

    def _vectors(
        self, tmp: Path, asm: Assembled, current: Manifest | None, plan: VectorPlan
    ) -> VectorsInfo | None:
        """Write ``vectors.bin`` into ``tmp`` when the build embeds (reusing the current bundle's rows)."""
        outcome = self.outcome
        if plan.embedder is None:
            outcome.vectors_note = plan.reason
            return None
        previous = self.vdir / current.build.build_id if current is not None else None
        # The deadline defers only a first embedding, and only when the keyword-only bundle may be
        # published in its place (``keyword_first``; ``build_target``).
        deferrable = self.keyword_first and (current is None or key_of(current) != plan.key)
        started = time.perf_counter()
        try:
            made = make_vectors(
                tmp,
                asm.docs,
                plan.embedder,
                previous,
                lambda total, verb: self._display(total, self.label, verb=verb, unit="chunks"),
                checkpoint=self.checkpoint,
                announce=self.announce,
                deadline=self.embed_deadline if deferrable else None,
            )
        except EmbeddingDeferred:
            outcome.embed_seconds = round(time.perf_counter() - started, 3)  # the time it did take
            raise
        outcome.embedded, outcome.reused, outcome.resumed = made.fresh, made.info.reused, made.resumed
        outcome.embed_seconds = made.seconds
        return made.info

    def _unchanged(self, current: Manifest, t1: float, plan: VectorPlan) -> None:
        """Record that the current bundle is kept: nothing changed since it was built."""
        outcome = self.outcome
        if current.vectors is None:
            outcome.vectors_note = outcome.vectors_note or plan.reason or "built without vectors"
        outcome.obtained = obtained_mix(current.documents)
        outcome.status = "unchanged"
        outcome.build_id = current.build.build_id
        outcome.content_hash = current.build.content_hash
        outcome.bundle = str(self.vdir / current.build.build_id)
        outcome.documents = current.counts.documents
        outcome.chunks = current.counts.chunks
        outcome.message = "content unchanged; kept the current bundle"
        if outcome.embed_deferred:
            outcome.message += f"; {outcome.embed_deferred}"
        outcome.build_seconds = round(time.perf_counter() - t1, 3)


def _unlock_skeleton(vdir: Path) -> None:
    """After a failed build, with the version lock still held: when the version folder holds nothing but
    its lock file (no bundle was ever published), remove the lock file so the folder can go. A build
    interrupted while writing leaves its temporary folder: it goes first (the lock is still held)."""
    with contextlib.suppress(OSError):
        layout.remove_stale_temps(vdir)
        if [p.name for p in vdir.iterdir()] == [layout.LOCK_NAME]:
            (vdir / layout.LOCK_NAME).unlink()


def _counted(prepared: Iterator[Prepared], bar: Progress) -> Iterator[Prepared]:
    """``prepared``, advancing ``bar`` by one page as each arrives (parsed and analysed)."""
    for item in prepared:
        bar.advance()
        yield item


def describe_mix(mix: dict[str, int]) -> str:
    """``3 html, 1 markdown``: the mix as the summary line and the crawl report show it."""
    return ", ".join(f"{n} {kind}" for kind, n in mix.items()) or "none"


__all__ = [
    "BuildError",
    "BuildRun",
    "Outcome",
    "build_target",
    "describe_mix",
    "doc_path",
    "obtained_mix",
    "page_key",
]
