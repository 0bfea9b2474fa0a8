"""``docbundle verify``: every file of every bundle (or of one bundle) checked against its manifest.

A report line per bundle (``--json``: one object per bundle); exit 1 when any did not verify.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from docbundle.bundle.errors import BundleError, BundleNotFoundError
from docbundle.bundle.layout import CURRENT, resolve_bundle
from docbundle.bundle.userdirs import bundles_origin, default_bundles
from docbundle.common.clitable import Command, arg

from ..catalog import Catalog
from ..errors import LibraryUnavailableError, LockFileError
from ..lockfile import find_lock
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, catalog_quiet, err, ways


def verify(args: argparse.Namespace) -> int:
    """Run ``verify``."""
    from docbundle.bundle.reader import check_bundle

    target: Path = args.dir or default_bundles()
    results: list[dict[str, Any]] = []
    try:
        single = _one_bundle(target)
    except BundleError as exc:
        results.append(_verified(str(target), error=str(exc)))
        return _report_verify(args, results)
    if single is None:
        return _verify_all(args, target, results)
    if args.lock is not None:
        err("--lock applies to a bundles directory, not to one bundle")
        return EXIT_USAGE
    try:
        m = check_bundle(single)
    except BundleError as exc:
        results.append(_verified(str(single), error=str(exc)))
    else:
        results.append(_verified(f"{m.library.id}/{m.version.name}", m.build.build_id, len(m.files)))
    return _report_verify(args, results)


def _verified(
    name: str, build_id: str | None = None, files: int = 0, error: str | None = None
) -> dict[str, Any]:
    """One line of ``verify``'s report (one object of ``verify --json``)."""
    return {"bundle": name, "ok": error is None, "buildId": build_id, "files": files, "error": error}


def _report_verify(args: argparse.Namespace, results: list[dict[str, Any]]) -> int:
    if args.json:
        print(json.dumps(results, indent=2, ensure_ascii=False))
    for r in [] if args.json else results:
        if r["ok"]:
            print(f"OK   {r['bundle']}/{r['buildId']} ({r['files']} files verified)")
        else:
            print(f"FAIL {r['bundle']}: {r['error']}")
    return EXIT_OK if results and all(r["ok"] for r in results) else EXIT_FAILED


def _one_bundle(target: Path) -> Path | None:
    """The one bundle ``target`` names (a bundle or a version dir), or None for a bundles directory."""
    try:
        return resolve_bundle(target)
    except BundleNotFoundError:
        if (target / CURRENT).is_file():
            raise  # a version directory whose CURRENT names no bundle
        return None


def _verify_all(args: argparse.Namespace, target: Path, results: list[dict[str, Any]]) -> int:
    """Verify every bundle a CURRENT names under the bundles directory ``target``."""
    if args.dir is None and not target.exists():
        target.mkdir(parents=True, exist_ok=True)  # the default folder: absent means empty
    try:
        catalog = Catalog.load(target, lock=find_lock(target, args.lock))
    except LockFileError as exc:
        err(str(exc))
        return EXIT_USAGE
    try:
        entries = catalog.entries()
        if not entries:
            how = "" if args.dir is not None else f" in the default folder ({bundles_origin()}); " + ways()
            results.append(
                _verified(
                    str(target), error=f"no bundles found (expected <libraryId>/<version>/CURRENT){how}"
                )
            )
        for entry in entries:
            name = f"{entry.library_id}/{entry.version}"
            try:
                with catalog_quiet():
                    opened = catalog.open_entry(entry)
            except LibraryUnavailableError as exc:
                results.append(_verified(name, entry.build_id, error=exc.reason))
                continue
            m = opened.manifest
            results.append(_verified(name, m.build.build_id, len(m.files)))
    finally:
        catalog.close()
    return _report_verify(args, results)


VERIFY = Command(
    "verify",
    help="verify bundles",
    description="Verify every file of every bundle CURRENT names under DIR (or one bundle directory) "
    "against its manifest, then open it.",
    run=verify,
    args=(
        arg("dir", metavar="DIR", nargs="?", type=Path, default=None, help="bundles dir or one bundle"),
        arg("--lock", type=Path, default=None, metavar="FILE", help="also check content hashes against it"),
        arg("--json", action="store_true", help="print a JSON list, one object per bundle"),
    ),
)
