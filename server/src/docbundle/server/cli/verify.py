"""``docbundle verify``: every file of every bundle (or of one bundle) checked against its manifest.

A report line per bundle (``--json``: one object per bundle); exit 1 when any did not verify. A bundle
``docbundle install`` recorded provenance for (``docbundle.server.provenance``) has its attestation
checked again, offline, for the archive it came from, and its manifest must be the one installed then;
``--require-provenance`` fails a bundle without such a record. Given a release archive
(``ARCHIVE.tar.gz``), ``verify`` checks its sha256 against ``SHA256SUMS`` beside it (when there is one)
and its attestation, and installs nothing: what an air-gapped site runs on what it copied.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docbundle.bundle.errors import BundleError, BundleNotFoundError
from docbundle.bundle.layout import CURRENT, bundle_at
from docbundle.bundle.userdirs import bundles_origin, default_bundles
from docbundle.common.clitable import Command, arg

from ..catalog import Catalog
from ..errors import InstallError, LibraryUnavailableError, LockFileError
from ..lockfile import find_lock
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    catalog_quiet,
    err,
    provenance_args,
    provenance_policy,
    ways,
)

if TYPE_CHECKING:
    from ..provenance import Policy

ARCHIVE_SUFFIX = ".tar.gz"


def verify(args: argparse.Namespace) -> int:
    """Run ``verify``."""
    from docbundle.bundle.reader import check_bundle

    target: Path = args.dir or default_bundles()
    results: list[dict[str, Any]] = []
    try:
        rules = provenance_policy(args)
    except InstallError as exc:
        err(str(exc))
        return EXIT_USAGE
    if target.is_file() and target.name.endswith(ARCHIVE_SUFFIX):
        results.append(_verify_archive(target, args.attestation, rules))
        return _report_verify(args, results)
    if args.attestation is not None:
        err("--attestation applies to a release archive (ARCHIVE.tar.gz), not to installed bundles")
        return EXIT_USAGE
    try:
        single = _one_bundle(target)
    except BundleError as exc:
        results.append(_verified(str(target), error=str(exc)))
        return _report_verify(args, results)
    if single is None:
        return _verify_all(args, target, results, rules)
    if args.lock is not None:
        err("--lock applies to a bundles directory, not to one bundle")
        return EXIT_USAGE
    try:
        m = check_bundle(single)
    except BundleError as exc:
        results.append(_verified(str(single), error=str(exc)))
    else:
        name = f"{m.library.id}/{m.version.name}"
        results.append(_with_provenance(_verified(name, m.build.build_id, len(m.files)), single, rules))
    return _report_verify(args, results)


def _verified(
    name: str, build_id: str | None = None, files: int = 0, error: str | None = None
) -> dict[str, Any]:
    """One line of ``verify``'s report (one object of ``verify --json``)."""
    return {"bundle": name, "ok": error is None, "buildId": build_id, "files": files, "error": error}


def _with_provenance(result: dict[str, Any], bundle: Path, rules: Policy) -> dict[str, Any]:
    """``result`` with the bundle's provenance checked again (``provenance.recheck``) when ``install``
    recorded it or ``--require-provenance`` asks for it; a failure fails the bundle. A bundle built
    here, with no record, is reported as before unless provenance is required."""
    import hashlib

    from docbundle.bundle.manifest import manifest_bytes

    from .. import provenance

    vdir, build_id = bundle.parent, bundle.name
    if not rules.required and not (vdir / f"{build_id}{provenance.RECORD_SUFFIX}").exists():
        return result
    try:
        digest = hashlib.sha256(manifest_bytes(bundle)).hexdigest()
        found = provenance.recheck(vdir, build_id, digest, rules)
    except (InstallError, BundleError, OSError) as exc:
        return {**result, "ok": False, "error": str(exc), "provenance": None}
    return {
        **result,
        "provenance": {"state": found.state, "signer": found.signer, "signedAt": found.signed_at},
    }


def _verify_archive(archive: Path, attestation: Path | None, rules: Policy) -> dict[str, Any]:
    """``verify ARCHIVE``: its sha256 against ``SHA256SUMS`` beside it (when there is one) and its
    attestation, as ``install`` checks them; nothing is unpacked."""
    from docbundle.bundle.release import SUMS

    from .. import install

    result = _verified(str(archive))
    try:
        if (archive.parent / SUMS).is_file():
            digest = install.check_sums(archive, None)
        else:
            digest = install.sha256_file(archive)
        found, _ = install.check_provenance(archive, digest, rules, attestation)
    except InstallError as exc:
        return {**result, "ok": False, "error": str(exc), "provenance": None}
    return {
        **result,
        "provenance": {"state": found.state, "signer": found.signer, "signedAt": found.signed_at},
    }


def _report_verify(args: argparse.Namespace, results: list[dict[str, Any]]) -> int:
    if args.json:
        print(json.dumps(results, indent=2, ensure_ascii=False))
    for r in [] if args.json else results:
        if r["ok"] and r["buildId"] is None:  # a release archive
            print(f"OK   {r['bundle']} ({_provenance_words(r['provenance'])})")
        elif r["ok"]:
            more = f"; {_provenance_words(r['provenance'])}" if r.get("provenance") else ""
            print(f"OK   {r['bundle']}/{r['buildId']} ({r['files']} files verified{more})")
        else:
            print(f"FAIL {r['bundle']}: {r['error']}")
    return EXIT_OK if results and all(r["ok"] for r in results) else EXIT_FAILED


def _provenance_words(found: dict[str, Any]) -> str:
    """``provenance verified: signed by ... at ...``, or what it is when it is not verified."""
    if found["state"] == "verified":
        return f"provenance verified: signed by {found['signer']} at {found['signedAt']}"
    if found["state"] == "unchecked":
        return "provenance not checked: the Sigstore client library is not installed"
    return "no attestation"


def _one_bundle(target: Path) -> Path | None:
    """The one bundle ``target`` names (a bundle or a version dir), or None for a bundles directory."""
    try:
        return bundle_at(target)
    except BundleNotFoundError:
        if (target / CURRENT).is_file():
            raise  # a version directory whose CURRENT names no bundle
        return None


def _verify_all(args: argparse.Namespace, target: Path, results: list[dict[str, Any]], rules: Policy) -> int:
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
            verified = _verified(name, m.build.build_id, len(m.files))
            bundle = entry.bundle_path
            results.append(verified if bundle is None else _with_provenance(verified, bundle, rules))
    finally:
        catalog.close()
    return _report_verify(args, results)


VERIFY = Command(
    "verify",
    help="verify bundles",
    description="Verify every file of every bundle CURRENT names under DIR (or one bundle directory) "
    "against its manifest, then open it; a bundle installed with an attestation has it checked again, "
    "offline. Given a release archive, check its SHA256SUMS and its Sigstore attestation.",
    run=verify,
    args=(
        arg(
            "dir",
            metavar="DIR",
            nargs="?",
            type=Path,
            default=None,
            help="bundles dir, one bundle, or a release archive (ARCHIVE.tar.gz: its SHA256SUMS and attestation)",
        ),
        arg("--lock", type=Path, default=None, metavar="FILE", help="also check content hashes against it"),
        arg("--json", action="store_true", help="print a JSON list, one object per bundle"),
        arg(
            "--attestation",
            type=Path,
            default=None,
            metavar="FILE",
            help="with ARCHIVE: its Sigstore attestation (default: found beside it, as install finds it)",
        ),
        *provenance_args(),
    ),
)
