"""Fetch a prebuilt bundle from a release and install it: ``docbundle pull LIBRARY[@VERSION] [--from URL]``.

A release is a folder served over http(s) holding what ``docbundle-index package`` writes (and the
nightly job publishes as GitHub release assets): ``index.json`` (the catalogue of archives),
``SHA256SUMS`` and one ``<libraryId>-<version>-<buildId>.tar.gz`` per bundle; ``--from URL``, else
``$DOCBUNDLE_RELEASES``, else the project's catalogue, the release ``bundles-latest`` (``default_release``).
``--list`` reads ``index.json`` and, when the folder has one, the nightly job's ``status.json``
(``read_status``; the table is ``offers.py``'s) and installs nothing. Otherwise ``pull``:

1. downloads ``index.json`` (at most ``MAX_INDEX_BYTES``, validated by
   ``docbundle.bundle.releaseindex``) and picks the entry asked for: the version named, else the one
   marked latest, else the only one. An entry may name the release that holds its archive (the catalogue
   of ``bundles-latest`` spreads thousands of libraries over several releases): its folder is then
   ``<base>/../<release>/``, on the same origin;
2. downloads that folder's ``SHA256SUMS`` (at most ``MAX_SUMS_BYTES``), which must list the archive with
   the sha256 ``index.json`` gives;
3. downloads the archive into a temporary folder, never more than the size ``index.json`` declares (and
   never more than ``MAX_ARCHIVE_BYTES``);
4. downloads the attestation the entry names (``attestation``, in the same folder: at most
   ``MAX_ATTESTATION_BYTES``; a 404 is a missing one), when it names one;
5. hands the archive, ``SHA256SUMS`` and the attestation to ``docbundle.server.install.install``: the very
   checks of ``docbundle install`` (checksum, provenance, safe entries, manifest, lock pin, sizes, hashes,
   restricted unpickler) and the same atomic publish. The temporary folder is removed whatever happens.

Only http and https are fetched, redirects included (a redirect from https to http is refused). Every
connection, the first and every redirect hop, goes through the address policy the crawler uses
(``docbundle.common.netpolicy``): the host is resolved once, every address it resolves to is checked,
and the connection is made to a checked address. Loopback, private, link-local (169.254.169.254
included), multicast, unspecified, reserved addresses and their IPv6 forms are refused, except the
release's own origin (scheme, host and port of ``--from`` or ``$DOCBUNDLE_RELEASES``, for the addresses
its name first resolved to), so a test or an intranet mirror can name one on purpose. Through an
http(s) proxy (the usual ``*_proxy`` variables) the proxy resolves names: then only a target written
as an address is checked.

Each download has an overall deadline (``DEADLINE`` seconds, ``$DOCBUNDLE_PULL_DEADLINE`` to change
it) besides the ``TIMEOUT`` for each read, so a server that sends one byte every few seconds cannot keep
``pull`` waiting for ever.

This is the only server-side code that touches the network; it uses the standard library's ``urllib``,
imported when a download starts, so ``serve`` never loads an HTTP client.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import quote, urljoin, urlsplit

from docbundle.bundle.errors import BundleFormatError
from docbundle.bundle.layout import LIBRARY_ID_RE, LIBRARY_ID_RULE, VERSION_RE, VERSION_RULE
from docbundle.bundle.release import SUMS, read_sums
from docbundle.bundle.releaseindex import INDEX, MAX_INDEX_BYTES, PackagedBundle, decode_index
from docbundle.bundle.status import MAX_STATUS_BYTES, STATUS, CatalogueStatus, decode_status
from docbundle.common.netpolicy import address_problem, host_key, parse_ip, shown_host

from .errors import PullError
from .install import Installed, install
from .provenance import MAX_ATTESTATION_BYTES, Policy, project_repository

if TYPE_CHECKING:
    from urllib.request import OpenerDirector

ENV_RELEASES = "DOCBUNDLE_RELEASES"
ROLLING_TAG = "bundles-latest"  # the release the nightly job keeps up to date (docs/releases.md)
MAX_SUMS_BYTES = 4 * 1024 * 1024
MAX_NAMED = 30  # ids an error names before it gives a count instead
MAX_ARCHIVE_BYTES = 4 * 1024**3
TIMEOUT = 30.0  # seconds without a byte before a download is given up
ENV_DEADLINE = "DOCBUNDLE_PULL_DEADLINE"
DEADLINE = 1800.0  # seconds one download (index.json, SHA256SUMS or the archive) may take in all
_DEFAULT_PORTS = {"http": 80, "https": 443}
_CHUNK = 1024 * 1024
_SPEC_RE = re.compile(r"(?P<library>[^@\s]+)(?:@(?P<version>[^@\s]+))?\Z")


@dataclass(frozen=True)
class Spec:
    """``LIBRARY[@VERSION]`` as given on the command line."""

    library: str
    version: str | None


def parse_spec(text: str) -> Spec:
    """Split and check ``LIBRARY[@VERSION]``."""
    m = _SPEC_RE.fullmatch(text.strip())
    if m is None:
        raise PullError(f"{text[:80]!r}: give LIBRARY or LIBRARY@VERSION, e.g. docbundle@latest")
    library, version = m["library"], m["version"]
    if not LIBRARY_ID_RE.fullmatch(library):
        raise PullError(f"{library[:80]!r} is not a library id: {LIBRARY_ID_RULE}")
    if version is not None and not VERSION_RE.fullmatch(version):
        raise PullError(f"{version[:80]!r} is not a version name: {VERSION_RULE}")
    return Spec(library, version)


def default_release() -> str | None:
    """The project's catalogue: ``<Homepage>/releases/download/bundles-latest/`` of this package.

    The nightly job keeps that release's ``index.json`` naming every library version's newest bundle and
    the release that holds it. The address comes
    from the installed distribution's metadata (``[project.urls]`` in ``server/pyproject.toml``), so a
    fork that publishes its own distribution pulls from its own releases. None when it is not a GitHub
    project.
    """
    repository = project_repository()
    return f"https://github.com/{repository}/releases/download/{ROLLING_TAG}/" if repository else None


def release_base(given: str | None) -> str:
    """The release folder's URL, ending in ``/``: ``--from``, else ``$DOCBUNDLE_RELEASES``, else the default."""
    url = (given or os.environ.get(ENV_RELEASES) or default_release() or "").strip()
    if not url:
        raise PullError(
            "no release to pull from: pass --from URL (the folder of a release that holds index.json, "
            f"e.g. https://github.com/OWNER/REPO/releases/download/TAG/) or set ${ENV_RELEASES}"
        )
    _check_scheme(url)
    if url.endswith("/" + INDEX):
        url = url[: -len(INDEX)]
    return url if url.endswith("/") else url + "/"


def _check_scheme(url: str, previous: str | None = None) -> None:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        shown = url[:120]
        if previous is not None:
            raise PullError(f"{previous[:120]} redirects to {shown}: only http(s) addresses are fetched")
        raise PullError(
            f"{shown}: only http(s) addresses are fetched; for an archive on disk use docbundle install"
        )
    if previous is not None and urlsplit(previous).scheme.lower() == "https" and scheme == "http":
        raise PullError(f"{previous[:120]} redirects to {url[:120]}: refusing to leave https for http")


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise PullError(f"{url[:120]}: the port is not a number from 1 to 65535") from None
    return scheme, host_key(parts.hostname or ""), port or _DEFAULT_PORTS.get(scheme, 0)


def _proxied(url: str) -> bool:
    """Whether urllib sends a request for ``url`` through a proxy from the environment."""
    import urllib.request

    scheme, host, _port = _origin(url)
    return scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(host)


def _proxy_origins() -> frozenset[tuple[str, int]]:
    """The (host, port) of every proxy the environment names: the user chose them, so they are allowed."""
    import urllib.request

    found: set[tuple[str, int]] = set()
    for scheme, proxy in urllib.request.getproxies().items():
        if scheme in ("http", "https"):
            parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
            found.add((host_key(parts.hostname or ""), parts.port or _DEFAULT_PORTS.get(parts.scheme, 80)))
    return frozenset(found)


@dataclass
class Guard:
    """The address policy and the deadline of the downloads of one ``pull`` (see the module docstring).

    ``origin`` is the release's own (scheme, host, port); ``lookup`` (DNS) is injectable for tests.
    """

    origin: tuple[str, str, int]
    deadline: float = DEADLINE
    proxies: frozenset[tuple[str, int]] = field(default_factory=_proxy_origins)
    pinned: frozenset[str] | None = None  # what the origin's name resolved to the first time

    @staticmethod
    def lookup(host: str, port: int) -> list[str]:
        """Every address ``host`` resolves to (numeric forms such as ``2130706433`` included)."""
        seen: dict[str, None] = {}
        for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
            seen.setdefault(str(sockaddr[0]), None)
        return list(seen)

    def addresses(self, scheme: str, host: str, port: int, *, via: str | None = None) -> list[str]:
        """Resolve ``host`` once, check every address, return them; PullError names a refused one."""
        key = (scheme, host_key(host), port)
        literal = parse_ip(host_key(host))
        try:
            found = [str(literal)] if literal is not None else self.lookup(host_key(host), port)
        except (OSError, UnicodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise PullError(
                f"cannot resolve {host[:120]} ({reason}): no network, or no DNS. {OFFLINE_ADVICE}"
            ) from None
        if not found:
            raise PullError(f"{host[:120]} did not resolve to any address")
        if (host_key(host), port) in self.proxies:
            return found
        for text in found:
            ip = parse_ip(text)
            problem = "not an IP address" if ip is None else address_problem(ip)
            if problem is None:
                continue
            if key == self.origin and (self.pinned is None or text in self.pinned):
                continue
            shown = shown_host(host_key(host), port)
            what = shown if literal is not None else f"{shown} resolves to {text}, which"
            where = f"{via[:120]} redirects to {shown}: " if via else ""
            raise PullError(
                f"{where}{what} is {problem}; pull fetches only public addresses and the release's own "
                "(the host and port of --from or $DOCBUNDLE_RELEASES)"
            )
        if key == self.origin and self.pinned is None:
            self.pinned = frozenset(found)
        return found

    def check_url(self, url: str, via: str | None = None) -> None:
        """Check ``url``'s scheme and address before it is requested (through a proxy: an address only)."""
        _check_scheme(url, via)
        scheme, host, port = _origin(url)
        if not _proxied(url) or parse_ip(host) is not None:
            self.addresses(scheme, host, port, via=via)


class _Deadline:
    """Shuts down every socket of one download when its time is up, wherever it is blocked."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                self._shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked recv at once, unlike close()


def _connect(
    guard: Guard, deadline: _Deadline, scheme: str, host: str, port: int, timeout: Any
) -> socket.socket:
    """A socket to the first checked address of ``host`` that answers."""
    error: OSError | None = None
    for address in guard.addresses(scheme, host, port):
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            if isinstance(timeout, int | float):  # urllib passes the request's timeout, else a sentinel
                sock.settimeout(timeout)
            deadline.add(sock)
            sock.connect((address, port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    assert error is not None
    raise error


def _opener(guard: Guard, deadline: _Deadline) -> OpenerDirector:
    import http.client
    import ssl
    import urllib.request  # only here: serve never loads an HTTP client

    class GuardedHTTP(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = _connect(guard, deadline, "http", self.host, self.port, self.timeout)
            if self._tunnel_host:  # type: ignore[attr-defined]
                self._tunnel()  # type: ignore[attr-defined]

    class GuardedHTTPS(http.client.HTTPSConnection):
        def __init__(self, host: str, *, context: ssl.SSLContext | None = None, **kwargs: Any) -> None:
            self._tls = context or ssl.create_default_context()
            super().__init__(host, context=self._tls, **kwargs)

        def connect(self) -> None:
            sock = _connect(guard, deadline, "https", self.host, self.port, self.timeout)
            server = self.host
            if self._tunnel_host:  # type: ignore[attr-defined]
                self.sock = sock
                self._tunnel()  # type: ignore[attr-defined]
                server = self._tunnel_host  # type: ignore[attr-defined]
            self.sock = self._tls.wrap_socket(sock, server_hostname=server)

    class HTTPHandler(urllib.request.HTTPHandler):
        def http_open(self, req: Any) -> Any:
            return self.do_open(GuardedHTTP, req)

    class HTTPSHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: Any) -> Any:
            return self.do_open(GuardedHTTPS, req)

    class Redirect(urllib.request.HTTPRedirectHandler):
        def http_error_302(self, req: Any, fp: Any, code: int, msg: str, headers: Any) -> Any:
            target = headers.get("location") or headers.get("uri")
            if target:
                guard.check_url(urljoin(req.full_url, target), req.full_url)
            return super().http_error_302(req, fp, code, msg, headers)

        http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    return urllib.request.build_opener(HTTPHandler, HTTPSHandler, Redirect)


def deadline_seconds() -> float:
    """``$DOCBUNDLE_PULL_DEADLINE`` when set (a positive number of seconds), else ``DEADLINE``."""
    text = os.environ.get(ENV_DEADLINE, "").strip()
    if not text:
        return DEADLINE
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise PullError(f"${ENV_DEADLINE} must be a positive number of seconds, not {text[:40]!r}")
    return value


def _user_agent() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"docbundle/{version('docbundle-server')}"
    except PackageNotFoundError:
        return "docbundle"


def download(
    url: str,
    out: BinaryIO,
    limit: int,
    *,
    what: str,
    guard: Guard,
    exact: int | None = None,
    optional: bool = False,
) -> int | None:
    """Copy ``url`` into ``out``; refuse more than ``limit`` bytes (or other than ``exact``). Bytes copied.

    Every connection is checked by ``guard``; the whole download must finish within its deadline.
    ``optional``: a file a release may lack (``status.json``): None when the server answers 404 or 410.
    """
    import http.client
    import urllib.error
    import urllib.request

    guard.check_url(url)
    request = urllib.request.Request(url, headers={"User-Agent": _user_agent()})
    with _Deadline(guard.deadline) as deadline:
        late = PullError(
            f"{what}: the download of {url[:200]} took longer than {guard.deadline:g} s "
            f"(the deadline of one download; ${ENV_DEADLINE} changes it); stopped"
        )
        try:
            response = _opener(guard, deadline).open(request, timeout=min(TIMEOUT, guard.deadline))
        except urllib.error.HTTPError as exc:
            exc.close()
            if optional and exc.code in (404, 410):
                return None
            hint = " (is --from the folder of a docbundle release?)" if exc.code == 404 else ""
            raise PullError(f"{what}: {url[:200]} answered {exc.code} {exc.reason}{hint}") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, PullError):
                raise exc.reason from None
            if deadline.expired:
                raise late from None
            raise _unreachable(url, what, exc.reason) from None
        except PullError:
            raise
        except (TimeoutError, OSError) as exc:
            if deadline.expired:
                raise late from None
            raise _unreachable(url, what, exc) from None
        except (ValueError, http.client.HTTPException) as exc:
            raise PullError(f"{what}: cannot fetch {url[:200]}: {exc!r}") from None
        with response:
            total = _copy(response, out, url, limit, what=what, exact=exact, deadline=deadline, late=late)
    if exact is not None and total != exact:
        raise PullError(f"{what} at {url[:200]} is {total} bytes; index.json says {exact}")
    return total


# What to do when the release cannot be reached (no network, a firewall, a name that does not resolve).
OFFLINE_ADVICE = (
    "Without network access to it: `docbundle pull --from URL` reads another copy of the release folder "
    "(a mirror, an internal web server), and `docbundle install ARCHIVE` installs archives copied here "
    "(with their SHA256SUMS), offline."
)


def _unreachable(url: str, what: str, reason: object) -> PullError:
    """The error of a release that could not be reached: why, in words, then what works offline."""
    host = urlsplit(url).hostname or url[:200]
    if isinstance(reason, socket.gaierror):
        why = f"the name {host} does not resolve ({reason.strerror or reason}): no network, or no DNS"
    elif isinstance(reason, ConnectionRefusedError):
        why = f"{host} refused the connection"
    elif isinstance(reason, TimeoutError | socket.timeout):
        why = f"{host} did not answer in time"
    elif isinstance(reason, OSError):
        why = f"{host} is unreachable ({reason.strerror or reason})"
    else:
        why = str(reason)
    return PullError(f"{what}: cannot fetch {url[:200]}: {why}. {OFFLINE_ADVICE}")


def _copy(
    response: Any,
    out: BinaryIO,
    url: str,
    limit: int,
    *,
    what: str,
    exact: int | None,
    deadline: _Deadline,
    late: PullError,
) -> int:
    import http.client

    declared = response.headers.get("Content-Length")
    if declared is not None and declared.strip().isdigit():
        size = int(declared)
        if exact is not None and size != exact:
            raise PullError(f"{what} at {url[:200]} is {size} bytes; index.json says {exact}")
        if size > limit:
            raise PullError(f"{what} at {url[:200]} is {size} bytes, over the {limit}-byte limit")
    total = 0
    try:
        while chunk := response.read1(_CHUNK):
            total += len(chunk)
            if exact is not None and total > exact:
                raise PullError(f"{what} at {url[:200]} is over {exact} bytes; index.json says {exact}")
            if total > limit:
                raise PullError(f"{what} at {url[:200]} is over the {limit}-byte limit; stopped")
            out.write(chunk)
    except (TimeoutError, OSError, http.client.HTTPException) as exc:
        if deadline.expired:
            raise late from None
        raise PullError(f"{what}: the download of {url[:200]} broke off: {exc!r}") from None
    if deadline.expired:
        raise late
    return total


def _fetch_bytes(url: str, limit: int, what: str, guard: Guard, *, optional: bool = False) -> bytes | None:
    """The bytes at ``url`` (None when ``optional`` and the server says it has none)."""
    import io

    buf = io.BytesIO()
    if download(url, buf, limit, what=what, guard=guard, optional=optional) is None:
        return None
    return buf.getvalue()


def _fetch(url: str, limit: int, what: str, guard: Guard) -> bytes:
    data = _fetch_bytes(url, limit, what, guard)
    assert data is not None  # not optional: a missing file is a PullError
    return data


def guard_for(base: str) -> Guard:
    """The guard of a pull from the release folder ``base``: its origin exempted, the deadline set."""
    return Guard(_origin(base), deadline_seconds())


def read_index(base: str, guard: Guard | None = None) -> list[PackagedBundle]:
    """The release's ``index.json``: one download, at most ``MAX_INDEX_BYTES``, validated entry by entry."""
    url = urljoin(base, INDEX)
    data = _fetch(url, MAX_INDEX_BYTES, INDEX, guard or guard_for(base))
    try:
        return decode_index(data, url[:200])
    except BundleFormatError as exc:
        raise PullError(str(exc)) from None


def read_status(base: str, guard: Guard | None = None) -> CatalogueStatus | None:
    """The release's ``status.json`` (the nightly job's health of every library version), or None when the
    release folder has none (404 or 410: a folder of ``docbundle-index package``, an older nightly's).
    At most ``MAX_STATUS_BYTES``, validated field by field; a malformed one is ``PullError``."""
    url = urljoin(base, STATUS)
    data = _fetch_bytes(url, MAX_STATUS_BYTES, STATUS, guard or guard_for(base), optional=True)
    if data is None:
        return None
    try:
        return decode_status(data, url[:200])
    except BundleFormatError as exc:
        raise PullError(str(exc)) from None


def release_folder(base: str, entry: PackagedBundle) -> str:
    """The folder that holds ``entry``'s archive and its ``SHA256SUMS``: the index's own, or the release
    it names beside it (``<base>/../<release>/``, as GitHub lays out release downloads)."""
    return urljoin(base, f"../{quote(entry.release)}/") if entry.release else base


def choose(entries: list[PackagedBundle], spec: Spec) -> PackagedBundle:
    """The entry ``spec`` names: its version, else the latest version, else the only one."""
    mine = [e for e in entries if e.library == spec.library]
    if not mine:
        raise PullError(f"the release offers no library {spec.library!r}; {_offered(entries, spec.library)}")
    versions = sorted({e.version for e in mine})
    if spec.version is not None:
        mine = [e for e in mine if e.version == spec.version]
        if not mine:
            raise PullError(
                f"the release offers no version {spec.version!r} of {spec.library}; it offers: "
                + ", ".join(versions[:MAX_NAMED])
                + (f" and {len(versions) - MAX_NAMED} more" if len(versions) > MAX_NAMED else "")
            )
    elif len(versions) > 1:
        latest = [e for e in mine if e.latest]
        if not latest:
            raise PullError(
                f"the release offers several versions of {spec.library} and none is marked latest; "
                f"name one: {', '.join(f'{spec.library}@{v}' for v in versions[:MAX_NAMED])}"
            )
        mine = latest
    return max(mine, key=lambda e: (e.built_at, e.build_id))


def _offered(entries: list[PackagedBundle], wanted: str) -> str:
    """What the release offers, in a bounded sentence: all of it when short, else the closest ids."""
    import difflib

    ids = sorted({e.library for e in entries})
    if len(ids) <= MAX_NAMED:
        return f"it offers: {', '.join(ids) or 'none'}"
    close = difflib.get_close_matches(wanted, ids, n=5, cutoff=0.6)
    hint = f"the closest: {', '.join(close)}; " if close else ""
    return f"it offers {len(ids)} libraries ({hint}docbundle pull --list shows them all)"


def pull(
    spec: Spec, base: str, bundles: Path, *, lock: Path | None = None, rules: Policy | None = None
) -> Installed:
    """Download the release's archive for ``spec`` (and its attestation) and install it as ``docbundle
    install`` does, its provenance checked by ``rules``."""
    guard = guard_for(base)
    entry = choose(read_index(base, guard), spec)
    if entry.size > MAX_ARCHIVE_BYTES:
        raise PullError(f"{entry.archive} is {entry.size} bytes, over the {MAX_ARCHIVE_BYTES}-byte limit")
    folder = release_folder(base, entry)
    sums_url = urljoin(folder, SUMS)
    sums_text = _fetch(sums_url, MAX_SUMS_BYTES, SUMS, guard).decode("utf-8", errors="replace")
    listed = read_sums(sums_text).get(entry.archive)
    if listed is None:
        raise PullError(f"{entry.archive} is not listed in {sums_url[:200]}")
    if listed != entry.sha256:
        raise PullError(f"{INDEX} and {SUMS} give different sha256 values for {entry.archive}; not installed")
    tmp = Path(tempfile.mkdtemp(prefix="docbundle-pull-"))
    try:
        (tmp / SUMS).write_text(sums_text, encoding="utf-8")
        archive = tmp / entry.archive
        with open(archive, "xb") as out:
            download(
                urljoin(folder, quote(entry.archive)),
                out,
                min(entry.size, MAX_ARCHIVE_BYTES),
                what=entry.archive,
                guard=guard,
                exact=entry.size,
            )
        attestation = None
        if entry.attestation and rules is not None:
            url = urljoin(folder, quote(entry.attestation))
            data = _fetch_bytes(url, MAX_ATTESTATION_BYTES, entry.attestation, guard, optional=True)
            if data is not None:
                attestation = tmp / entry.attestation
                attestation.write_bytes(data)
        return install(archive, bundles, sums=tmp / SUMS, lock=lock, rules=rules, attestation=attestation)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
