"""Provenance checked offline (issue 34): ``docbundle verify``, ``install`` and ``pull`` check an archive's
Sigstore attestation against the expected signer with the trusted root docbundle ships, no network.

The attestation is a real one (``tests/fixtures/provenance``: a GitHub Actions attestation of a wheel,
from the GitHub CLI's test data); every forged case is made from it. Since the attested file is not a
docbundle archive, ``install`` and ``pull`` of it pass the provenance check and are then refused as "not
a bundle archive": a forged attestation is refused before that, with its own reason. ``verify ARCHIVE``
checks provenance only, so the genuine case passes whole there.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clikit import server_cli
from docbundle.bundle.layout import read_current
from docbundle.bundle.release import INDEX, SUMS, render_sums
from docbundle.bundle.releaseindex import ATTESTATION, PackagedBundle, encode_index
from docsite import packaged_entry
from sitesrv import Site

pytest.importorskip("sigstore", reason="the provenance extra: pip install 'docbundle-server[provenance]'")

DATA = Path(__file__).parent.parent / "fixtures" / "provenance"
ARTIFACT = (DATA / "artifact").read_bytes()
ATTESTED = json.loads((DATA / "artifact.sigstore.json").read_text())
#: The workflow that signed the real attestation (the certificate's identity, without its ref).
SIGNER = "github/artifact-attestations-workflows/.github/workflows/attest.yml"
SIGNED_BY = f"https://github.com/{SIGNER}@09b495c3f12c7881b3cc17209a327792065c1a1d"
ARCHIVE = "demo-1.0-20240524-0123456789ab.tar.gz"

# What a process is refused when it reaches for the network (installed in it as sitecustomize).
NO_NETWORK = """
import sys
def _offline(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"):
        raise RuntimeError(f"offline test: {event} {args!r}")
sys.addaudithook(_offline)
"""
# The provenance extra not installed: ``import sigstore`` fails in that process.
NO_SIGSTORE = """
import sys
class _NoSigstore:
    def find_spec(self, name, path=None, target=None):
        if name == "sigstore" or name.startswith("sigstore."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoSigstore())
"""


def docbundle(*args: str, tmp: Path, hooks: str = NO_NETWORK, **env: str) -> tuple[int, str, str]:
    """``docbundle ARGS`` in a fresh process with ``hooks`` as its sitecustomize (no network by default)."""
    site = tmp / "site"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(hooks)
    full = {k: v for k, v in os.environ.items() if not k.startswith("DOCBUNDLE_")}
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    full.update(env)
    r = server_cli(*args, env=full)
    return r.returncode, r.stdout, r.stderr


def _install_signed(folder: Path, bundles: Path, *options: str, tmp: Path) -> tuple[int, str, str]:
    """``docbundle install`` of the demo archive in ``folder`` into ``bundles``, expecting ``SIGNER``."""
    return docbundle(
        "install",
        str(folder / ARCHIVE),
        "--signer-workflow",
        SIGNER,
        "--bundles",
        str(bundles),
        *options,
        tmp=tmp,
    )


def _b64_flip(text: str, at: int) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[at] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def _statement(d: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> None:
    statement = json.loads(base64.b64decode(d["dsseEnvelope"]["payload"]))
    change(statement)
    d["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()


def _late(d: dict[str, Any]) -> None:
    entry = d["verificationMaterial"]["tlogEntries"][0]
    entry["integratedTime"] = str(int(entry["integratedTime"]) + 3600)  # the certificate lived 10 minutes


def _other_subject(st: dict[str, Any]) -> None:
    st["subject"][0]["digest"]["sha256"] = hashlib.sha256(b"another archive").hexdigest()


#: A forged attestation (made from the real one) and what the refusal must say.
FORGED: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "signature flipped": (
        lambda d: d["dsseEnvelope"]["signatures"][0].update(
            sig=_b64_flip(d["dsseEnvelope"]["signatures"][0]["sig"], 12)
        ),
        "DSSE: invalid signature",
    ),
    "statement rewritten to name another archive": (
        lambda d: _statement(d, _other_subject),
        "DSSE: invalid signature",
    ),
    "certificate flipped": (
        lambda d: d["verificationMaterial"]["certificate"].update(
            rawBytes=_b64_flip(d["verificationMaterial"]["certificate"]["rawBytes"], -40)
        ),
        "certificate chain",
    ),
    "log entry moved past the certificate's life (expired)": (
        _late,
        "cert is not valid at validation time",
    ),
    "no verified time (the log's promise removed)": (
        lambda d: d["verificationMaterial"]["tlogEntries"][0].pop("inclusionPromise"),
        "must contain an inclusion promise or signed timestamp",
    ),
    "log entry of another signature": (
        lambda d: d["verificationMaterial"]["tlogEntries"][0].update(
            canonicalizedBody=base64.b64encode(b'{"kind":"dsse"}').decode()
        ),
        "does not verify",
    ),
}


def _forge(kind: str) -> bytes:
    d = copy.deepcopy(ATTESTED)
    FORGED[kind][0](d)
    return json.dumps(d).encode()


def _folder(tmp: Path, *, artifact: bytes = ARTIFACT, attestation: bytes | None = None) -> Path:
    """An archive as an air-gapped site copies it: the file, SHA256SUMS and ``<archive>.sigstore.json``."""
    folder = tmp / "copied"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / ARCHIVE).write_bytes(artifact)
    (folder / SUMS).write_text(render_sums({ARCHIVE: hashlib.sha256(artifact).hexdigest()}))
    if attestation is not None:
        (folder / f"{ARCHIVE}.sigstore.json").write_bytes(attestation)
    return folder


GENUINE = (DATA / "artifact.sigstore.json").read_bytes()
NOT_A_BUNDLE = f"{ARCHIVE} is damaged or not a bundle archive"


def test_verify_accepts_a_genuine_github_attestation_offline(tmp_path: Path) -> None:
    folder = _folder(tmp_path, attestation=GENUINE)
    code, out, err = docbundle(
        "verify", str(folder / ARCHIVE), "--signer-workflow", SIGNER, "--require-provenance", tmp=tmp_path
    )
    assert code == 0, err
    assert out.strip() == (
        f"OK   {folder / ARCHIVE} (provenance verified: signed by {SIGNED_BY} at 2024-05-24T19:14:24Z)"
    )
    # The same through $DOCBUNDLE_SIGNER_WORKFLOW (a fork's or a mirror's setting), in JSON.
    code, out, err = docbundle(
        "verify", str(folder / ARCHIVE), "--json", tmp=tmp_path, DOCBUNDLE_SIGNER_WORKFLOW=SIGNER
    )
    assert code == 0, err
    assert json.loads(out)[0]["provenance"] == {
        "state": "verified",
        "signer": SIGNED_BY,
        "signedAt": "2024-05-24T19:14:24Z",
    }


@pytest.mark.parametrize("kind", sorted(FORGED))
def test_a_forged_attestation_is_refused_by_verify_and_install_with_its_reason(
    kind: str, tmp_path: Path
) -> None:
    """Tampered, expired, without a verified time: refused whether provenance is required or not."""
    folder = _folder(tmp_path, attestation=_forge(kind))
    reason = FORGED[kind][1]
    code, out, err = docbundle("verify", str(folder / ARCHIVE), "--signer-workflow", SIGNER, tmp=tmp_path)
    assert code == 1 and out.startswith(f"FAIL {folder / ARCHIVE}: ") and reason in out, out + err
    assert "does not verify" in out
    for required in ((), ("--require-provenance",)):
        bundles = tmp_path / "bundles"
        code, out, err = _install_signed(folder, bundles, *required, tmp=tmp_path)
        assert code == 1 and out == "", err
        assert (
            err.startswith(f"docbundle: error: {ARCHIVE}: ") and reason in err and NOT_A_BUNDLE not in err
        ), err
        assert not bundles.exists()


def test_an_attestation_for_another_file_is_refused(tmp_path: Path) -> None:
    other = bytes([ARTIFACT[0] ^ 0x01]) + ARTIFACT[1:]
    folder = _folder(tmp_path, artifact=other, attestation=GENUINE)
    code, out, err = docbundle("verify", str(folder / ARCHIVE), "--signer-workflow", SIGNER, tmp=tmp_path)
    digest = hashlib.sha256(other).hexdigest()
    assert code == 1, out + err
    assert (
        f"it is for other files (1 subject(s): github_provenance_demo-0.0.0-py3-none-any.whl sha256:49a3aa6075e0…), not for sha256:{digest[:12]}…"
        in out
    )
    code, out, err = _install_signed(folder, tmp_path / "b", tmp=tmp_path)
    assert code == 1 and "it is for other files" in err and not (tmp_path / "b").exists(), err


@pytest.mark.parametrize(
    "signer",
    [
        "github/another-repository/.github/workflows/attest.yml",  # another repository, the same path
        "github/artifact-attestations-workflows/.github/workflows/nightly.yml",  # another workflow
        "docbundle/docbundle/.github/workflows/nightly.yml",  # the project's own: the default
    ],
)
def test_an_attestation_by_another_repository_or_workflow_is_refused(signer: str, tmp_path: Path) -> None:
    folder = _folder(tmp_path, attestation=GENUINE)
    given = () if signer.startswith("docbundle/") else ("--signer-workflow", signer)
    code, _out, err = docbundle(
        "install", str(folder / ARCHIVE), *given, "--bundles", str(tmp_path / "b"), tmp=tmp_path
    )
    assert code == 1, err
    assert (
        f"signed by {SIGNED_BY}, not by the workflow {signer} (expected https://github.com/{signer}@<ref>); "
        "--signer-workflow or $DOCBUNDLE_SIGNER_WORKFLOW names another signer"
    ) in err
    assert not (tmp_path / "b").exists()


def test_the_genuine_attestation_passes_install_s_provenance_check(tmp_path: Path) -> None:
    """It gets past provenance to the next check (the attested file is a wheel, not a bundle archive)."""
    folder = _folder(tmp_path, attestation=GENUINE)
    for attestation in ((), ("--attestation", str(folder / f"{ARCHIVE}.sigstore.json"))):
        code, _, err = _install_signed(
            folder, tmp_path / "b", "--require-provenance", *attestation, tmp=tmp_path
        )
        assert code == 1 and NOT_A_BUNDLE in err and "attestation" not in err, err
    # The release's own attestation (one for all its archives) is found beside the archive too.
    (folder / f"{ARCHIVE}.sigstore.json").rename(folder / ATTESTATION)
    code, _, err = _install_signed(folder, tmp_path / "b", "--require-provenance", tmp=tmp_path)
    assert code == 1 and NOT_A_BUNDLE in err, err


def test_a_missing_attestation_is_a_warning_and_refused_when_required(release: Path, tmp_path: Path) -> None:
    """A real bundle archive without an attestation: installed with a warning (and recorded as such),
    refused under --require-provenance; verify says so."""
    archive = release / packaged_entry(release).archive
    bundles = tmp_path / "bundles"
    code, out, err = docbundle(
        "install", str(archive), "--require-provenance", "--bundles", str(bundles), tmp=tmp_path
    )
    assert code == 1 and out == "", err
    assert (
        f"docbundle: error: {archive.name} has no attestation, and --require-provenance refuses it: copy the "
        "release's attestation (.sigstore.json) with the archive, or pass --attestation FILE"
    ) in err
    assert not (bundles / "golden").exists()

    code, out, err = docbundle("install", str(archive), "--bundles", str(bundles), tmp=tmp_path)
    assert code == 0 and out.startswith("installed golden@latest"), err
    assert (
        f"docbundle: warning: provenance: {archive.name} has no attestation (no .sigstore.json beside it)"
        in err
    )
    build = read_current(bundles / "golden" / "latest")
    record = json.loads((bundles / "golden" / "latest" / f"{build}.provenance.json").read_text())
    assert record["state"] == "missing" and record["archive"] == archive.name
    assert record["archive_sha256"] == packaged_entry(release).sha256
    assert record["manifest_sha256"] == packaged_entry(release).manifest_sha256

    code, out, err = docbundle("verify", str(bundles), tmp=tmp_path)
    assert code == 0 and out.strip() == f"OK   golden/latest/{build} (6 files verified; no attestation)", (
        out + err
    )
    code, out, err = docbundle("verify", str(bundles), "--require-provenance", tmp=tmp_path)
    assert code == 1 and "has no attestation, and --require-provenance refuses it" in out, out + err


def test_verify_checks_a_recorded_attestation_again(release: Path, tmp_path: Path) -> None:
    """What install records is checked again by verify: a record of a genuine attestation passes; one
    whose archive, attestation or manifest does not match fails its bundle."""
    archive = release / packaged_entry(release).archive
    bundles = tmp_path / "bundles"
    code, _, err = docbundle("install", str(archive), "--bundles", str(bundles), tmp=tmp_path)
    assert code == 0, err
    vdir = bundles / "golden" / "latest"
    build = read_current(vdir)
    record_path = vdir / f"{build}.provenance.json"
    record = json.loads(record_path.read_text())
    # A record of the genuine attestation for the file it attests (as install writes after verifying it).
    genuine = dict(record, state="verified", archive_sha256=hashlib.sha256(ARTIFACT).hexdigest())
    record_path.write_text(json.dumps(genuine))
    (vdir / f"{build}.sigstore.json").write_bytes(GENUINE)
    code, out, err = docbundle(
        "verify", str(bundles), "--signer-workflow", SIGNER, "--require-provenance", tmp=tmp_path
    )
    assert code == 0, out + err
    assert f"provenance verified: signed by {SIGNED_BY} at 2024-05-24T19:14:24Z" in out

    # The record names the archive it was installed from: the attestation does not sign that one.
    record_path.write_text(json.dumps(dict(genuine, archive_sha256=record["archive_sha256"])))
    code, out, _ = docbundle("verify", str(bundles), "--signer-workflow", SIGNER, tmp=tmp_path)
    assert code == 1 and out.startswith("FAIL golden/latest: ") and "it is for other files" in out, out
    # The bundle's manifest is not the one installed from the attested archive.
    record_path.write_text(json.dumps(dict(genuine, manifest_sha256="0" * 64)))
    code, out, _ = docbundle("verify", str(bundles), "--signer-workflow", SIGNER, tmp=tmp_path)
    assert code == 1 and "its manifest is not the one installed from" in out, out
    # The copy of the attestation was tampered with.
    record_path.write_text(json.dumps(genuine))
    (vdir / f"{build}.sigstore.json").write_bytes(_forge("signature flipped"))
    code, out, _ = docbundle("verify", str(bundles), "--signer-workflow", SIGNER, tmp=tmp_path)
    assert code == 1 and "DSSE: invalid signature" in out, out


def test_without_the_extra_an_attestation_is_not_checked_and_required_names_the_extra(tmp_path: Path) -> None:
    folder = _folder(tmp_path, attestation=_forge("signature flipped"))
    code, out, err = docbundle(
        "verify", str(folder / ARCHIVE), "--require-provenance", tmp=tmp_path, hooks=NO_NETWORK + NO_SIGSTORE
    )
    assert code == 1, err
    assert (
        "its attestation cannot be checked without the Sigstore client library; install "
        "docbundle-server[provenance] (pip install 'docbundle-server[provenance]'), or leave out --require-provenance"
    ) in out
    code, out, err = docbundle("verify", str(folder / ARCHIVE), tmp=tmp_path, hooks=NO_NETWORK + NO_SIGSTORE)
    assert code == 0 and "provenance not checked: the Sigstore client library is not installed" in out, (
        out + err
    )


@pytest.fixture
def signed_release(tmp_path: Path) -> Path:
    """A release folder whose index names one archive (the attested file) and the release's attestation."""
    folder = tmp_path / "rel"
    folder.mkdir()
    digest = hashlib.sha256(ARTIFACT).hexdigest()
    entry = PackagedBundle(
        library="demo",
        name="Demo",
        version="1.0",
        status="active",
        latest=True,
        build_id="20240524-0123456789ab",
        content_hash="1" * 64,
        manifest_sha256="2" * 64,
        built_at="2024-05-24T19:14:24Z",
        documents=1,
        archive=ARCHIVE,
        sha256=digest,
        size=len(ARTIFACT),
        attestation=ATTESTATION,
    )
    (folder / INDEX).write_bytes(encode_index([entry]))
    (folder / SUMS).write_text(render_sums({ARCHIVE: digest}))
    (folder / ARCHIVE).write_bytes(ARTIFACT)
    (folder / ATTESTATION).write_bytes(GENUINE)
    return folder


def _pull(site: Site, *args: str, tmp: Path) -> tuple[int, str, str]:
    return docbundle(
        "pull",
        "demo",
        "--from",
        site.url("/rel/"),
        "--bundles",
        str(tmp / "b"),
        "--signer-workflow",
        SIGNER,
        *args,
        tmp=tmp,
        hooks="",
    )


def test_pull_fetches_and_checks_the_attestation_the_index_names(
    site: Site, signed_release: Path, tmp_path: Path
) -> None:
    site.serve_dir(signed_release, "/rel")
    code, _, err = _pull(site, "--require-provenance", tmp=tmp_path)
    assert code == 1 and NOT_A_BUNDLE in err and "attestation" not in err, err  # past provenance
    assert f"/rel/{ATTESTATION}" in [q.path for q in site.requests]

    (signed_release / ATTESTATION).write_bytes(
        _forge("log entry moved past the certificate's life (expired)")
    )
    code, _, err = _pull(site, tmp=tmp_path)
    assert code == 1 and "cert is not valid at validation time" in err and NOT_A_BUNDLE not in err, err

    (signed_release / ATTESTATION).unlink()  # named by the index, gone from the release (404)
    code, _, err = _pull(site, "--require-provenance", tmp=tmp_path)
    assert code == 1 and f"{ARCHIVE} has no attestation, and --require-provenance refuses it" in err, err
    code, _, err = _pull(site, tmp=tmp_path)
    assert code == 1 and NOT_A_BUNDLE in err and "attestation" not in err, err  # a missing one is no error
    assert not (tmp_path / "b" / "demo").exists()


async def _listed(bundles: Path) -> tuple[dict[str, Any], str]:
    """``list_libraries`` of a real ``docbundle serve`` over ``bundles`` (stdio, the MCP SDK's client):
    the golden library's structured entry, and the markdown a model reads."""
    import sys

    import anyio
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "docbundle.server", "serve", "--bundles", str(bundles)],
        env=dict(os.environ),  # the SDK passes few variables on; this test's PYTHONPATH, if any, too
    )
    with anyio.fail_after(60):
        async with Client(params) as client:
            result = await client.call_tool("list_libraries", {})
    assert not result.is_error and isinstance(result.structured_content, dict)
    (entry,) = result.structured_content["libraries"]
    text = result.content[0].text  # type: ignore[union-attr]
    return entry, text


@pytest.mark.anyio
async def test_list_libraries_says_what_install_found_of_a_bundles_provenance(
    release: Path, tmp_path: Path
) -> None:
    """The answer of list_libraries says whether the served bundle's attestation was verified at install
    (and by whom), found missing, or never looked at; a record that names another manifest is not shown,
    and one that is not a regular file neither hangs the server nor fails the library."""
    from docbundle.server import provenance

    archive = release / packaged_entry(release).archive
    bundles = tmp_path / "bundles"
    code, _, err = docbundle("install", str(archive), "--bundles", str(bundles), tmp=tmp_path)
    assert code == 0, err
    entry, text = await _listed(bundles)
    note = "missing at install: has no attestation (no .sigstore.json beside it)"
    assert entry["provenance"] == note and f"\n  provenance: {note}" in text

    # What install writes for a genuine attestation (nothing here can sign a bundle archive).
    vdir = bundles / "golden" / "latest"
    build = read_current(vdir)
    assert build is not None
    signer = "https://github.com/OWNER/REPO/.github/workflows/nightly.yml@refs/heads/main"
    genuine = provenance.Provenance("verified", signer=signer, signed_at="2026-12-01T03:04:05Z")
    manifest_sha = packaged_entry(release).manifest_sha256
    record = dict(archive=archive.name, archive_sha256=packaged_entry(release).sha256, attestation=None)
    provenance.record(vdir, build, manifest_sha256=manifest_sha, found=genuine, **record)  # type: ignore[arg-type]
    entry, text = await _listed(bundles)
    assert entry["provenance"] == f"verified at install: signed by {signer} at 2026-12-01T03:04:05Z"

    provenance.record(vdir, build, manifest_sha256="0" * 64, found=genuine, **record)  # type: ignore[arg-type]
    entry, text = await _listed(bundles)
    assert entry["provenance"] is None and "provenance:" not in text  # another manifest's record
    assert entry["status"] != "failed"

    path = vdir / f"{build}.provenance.json"
    path.unlink()
    os.mkfifo(path)  # a FIFO where the record goes: read without blocking, refused, not shown
    entry, _ = await _listed(bundles)
    assert entry["provenance"] is None and entry["status"] != "failed"
