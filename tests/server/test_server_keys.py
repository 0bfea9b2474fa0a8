"""API keys: the keys file, ``docbundle keys``, scrypt hashing, cached verification and revocation."""

from __future__ import annotations

import json
import stat
import threading
import tomllib
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from docbundle.server import keys as keys_mod
from docbundle.server.cli import main
from docbundle.server.errors import KeyFileError
from docbundle.server.keys import (
    ApiKey,
    KeyStore,
    check_secret,
    create_key,
    hash_secret,
    load_keys,
    parse_expiry,
    revoke_key,
    save_keys,
    secret_check,
    split_key,
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def scrypt_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the scrypt computations (the real ones still run)."""
    calls: list[str] = []
    real = keys_mod._scrypt

    def counting(secret: str, *args: int | bytes) -> bytes:
        calls.append(secret)
        return real(secret, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(keys_mod, "_scrypt", counting)
    return calls


# -- docbundle keys ---------------------------------------------------------------------------------


def test_keys_create_list_revoke(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    code, out, err = run(
        capsys, "keys", "create", "--name", "ci bot", "--expires", "2999-12-31", "--keys", str(path)
    )
    key = out.strip()
    key_id, secret = key.split(".")
    assert code == 0 and split_key(key) == (key_id, secret)
    assert f"created key {key_id} (ci bot)" in err and "only time the key is shown" in err
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text(encoding="utf-8")
    assert secret not in text and key_id in text
    assert [p.name for p in tmp_path.iterdir()] == ["keys.toml"]  # no temporary file left behind

    code, out, _ = run(capsys, "keys", "create", "--name", "laptop", "--keys", str(path))
    other_id = out.strip().split(".")[0]
    code, out, _ = run(capsys, "keys", "list", "--keys", str(path))
    assert code == 0 and secret not in out
    lines = out.splitlines()
    assert (
        lines[0].startswith(f"{key_id}  active ")
        and "expires 2999-12-31" in lines[0]
        and "ci bot" in lines[0]
    )
    assert lines[1].startswith(f"{other_id}  active ") and "expires never" in lines[1]

    code, out, _ = run(capsys, "keys", "revoke", key_id, "--keys", str(path))
    assert code == 0 and f"{key_id} (ci bot) revoked" in out
    code, out, _ = run(capsys, "keys", "revoke", key_id, "--keys", str(path))
    assert code == 0 and "was already revoked" in out
    code, out, _ = run(capsys, "keys", "list", "--json", "--keys", str(path))
    rows = json.loads(out)
    assert [(r["id"], r["status"]) for r in rows] == [(key_id, "revoked"), (other_id, "active")]
    assert set(rows[0]) == {"id", "name", "status", "created", "expires"}

    code, _, err = run(capsys, "keys", "revoke", "0123456789ab", "--keys", str(path))
    assert code == 2 and "no key with id '0123456789ab'" in err and key_id in err


def test_keys_file_from_the_environment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCBUNDLE_KEYS", str(tmp_path / "env-keys.toml"))
    assert run(capsys, "keys", "create", "--name", "from env")[0] == 0
    assert [k.name for k in load_keys(tmp_path / "env-keys.toml").values()] == ["from env"]


def test_keys_create_refuses_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    code, out, err = run(
        capsys, "keys", "create", "--name", "old", "--expires", "2020-01-01", "--keys", str(path)
    )
    assert code == 2 and out == "" and "is in the past" in err
    code, _, err = run(capsys, "keys", "create", "--name", "x", "--expires", "soon", "--keys", str(path))
    assert code == 2 and "YYYY-MM-DD" in err
    code, _, err = run(capsys, "keys", "create", "--name", "tab\there", "--keys", str(path))
    assert code == 2 and "printable" in err
    code, _, err = run(capsys, "keys", "list", "--keys", str(path))
    assert code == 2 and "does not exist" in err and "docbundle keys create" in err
    assert not path.exists()


def test_expiry_is_the_last_valid_day() -> None:
    today = date(2026, 5, 1)
    assert parse_expiry("2026-05-01", today=today) == today
    assert parse_expiry("30d", today=today) == date(2026, 5, 31)
    with pytest.raises(KeyFileError, match="in the past"):
        parse_expiry("2026-04-30", today=today)


# -- the file ---------------------------------------------------------------------------------------


def test_secrets_are_stored_as_salted_scrypt_hashes(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    record, key = create_key(path, "svc", expires=date(2030, 1, 1), now=datetime(2026, 5, 1, 10, tzinfo=UTC))
    secret = key.split(".", 1)[1]
    assert len(secret) == 43 and record.hash.startswith("$scrypt$ln=14,r=8,p=1$")
    wrong = secret[:-1] + ("B" if secret.endswith("A") else "A")  # one character off, never the same
    assert check_secret(secret, record.hash) and not check_secret(wrong, record.hash)
    again = hash_secret(secret)
    assert again != record.hash and check_secret(secret, again)  # a fresh salt every time
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    assert raw["version"] == 1
    assert raw["key"] == [
        {
            "id": record.id,
            "name": "svc",
            "created": datetime(2026, 5, 1, 10, tzinfo=UTC),
            "expires": date(2030, 1, 1),
            "revoked": False,
            "hash": record.hash,
            "check": secret_check(secret, record.hash),
        }
    ]
    assert record.check is not None and len(record.check) == 8
    assert load_keys(path) == {record.id: record}
    # A record without a check (a key created before checks existed) still loads and works.
    save_keys(path, {record.id: replace(record, check=None)})
    assert "check" not in path.read_text(encoding="utf-8")
    assert KeyStore(path).verify(key).verdict == "ok"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('version = 1\n[[key]]\nid = "abc"\n', "id must be 12 lowercase hex digits"),
        ("version = 2\n", "version must be 1"),
        ("[[key]]\n", "version must be 1"),
        ("version = 1\nkeys = []\n", "unknown top-level key(s) keys"),
        ('version = 1\n[[key]]\nid = "0123456789ab"\nname = "x"\n', "missing field(s) created, hash"),
        ("not toml [", "not readable TOML"),
    ],
)
def test_malformed_keys_files_are_refused(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "keys.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(KeyFileError) as info:
        load_keys(path)
    assert message in str(info.value)


def test_hand_edited_records_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    record, _ = create_key(path, "a")
    good = path.read_text(encoding="utf-8")
    for old, new, message in [
        ("revoked = false", "revoked = false\nadmin = true", "unknown field(s) admin"),
        ("revoked = false", 'revoked = "no"', "revoked must be true or false"),
        ("$scrypt$ln=14,", "$scrypt$ln=30,", "scrypt parameters out of range"),
        ("$scrypt$", "$bcrypt$", "hash is unusable"),
        (f'check = "{record.check}"', 'check = "XYZ"', "check must be 8 lowercase hex digits"),
        (f'check = "{record.check}"', f'check = "{record.check}0"', "check must be 8 lowercase hex digits"),
    ]:
        path.write_text(good.replace(old, new), encoding="utf-8")
        with pytest.raises(KeyFileError) as info:
            load_keys(path)
        assert message in str(info.value) and record.id in str(info.value)
    path.write_text(good + good.split("\n\n", 2)[2], encoding="utf-8")
    with pytest.raises(KeyFileError, match="appears twice"):
        load_keys(path)


# -- verification -----------------------------------------------------------------------------------


@pytest.fixture
def app_key(tmp_path: Path, scrypt_calls: list[str]) -> tuple[ApiKey, str, KeyStore]:
    """One key ("app") in a fresh keys file, its store, and no scrypt counted yet."""
    path = tmp_path / "keys.toml"
    record, key = create_key(path, "app")
    store = KeyStore(path, check_interval=60)
    scrypt_calls.clear()
    return record, key, store


def test_wrong_secrets_for_a_key_with_a_check_cost_no_scrypt(
    app_key: tuple[ApiKey, str, KeyStore], scrypt_calls: list[str]
) -> None:
    record, key, store = app_key
    kid = record.id
    for n in range(200):
        guess = f"{kid}.G{n:042d}"
        assert store.check_cached(guess) == keys_mod.AuthResult("invalid")
        assert store.verify(guess).verdict == "invalid"
    assert scrypt_calls == []  # 200 guesses, not one scrypt
    assert store.prechecked(key) and store.check_cached(key) is None  # the right one passes the check
    assert store.verify(key).verdict == "ok" and len(scrypt_calls) == 1


def test_a_verified_key_is_cached_and_failures_let_no_guess_through(
    tmp_path: Path, scrypt_calls: list[str]
) -> None:
    path = tmp_path / "keys.toml"
    record, key = create_key(path, "app")
    # A key from before checks existed: every new guess costs a scrypt.
    save_keys(path, {record.id: replace(record, check=None)})
    store = KeyStore(path, check_interval=60)
    assert not store.prechecked(key)
    scrypt_calls.clear()
    assert store.check_cached(key) is None  # not verified yet: the slow path is needed
    assert store.verify(key).verdict == "ok" and len(scrypt_calls) == 1
    for _ in range(3):
        result = store.check_cached(key)
        assert result is not None and (result.verdict, result.key_id) == ("ok", record.id)
    assert len(scrypt_calls) == 1

    wrong = key[:-1] + ("A" if key[-1] != "A" else "B")
    assert store.verify(wrong).verdict == "invalid" and len(scrypt_calls) == 2
    assert (
        store.verify(wrong).verdict == "invalid" and len(scrypt_calls) == 2
    )  # the same wrong key: remembered
    other = key[:-2] + ("xy" if key[-2:] != "xy" else "yz")
    assert store.verify(other).verdict == "invalid" and len(scrypt_calls) == 3  # another guess is checked
    # Malformed keys and unknown ids are refused without any scrypt.
    for bad in ("", "nodot", f"{record.id}.short", f"ffffffffffff.{key.split('.')[1]}", key + "x"):
        assert store.verify(bad).verdict == "invalid"
    assert len(scrypt_calls) == 3
    assert store.known_id(wrong) == record.id and store.known_id("ffffffffffff.x") is None
    # A change to the file that leaves this key alone keeps its proof: no scrypt again.
    create_key(path, "another")
    store.refresh(force=True)
    assert store.verify(key).verdict == "ok" and len(scrypt_calls) == 4  # 4th: hashing the new key


def test_revocation_expiry_and_file_changes_take_effect(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    record, key = create_key(path, "app")
    _, other = create_key(path, "other")
    clock = [datetime(2026, 5, 1, tzinfo=UTC)]
    store = KeyStore(path, check_interval=0, now=lambda: clock[0])
    assert store.verify(key).verdict == "ok" and store.verify(other).verdict == "ok"

    revoke_key(path, record.id)
    result = store.verify(key)
    assert (result.verdict, result.key_id) == ("revoked", record.id)
    assert store.verify(other).verdict == "ok"

    expiring, key3 = create_key(path, "temp", expires=date(2026, 5, 1))
    assert store.verify(key3).verdict == "ok"
    clock[0] = datetime(2026, 5, 1, 23, 59, tzinfo=UTC)
    assert store.verify(key3).verdict == "ok"  # the expiry date is the last day it works
    clock[0] = datetime(2026, 5, 2, 0, 0, tzinfo=UTC)
    result = store.verify(key3)
    assert (result.verdict, result.key_id) == ("expired", expiring.id)

    # A broken file fails closed (no key works) until it is fixed.
    good = path.read_text(encoding="utf-8")
    path.write_text(good + "oops = [", encoding="utf-8")
    assert store.verify(other).verdict == "unavailable" and "not readable TOML" in (store.error or "")
    path.write_text(good, encoding="utf-8")
    assert store.verify(other).verdict == "ok" and store.error is None
    # A key removed from the file stops working even though it was cached.
    path.write_text(good.split("[[key]]")[0], encoding="utf-8")
    assert store.verify(other).verdict == "invalid"


def test_a_broken_keys_file_is_refused_at_start(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    path.write_text('version = 1\n[[key]]\nid = "0123456789ab"\n', encoding="utf-8")
    with pytest.raises(KeyFileError, match="missing field"):
        KeyStore(path)


def test_concurrent_first_uses_run_one_scrypt(
    app_key: tuple[ApiKey, str, KeyStore], scrypt_calls: list[str]
) -> None:
    _, key, store = app_key
    start = threading.Barrier(8, timeout=10)
    verdicts: list[str] = []

    def first_use() -> None:
        start.wait()
        verdicts.append(store.verify(key).verdict)

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert verdicts == ["ok"] * 8
    assert len(scrypt_calls) == 1
