"""``docbundle search`` and ``docbundle info``: one library searched, the installed libraries described.

Both go through ``Docs``, as the MCP tools do, and print for a person (``--json`` for a program).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys

from docbundle.bundle.query import SEARCH_MODES
from docbundle.common.clitable import Command, arg
from docbundle.common.terminal import printable

from ..bounds import DEFAULT_LIMIT, DEFAULT_MAX_TOKENS, MAX_LIMIT, MAX_MAX_TOKENS, MIN_MAX_TOKENS
from ..catalog import Catalog, VersionEntry
from ..errors import LibraryUnavailableError, LockFileError
from ..words import SHELL, plural
from .common import EXIT_OK, bundle_args, catalog_quiet, load, root, where, where_to_get

SNIPPET_CHARS = 240  # a hit's text on one line
SAFETY_SHOWN = 5  # findings listed per version; `docbundle-index audit` lists them all


def _snippet(text: str, width: int = SNIPPET_CHARS) -> str:
    flat = " ".join(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("```"))
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def search(args: argparse.Namespace) -> int:
    """Run ``search``."""
    from ..docs import Docs
    from ..render import hit_title

    with catalog_quiet():  # a version that cannot be served is said once, by the error below
        catalog = load(args)
    try:
        result = (
            Docs(catalog)
            .search(
                args.query,
                library_id=args.library,
                version=args.doc_version,
                mode=args.mode,
                limit=args.limit,
                max_tokens=args.max_tokens,
            )
            .result
        )
    finally:
        catalog.close()
    if args.json:
        print(result.model_dump_json(by_alias=True, indent=2))
        return EXIT_OK
    print(
        f"{result.library_id}@{result.version} (build {result.build_id}): {len(result.hits)} hit(s) for "
        f"{args.query!r} (mode {result.mode})"
    )
    if result.requested_mode is not None and result.mode_reason:
        print(f"mode: {printable(result.mode_reason, 400)}")
    if result.dropped:
        print(f"ignored words: {', '.join(result.dropped)}")
    for h in result.hits:
        print(f"\n{h.rank}. {printable(hit_title(h))}  (score {h.score:.3f})")
        print(f"   {printable(h.document_id)} chunk {h.chunk_id} · {printable(h.url)}")
        print(f"   {printable(_snippet(h.text), SNIPPET_CHARS)}")
    if result.message:
        print(f"\n{result.message}")
        for step in SHELL.advice(result.next_steps):
            print(f"  - {step}")
    return EXIT_OK


def info(args: argparse.Namespace) -> int:
    """Run ``info``."""
    try:
        with catalog_quiet():
            catalog = load(args)
    except LockFileError as exc:
        if args.lock is not None:
            raise  # named with --lock: checking against it is what was asked
        # info is how one gets the hash for a new pin: a broken bundles.lock must not block it.
        print(f"docbundle: warning: {printable(str(exc), 600)}; shown without the lock file", file=sys.stderr)
        with catalog_quiet():
            catalog = Catalog.load(root(args))
    try:
        with catalog_quiet():
            return _info_library(args, catalog) if args.library else _info_all(args, catalog)
    finally:
        catalog.close()


def _info_all(args: argparse.Namespace, catalog: Catalog) -> int:
    """Every library, its default version checked by size (a stat per file: cheap)."""
    from ..docs import Docs

    listed = Docs(catalog).list_libraries(max_tokens=None)
    by_id = {lib.id: lib for lib in catalog.libraries()}
    summaries = []
    for s in listed.libraries:
        problem = size_problem(by_id[s.id].default) if s.status != "failed" else None
        summaries.append(s.model_copy(update={"status": "failed", "reason": problem}) if problem else s)
    if args.json:
        print(listed.model_copy(update={"libraries": summaries}).model_dump_json(by_alias=True, indent=2))
        return EXIT_OK
    if not summaries:
        print("no libraries installed" + where_to_get(args))
        return EXIT_OK
    print(f"{plural(len(summaries), 'library', 'libraries')} in {where(catalog.root, args)}")
    for s in summaries:
        if s.status == "failed":
            state = _problem_text(s.reason or "")
        else:
            state = f"{s.documents} docs, build {s.build_id}"
            if s.vectors is not None:
                state += "; vectors" + (
                    " (keyword search only here)" if "keyword search only" in s.vectors else ""
                )
            if s.safety_findings:
                state += f"; {plural(s.safety_findings, 'safety finding', 'safety findings')} "
                state += f"({', '.join(s.safety_kinds)}): see `docbundle info {s.id}`"
        print(f"{s.id:<20} {s.default_version:<10} {printable(state, 400)}")
    return EXIT_OK


def _info_library(args: argparse.Namespace, catalog: Catalog) -> int:
    """One library: every version opened, which checks each file's size and sha256 first."""
    from ..docs import Docs

    lib_entry = catalog.library(args.library)
    if any(e.meta is not None and e.meta.vectors is not None for e in lib_entry.versions.values()):
        catalog.encoder.get()  # to say whether this install's encoder is the one that made the vectors
    for entry in lib_entry.versions.values():
        problem = size_problem(entry)
        if problem is not None:
            catalog.mark_failed(entry, problem)
            continue
        with contextlib.suppress(LibraryUnavailableError):  # recorded; list_versions reports it
            catalog.open_entry(entry)
    versions = Docs(catalog).list_versions(args.library)
    if args.json:
        print(versions.model_dump_json(by_alias=True, indent=2))
        return EXIT_OK
    lib = versions.library
    print(f"{lib.id}: {printable(lib.name)}" + (f" [{printable(lib.category, 60)}]" if lib.category else ""))
    if lib.description:
        print(f"  {printable(lib.description, 400)}")
    for v in versions.versions:
        flags = ", ".join(f for f, on in (("default", v.default), ("latest", v.latest), ("lts", v.lts)) if on)
        print(f"  {v.version}: {printable(v.status or '?', 40)}" + (f" ({flags})" if flags else ""))
        if v.availability == "failed":
            print(f"    {printable(_problem_text(v.reason or ''), 400)}")
            continue
        print(
            f"    build {v.build_id}, built {printable(v.built_at, 40)}, {v.documents} documents (files verified)"
        )
        print(f"    content hash {v.content_hash}")
        _print_vectors(catalog, lib_entry.versions[v.version])
        _print_safety(lib_entry.versions[v.version])
    print(f"  from {where(catalog.root, args)}")
    return EXIT_OK


def _print_vectors(catalog: Catalog, entry: VersionEntry) -> None:
    """The version's semantic vectors: the model that made them, and whether this install can use them."""
    from ..libraries import vectors_summary

    summary = vectors_summary(catalog, entry)
    if summary is not None:
        print(f"    vectors: {printable(summary, 400)}")
    else:
        print("    no semantic vectors: searched by keywords")


def _print_safety(entry: VersionEntry, shown: int = SAFETY_SHOWN) -> None:
    """The content-safety findings the build recorded: text a model must read as data."""
    manifest = entry.read_manifest() if entry.meta is not None and entry.meta.safety_findings else None
    findings = manifest.safety if manifest else []
    if not findings:
        return
    kinds = sorted({printable(f.kind, 40) for f in findings})
    print(
        f"    {plural(len(findings), 'safety finding', 'safety findings')} ({', '.join(kinds)}): "
        "documentation text that may try to steer an AI assistant; it is served as data"
    )
    for f in findings[:shown]:
        where_ = printable(f.path) + (f" chunk {f.chunk}" if f.chunk is not None else "")
        print(f"      {printable(f.kind, 40)} in {where_}: {printable(f.detail)}")
    if len(findings) > shown:
        print(f"      ... and {len(findings) - shown} more (`docbundle-index audit` lists them all)")


def size_problem(entry: VersionEntry) -> str | None:
    """Why a bundle's files do not match its manifest by size (a stat each), or None."""
    manifest = None if entry.problem else entry.read_manifest()
    if manifest is None or entry.bundle_path is None:
        return None
    for f in manifest.files:
        try:
            size = (entry.bundle_path / f.path).stat().st_size
        except OSError:
            return f"corrupt: {f.path} is missing; rebuild or reinstall"
        if size != f.size:
            return f"corrupt: {f.path} size differs from the manifest; rebuild or reinstall"
    return None


_CORRUPT = (
    (re.compile(r"(\S+) is \d+ bytes, the manifest says \d+"), "size differs from the manifest"),
    (
        re.compile(r"(\S+) does not match its sha256 in the manifest"),
        "content differs from its sha256 in the manifest",
    ),
    (re.compile(r"missing file listed in the manifest: (\S+)"), "is missing"),
)


def _problem_text(reason: str) -> str:
    """A version's problem as a line: ``corrupt: FILE ...; rebuild or reinstall`` when a file is damaged."""
    if reason.startswith("corrupt: "):
        return reason
    for pattern, what in _CORRUPT:
        m = pattern.search(reason)
        if m:
            return f"corrupt: {m[1]} {what}; rebuild or reinstall"
    return f"FAILED: {reason}"


SEARCH = Command(
    "search",
    help="search one library",
    description="Search one library's bundle.",
    run=search,
    args=(
        *bundle_args(),
        arg("library", metavar="LIBRARY", help="library id"),
        arg("query", metavar="QUERY", help="what to search for"),
        arg("--version", dest="doc_version", default=None, help="docs version (default: latest)"),
        arg(
            "--mode",
            choices=SEARCH_MODES,
            default=None,
            help="hybrid (words and meaning; the default when the library has vectors), semantic (meaning), "
            "fulltext = balanced (most words; the default without vectors), broad (any word), precise "
            "(every word)",
        ),
        arg(
            "--limit",
            type=int,
            default=DEFAULT_LIMIT,
            help=f"hits (1-{MAX_LIMIT}, default %(default)s)",
        ),
        arg(
            "--max-tokens",
            type=int,
            default=DEFAULT_MAX_TOKENS,
            help=f"budget for the hits' text ({MIN_MAX_TOKENS}-{MAX_MAX_TOKENS})",
        ),
        arg("--json", action="store_true", help="print the result as JSON"),
    ),
)

INFO = Command(
    "info",
    help="describe libraries",
    description="Describe the installed libraries, and say where they were looked for. Each bundle's "
    "file sizes are checked against its manifest; with LIBRARY, every file's sha256 too.",
    run=info,
    args=(
        *bundle_args(),
        arg("library", metavar="LIBRARY", nargs="?", help="one library's versions and details"),
        arg("--json", action="store_true", help="print JSON"),
    ),
)
