"""API keys for the HTTP transport: the keys file, creating and revoking keys, and verifying them.

A key is ``{id}.{secret}``: ``id`` is 12 lowercase hex digits (not secret: it appears in logs and in
``docbundle keys list``), ``secret`` is 256 random bits in URL-safe base64 (43 characters). The keys
file (TOML) holds, per key, the id, a name, the creation time, an optional expiry date, a revoked flag
and a salted scrypt hash of the secret; never the secret itself::

    version = 1

    [[key]]
    id = "3f9c0a1b2d4e"
    name = "ci bot"
    created = 2026-05-01T10:00:00Z
    expires = 2026-12-31          # optional: the last day (UTC) the key works
    revoked = false
    hash = "$scrypt$ln=14,r=8,p=1$<salt>$<hash>"
    check = "9b1c02fe"            # optional: 32 bits of an HMAC of the secret (see below)

``check`` lets the server turn away a wrong secret in microseconds instead of a scrypt: it holds the
first ``CHECK_BYTES`` bytes of HMAC-SHA256(salt of the hash, secret). A random guess passes it once
in 2**32 tries, so guessing secrets costs the server almost nothing and cannot crowd out a right
secret, which always passes. It gives away 32 of the secret's 256 random bits to whoever can read
the file: the other 224 are as far out of reach as the 256 were. Keys written before ``check``
existed have none; they keep working, and every guess at them still costs a scrypt (the HTTP layer
budgets those per client address and globally).

``KeyStore`` verifies presented keys for the server. The scrypt check (about 65 ms and 16 MiB) runs
once per distinct presented key: a key that verified is remembered under an HMAC-SHA256 of the whole
presented string (keyed with a per-process random secret), bound to the hash it was proven against,
so later requests cost a hash and a dict lookup. A wrong key is remembered only as wrong, and only
that exact string. Revocation and expiry are read from the current record on every request, and the
file is re-read when its content changes (checked at most once a second): proofs for keys whose hash
changed or that left the file are dropped, remembered failures are forgotten.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import tempfile
import threading
import time
import tomllib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from .errors import KeyFileError

FILE_VERSION = 1
# Patterns are used with fullmatch only: "$" would accept a trailing newline.
KEY_ID_RE = re.compile(r"[0-9a-f]{12}")
SECRET_RE = re.compile(r"[A-Za-z0-9_-]{43}")
MAX_NAME = 200
# scrypt cost: 2**14 x 8 x 1 is about 65 ms and 16 MiB here. The secrets are 256 random bits, so the
# hash only has to make a stolen keys file useless, not resist guessing of human passwords.
SCRYPT_LOG_N, SCRYPT_R, SCRYPT_P, SCRYPT_DKLEN, SALT_BYTES = 14, 8, 1, 32, 16
# Bounds for parameters read from a file, so a hand-edited hash cannot ask for gigabytes.
_MAX_SCRYPT_MEMORY = 256 * 1024 * 1024
_HASH_RE = re.compile(
    r"\$scrypt\$ln=(?P<ln>\d{1,2}),r=(?P<r>\d{1,2}),p=(?P<p>\d{1,2})\$(?P<salt>[A-Za-z0-9+/]+)\$(?P<hash>[A-Za-z0-9+/]+)"
)
_FIELDS = {"id", "name", "created", "expires", "revoked", "hash", "check"}
# Bytes of HMAC-SHA256(salt, secret) kept in a record's ``check`` (hex in the file).
CHECK_BYTES = 4
_CHECK_RE = re.compile(rf"[0-9a-f]{{{2 * CHECK_BYTES}}}")
_CHECK_LABEL = b"docbundle key check\x00"

Status = Literal["active", "revoked", "expired"]
Verdict = Literal["ok", "invalid", "revoked", "expired", "unavailable"]


@dataclass(frozen=True)
class ApiKey:
    """One record of the keys file (no secret: only its scrypt hash)."""

    id: str
    name: str
    created: datetime
    hash: str
    expires: date | None = None
    revoked: bool = False
    check: str | None = None  # None: a key from before checks existed (always verified by scrypt)

    def status(self, now: datetime) -> Status:
        """``revoked``, ``expired`` (after the last day of ``expires``, UTC) or ``active``."""
        if self.revoked:
            return "revoked"
        if self.expires is not None and now.astimezone(UTC).date() > self.expires:
            return "expired"
        return "active"


@dataclass(frozen=True)
class AuthResult:
    """What verifying a presented key found; ``key_id`` is set only once the secret is proven."""

    verdict: Verdict
    key_id: str | None = None


# -- hashing ----------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def _scrypt(secret: str, salt: bytes, log_n: int, r: int, p: int, dklen: int) -> bytes:
    n = 1 << log_n
    # OpenSSL refuses anything above its 32 MiB default unless maxmem says more.
    maxmem = 128 * r * (n + p + 2) + 1024 * 1024
    return hashlib.scrypt(secret.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=dklen, maxmem=maxmem)


def hash_secret(secret: str) -> str:
    """A salted scrypt hash of ``secret`` in PHC form: ``$scrypt$ln=14,r=8,p=1$<salt>$<hash>``."""
    salt = secrets.token_bytes(SALT_BYTES)
    digest = _scrypt(secret, salt, SCRYPT_LOG_N, SCRYPT_R, SCRYPT_P, SCRYPT_DKLEN)
    return f"$scrypt$ln={SCRYPT_LOG_N},r={SCRYPT_R},p={SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def _parse_hash(encoded: str) -> tuple[int, int, int, bytes, bytes]:
    m = _HASH_RE.fullmatch(encoded)
    if m is None:
        raise ValueError("not a $scrypt$ln=..,r=..,p=..$salt$hash string")
    log_n, r, p = int(m["ln"]), int(m["r"]), int(m["p"])
    if (
        not (1 <= log_n <= 20 and 1 <= r <= 32 and 1 <= p <= 16)
        or 128 * r * (1 << log_n) > _MAX_SCRYPT_MEMORY
    ):
        raise ValueError("scrypt parameters out of range")
    salt, digest = _unb64(m["salt"]), _unb64(m["hash"])
    if len(salt) < 8 or not 16 <= len(digest) <= 64:
        raise ValueError("salt or hash too short")
    return log_n, r, p, salt, digest


def check_secret(secret: str, encoded: str) -> bool:
    """Whether ``secret`` matches the scrypt hash ``encoded`` (constant-time comparison)."""
    log_n, r, p, salt, digest = _parse_hash(encoded)
    return hmac.compare_digest(_scrypt(secret, salt, log_n, r, p, len(digest)), digest)


def secret_check(secret: str, encoded: str) -> str:
    """The ``check`` of ``secret`` for a record with the scrypt hash ``encoded`` (hex, CHECK_BYTES)."""
    salt = _parse_hash(encoded)[3]
    mac = hmac.new(salt, _CHECK_LABEL + secret.encode("utf-8"), hashlib.sha256)
    return mac.digest()[:CHECK_BYTES].hex()


def split_key(presented: str) -> tuple[str, str] | None:
    """``(id, secret)`` of a well-formed ``{id}.{secret}`` key, else None."""
    key_id, dot, secret = presented.partition(".")
    if not dot or not KEY_ID_RE.fullmatch(key_id) or not SECRET_RE.fullmatch(secret):
        return None
    return key_id, secret


# -- the keys file ----------------------------------------------------------------------------------


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _toml_datetime(value: datetime) -> str:
    return value.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _record(where: str, raw: Any) -> ApiKey:
    if not isinstance(raw, dict):
        raise KeyFileError(f"{where}: expected a [[key]] table")
    key_id = raw.get("id")
    if not isinstance(key_id, str) or not KEY_ID_RE.fullmatch(key_id):
        raise KeyFileError(f"{where}: id must be 12 lowercase hex digits")
    where = f"{where} (id {key_id})"
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise KeyFileError(f"{where}: unknown field(s) {', '.join(unknown)}")
    missing = sorted({"name", "created", "hash"} - set(raw))
    if missing:
        raise KeyFileError(f"{where}: missing field(s) {', '.join(missing)}")
    name, created, hashed = raw["name"], raw["created"], raw["hash"]
    expires, revoked, check = raw.get("expires"), raw.get("revoked", False), raw.get("check")
    if not isinstance(name, str) or not name.strip():
        raise KeyFileError(f"{where}: name must be a non-empty string")
    if not isinstance(created, datetime) or created.tzinfo is None:
        raise KeyFileError(f"{where}: created must be a date-time with an offset, e.g. 2026-05-01T10:00:00Z")
    if expires is not None and (isinstance(expires, datetime) or not isinstance(expires, date)):
        raise KeyFileError(f"{where}: expires must be a date, e.g. 2026-12-31")
    if not isinstance(revoked, bool):
        raise KeyFileError(f"{where}: revoked must be true or false")
    if not isinstance(hashed, str):
        raise KeyFileError(f"{where}: hash must be a string")
    try:
        _parse_hash(hashed)
    except ValueError as exc:
        raise KeyFileError(f"{where}: hash is unusable: {exc}") from None
    if check is not None and (not isinstance(check, str) or not _CHECK_RE.fullmatch(check)):
        raise KeyFileError(
            f"{where}: check must be {2 * CHECK_BYTES} lowercase hex digits (or left out); "
            "it is written by `docbundle keys create`"
        )
    return ApiKey(key_id, name, created, hashed, expires, revoked, check)


def load_keys(path: Path) -> dict[str, ApiKey]:
    """The keys of a keys file by id; raises KeyFileError when it is missing or malformed."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KeyFileError(
            f"keys file {path} does not exist; create a key with: docbundle keys create --name NAME --keys {path}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"keys file {path} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise KeyFileError(f"keys file {path} is not readable TOML: {exc}") from None
    return _decode(path, data)


def _decode(path: Path, data: dict[str, Any]) -> dict[str, ApiKey]:
    unknown = sorted(set(data) - {"version", "key"})
    if unknown:
        raise KeyFileError(f"keys file {path}: unknown top-level key(s) {', '.join(unknown)}")
    if data.get("version") != FILE_VERSION:
        raise KeyFileError(f"keys file {path}: version must be {FILE_VERSION}")
    raw = data.get("key", [])
    if not isinstance(raw, list):
        raise KeyFileError(f"keys file {path}: 'key' must be an array of tables ([[key]])")
    keys: dict[str, ApiKey] = {}
    for i, item in enumerate(raw):
        k = _record(f"keys file {path}, key #{i + 1}", item)
        if k.id in keys:
            raise KeyFileError(f"keys file {path}: id {k.id} appears twice")
        keys[k.id] = k
    return keys


def render_keys(keys: dict[str, ApiKey]) -> str:
    """The TOML text of a keys file holding ``keys``."""
    lines = [
        "# docbundle API keys, written by `docbundle keys`. No secrets: each key's secret is stored as",
        "# a salted scrypt hash. Revoke with `docbundle keys revoke ID`; the server re-reads this file.",
        "",
        f"version = {FILE_VERSION}",
    ]
    for k in keys.values():
        lines += ["", "[[key]]", f'id = "{k.id}"', f"name = {json.dumps(k.name, ensure_ascii=False)}"]
        lines.append(f"created = {_toml_datetime(k.created)}")
        if k.expires is not None:
            lines.append(f"expires = {k.expires.isoformat()}")
        lines += [f"revoked = {'true' if k.revoked else 'false'}", f'hash = "{k.hash}"']
        if k.check is not None:
            lines.append(f'check = "{k.check}"')
    return "\n".join(lines) + "\n"


def save_keys(path: Path, keys: dict[str, ApiKey]) -> None:
    """Replace the keys file atomically (temporary file, fsync, rename), readable by its owner only."""
    text = render_keys(keys)
    # A round trip catches anything the renderer could not express (it would be a bug here).
    if _decode(path, tomllib.loads(text)) != keys:
        raise KeyFileError("internal error: the keys file would not read back the same")
    try:
        st: os.stat_result | None = path.stat()
    except FileNotFoundError:
        st = None
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode) if st else 0o600)
            if st is not None:
                # Keep the owner and group: an admin running `keys revoke` as root must not leave a
                # file the server's own user can no longer read (it would then refuse every request).
                with contextlib.suppress(PermissionError):
                    os.fchown(fh.fileno(), st.st_uid, st.st_gid)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialise read-modify-write of the keys file between concurrent ``docbundle keys`` commands."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no advisory locks, and no concurrent admins to expect
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    # A lock on the directory: the file itself is replaced by rename, so a lock on it would not hold.
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def create_key(
    path: Path, name: str, *, expires: date | None = None, now: datetime | None = None
) -> tuple[ApiKey, str]:
    """Add a new key to the keys file (created if absent); returns the record and the full key."""
    name = name.strip()
    if not name or len(name) > MAX_NAME or not name.isprintable():
        raise KeyFileError(f"a key name must be 1-{MAX_NAME} printable characters")
    with _locked(path):
        keys = load_keys(path) if path.exists() else {}
        key_id = secrets.token_hex(6)
        while key_id in keys:
            key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        hashed = hash_secret(secret)
        created = (now or _utcnow()).replace(microsecond=0)
        record = ApiKey(key_id, name, created, hashed, expires, check=secret_check(secret, hashed))
        save_keys(path, {**keys, key_id: record})
    return record, f"{key_id}.{secret}"


def revoke_key(path: Path, key_id: str) -> tuple[ApiKey, bool]:
    """Mark a key revoked; returns the record and whether it was already revoked."""
    with _locked(path):
        keys = load_keys(path)
        if key_id not in keys:
            listed = ", ".join(keys) or "(none)"
            raise KeyFileError(f"no key with id {key_id!r} in {path}; ids: {listed}")
        record = keys[key_id]
        if record.revoked:
            return record, True
        record = replace(record, revoked=True)
        save_keys(path, {**keys, key_id: record})
    return record, False


def parse_expiry(text: str, *, today: date | None = None) -> date:
    """``YYYY-MM-DD`` or ``<N>d`` (N days from today, UTC) as the last day a key works."""
    today = today or _utcnow().date()
    text = text.strip()
    if re.fullmatch(r"\d{1,5}d", text):
        day = today + timedelta(days=int(text[:-1]))
    else:
        try:
            day = date.fromisoformat(text)
        except ValueError:
            raise KeyFileError(
                f"--expires {text!r}: give a date (YYYY-MM-DD) or a number of days (90d)"
            ) from None
    if day < today:
        raise KeyFileError(f"--expires {day.isoformat()} is in the past")
    return day


# -- verification -----------------------------------------------------------------------------------


def _file_identity(path: Path) -> bytes | None:
    # The content's hash, not the mtime: an edit within the file system's timestamp granularity that
    # keeps the size would otherwise go unnoticed. The file is small and read once a second at most.
    try:
        return hashlib.sha256(path.read_bytes()).digest()
    except OSError:
        return None


class KeyStore:
    """The keys file as the server sees it: cached verification, reloaded when the file changes.

    Thread-safe: the slow check runs in worker threads while the event loop takes the fast path.
    """

    def __init__(
        self,
        path: Path,
        *,
        check_interval: float = 1.0,
        now: Callable[[], datetime] = _utcnow,
        max_failed: int = 1024,
    ) -> None:
        self.path = path
        self._check_interval = check_interval
        self._now = now
        self._max_failed = max_failed
        self._lock = threading.Lock()
        # Per-process key for the cache fingerprints: a dump of this process's memory does not give
        # an offline oracle for secrets the way a plain sha256 of them would.
        self._pepper = secrets.token_bytes(32)
        # fingerprint of a presented key -> (id, hash) it was proven against
        self._verified: dict[bytes, tuple[str, str]] = {}
        self._failed: OrderedDict[bytes, None] = OrderedDict()  # fingerprints that failed scrypt
        self._inflight: dict[bytes, threading.Lock] = {}
        self._keys: dict[str, ApiKey] = {}
        self._error: str | None = None
        self._identity: bytes | None = None
        self._checked = 0.0
        self._generation = 0
        self._load()
        if self._error is not None:
            raise KeyFileError(self._error)

    # -- file ---------------------------------------------------------------------------------------

    def _load(self) -> None:
        identity = _file_identity(self.path)
        try:
            keys = load_keys(self.path)
        except KeyFileError as exc:
            # Fail closed: a broken file must not keep a revoked key working.
            self._keys, self._error = {}, str(exc)
        else:
            self._keys, self._error = keys, None
        self._identity = identity
        # A proof stands while its key's hash is unchanged: adding or revoking another key must not
        # send every client back through scrypt. Revocation and expiry are judged on each request.
        self._verified = {
            fp: (key_id, hashed)
            for fp, (key_id, hashed) in self._verified.items()
            if key_id in self._keys and self._keys[key_id].hash == hashed
        }
        self._failed.clear()
        self._generation += 1

    def refresh(self, *, force: bool = False) -> bool:
        """Re-read the file if it changed (at most every ``check_interval`` s); True when reloaded."""
        t = time.monotonic()
        if not force and t - self._checked < self._check_interval:
            return False
        with self._lock:
            self._checked = t
            if not force and _file_identity(self.path) == self._identity:
                return False
            self._load()
            return True

    @property
    def error(self) -> str | None:
        """Why the keys file cannot be used (every request is refused meanwhile), or None."""
        return self._error

    @property
    def generation(self) -> int:
        """Incremented on every (re)load, so callers can tell a reload happened."""
        return self._generation

    def records(self) -> list[ApiKey]:
        """The keys currently loaded."""
        return list(self._keys.values())

    def any_active(self) -> bool:
        """Whether some key can authenticate now (False when every one is revoked or expired, or none)."""
        now = self._now()
        return any(k.status(now) == "active" for k in self._keys.values())

    def known_id(self, presented: str) -> str | None:
        """The id part of a presented key when it names a key of the file (ids are not secret)."""
        parts = split_key(presented)
        return parts[0] if parts is not None and parts[0] in self._keys else None

    # -- verification -------------------------------------------------------------------------------

    def _fingerprint(self, presented: str) -> bytes:
        return hmac.new(self._pepper, presented.encode("utf-8"), hashlib.sha256).digest()

    def _judge(self, record: ApiKey) -> AuthResult:
        status = record.status(self._now())
        return AuthResult("ok" if status == "active" else status, record.id)

    def check_cached(self, presented: str) -> AuthResult | None:
        """The answer when no scrypt is needed (cached, malformed, unknown id, failed check); else None."""
        self.refresh()
        if self._error is not None:
            return AuthResult("unavailable")
        fp = self._fingerprint(presented)
        proven = self._verified.get(fp)
        if proven is not None:
            record = self._keys.get(proven[0])
            if record is not None and record.hash == proven[1]:
                return self._judge(record)
        parts = split_key(presented)
        record = self._keys.get(parts[0]) if parts is not None else None
        if parts is None or record is None or fp in self._failed:
            return AuthResult("invalid")
        if record.check is not None and not hmac.compare_digest(
            secret_check(parts[1], record.hash), record.check
        ):
            return AuthResult("invalid")  # a wrong secret, known without a scrypt
        return None

    def prechecked(self, presented: str) -> bool:
        """Whether the key a presented string names has a ``check`` (so a string it passed is plausible)."""
        parts = split_key(presented)
        record = self._keys.get(parts[0]) if parts is not None else None
        return record is not None and record.check is not None

    def verify(self, presented: str) -> AuthResult:
        """Verify a presented key, running scrypt when it is not cached (call it off the event loop)."""
        cached = self.check_cached(presented)
        if cached is not None:
            return cached
        fp = self._fingerprint(presented)
        with self._lock:
            gate = self._inflight.setdefault(fp, threading.Lock())
        try:
            # Concurrent first requests with the same key wait for one scrypt instead of running many.
            with gate:
                cached = self.check_cached(presented)
                if cached is not None:
                    return cached
                with self._lock:
                    generation = self._generation
                    parts = split_key(presented)
                    record = self._keys.get(parts[0]) if parts else None
                if parts is None or record is None:
                    return AuthResult("invalid")
                ok = check_secret(parts[1], record.hash)
                with self._lock:
                    if ok:
                        # Bound to the hash it was proven against, so it holds across reloads.
                        self._verified[fp] = (record.id, record.hash)
                    elif generation == self._generation:  # a failure only for the file it was checked on
                        self._failed[fp] = None
                        while len(self._failed) > self._max_failed:
                            self._failed.popitem(last=False)
                    current = self._keys.get(record.id)
                # Judged on the record as it is now (the file may have changed during the scrypt).
                if ok and current is not None and current.hash == record.hash:
                    return self._judge(current)
                return AuthResult("invalid")
        finally:
            with self._lock:
                if self._inflight.get(fp) is gate and not gate.locked():
                    del self._inflight[fp]
