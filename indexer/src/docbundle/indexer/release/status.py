"""The catalogue's health, from the build shards to ``status.json`` (issue 32).

Each build shard writes ``nightly.json`` into its ``--dist``: one ``NightlyEntry`` per library version it
was given (built, unchanged, failed or regressed, with the failure's class and the bundle's counts).
``--merge`` concatenates its shards' files into the release folder (``merge_outcomes``), and ``--roll``
reads them from every release folder, with last night's ``status.json``, and writes tonight's
(``roll_status``): the file ``docbundle pull --list`` and the catalogue page read
(``docbundle.bundle.status`` holds its format).

The failure classes are a closed list, ``docbundle.bundle.status.REASONS``; ``reason_of`` maps a build's
failure onto it. A library version that fails ``UNAVAILABLE_AFTER`` nights in a row is ``unavailable``:
it stays in ``status.json``, and its last good bundle stays in ``index.json``, pullable (``roll`` never
removes an entry). With ``--plan-file``, a library version the plan gave a shard but no shard reported
(its job died or timed out) counts as failed, class ``no-report``; one nobody planned tonight (a manual
run of a few libraries) keeps last night's entry as it was.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
from docbundle.bundle.errors import BundleFormatError
from docbundle.bundle.layout import write_atomically
from docbundle.bundle.releaseindex import MAX_TEXT_CHARS, PackagedBundle
from docbundle.bundle.status import (
    MAX_MESSAGE_CHARS,
    MAX_STATUS_CATEGORY_CHARS,
    REASONS,
    STATES,
    STATUS,
    CatalogueStatus,
    LibraryStatus,
    decode_status,
    encode_status,
)
from docbundle.bundle.untrusted import decode, read_regular

from ..config import Config, LibraryConfig
from ..errors import ConfigError

#: Failed nights in a row after which a library version is ``unavailable``: three nights rides out a
#: site's bad weekend or a maintenance window, and still tells users within the week that it is gone.
UNAVAILABLE_AFTER = 3
#: A shard's outcomes: one small entry (~300 bytes) per library version, plus golden-query reports.
OUTCOMES = "nightly.json"
MAX_OUTCOMES_BYTES = 64 * 1024 * 1024
MAX_PREVIOUS_BYTES = 64 * 1024 * 1024  # last night's status.json is our own file: read within any bound

_SUCCEEDED = ("built", "unchanged")
# A fetch error's kind (``pipeline.fetched.ERROR_KINDS``, ``empty`` and ``build``) onto its class.
_KIND_REASONS = {
    "timeout": "timeout",
    "network": "network",
    "refused": "refused",
    "redirects": "redirects",
    "too-large": "too-large",
    "content-type": "content-type",
    "encoding": "encoding",
    "empty": "no-content",
    "not-found": "http-404",
    "rate-limited": "rate-limited",
    "build": "build-error",
}


class NightlyEntry(msgspec.Struct, kw_only=True):
    """What the nightly job did with one library version (one line of a shard's ``nightly.json``)."""

    library: str
    version: str
    status: str  # built | unchanged | failed | regressed
    message: str = ""
    build_id: str | None = None
    previous: str | None = None
    regress: str = ""
    reason: str = ""  # failed and regressed: a class of REASONS
    documents: int = 0  # built and unchanged: the bundle's documents, chunks and vector rows
    chunks: int = 0
    vectors: int = 0


_outcomes_decoder = msgspec.json.Decoder(list[NightlyEntry])


def reason_of(status: str, kind: str, http_status: int | None) -> str:
    """The class (``REASONS``) of a failed build's ``kind`` and HTTP status, or of a regression; ``""``
    for a build that succeeded."""
    if status in _SUCCEEDED:
        return ""
    if status == "regressed":
        return "regressed"
    if kind == "http":
        code = http_status or 0
        if code in (404, 410):
            return f"http-{code}"
        if code == 429:
            return "rate-limited"
        if 400 <= code < 500:
            return "http-4xx"
        if code >= 500:
            return "http-5xx"
    return _KIND_REASONS.get(kind, "error")


def write_outcomes(entries: list[NightlyEntry], folder: Path) -> None:
    """``nightly.json`` in ``folder``: the entries, readable by people and by ``read_outcomes``."""
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(folder / OUTCOMES, msgspec.json.format(msgspec.json.encode(entries), indent=2) + b"\n")


def read_outcomes(folder: Path) -> list[NightlyEntry]:
    """The entries of ``folder``'s ``nightly.json``; none when it has none (a release folder of an older
    docbundle), ``ConfigError`` naming the file when it cannot be read."""
    path = folder / OUTCOMES
    try:
        data = read_regular(path, MAX_OUTCOMES_BYTES)
        return decode(_outcomes_decoder.decode, data, str(path))
    except FileNotFoundError:
        return []
    except BundleFormatError as exc:
        raise ConfigError(f"cannot read the shard outcomes: {exc}") from None


def merge_outcomes(folders: list[Path], out_dir: Path) -> list[NightlyEntry]:
    """The shards' ``nightly.json`` files as one, in ``out_dir`` (``--merge``), so ``--roll`` sees them."""
    entries = [e for folder in folders for e in read_outcomes(folder)]
    entries.sort(key=lambda e: (e.library, e.version))
    write_outcomes(entries, out_dir)
    return entries


def read_previous(path: Path | None) -> CatalogueStatus | None:
    """Last night's ``status.json``; None when there is none (the first night) or it cannot be read, which
    is said on stderr: failed nights are then counted from tonight, and tonight's file replaces it."""
    if path is None:
        return None
    try:
        return decode_status(read_regular(path, MAX_PREVIOUS_BYTES), str(path))
    except FileNotFoundError:
        return None
    except BundleFormatError as exc:
        print(f"nightly: {exc}; failed nights are counted from tonight", file=sys.stderr)
        return None


def planned_versions(config: Config, library_ids: list[str]) -> set[tuple[str, str]]:
    """The (library, version) pairs of ``library_ids`` (a plan's libraries) that the config lists."""
    known = {lib.id: lib for lib in config.libraries}
    return {
        (lib_id, t.version.name)
        for lib_id in library_ids
        if lib_id in known
        for t in config.targets(known[lib_id])
    }


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def roll_status(
    config: Config,
    index: list[PackagedBundle],
    reports: list[NightlyEntry],
    previous: CatalogueStatus | None,
    now: str,
    planned: set[tuple[str, str]] | None = None,
) -> list[LibraryStatus]:
    """Tonight's health of every library version the config, the release index or last night's file
    knows (a version in none of them, removed from the config and never published, is left out).

    ``index``: tonight's release index (``roll``); ``reports``: the shards' entries; ``planned``: the
    versions tonight's plan gave a shard (None: not known, so an unreported version keeps its entry)."""
    configured = {
        (lib.id, t.version.name): (lib, t.version.latest)
        for lib in config.libraries
        for t in config.targets(lib)
    }
    served = {(e.library, e.version): e for e in index}
    tonight = {(r.library, r.version): r for r in reports}
    before = {(e.library, e.version): e for e in previous.libraries} if previous else {}
    keys = sorted(set(configured) | set(served))
    entries: list[LibraryStatus] = []
    for key in keys:
        report = tonight.get(key)
        if report is None and planned is not None and key in planned:
            report = NightlyEntry(
                library=key[0],
                version=key[1],
                status="failed",
                reason="no-report",
                message="planned tonight, but its shard reported nothing (the job failed or timed out)",
            )
        entry = _entry(key, report, before.get(key), served.get(key), configured.get(key), now)
        if entry is not None:
            entries.append(entry)
    return entries


def _entry(
    key: tuple[str, str],
    report: NightlyEntry | None,
    last: LibraryStatus | None,
    bundle: PackagedBundle | None,
    config: tuple[LibraryConfig, bool] | None,
    now: str,
) -> LibraryStatus | None:
    """One library version's entry (``roll_status``)."""
    library, version = key
    if report is None and last is None and bundle is None:
        return None  # configured, never built, not planned tonight: nothing is known yet
    if report is None and last is not None:
        entry = msgspec.structs.replace(last)
    elif report is None:
        assert bundle is not None  # published before status.json existed: it was built then
        entry = LibraryStatus(
            library=library, version=version, name=library, state="built", last_success=bundle.built_at
        )
    elif report.status in ("built", "unchanged"):
        entry = LibraryStatus(
            library=library,
            version=version,
            name=library,
            state="built" if report.status == "built" else "unchanged",
            checked_at=now,
            last_success=now,
        )
    else:
        nights = (last.failed_nights if last else 0) + 1
        entry = LibraryStatus(
            library=library,
            version=version,
            name=library,
            state="unavailable" if nights >= UNAVAILABLE_AFTER else "failed",
            reason=report.reason if report.reason in REASONS else "error",
            message=_cut(report.message, MAX_MESSAGE_CHARS),
            failed_nights=nights,
            checked_at=now,
            last_success=last.last_success if last else "",
        )
    _describe(entry, config, bundle, last)
    _counts(entry, report, bundle, last)
    return entry


def _describe(
    entry: LibraryStatus,
    config: tuple[LibraryConfig, bool] | None,
    bundle: PackagedBundle | None,
    last: LibraryStatus | None,
) -> None:
    """Name, category, description and latest: the config's, else the published bundle's, else last night's."""
    if config is not None:
        lib, latest = config
        entry.name = _cut(lib.display_name, MAX_TEXT_CHARS)
        entry.category = _cut(lib.category, MAX_STATUS_CATEGORY_CHARS)
        entry.latest = latest
        entry.description = _cut(lib.description or (bundle.description if bundle else ""), MAX_TEXT_CHARS)
    elif bundle is not None:
        entry.name, entry.description, entry.latest = bundle.name, bundle.description, bundle.latest
        entry.category = last.category if last else ""


def _counts(
    entry: LibraryStatus,
    report: NightlyEntry | None,
    bundle: PackagedBundle | None,
    last: LibraryStatus | None,
) -> None:
    """The served bundle's figures: the index entry's, with chunks and vectors from whoever saw that build."""
    if bundle is None:
        entry.build_id, entry.built_at, entry.pages, entry.bytes, entry.chunks, entry.vectors = (
            "",
            "",
            0,
            0,
            0,
            0,
        )
        return
    entry.build_id, entry.built_at = bundle.build_id, bundle.built_at
    entry.pages, entry.bytes = bundle.documents, bundle.size
    if report is not None and report.status in _SUCCEEDED and report.build_id == bundle.build_id:
        entry.chunks, entry.vectors = report.chunks, report.vectors
    elif last is not None and last.build_id == bundle.build_id:
        entry.chunks, entry.vectors = last.chunks, last.vectors
    else:
        entry.chunks = entry.vectors = 0


def publish_health(
    config: Config,
    index: list[PackagedBundle],
    releases: list[Path],
    out_dir: Path,
    *,
    previous: Path | None,
    plan_file: Path | None,
) -> list[LibraryStatus]:
    """``--roll``'s health step: tonight's ``status.json`` and ``catalogue.html`` in ``out_dir``, from the
    outcomes in tonight's ``releases``, last night's status (``previous``) and tonight's plan."""
    from ..pipeline.assemble import iso, now
    from . import page, plan

    planned = None
    if plan_file is not None:
        tonight = [i for shard in plan.read_plan(plan_file).shards for i in shard.libraries]
        planned = planned_versions(config, tonight)
    reports = [e for folder in releases for e in read_outcomes(folder)]
    checked = iso(now())
    entries = roll_status(config, index, reports, read_previous(previous), checked, planned)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / STATUS).write_bytes(encode_status(checked, UNAVAILABLE_AFTER, entries))
    page.write_page(entries, out_dir, checked, UNAVAILABLE_AFTER)
    return entries


def render_health(entries: list[LibraryStatus]) -> str:
    """One line for the job's log: how many library versions are in each state."""
    counts = ", ".join(f"{sum(1 for e in entries if e.state == s)} {s}" for s in STATES)
    return f"nightly: status of {len(entries)} library version(s): {counts}"
