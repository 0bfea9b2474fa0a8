"""Provenance checked offline: a release archive's Sigstore attestation against the expected signer.

``SHA256SUMS`` comes from the same place as the archive, so whoever can write to a release (or to the
mirror an air-gapped site copies from) can replace both. The nightly job also signs every archive it
publishes (``actions/attest-build-provenance``: an in-toto statement of SLSA build provenance naming
each archive's sha256, signed with a short-lived certificate that Sigstore's public-good Fulcio issued to
the workflow run, and entered in the Rekor transparency log). This module checks that signature with
the Sigstore client library (``sigstore``, the ``provenance`` extra), offline:

- the **trusted root** (Fulcio's certificates, Rekor's, the CT logs' and the timestamp authorities'
  keys) is a JSON file that ships with docbundle (``sigstore_trusted_root.json`` beside this module,
  Sigstore's public-good root); ``--trusted-root FILE`` or ``$DOCBUNDLE_TRUSTED_ROOT`` names another
  (a newer copy, updated by hand: docs/releases.md). Nothing is fetched: the bundle carries the
  certificate, the log entry and its inclusion proof and promise, and the library checks them against
  the root;
- the **signer**: the certificate's OIDC issuer must be GitHub Actions' and its identity (the workflow
  that signed) ``https://github.com/OWNER/REPO/PATH@REF``, where OWNER/REPO is this distribution's
  Homepage (as ``pull`` derives the release URL) and PATH the nightly workflow; any REF (the nightly
  runs from the default branch; whoever can push a branch can change the workflow anyway).
  ``--signer-workflow OWNER/REPO/PATH`` or ``$DOCBUNDLE_SIGNER_WORKFLOW`` names another (a fork, a
  mirror that signs its own);
- the **statement**: in-toto, SLSA provenance, and one of its subjects is the archive's sha256. One
  attestation may name many archives (the nightly signs a release's archives at once).

What each outcome means (``check``): ``verified``; ``missing`` (no attestation: a warning, refused with
``--require-provenance``); ``unchecked`` (an attestation but no ``sigstore`` installed: a warning naming
the extra, refused with ``--require-provenance``). An attestation that is present and does not verify
is always an error: the archive is not installed, whatever the options.

``install`` records the result beside the bundle it installed (``record``): ``<build_id>.provenance.json``
and a copy of the attestation, ``<build_id>.sigstore.json``, in the version folder, so ``verify`` can check
the attestation again (``recheck``) and the server can show it. ``sigstore`` (and with it pydantic,
cryptography and requests) is imported only inside ``_verify``: start-up never loads it.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import msgspec
from docbundle.bundle.errors import BundleFormatError
from docbundle.bundle.untrusted import decode, read_regular

from .errors import ProvenanceError

log = logging.getLogger(__name__)

#: The OIDC issuer of GitHub Actions' tokens, which Fulcio writes into the certificate.
ISSUER = "https://token.actions.githubusercontent.com"
#: The workflow that builds and signs the catalogue's archives (.github/workflows/nightly.yml).
DEFAULT_WORKFLOW = ".github/workflows/nightly.yml"
ENV_SIGNER = "DOCBUNDLE_SIGNER_WORKFLOW"
ENV_TRUSTED_ROOT = "DOCBUNDLE_TRUSTED_ROOT"
#: The Sigstore public-good trusted root docbundle ships (see the module docstring to update it).
TRUSTED_ROOT = Path(__file__).with_name("sigstore_trusted_root.json")
#: The distribution extra that installs the Sigstore client library.
EXTRA = "docbundle-server[provenance]"
#: An attestation bundle's bound: the nightly signs at most 1,024 subjects at once (the action's own
#: limit), about 150 bytes each in the base64 payload; with the certificate and the log entry one is
#: under 300 KB. A trusted root is a few KB. Larger files are refused before they are parsed.
MAX_ATTESTATION_BYTES = 4 * 1024 * 1024
MAX_TRUSTED_ROOT_BYTES = 1024 * 1024
INTOTO_PAYLOAD = "application/vnd.in-toto+json"
INTOTO_STATEMENTS = ("https://in-toto.io/Statement/v1", "https://in-toto.io/Statement/v0.1")
SLSA_PROVENANCE = "https://slsa.dev/provenance/v1"
#: What the suffix of the files ``install`` writes beside a bundle.
RECORD_SUFFIX = ".provenance.json"
COPY_SUFFIX = ".sigstore.json"
RECORD_FORMAT = "docbundle-provenance"
RECORD_VERSION = 1
MAX_RECORD_BYTES = 64 * 1024
#: What a refusal quotes of the verifier's words: its reasons are a line; a parser error may quote input.
MAX_REASON_CHARS = 600
_SIGNER_RE = re.compile(r"(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/(?P<path>[A-Za-z0-9_./-]+)\Z")

State = Literal["verified", "missing", "unchecked"]


@dataclass(frozen=True)
class Signer:
    """Whose signature is expected: the workflow file ``path`` of the GitHub repository ``repository``."""

    repository: str
    path: str

    @property
    def identity(self) -> str:
        """The certificate identity's start: ``https://github.com/OWNER/REPO/PATH@`` (any ref follows)."""
        return f"https://github.com/{self.repository}/{self.path}@"

    def __str__(self) -> str:
        return f"{self.repository}/{self.path}"


@dataclass(frozen=True)
class Policy:
    """How one command checks provenance: the signer, the trusted root, and whether it is required."""

    signer: Signer | None  # None: no signer could be derived (then only a missing attestation passes)
    trusted_root: Path
    required: bool = False


@dataclass(frozen=True)
class Provenance:
    """The outcome of a check (see the module docstring)."""

    state: State
    signer: str = ""  # the certificate's identity (the workflow that signed, with its ref)
    signed_at: str = ""  # when its certificate was issued (UTC): a Fulcio certificate lives 10 minutes
    note: str = ""  # why it is missing or unchecked

    def line(self, what: str) -> str:
        """The line a command prints about ``what``."""
        if self.state == "verified":
            return f"provenance: {what} verified: signed by {self.signer} at {self.signed_at}"
        return f"provenance: {what} {self.note}"


class Record(msgspec.Struct, kw_only=True):
    """``<build_id>.provenance.json``: what ``install`` found, for ``verify`` and the server to show."""

    format: str
    version: int
    state: str
    archive: str
    archive_sha256: str
    manifest_sha256: str
    signer: str = ""
    signed_at: str = ""
    note: str = ""
    checked_at: str = ""


def project_repository() -> str | None:
    """``OWNER/REPO`` of this distribution's Homepage when it is a GitHub project, else None.

    The project's catalogue (``pull``'s default release) and its signer (the nightly workflow of the same
    repository) both come from here, so a fork that publishes its own distribution trusts its own.
    """
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        urls = metadata("docbundle-server").get_all("Project-URL") or []
    except PackageNotFoundError:
        return None
    for line in urls:
        label, _, url = line.partition(",")
        m = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+)", url.strip().rstrip("/"))
        if label.strip().lower() == "homepage" and m:
            return m[1]
    return None


def parse_signer(text: str, where: str) -> Signer:
    """``OWNER/REPO/PATH/TO/WORKFLOW.yml`` (as ``gh attestation verify --signer-workflow`` takes it)."""
    m = _SIGNER_RE.fullmatch(text.strip().removeprefix("https://").removeprefix("github.com/"))
    if m is None or ".." in m["path"].split("/"):
        raise ProvenanceError(
            f"{where} {text[:120]!r} is not a workflow: give OWNER/REPO/PATH, "
            f"e.g. docbundle/docbundle/{DEFAULT_WORKFLOW}"
        )
    return Signer(m["repo"], m["path"])


def policy(signer: str | None, trusted_root: Path | None, *, required: bool) -> Policy:
    """The policy of a command: ``--signer-workflow`` else ``$DOCBUNDLE_SIGNER_WORKFLOW`` else the project's
    nightly workflow; ``--trusted-root`` else ``$DOCBUNDLE_TRUSTED_ROOT`` else the shipped root."""
    env_signer = os.environ.get(ENV_SIGNER, "").strip()
    if signer:
        expected: Signer | None = parse_signer(signer, "--signer-workflow")
    elif env_signer:
        expected = parse_signer(env_signer, f"${ENV_SIGNER}")
    else:
        repository = project_repository()
        expected = Signer(repository, DEFAULT_WORKFLOW) if repository else None
    env_root = os.environ.get(ENV_TRUSTED_ROOT, "").strip()
    root = trusted_root or (Path(env_root) if env_root else TRUSTED_ROOT)
    return Policy(expected, root, required)


def check(
    what: str, archive_sha256: str, attestation: bytes | None, rules: Policy, *, source: str = ""
) -> Provenance:
    """Check ``attestation`` (the bytes of a Sigstore bundle, from ``source``) for the archive ``what``
    whose sha256 is ``archive_sha256``; see the module docstring. ``ProvenanceError`` says why not."""
    if attestation is None:
        found = Provenance("missing", note="has no attestation (no .sigstore.json beside it)")
        if rules.required:
            raise ProvenanceError(
                f"{what} has no attestation, and --require-provenance refuses it: copy the release's "
                "attestation (.sigstore.json) with the archive, or pass --attestation FILE"
            )
        return found
    try:
        import sigstore  # noqa: F401 - only to know whether the extra is installed
    except ImportError:
        if rules.required:
            raise ProvenanceError(
                f"{what}: its attestation cannot be checked without the Sigstore client library; "
                f"install {EXTRA} (pip install '{EXTRA}'), or leave out --require-provenance"
            ) from None
        return Provenance("unchecked", note=f"has an attestation, not checked: install {EXTRA} to check it")
    if rules.signer is None:
        raise ProvenanceError(
            f"{what}: no signer to check its attestation against (this docbundle's Homepage is not a GitHub "
            f"project): pass --signer-workflow OWNER/REPO/PATH or set ${ENV_SIGNER}"
        )
    return _verify(what, archive_sha256, attestation, rules, source or "the attestation")


def _verify(what: str, digest: str, attestation: bytes, rules: Policy, source: str) -> Provenance:
    """Verify offline with the Sigstore client library; any failure is ``ProvenanceError`` naming it."""
    from sigstore.errors import VerificationError
    from sigstore.models import Bundle, TrustedRoot
    from sigstore.verify import Verifier
    from sigstore.verify.policy import OIDCIssuerV2

    assert rules.signer is not None
    signer = rules.signer
    try:
        read_regular(rules.trusted_root, MAX_TRUSTED_ROOT_BYTES)  # a regular file within its bound
        verifier = Verifier(trusted_root=TrustedRoot.from_file(str(rules.trusted_root)))
    except Exception as exc:
        raise ProvenanceError(
            f"the trusted root {rules.trusted_root} cannot be read ({_why(exc)}); "
            f"fix it or set ${ENV_TRUSTED_ROOT} to a Sigstore trusted_root.json"
        ) from None

    class Identity:
        """The certificate's issuer and identity (the signing workflow, any ref)."""

        def verify(self, cert: Any) -> None:
            from cryptography.x509 import SubjectAlternativeName, UniformResourceIdentifier

            OIDCIssuerV2(ISSUER).verify(cert)
            names = cert.extensions.get_extension_for_class(SubjectAlternativeName).value
            uris = names.get_values_for_type(UniformResourceIdentifier)
            if not any(_same_signer(uri, signer) for uri in uris):
                shown = ", ".join(uris) or "no workflow"
                raise VerificationError(
                    f"signed by {shown}, not by the workflow {signer} (expected {signer.identity}<ref>); "
                    f"--signer-workflow or ${ENV_SIGNER} names another signer (a fork's, a mirror's)"
                )

    try:
        if len(attestation) > MAX_ATTESTATION_BYTES:
            raise ValueError(f"{len(attestation)} bytes, over the {MAX_ATTESTATION_BYTES}-byte limit")
        bundle = Bundle.from_json(attestation)
        payload_type, payload = verifier.verify_dsse(bundle, Identity())
        if payload_type != INTOTO_PAYLOAD:
            raise ValueError(f"it signs {payload_type[:80]!r}, not an in-toto statement")
        _check_statement(payload, digest)
        cert = bundle.signing_certificate
        from cryptography.x509 import SubjectAlternativeName, UniformResourceIdentifier

        uris = cert.extensions.get_extension_for_class(SubjectAlternativeName).value
        identity = next(iter(uris.get_values_for_type(UniformResourceIdentifier)), "")
        signed_at = cert.not_valid_before_utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    except Exception as exc:
        raise ProvenanceError(f"{what}: {source} does not verify: {_why(exc)}") from None
    return Provenance("verified", signer=identity, signed_at=signed_at)


def _same_signer(uri: str, signer: Signer) -> bool:
    """Whether the certificate identity ``uri`` is ``signer``'s workflow at some ref (owner and repository
    names compare without case, as GitHub's do; the path exactly)."""
    prefix = "https://github.com/"
    if not uri.startswith(prefix) or "@" not in uri:
        return False
    owner, repo, *path = uri[len(prefix) :].split("@", 1)[0].split("/")
    return f"{owner}/{repo}".lower() == signer.repository.lower() and "/".join(path) == signer.path


def _check_statement(payload: bytes, digest: str) -> None:
    """The signed statement is SLSA build provenance and one of its subjects is the archive."""
    import json

    statement = json.loads(payload)
    if not isinstance(statement, dict) or statement.get("_type") not in INTOTO_STATEMENTS:
        raise ValueError("the signed payload is not an in-toto statement")
    if statement.get("predicateType") != SLSA_PROVENANCE:
        raise ValueError(f"it states {str(statement.get('predicateType'))[:80]!r}, not SLSA build provenance")
    subjects = statement.get("subject")
    if not isinstance(subjects, list):
        raise ValueError("the statement names no subject")
    for s in subjects:
        if isinstance(s, dict) and isinstance(s.get("digest"), dict) and s["digest"].get("sha256") == digest:
            return
    named = ", ".join(
        f"{str(s.get('name'))[:60]} sha256:{str((s.get('digest') or {}).get('sha256'))[:12]}…"
        for s in subjects[:3]
        if isinstance(s, dict)
    )
    raise ValueError(
        f"it is for other files ({len(subjects)} subject(s): {named}), not for sha256:{digest[:12]}…"
    )


def _why(exc: BaseException) -> str:
    """One line of what the verifier said (bounded: a parser may quote its input)."""
    text = " ".join(str(exc).split())[:MAX_REASON_CHARS] or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def record(
    vdir: Path,
    build_id: str,
    *,
    archive: str,
    archive_sha256: str,
    manifest_sha256: str,
    found: Provenance,
    attestation: bytes | None,
) -> None:
    """Write ``found`` beside the bundle (and a copy of the attestation, which ``verify`` checks again)."""
    copy = vdir / f"{build_id}{COPY_SUFFIX}"
    if attestation is not None:
        _write(copy, attestation)
    elif copy.exists():
        copy.unlink()
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    rec = Record(
        format=RECORD_FORMAT,
        version=RECORD_VERSION,
        state=found.state,
        archive=archive,
        archive_sha256=archive_sha256,
        manifest_sha256=manifest_sha256,
        signer=found.signer,
        signed_at=found.signed_at,
        note=found.note,
        checked_at=now,
    )
    _write(vdir / f"{build_id}{RECORD_SUFFIX}", msgspec.json.format(msgspec.json.encode(rec)) + b"\n")


def _write(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically."""
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def read_record(vdir: Path, build_id: str) -> Record | None:
    """The record ``install`` wrote for ``build_id``, or None when there is none (a build, an older install)."""
    path = vdir / f"{build_id}{RECORD_SUFFIX}"
    if not path.exists():
        return None
    try:
        rec = decode(msgspec.json.Decoder(Record).decode, read_regular(path, MAX_RECORD_BYTES), str(path))
    except BundleFormatError as exc:
        raise ProvenanceError(str(exc)) from None
    if rec.format != RECORD_FORMAT or rec.version != RECORD_VERSION:
        raise ProvenanceError(f"{path} is not a provenance record this docbundle reads")
    return rec


def record_claim(vdir: Path, build_id: str, manifest_sha256: str) -> str | None:
    """What ``list_libraries`` shows of a served build's provenance: the state ``install`` recorded
    (``verified``, ``unchecked``, ``missing``), with the signer when verified, or None when there is no
    record (a build made here, an older install). A record for another manifest than the one served, or
    one that cannot be read, is not shown (a line is logged). The server does not check the attestation
    again (that is ``docbundle verify``): the record is what was found at install time, and anyone who
    can write the bundles folder can write it, so the answer says "recorded at install"."""
    try:
        rec = read_record(vdir, build_id)
    except (ProvenanceError, OSError) as exc:
        log.warning("ignoring the provenance record of %s/%s: %s", vdir.name, build_id, exc)
        return None
    if rec is None:
        return None
    if rec.manifest_sha256 != manifest_sha256:
        log.warning(
            "ignoring the provenance record of %s/%s: it names another manifest than the one served",
            vdir.name,
            build_id,
        )
        return None
    if rec.state == "verified":
        return f"verified at install: signed by {rec.signer[:300]} at {rec.signed_at[:40]}"
    return f"{rec.state[:20]} at install: {rec.note[:300]}"


def recheck(vdir: Path, build_id: str, manifest_sha256: str, rules: Policy) -> Provenance:
    """``verify``'s check of an installed bundle: its record's attestation verified again for the archive
    it was installed from, and the manifest installed then is the one there now."""
    what = f"{vdir.parent.name}/{vdir.name}/{build_id}"
    rec = read_record(vdir, build_id)
    if rec is None:
        if rules.required:
            raise ProvenanceError(
                f"{what} has no provenance record ({build_id}{RECORD_SUFFIX}: built here, or installed by "
                "an older docbundle), and --require-provenance refuses it: install it again from its "
                "release archive with the release's attestation"
            )
        return Provenance("missing", note="has no provenance record")
    if rec.manifest_sha256 != manifest_sha256:
        raise ProvenanceError(
            f"{what}: its manifest is not the one installed from {rec.archive} (sha256 "
            f"{manifest_sha256[:12]}…, the record says {rec.manifest_sha256[:12]}…)"
        )
    copy = vdir / f"{build_id}{COPY_SUFFIX}"
    attestation = read_regular(copy, MAX_ATTESTATION_BYTES) if copy.exists() else None
    if attestation is None and rec.state == "verified":
        raise ProvenanceError(f"{what}: the record says verified but {copy.name} is gone")
    return check(rec.archive, rec.archive_sha256, attestation, rules, source=str(copy))
