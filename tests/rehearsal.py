"""The nightly job rehearsed on the fake web (``fakeweb.py``): the workflow's steps, each a real command.

``.github/workflows/nightly.yml`` runs, every night: **plan** (``nightly --plan --plan-out``, reading last
night's ``timings.json`` and ``index.json``), **build** one job per shard (``--plan-file --shard K``, each
with its own bundles folder, the Actions cache of that shard), **publish** one job per release (``--merge
DIR ... --release TAG``) and **index** (``--roll DIR ... --previous --timings``, uploaded to
``bundles-latest``). ``run_night`` runs the same commands (``python -m docbundle.indexer.cli``, shards one
after the other) in a work folder laid out as the runners and the releases are::

    work/bundles/shard-K/         a shard's bundles and crawl cache (kept between nights, as the cache is)
    work/night-N/plan.json        the plan, and each shard's --dist (dist-K) and log
    work/releases/TAG/            a published release (archives, SHA256SUMS, index.json)
    work/releases/bundles-latest/ the release index and timings, rolled each night

``reported_class`` reads what a night reported for a library version, as a user reads it: the state and
reason class of the rolled ``status.json`` (``docbundle.bundle.status``, what ``pull --list`` and the
catalogue page show), and, for a library built tonight, its manifest (the pages that failed and how each
document was obtained), which tells the site kinds of a successful build apart.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from clikit import index_cli, server_cli
from docbundle.bundle.status import STATUS, LibraryStatus, decode_status
from fakeweb import FakeWeb, SiteSpec

__all__ = [
    "Night",
    "Shard",
    "check_nothing_lost",
    "class_table",
    "pull_installs",
    "reported_class",
    "run_night",
    "two_nights",
    "write_catalogue",
]

#: Bound on one command of the rehearsal (a shard of the full rehearsal runs for minutes).
COMMAND_TIMEOUT = 6 * 3600
LATEST = "bundles-latest"


def reported_class(entry: Mapping[str, Any], manifest: Mapping[str, Any] | None) -> str:
    """The class a night reported for one library version, from its ``status.json`` entry and, when it
    was built tonight, its manifest: ``unchanged``; ``built`` (``built:html`` when every document was
    converted from HTML, ``built:pages-failed`` when some listed page failed); ``failed:<reason>`` with
    the reason class of ``status.json`` (``http-404``, ``timeout``, ``refused``, ``no-content`` ... the
    closed list ``docbundle.bundle.status.REASONS``), ``unavailable:<reason>`` after too many failed
    nights; ``regressed`` for a build refused by its golden queries."""
    state, reason = str(entry["state"]), str(entry.get("reason", ""))
    if state in ("failed", "unavailable"):
        return "regressed" if reason == "regressed" else f"{state}:{reason}"
    if state == "unchanged" or manifest is None:
        return "unchanged"
    docs = manifest.get("documents", [])
    if any(d.get("error") for d in docs):
        return "built:pages-failed"
    indexed = [d for d in docs if not d.get("error")]
    if indexed and all(d.get("obtained") == "html" for d in indexed):
        return "built:html"
    return "built"


def write_catalogue(path: Path, web: FakeWeb, crawl: Mapping[str, float | int]) -> None:
    """The ``libraries.toml`` of the fake web's sites, with ``crawl`` as every library's defaults."""
    options = ", ".join(f"{k} = {v}" for k, v in crawl.items())
    lines = ["[defaults]", "keep = 3", f"crawl = {{ {options} }}", ""]
    for spec in web.specs:
        lines += ["[[library]]", f'id = "{spec.library}"', f'llms_txt = "{web.llms_url(spec)}"']
        if spec.follow:
            lines.append('follow = { depth = 1, prefix = "/" }')
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")


@dataclass
class Shard:
    """One build job of a night: its libraries, wall time, the HTTP requests the fake web answered
    meanwhile, and its documents and chunks built."""

    shard: int
    libraries: list[str]
    seconds: float
    requests: int
    exit: int
    documents: int = 0
    chunks: int = 0


@dataclass
class Night:
    """What one night did: per library its shard, entry, manifest (when built) and reported class."""

    number: int
    shards: list[Shard] = field(default_factory=list)
    shard_of: dict[str, int] = field(default_factory=dict)
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    manifests: dict[str, dict[str, Any]] = field(default_factory=dict)
    reported: dict[str, str] = field(default_factory=dict)
    releases: list[str] = field(default_factory=list)
    seconds: float = 0.0  # the whole night: plan, shards, merges and roll
    problems: list[str] = field(default_factory=list)  # a step that failed, a library seen twice or never


def _run(argv: list[str], log: Path | None = None) -> int:
    done = index_cli(*argv, timeout=COMMAND_TIMEOUT)
    if log is not None:
        log.write_text(done.stdout + "\n--- stderr ---\n" + done.stderr, encoding="utf-8")
    if done.returncode not in (0, 1):
        raise RuntimeError(
            f"docbundle-index {' '.join(argv[:2])} exited {done.returncode}: {done.stderr[-2000:]}"
        )
    return done.returncode


def run_night(
    work: Path, config: Path, number: int, web: FakeWeb, *, target_minutes: float, progress: bool = False
) -> Night:
    """Plan, build every shard, merge every release and roll the release index: night ``number``."""
    night = Night(number)
    here = work / f"night-{number}"
    here.mkdir(parents=True, exist_ok=True)
    releases, latest = work / "releases", work / "releases" / LATEST
    started = time.perf_counter()
    common = ["nightly", "--config", str(config), "--golden", str(work / "golden")]
    (work / "golden").mkdir(exist_ok=True)
    _run(
        [*common, "--plan", "--plan-out", str(here / "plan.json"), "--timings", str(latest / "timings.json"),
         "--previous", str(latest / "index.json"), "--release-prefix", f"bundles-20261202-{number}",
         "--target-minutes", str(target_minutes)],
    )  # fmt: skip
    plan = json.loads((here / "plan.json").read_text())
    for shard in plan["shards"]:
        k, libraries = shard["shard"], shard["libraries"]
        before, t0 = len(web.site.requests), time.perf_counter()
        code = _run(
            [*common, "--plan-file", str(here / "plan.json"), "--shard", str(k), "--out",
             str(work / "bundles" / f"shard-{k}"), "--dist", str(here / f"dist-{k}")],
            here / f"shard-{k}.log",
        )  # fmt: skip
        result = Shard(k, libraries, time.perf_counter() - t0, len(web.site.requests) - before, code)
        _collect(night, result, work, here)
        night.shards.append(result)
        if progress:
            print(
                f"  night {number} shard {k}: {len(libraries)} libraries in {result.seconds:.1f} s",
                flush=True,
            )
    by_release: dict[str, list[str]] = {}
    for shard in plan["shards"]:
        by_release.setdefault(shard["release"], []).append(str(here / f"dist-{shard['shard']}"))
    for tag, dists in by_release.items():
        _run([*common, "--merge", *dists, "--release", tag, "--dist", str(releases / tag)])
        night.releases.append(tag)
    rolled = here / "rolled"
    _run(
        [*common, "--roll", *(str(releases / t) for t in night.releases), "--previous",
         str(latest / "index.json"), "--timings", str(latest / "timings.json"), "--plan-file",
        str(here / "plan.json"), "--dist", str(rolled)],
    )  # fmt: skip
    latest.mkdir(parents=True, exist_ok=True)
    for name in ("index.json", "timings.json", STATUS, "catalogue.html"):  # gh release upload --clobber
        (latest / name).write_bytes((rolled / name).read_bytes())
    _classify(night, decode_status((rolled / STATUS).read_bytes(), STATUS).libraries)
    night.seconds = time.perf_counter() - started
    missing = {s.library for s in web.specs} - set(night.entries)
    night.problems += [f"night {number}: {lib} was in no shard's nightly.json" for lib in sorted(missing)]
    return night


def _collect(night: Night, shard: Shard, work: Path, here: Path) -> None:
    """Read a shard's ``nightly.json`` and the manifests of what it built; classify each library."""
    entries = json.loads((here / f"dist-{shard.shard}" / "nightly.json").read_text())
    for entry in entries:
        lib = entry["library"]
        if lib in night.entries:
            night.problems.append(
                f"night {night.number}: {lib} reported by shards {night.shard_of[lib]} and {shard.shard}"
            )
        night.entries[lib], night.shard_of[lib] = entry, shard.shard
        manifest = None
        if entry["status"] == "built":
            path = work / "bundles" / f"shard-{shard.shard}" / lib / entry["version"] / entry["build_id"]
            manifest = json.loads((path / "manifest.json").read_text())
            night.manifests[lib] = manifest
            shard.documents += manifest["counts"]["documents"]
            shard.chunks += manifest["counts"]["chunks"]


def _classify(night: Night, health: list[LibraryStatus]) -> None:
    """Each library's class from the rolled ``status.json`` (and tonight's manifests)."""
    for entry in health:
        night.reported[entry.library] = reported_class(
            msgspec.structs.asdict(entry), night.manifests.get(entry.library)
        )


def expected_classes(specs: list[SiteSpec], nights: list[Night]) -> list[dict[str, str]]:
    """Per night, per library, the class it must report: the site's class for that night, except that
    a site whose content did not change reports ``unchanged`` on night two when it stayed in its shard
    (a library that moved starts without its previous bundle, as on the real runners)."""
    out: list[dict[str, str]] = []
    for night in nights:
        want = {}
        for spec in specs:
            cls = spec.expected_on(night.number)
            stayed = night.number > 1 and nights[0].shard_of.get(spec.library) == night.shard_of.get(
                spec.library
            )
            if night.number > 1 and spec.change == "same" and cls.startswith("built") and stayed:
                cls = "unchanged"
            want[spec.library] = cls
        out.append(want)
    return out


def class_table(specs: list[SiteSpec], night: Night, want: Mapping[str, str]) -> tuple[str, list[str]]:
    """The table of classes, expected against reported (libraries counted), and the libraries whose
    reported class is not the expected one."""
    pairs = Counter((want[s.library], night.reported.get(s.library, "(missing)")) for s in specs)
    rows = [f"  {'expected':<26} {'reported':<26} {'libraries':>9}"]
    for (exp, rep), n in sorted(pairs.items()):
        mark = "" if exp == rep else "   <-- wrong class"
        rows.append(f"  {exp:<26} {rep:<26} {n:>9}{mark}")
    wrong = [
        f"{s.library}: expected {want[s.library]}, reported {night.reported.get(s.library)}: "
        f"{night.entries.get(s.library, {}).get('message', '')[:300]}"
        for s in specs
        if night.reported.get(s.library) != want[s.library]
    ]
    return "\n".join(rows), wrong


def check_nothing_lost(work: Path, specs: list[SiteSpec], nights: list[Night]) -> list[str]:
    """What was lost, if anything: every library built on some night must be in the release index, with
    its newest build, in a release folder that holds its archive listed in that release's SHA256SUMS; and a
    library that failed tonight keeps its previous bundle in its shard's folder (``CURRENT``) when it stayed
    in its shard."""
    problems = [p for n in nights for p in n.problems]
    index = json.loads((work / "releases" / LATEST / "index.json").read_text())
    listed = {(b["library"], b["version"]): b for b in index["bundles"]}
    for spec in specs:
        built = [n for n in nights if n.entries.get(spec.library, {}).get("status") == "built"]
        if not built:
            continue
        entry = built[-1].entries[spec.library]
        got = listed.get((spec.library, entry["version"]))
        if got is None:
            problems.append(f"{spec.library}: built on night {built[-1].number}, not in the release index")
            continue
        if got["build_id"] != entry["build_id"]:
            problems.append(
                f"{spec.library}: index names {got['build_id']}, newest build is {entry['build_id']}"
            )
        folder = work / "releases" / got.get("release", "")
        sums = (folder / "SHA256SUMS").read_text() if (folder / "SHA256SUMS").is_file() else ""
        if not (folder / got["archive"]).is_file() or got["archive"] not in sums:
            problems.append(f"{spec.library}: {got['release']}/{got['archive']} missing or not in SHA256SUMS")
        last = nights[-1]
        if last.entries.get(spec.library, {}).get("status") == "failed" and built[-1] is not last:
            shard = last.shard_of[spec.library]
            current = work / "bundles" / f"shard-{shard}" / spec.library / entry["version"] / "CURRENT"
            moved = built[-1].shard_of[spec.library] != shard
            if not moved and current.read_text().strip() != entry["build_id"]:
                problems.append(
                    f"{spec.library}: failed tonight and its shard's CURRENT moved off {entry['build_id']}"
                )
    return problems


def pull_installs(web: FakeWeb, work: Path, library: str, dest: Path) -> str:
    """``docbundle pull LIBRARY --from <the rolled bundles-latest over loopback>``: the build id installed,
    or the command's error."""
    base = f"{web.base}/download/{LATEST}/"
    done = server_cli("pull", library, "--from", base, "--bundles", str(dest), timeout=300)
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.strip()[-500:]}"
    current = dest / library / "latest" / "CURRENT"
    return current.read_text().strip() if current.is_file() else "(nothing installed)"


def serve_releases(web: FakeWeb, work: Path) -> None:
    """Serve the release folders at ``/download/`` of the fake web, as GitHub serves release assets."""
    (work / "releases").mkdir(parents=True, exist_ok=True)
    web.site.serve_dir(work / "releases", "/download")


def two_nights(
    web: FakeWeb,
    work: Path,
    config: Path,
    crawl: Mapping[str, float | int],
    *,
    target_minutes: float,
    progress: bool = False,
) -> list[Night]:
    """The rehearsal: the releases served, the catalogue of ``web`` written to ``config`` with ``crawl``'s
    settings, night one, the web's changes (``FakeWeb.night_two``), night two."""
    serve_releases(web, work)
    write_catalogue(config, web, crawl)
    nights = [run_night(work, config, 1, web, target_minutes=target_minutes, progress=progress)]
    web.night_two()
    nights.append(run_night(work, config, 2, web, target_minutes=target_minutes, progress=progress))
    return nights
