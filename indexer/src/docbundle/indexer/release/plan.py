"""The nightly plan: which libraries each CI job builds, and which release each job's archives go to.

``docbundle-index nightly --plan`` reads the config, last night's timings (``timings.json``, an asset of
the well-known release ``bundles-latest``) and last night's release index (``index.json``, same
release: its document counts), and splits the catalogue into at most ``MAX_SHARDS`` shards (GitHub's
limit of jobs in one matrix) balanced by expected time, each shard a matrix job. Then it groups the
shards into releases of at most ``MAX_ARCHIVES_PER_RELEASE`` archives (a GitHub release holds at most
``MAX_ASSETS_PER_RELEASE`` assets; SHA256SUMS, index.json and the release's attestation bundle are three
of them), counting every library
version a shard builds as one archive, so no release can overflow even on a night when everything
changed. Pure computation: no network, no clock (the release tags' prefix is given).

Expected time of a library: its measured seconds from last night's timings; else its document count
from the release index times the seconds per document measured over the libraries that have both
(``SECONDS_PER_DOCUMENT`` when none have); else ``DEFAULT_DOCUMENTS`` per version. Every library also
costs ``SECONDS_PER_LIBRARY`` at least.

Shards: their number is the expected total over ``target_seconds``, at most ``MAX_SHARDS`` and at most
one per library, and never fewer than last night's (``last_shard_count``): a library that moves shard
loses its shard's cache, its previous bundle (whose vectors a rebuild reuses) and its embedding checkpoint,
so fewer shards would embed the moved libraries again from nothing. A library stays in the shard it ran in last night (the shard's Actions cache holds
its previous bundle and crawl cache) unless that shard is over ``STICKY_SLACK`` times the mean; the
libraries that move, and the new ones, go heaviest first to the lightest shard that has room (LPT).
The heaviest shard is then at most ``STICKY_SLACK`` times the mean plus the longest single library
(without last night's shards: the mean plus the longest library). Ties break by library id, so the same
inputs always give the same plan.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from pathlib import Path
from statistics import median
from typing import Annotated

import msgspec
from docbundle.bundle.errors import BundleFormatError
from docbundle.bundle.layout import write_atomically
from docbundle.bundle.releaseindex import (
    ATTESTATION,
    MAX_ARCHIVES_PER_RELEASE,
    MAX_ASSETS_PER_RELEASE,
    MAX_INDEX_BYTES,
    RELEASE_TAG_RE,
    PackagedBundle,
    decode_index,
)
from docbundle.bundle.untrusted import decode, read_regular

from ..config import Config
from ..errors import ConfigError

MAX_SHARDS = 256  # GitHub Actions: jobs in one workflow run's matrix
TARGET_SECONDS = 30 * 60.0  # expected time of one shard
SECONDS_PER_LIBRARY = 2.0  # start-up of one library: its llms.txt, the index writer, packing
SECONDS_PER_DOCUMENT = 0.2  # a crawled page, fetched and indexed, when nothing was measured
DEFAULT_DOCUMENTS = 100  # a library version never built before
STICKY_SLACK = 1.10
TIMINGS = "timings.json"
TIMINGS_FORMAT = "docbundle-nightly-timings"
MAX_TIMINGS_BYTES = 8 * 1024 * 1024
# A plan lists each library id once (at most 64 characters) in one of MAX_SHARDS shards, and the
# releases: 100,000 libraries fit in ~8 MB.
MAX_PLAN_BYTES = 16 * 1024 * 1024


class LibraryTiming(msgspec.Struct, kw_only=True, frozen=True):
    """What one library cost last night, and in which shard it ran: ``seconds`` without embedding (what
    the plan balances: a first embedding is bounded by the shard's ``--embed-budget`` and spread over
    nights, a later one embeds only changed chunks), ``embed_seconds`` the embedding apart."""

    seconds: Annotated[float, msgspec.Meta(ge=0, le=7 * 24 * 3600)]
    embed_seconds: Annotated[float, msgspec.Meta(ge=0, le=7 * 24 * 3600)] = 0.0
    shard: Annotated[int, msgspec.Meta(ge=0, lt=MAX_SHARDS)] | None = None


class Timings(msgspec.Struct, kw_only=True):
    """``timings.json``: seconds per library id, written by each shard and merged by the publish job."""

    format: str = TIMINGS_FORMAT
    version: int = 1
    libraries: dict[str, LibraryTiming] = {}


class Shard(msgspec.Struct, kw_only=True):
    """One matrix job: the libraries it builds, the archives it can produce at most, its expected time."""

    shard: int
    release: str
    libraries: list[str]
    archives: int
    seconds: float


class Release(msgspec.Struct, kw_only=True):
    """One release of tonight: the shards whose archives it holds, and every archive it may hold."""

    tag: str
    shards: list[int]
    archives: list[str]  # ``<libraryId>-<version>-*.tar.gz``: the build id is known once built

    @property
    def assets(self) -> int:
        """Archives, plus SHA256SUMS, index.json and the attestation (``ATTESTATION``)."""
        return len(self.archives) + MAX_ASSETS_PER_RELEASE - MAX_ARCHIVES_PER_RELEASE


class Plan(msgspec.Struct, kw_only=True):
    """The whole plan (``--plan-out``): what the build and publish jobs read."""

    format: str = "docbundle-nightly-plan"
    version: int = 1
    seconds: float
    shards: list[Shard]
    releases: list[Release]

    def shard(self, number: int) -> Shard:
        """Shard ``number``, or ``ConfigError``."""
        if not 0 <= number < len(self.shards):
            raise ConfigError(f"the plan has shards 0-{len(self.shards) - 1}, not {number}")
        return self.shards[number]


_timings_decoder = msgspec.json.Decoder(Timings)
_plan_decoder = msgspec.json.Decoder(Plan)


# -- reading the inputs -----------------------------------------------------------------------------


def _read(path: Path, limit: int) -> bytes | None:
    """``path`` read as ``untrusted.read_regular`` reads a file (a FIFO, a device or a file over ``limit``
    is ``ConfigError`` with the reason, never a hang); None when it is missing."""
    try:
        return read_regular(path, limit)
    except FileNotFoundError:
        return None
    except BundleFormatError as exc:
        raise ConfigError(str(exc)) from None


def read_timings(path: Path | None) -> Timings:
    """Last night's timings; an empty set when ``path`` is None or missing (the first night)."""
    data = None if path is None else _read(path, MAX_TIMINGS_BYTES)
    if data is None:
        return Timings()
    try:
        timings = decode(_timings_decoder.decode, data, str(path))
    except BundleFormatError as exc:
        raise ConfigError(str(exc)) from None
    if timings.format != TIMINGS_FORMAT or timings.version != 1:
        raise ConfigError(f"{path} is not version 1 of {TIMINGS_FORMAT!r}")
    return timings


def read_plan(path: Path) -> Plan:
    """The plan ``--plan-out`` wrote (``--plan-file``), or ``ConfigError`` saying what is wrong."""
    data = _read(path, MAX_PLAN_BYTES)
    if data is None:
        raise ConfigError(f"cannot read the plan {path}: there is no such file")
    try:
        return decode(_plan_decoder.decode, data, str(path))
    except BundleFormatError as exc:
        raise ConfigError(f"cannot read the plan: {exc}") from None


def read_documents(path: Path | None) -> dict[str, int]:
    """Documents per library (all versions) in last night's release index; empty when there is none."""
    data = None if path is None else _read(path, MAX_INDEX_BYTES)
    if data is None:
        return {}
    try:
        entries: list[PackagedBundle] = decode_index(data, str(path))
    except BundleFormatError as exc:
        raise ConfigError(str(exc)) from None
    documents: dict[str, int] = {}
    for e in entries:
        documents[e.library] = documents.get(e.library, 0) + e.documents
    return documents


def write_timings(timings: Timings, path: Path) -> None:
    """Write ``timings`` as ``timings.json`` (libraries sorted by id)."""
    ordered = Timings(libraries=dict(sorted(timings.libraries.items())))
    write_atomically(path, msgspec.json.encode(ordered) + b"\n")


def merge_timings(previous: Timings, tonight: list[Timings], keep: set[str] | None = None) -> Timings:
    """Tonight's measurements over last night's (a shard that did not report keeps its old figures);
    with ``keep``, only those library ids."""
    merged = dict(previous.libraries)
    for t in tonight:
        merged.update(t.libraries)
    if keep is not None:
        merged = {k: v for k, v in merged.items() if k in keep}
    return Timings(libraries=merged)


# -- planning ---------------------------------------------------------------------------------------


def estimates(config: Config, timings: Timings, documents: Mapping[str, int]) -> dict[str, tuple[float, int]]:
    """Expected seconds and archive count (versions) of every library in the config."""
    rates = [
        t.seconds / documents[lib]
        for lib, t in timings.libraries.items()
        if documents.get(lib, 0) > 0 and t.seconds > 0
    ]
    per_document = median(rates) if rates else SECONDS_PER_DOCUMENT
    out: dict[str, tuple[float, int]] = {}
    for lib in config.libraries:
        versions = len(lib.version) or 1
        if lib.id in timings.libraries:
            seconds = timings.libraries[lib.id].seconds
        elif lib.id in documents:
            seconds = documents[lib.id] * per_document
        else:
            seconds = versions * min(DEFAULT_DOCUMENTS, lib.max_pages) * per_document
        out[lib.id] = (max(seconds, SECONDS_PER_LIBRARY), versions)
    return out


def shard_count(total_seconds: float, libraries: int, target_seconds: float, max_shards: int) -> int:
    """How many matrix jobs: the expected total over ``target_seconds``, within 1..max_shards and ≤ libraries."""
    wanted = math.ceil(total_seconds / target_seconds) if target_seconds > 0 else max_shards
    return max(1, min(wanted, max_shards, libraries))


def last_shard_count(timings: Timings) -> int:
    """How many shards last night's timings name (0 when they name none)."""
    return max((t.shard + 1 for t in timings.libraries.values() if t.shard is not None), default=0)


def make_plan(
    config: Config,
    timings: Timings,
    documents: Mapping[str, int],
    *,
    release_prefix: str,
    target_seconds: float = TARGET_SECONDS,
    max_shards: int = MAX_SHARDS,
) -> Plan:
    """The plan of tonight's run (see the module docstring); deterministic for the same inputs."""
    if not 1 <= max_shards <= MAX_SHARDS:
        raise ConfigError(f"--max-shards must be within 1..{MAX_SHARDS}, not {max_shards}")
    if not RELEASE_TAG_RE.fullmatch(f"{release_prefix}-01"):
        raise ConfigError(
            f"{release_prefix[:80]!r} cannot start a release tag (letters, digits, '.', '_', '-')"
        )
    cost = estimates(config, timings, documents)
    total_archives = sum(n for _, n in cost.values())
    if total_archives > max_shards * MAX_ARCHIVES_PER_RELEASE:
        raise ConfigError(
            f"{total_archives} library versions do not fit one run ({max_shards} jobs of at most "
            f"{MAX_ARCHIVES_PER_RELEASE} archives each)"
        )
    total = sum(s for s, _ in cost.values())
    n = shard_count(total, len(cost), target_seconds, max_shards)
    n = max(n, min(last_shard_count(timings), max_shards, len(cost)))
    while total_archives > n * MAX_ARCHIVES_PER_RELEASE:
        n += 1
    members: list[list[str]] = [[] for _ in range(n)]
    load = [0.0] * n
    count = [0] * n
    mean = total / n

    # Last night's shards first, lightest libraries first, as long as the shard stays within the slack.
    placed: set[str] = set()
    sticky = sorted(
        (t.shard, cost[lib][0], lib)
        for lib, t in timings.libraries.items()
        if lib in cost and t.shard is not None and t.shard < n
    )
    for shard, seconds, lib in sticky:
        archives = cost[lib][1]
        if (
            load[shard] + seconds <= STICKY_SLACK * mean
            and count[shard] + archives <= MAX_ARCHIVES_PER_RELEASE
        ):
            members[shard].append(lib)
            load[shard] += seconds
            count[shard] += archives
            placed.add(lib)

    # The others, heaviest first, each to the lightest shard with room for its archives.
    heap = [(load[i], i) for i in range(n)]
    heapq.heapify(heap)
    rest = sorted((lib for lib in cost if lib not in placed), key=lambda lib: (-cost[lib][0], lib))
    for lib in rest:
        seconds, archives = cost[lib]
        skipped = []
        while True:
            if not heap:
                raise ConfigError(f"no shard has room for the {archives} versions of {lib}")
            shard_load, i = heapq.heappop(heap)
            if count[i] + archives <= MAX_ARCHIVES_PER_RELEASE:
                break
            skipped.append((shard_load, i))
        members[i].append(lib)
        load[i] += seconds
        count[i] += archives
        for item in [*skipped, (load[i], i)]:
            heapq.heappush(heap, item)

    versions = {lib.id: [v.name for v in lib.version] or ["latest"] for lib in config.libraries}
    shards: list[Shard] = []
    releases: list[Release] = []
    for i in range(n):
        libs = sorted(members[i])
        names = [f"{lib}-{v}-*.tar.gz" for lib in libs for v in versions[lib]]
        if not releases or len(releases[-1].archives) + len(names) > MAX_ARCHIVES_PER_RELEASE:
            releases.append(Release(tag=f"{release_prefix}-{len(releases) + 1:02d}", shards=[], archives=[]))
        releases[-1].shards.append(i)
        releases[-1].archives.extend(names)
        shards.append(
            Shard(
                shard=i,
                release=releases[-1].tag,
                libraries=libs,
                archives=count[i],
                seconds=round(load[i], 1),
            )
        )
    return Plan(seconds=round(total, 1), shards=shards, releases=releases)


# -- what the workflow and people read --------------------------------------------------------------


def matrices(plan: Plan) -> dict[str, object]:
    """The workflow's two matrices: ``build`` (one job per shard) and ``publish`` (one per release)."""
    return {
        "build": {"include": [{"shard": s.shard, "release": s.release} for s in plan.shards]},
        "publish": {"include": [{"release": r.tag} for r in plan.releases]},
    }


def _hms(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}"


def _few(items: list[str], shown: int = 4) -> str:
    head = ", ".join(items[:shown])
    return head + (f", … (+{len(items) - shown})" if len(items) > shown else "")


def render_plan(plan: Plan, *, full: bool = False) -> str:
    """The dry run's report: each shard (libraries, expected time), then each release and its assets.

    ``full`` lists every library and every asset; else the first few of each."""
    loads = [s.seconds for s in plan.shards]
    mean = sum(loads) / len(loads)
    libraries = sum(len(s.libraries) for s in plan.shards)
    shared = [s.seconds for s in plan.shards if len(s.libraries) > 1] or loads
    alone = sum(1 for s in plan.shards if len(s.libraries) == 1 and s.seconds > max(shared))
    lines = [
        f"nightly plan: {libraries} libraries, {sum(s.archives for s in plan.shards)} library versions, "
        f"expected {_hms(plan.seconds)} in all",
        f"{len(plan.shards)} shard(s) (at most {MAX_SHARDS}): expected {_hms(min(loads))} to {_hms(max(loads))} "
        f"each; heaviest shard of several libraries / mean = {max(shared) / mean:.3f}"
        + (f"; {alone} shard(s) hold one longer library alone" if alone else ""),
    ]
    for s in plan.shards:
        shown = ", ".join(s.libraries) if full else _few(s.libraries)
        lines.append(
            f"  shard {s.shard:>3}  {len(s.libraries):>5} libraries  {_hms(s.seconds):>8}  -> {s.release}  {shown}"
        )
    lines.append(
        f"{len(plan.releases)} release(s) (at most {MAX_ARCHIVES_PER_RELEASE} archives + SHA256SUMS + index.json "
        f"+ {ATTESTATION} each), on a night when every library changed:"
    )
    for r in plan.releases:
        names = (
            r.archives
            if full
            else [r.archives[0], "…", r.archives[-1]]
            if len(r.archives) > 2
            else r.archives
        )
        lines.append(
            f"  {r.tag}  {r.assets:>4} assets: {len(r.archives)} archives, SHA256SUMS, index.json, {ATTESTATION}  "
            f"(shards {r.shards[0]}-{r.shards[-1]})"
        )
        lines.extend(f"      {name}" for name in names)
    return "\n".join(lines) + "\n"
