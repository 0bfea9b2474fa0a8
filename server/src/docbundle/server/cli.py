"""``docbundle``: serve documentation bundles over MCP, and search, inspect or verify them from a shell.

Commands: ``serve`` (stdio or streamable HTTP), ``search``, ``info``, ``verify``, ``keys`` (API keys
for the HTTP transport: ``create``, ``list``, ``revoke``).

Exit codes: 0 success; 1 something failed (a bundle did not verify, a library could not be opened, the
HTTP port could not be bound); 2 usage or configuration error (bad arguments, unknown library, missing
bundles directory, malformed lock file, missing or malformed keys file, HTTP with neither keys nor
``--no-auth``, unknown key id).

Only ``serve`` imports the MCP SDK, so the other commands start quickly. Logs go to stderr (JSON lines
when serving HTTP); in stdio mode stdout belongs to MCP.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docbundle.bundle.errors import BundleError, BundleNotFoundError
from docbundle.bundle.layout import CURRENT, resolve_bundle
from docbundle.bundle.query import MODES

from .catalog import Catalog
from .errors import LibraryUnavailableError, LockFileError, ServerError
from .lockfile import find_lock

if TYPE_CHECKING:
    from .http.app import HttpApp, HttpOptions
    from .keys import KeyStore

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
ENV_BUNDLES = "DOCBUNDLE_BUNDLES"
ENV_KEYS = "DOCBUNDLE_KEYS"
DEFAULT_KEYS_FILE = "docbundle-keys.toml"
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
LOG_LEVELS = ("debug", "info", "warning", "error")
# serve options that only mean something over HTTP (argparse dest names, all defaulting to None).
HTTP_ONLY = (
    "keys",
    "no_auth",
    "allowed_host",
    "allowed_origin",
    "rate",
    "burst",
    "max_body_size",
    "body_timeout",
    "trusted_proxy",
    "workers",
)

log = logging.getLogger("docbundle.server")


def _default_bundles() -> Path:
    return Path(os.environ.get(ENV_BUNDLES) or "bundles")


def _rate(text: str) -> float:
    """``--rate``: ``N/s``, ``N/m``, ``N/h`` or ``N`` (per second) as requests per second; ``off`` is 0."""
    if text.strip().lower() in ("off", "0", "none"):
        return 0.0
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:/\s*(s|sec|second|m|min|minute|h|hour))?\s*", text.lower())
    if m is None or float(m[1]) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give N/s, N/m or N/h (e.g. 10/s), or off")
    per = {"m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}.get(m[2] or "s", 1)
    return float(m[1]) / per


def _size(text: str) -> int:
    """``--max-body-size``: bytes, or with a K or M suffix (binary units)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKmM]i?[bB]?)?\s*", text)
    if m is None or int(m[1]) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of bytes, e.g. 1048576 or 1M")
    return int(m[1]) * {"k": 1024, "m": 1024 * 1024}.get((m[2] or " ")[0].lower(), 1)


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be positive")
        return value

    return parse


def _proxy(text: str) -> str:
    """``--trusted-proxy``: an IP address or network (``10.0.0.5``, ``10.0.0.0/24``, ``::1``), normalised."""
    import ipaddress

    try:
        return str(ipaddress.ip_network(text.strip(), strict=False))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give the IP address or network (e.g. 10.0.0.5 or 10.0.0.0/24) of a proxy in front "
            "of this server; names and * are not accepted"
        ) from None


def _default_keys() -> Path:
    return Path(os.environ.get(ENV_KEYS) or DEFAULT_KEYS_FILE)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="docbundle",
        description="Serve prebuilt documentation bundles to AI assistants over MCP (read-only, no network).",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level (stderr)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_serve, _add_search, _add_info, _add_verify, _add_install, _add_pull, _add_keys):
        add(sub)
    return p


def _common(sp: argparse.ArgumentParser) -> None:
    """Options every command reading a bundles directory takes."""
    sp.add_argument(
        "--bundles",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"bundles directory (default: ${ENV_BUNDLES}, else ./bundles)",
    )
    sp.add_argument(
        "--lock",
        type=Path,
        default=None,
        metavar="FILE",
        help="lock file pinning content hashes (default: DIR/bundles.lock when it exists)",
    )


def _add_serve(sub: Subparsers) -> None:
    s = sub.add_parser("serve", help="run the MCP server", description="Run the read-only MCP server.")
    _common(s)
    s.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default: stdio")
    s.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default: 127.0.0.1)")
    s.add_argument("--port", type=int, default=8000, help="HTTP port (default: 8000; 0 picks a free one)")
    _add_http_options(s.add_argument_group("HTTP transport"))
    s.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=None,
        help="default: info over HTTP (JSON lines on stderr, one per request), warning over stdio",
    )


def _add_http_options(h: argparse._ArgumentGroup) -> None:
    """The options of ``serve`` that apply to HTTP only (``HTTP_ONLY``)."""
    h.add_argument(
        "--keys",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"API keys file (default: ${ENV_KEYS}); HTTP refuses to start without one unless --no-auth",
    )
    h.add_argument(
        "--no-auth",
        action="store_true",
        default=None,
        help="serve HTTP without API keys (binds to 127.0.0.1 unless --host says otherwise)",
    )
    h.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        metavar="HOST",
        help="a Host header clients may use (NAME, NAME:PORT or *), besides localhost and the bind "
        "address; repeatable",
    )
    h.add_argument(
        "--allowed-origin",
        action="append",
        default=None,
        metavar="ORIGIN",
        help="a browser Origin allowed besides those of the allowed hosts (scheme://host[:port|:*] or *); "
        "repeatable",
    )
    h.add_argument(
        "--rate",
        type=_rate,
        default=None,
        metavar="RATE",
        help="requests per key (per client address with --no-auth; loopback clients then only when given): "
        "N/s, N/m, N/h or off (default: 50/s)",
    )
    h.add_argument(
        "--burst",
        type=_positive(int),
        default=None,
        metavar="N",
        help="requests a key may make at once before --rate applies (default: 500)",
    )
    h.add_argument(
        "--max-body-size",
        type=_size,
        default=None,
        metavar="BYTES",
        help="largest request body, e.g. 65536 or 1M (default: 1M); larger is refused with 413",
    )
    h.add_argument(
        "--body-timeout",
        type=_positive(float),
        default=None,
        metavar="SECONDS",
        help="time a client has to send a request body (default: 10); slower is refused with 408",
    )
    h.add_argument(
        "--trusted-proxy",
        action="append",
        type=_proxy,
        default=None,
        metavar="ADDR",
        help="the IP address or network of a reverse proxy whose X-Forwarded-For names the client; "
        "repeatable (default: none, the TCP peer is the client)",
    )
    h.add_argument(
        "--workers",
        type=_positive(int),
        default=None,
        metavar="N",
        help="worker processes serving the port (default: 1); they share the rate limits and key-check budgets",
    )


def _add_search(sub: Subparsers) -> None:
    q = sub.add_parser("search", help="search one library", description="Search one library's bundle.")
    _common(q)
    q.add_argument("library", metavar="LIBRARY", help="library id")
    q.add_argument("query", metavar="QUERY", help="what to search for")
    q.add_argument("--version", dest="doc_version", default=None, help="docs version (default: latest)")
    q.add_argument("--mode", choices=MODES, default="balanced")
    q.add_argument("--limit", type=int, default=5, help="hits (1-20, default 5)")
    q.add_argument("--max-tokens", type=int, default=5000, help="budget for the hits' text (500-50000)")
    q.add_argument("--json", action="store_true", help="print the search_documents result as JSON")


def _add_info(sub: Subparsers) -> None:
    i = sub.add_parser("info", help="describe libraries", description="Describe the installed libraries.")
    _common(i)
    i.add_argument("library", metavar="LIBRARY", nargs="?", help="one library's versions and details")
    i.add_argument("--json", action="store_true", help="print JSON")


def _add_verify(sub: Subparsers) -> None:
    v = sub.add_parser(
        "verify",
        help="verify bundles",
        description="Verify every file of every bundle CURRENT names under DIR (or one bundle directory) "
        "against its manifest, then open it.",
    )
    v.add_argument("dir", metavar="DIR", nargs="?", type=Path, default=None, help="bundles dir or one bundle")
    v.add_argument(
        "--lock", type=Path, default=None, metavar="FILE", help="also check content hashes against it"
    )


def _add_install(sub: Subparsers) -> None:
    n = sub.add_parser(
        "install",
        help="install a release archive (offline)",
        description="Check a release archive against SHA256SUMS, unpack it safely, verify it against its "
        "manifest and the lock file, then point CURRENT at it. Needs no network.",
    )
    n.add_argument("archive", metavar="ARCHIVE", type=Path, help="<libraryId>-<version>-<buildId>.tar.gz")
    n.add_argument(
        "--bundles",
        type=Path,
        default=None,
        metavar="DIR",
        help="bundles directory (default: $DOCBUNDLE_BUNDLES, else ./bundles)",
    )
    n.add_argument(
        "--sums", type=Path, default=None, metavar="FILE", help="SHA256SUMS (default: beside the archive)"
    )
    n.add_argument(
        "--lock", type=Path, default=None, metavar="FILE", help="lock file (default: DIR/bundles.lock)"
    )


def _add_pull(sub: Subparsers) -> None:
    n = sub.add_parser(
        "pull",
        help="download a prebuilt bundle from a release and install it",
        description="Download a library's bundle from a release (index.json, SHA256SUMS, archive) over "
        "http(s) and install it with the checks of docbundle install. The only command that uses the network.",
    )
    n.add_argument("spec", metavar="LIBRARY[@VERSION]", nargs="?", help="e.g. docbundle or docbundle@latest")
    n.add_argument(
        "--from",
        dest="release",
        metavar="URL",
        default=None,
        help="the release folder holding index.json (default: $DOCBUNDLE_RELEASES, else the project's "
        "rolling release bundles-latest)",
    )
    n.add_argument("--list", action="store_true", help="list what the release offers and install nothing")
    n.add_argument("--json", action="store_true", help="with --list: print the release's entries as JSON")
    n.add_argument(
        "--bundles",
        type=Path,
        default=None,
        metavar="DIR",
        help="bundles directory (default: $DOCBUNDLE_BUNDLES, else ./bundles)",
    )
    n.add_argument(
        "--lock", type=Path, default=None, metavar="FILE", help="lock file (default: DIR/bundles.lock)"
    )


def _add_keys(sub: Subparsers) -> None:
    k = sub.add_parser(
        "keys",
        help="manage API keys for the HTTP transport",
        description="Create, list and revoke the API keys `docbundle serve --transport http --keys FILE` "
        "accepts. The file stores only a salted scrypt hash of each key's secret.",
    )
    ksub = k.add_subparsers(dest="keys_command", required=True, metavar="ACTION")

    kc = ksub.add_parser(
        "create", help="create a key and print it once", description="Create a key; prints it once."
    )
    kc.add_argument("--name", required=True, help="who or what the key is for (shown by keys list)")
    kc.add_argument(
        "--expires",
        metavar="DATE",
        default=None,
        help="last day (UTC) the key works: YYYY-MM-DD, or a number of days such as 90d (default: never)",
    )
    _keys_file(kc)
    kl = ksub.add_parser("list", help="list keys (never their secrets)", description="List the keys.")
    _keys_file(kl)
    kl.add_argument("--json", action="store_true", help="print JSON")
    kr = ksub.add_parser(
        "revoke",
        help="revoke a key",
        description="Revoke a key; a running server refuses it within a second.",
    )
    kr.add_argument("key_id", metavar="ID", help="the key's id (the part before the dot)")
    _keys_file(kr)


def _keys_file(sp: argparse.ArgumentParser) -> None:
    """The --keys option of every keys action."""
    sp.add_argument(
        "--keys",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"keys file (default: ${ENV_KEYS}, else ./{DEFAULT_KEYS_FILE})",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``docbundle`` command."""
    args = _parser().parse_args(argv)
    # Before the MCP SDK is imported: MCPServer() configures root logging at INFO unless a handler exists.
    level = getattr(args, "log_level", None)
    logging.basicConfig(
        level=level.upper() if level else logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="docbundle: %(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "search":
            return _search(args)
        if args.command == "info":
            return _info(args)
        if args.command == "keys":
            return _keys(args)
        if args.command == "install":
            return _install(args)
        if args.command == "pull":
            return _pull(args)
        return _verify(args)
    except LibraryUnavailableError as exc:
        _err(str(exc))
        return EXIT_FAILED
    except (ServerError, FileNotFoundError, NotADirectoryError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_FAILED


def _install(args: argparse.Namespace) -> int:
    from .errors import InstallError
    from .install import install  # whoosh and tarfile only for this command

    bundles: Path = args.bundles or _default_bundles()
    if not args.archive.is_file():
        _err(f"{args.archive} not found")
        return EXIT_FAILED
    try:
        done = install(args.archive, bundles, sums=args.sums, lock=args.lock)
    except InstallError as exc:
        _err(str(exc))
        return EXIT_FAILED
    note = " (already present; CURRENT points at it)" if done.already_present else ""
    print(
        f"installed {done.library}@{done.version} build {done.build_id} (content {done.content_hash[:12]}){note}"
    )
    print("restart a running server to serve it", file=sys.stderr)
    return EXIT_OK


def _pull(args: argparse.Namespace) -> int:
    from .errors import InstallError
    from .pull import parse_spec, pull, read_index, release_base, render_list  # network code only here

    if args.list == (args.spec is not None):
        _err("give LIBRARY[@VERSION] to install, or --list to see what the release offers")
        return EXIT_USAGE
    try:
        base = release_base(args.release)
        spec = None if args.list else parse_spec(args.spec)
    except InstallError as exc:
        _err(str(exc))
        return EXIT_USAGE
    try:
        if spec is None:
            entries = read_index(base)
            if args.json:
                import msgspec

                print(json.dumps({"release": base, "bundles": msgspec.to_builtins(entries)}, indent=2))
            else:
                sys.stdout.write(render_list(entries))
            return EXIT_OK
        done = pull(spec, base, args.bundles or _default_bundles(), lock=args.lock)
    except InstallError as exc:
        _err(str(exc))
        return EXIT_FAILED
    note = " (already present; CURRENT points at it)" if done.already_present else ""
    print(
        f"installed {done.library}@{done.version} build {done.build_id} (content {done.content_hash[:12]}){note}"
    )
    print("restart a running server to serve it", file=sys.stderr)
    return EXIT_OK


def _err(message: str) -> None:
    print(f"docbundle: error: {message}", file=sys.stderr)


def _load(args: argparse.Namespace) -> Catalog:
    root: Path = args.bundles or _default_bundles()
    return Catalog.load(root, lock=find_lock(root, args.lock))


# -- serve ------------------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    if args.transport != "http":
        given = [f"--{name.replace('_', '-')}" for name in HTTP_ONLY if getattr(args, name) is not None]
        if given:
            _err(f"{', '.join(given)} only apply to --transport http")
            return EXIT_USAGE
        return _serve_stdio(args)
    return _serve_http(args)


def _serve_stdio(args: argparse.Namespace) -> int:
    catalog = _load(args)
    n = len(catalog.library_ids())
    if n == 0:
        log.warning("no library bundles under %s; build some with docbundle-index build", catalog.root)
    import anyio

    from .mcp.server import create_server
    from .stdio import exit_when_threads_linger, serve_stdio

    server = create_server(catalog)
    try:
        print(f"docbundle: serving {n} libraries from {catalog.root} over stdio", file=sys.stderr, flush=True)
        # Returns when the client leaves (end of stdin, or the parent process died), after a bounded drain.
        anyio.run(serve_stdio, server)
    except KeyboardInterrupt:
        # Ctrl-C (or SIGINT from a supervisor) is how a server is meant to stop.
        pass
    finally:
        catalog.close()
    exit_when_threads_linger(EXIT_OK)
    return EXIT_OK


def _serve_http(args: argparse.Namespace) -> int:
    keys_path: Path | None = args.keys or (Path(os.environ[ENV_KEYS]) if os.environ.get(ENV_KEYS) else None)
    if args.no_auth and args.keys is not None:
        _err("--keys and --no-auth exclude each other")
        return EXIT_USAGE
    if args.no_auth:
        keys_path = None
    elif keys_path is None:
        _err(
            "the HTTP transport needs API keys: create one with "
            f"`docbundle keys create --name NAME --keys FILE` and pass --keys FILE (or set ${ENV_KEYS}); "
            "or pass --no-auth to serve without authentication on 127.0.0.1"
        )
        return EXIT_USAGE
    from . import logs
    from .keys import KeyStore

    keys = KeyStore(keys_path) if keys_path is not None else None
    # From here on every line on stderr is JSON (the catalogue's warnings included).
    handler = logs.configure(args.log_level or "info")
    catalog = _load(args)
    try:
        return _run_http(args, catalog, keys, handler)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        catalog.close()


def _run_http(
    args: argparse.Namespace, catalog: Catalog, keys: KeyStore | None, handler: logging.Handler
) -> int:
    from .http.app import HttpApp
    from .http.serve import bind_socket, run_http
    from .mcp.server import create_server

    n = len(catalog.library_ids())
    if n == 0:
        log.warning("no library bundles under %s; build some with docbundle-index build", catalog.root)
    host: str = args.host
    app = HttpApp(create_server(catalog), catalog, keys, _http_options(args))
    try:
        sock = bind_socket(host, args.port)
    except OSError as exc:
        _err(f"cannot listen on {host}:{args.port}: {exc}")
        return EXIT_FAILED
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    auth = _auth_summary(keys, host)
    if host.strip("[]") in ("0.0.0.0", "::") and not args.allowed_host:
        log.warning(
            "listening on all interfaces without --allowed-host: requests are accepted only with a Host of "
            "localhost or 127.0.0.1; pass --allowed-host NAME for the name clients use"
        )
    _announce(handler, app, f"http://{shown}:{port}/mcp", n, auth)
    return run_http(app, sock, log_level=args.log_level or "info")


def _http_options(args: argparse.Namespace) -> HttpOptions:
    """``HttpOptions`` from the ``serve`` options (defaults for those not given)."""
    from .http.app import DEFAULT_BODY_TIMEOUT, DEFAULT_BURST, DEFAULT_MAX_BODY, DEFAULT_RATE, HttpOptions

    return HttpOptions(
        host=args.host,
        allowed_hosts=tuple(args.allowed_host or ()),
        allowed_origins=tuple(args.allowed_origin or ()),
        rate=(args.rate if args.rate is not None else DEFAULT_RATE) or None,
        burst=args.burst or DEFAULT_BURST,
        limit_loopback=args.rate is not None or args.burst is not None,
        max_body_size=args.max_body_size or DEFAULT_MAX_BODY,
        body_timeout=args.body_timeout or DEFAULT_BODY_TIMEOUT,
        trusted_proxies=tuple(args.trusted_proxy or ()),
        workers=args.workers or 1,
    )


def _auth_summary(keys: KeyStore | None, host: str) -> str:
    """How requests are authenticated, for the start-up line; warns about what weakens it."""
    if keys is None:
        if host not in LOOPBACK:
            log.warning("listening on %s with --no-auth: anyone who can reach it can use it", host)
        return "no authentication"
    active = sum(1 for k in keys.records() if k.status(datetime.now(UTC)) == "active")
    if active == 0:
        log.warning("no active key in %s: every request will be refused", keys.path)
    unchecked = [k.id for k in keys.records() if k.check is None and k.status(datetime.now(UTC)) == "active"]
    if unchecked:
        log.warning(
            "key(s) %s in %s have no check (created by an older docbundle): every guess at them costs "
            "the server a scrypt; replace them with `docbundle keys create` and `docbundle keys revoke ID`",
            ", ".join(unchecked),
            keys.path,
        )
    return f"API keys from {keys.path}: {active} active"


def _announce(handler: logging.Handler, app: HttpApp, url: str, libraries: int, auth: str) -> None:
    """The "serving ... at URL" line, always shown whatever the log level: supervisors read the address."""
    options = app.options
    handler.handle(
        logging.makeLogRecord(
            {
                "name": log.name,
                "levelno": logging.INFO,
                "levelname": "INFO",
                "msg": f"docbundle: serving {libraries} libraries from {app.catalog.root} over streamable HTTP "
                f"at {url} ({auth})",
                "fields": {
                    "event": "listening",
                    "url": url,
                    "libraries": libraries,
                    "auth": "keys" if app.keys is not None else "none",
                    "rate": options.rate,
                    "burst": options.burst,
                    "maxBodySize": options.max_body_size,
                    "trustedProxies": list(options.trusted_proxies),
                },
            }
        )
    )


# -- search -----------------------------------------------------------------------------------------


def _snippet(text: str, width: int = 240) -> str:
    flat = " ".join(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("```"))
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def _search(args: argparse.Namespace) -> int:
    from .docs import Docs
    from .render import hit_title

    catalog = _load(args)
    try:
        result = Docs(catalog).search(
            args.query,
            library_id=args.library,
            version=args.doc_version,
            mode=args.mode,
            limit=args.limit,
            max_tokens=args.max_tokens,
        )
    finally:
        catalog.close()
    if args.json:
        print(result.model_dump_json(by_alias=True, indent=2))
        return EXIT_OK
    print(
        f"{result.library_id}@{result.version} (build {result.build_id}): {len(result.hits)} hit(s) for {args.query!r}"
    )
    if result.dropped:
        print(f"ignored words: {', '.join(result.dropped)}")
    for h in result.hits:
        print(f"\n{h.rank}. {hit_title(h)}  (score {h.score:.3f})")
        print(f"   {h.document_id} chunk {h.chunk_id} · {h.url}")
        print(f"   {_snippet(h.text)}")
    if result.message:
        print(f"\n{result.message}")
        for s in result.suggestions:
            print(f"  - {s}")
    return EXIT_OK


# -- info -------------------------------------------------------------------------------------------


def _info(args: argparse.Namespace) -> int:
    from .docs import Docs

    catalog = _load(args)
    docs = Docs(catalog)
    if args.library:
        versions = docs.list_versions(args.library)
        if args.json:
            print(versions.model_dump_json(by_alias=True, indent=2))
            return EXIT_OK
        lib = versions.library
        print(f"{lib.id}: {lib.name}" + (f" [{lib.category}]" if lib.category else ""))
        if lib.description:
            print(f"  {lib.description}")
        for v in versions.versions:
            flags = ", ".join(
                f for f, on in (("default", v.default), ("latest", v.latest), ("lts", v.lts)) if on
            )
            print(f"  {v.version}: {v.status or '?'}" + (f" ({flags})" if flags else ""))
            if v.availability == "failed":
                print(f"    FAILED: {v.reason}")
                continue
            print(f"    build {v.build_id}, built {v.built_at}, {v.documents} documents")
            print(f"    content hash {v.content_hash}")
        return EXIT_OK
    libraries = docs.list_libraries()
    if args.json:
        print(libraries.model_dump_json(by_alias=True, indent=2))
        return EXIT_OK
    if not libraries.libraries:
        print(f"no libraries under {catalog.root}")
    for s in libraries.libraries:
        state = f"FAILED: {s.reason}" if s.status == "failed" else f"{s.documents} docs, build {s.build_id}"
        print(f"{s.id:<20} {s.default_version:<10} {state}")
    return EXIT_OK


# -- keys -------------------------------------------------------------------------------------------


def _keys(args: argparse.Namespace) -> int:
    from .keys import create_key, load_keys, parse_expiry, revoke_key

    path: Path = args.keys or _default_keys()
    if args.keys_command == "create":
        expires = parse_expiry(args.expires) if args.expires else None
        record, key = create_key(path, args.name, expires=expires)
        until = f"until {record.expires.isoformat()} (UTC)" if record.expires else "with no expiry"
        print(
            f"docbundle: created key {record.id} ({record.name}) in {path}, valid {until}. "
            "This is the only time the key is shown: store it now.",
            file=sys.stderr,
        )
        print(key)
        return EXIT_OK
    if args.keys_command == "revoke":
        record, already = revoke_key(path, args.key_id)
        state = "was already revoked" if already else "revoked"
        print(f"{record.id} ({record.name}) {state}; a running server refuses it within a second")
        return EXIT_OK
    now = datetime.now(UTC)
    keys = load_keys(path)
    rows: list[dict[str, str | None]] = [
        {
            "id": k.id,
            "name": k.name,
            "status": k.status(now),
            "created": k.created.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "expires": k.expires.isoformat() if k.expires else None,
        }
        for k in keys.values()
    ]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        print(f"no keys in {path}")
    for r in rows:
        print(
            f"{r['id']}  {r['status']:<8} created {(r['created'] or '')[:10]}  "
            f"expires {r['expires'] or 'never':<10}  {r['name']}"
        )
    return EXIT_OK


# -- verify -----------------------------------------------------------------------------------------


def _verify(args: argparse.Namespace) -> int:
    from docbundle.bundle.reader import check_bundle

    target: Path = args.dir or _default_bundles()
    try:
        single = _one_bundle(target)
    except BundleError as exc:
        print(f"FAIL {target}: {exc}")
        return EXIT_FAILED
    if single is None:
        return _verify_all(target, args.lock)
    if args.lock is not None:
        _err("--lock applies to a bundles directory, not to one bundle")
        return EXIT_USAGE
    try:
        m = check_bundle(single)
    except BundleError as exc:
        print(f"FAIL {single}: {exc}")
        return EXIT_FAILED
    print(f"OK   {m.library.id}/{m.version.name}/{m.build.build_id} ({len(m.files)} files verified)")
    return EXIT_OK


def _one_bundle(target: Path) -> Path | None:
    """The one bundle ``target`` names (a bundle or a version dir), or None for a bundles directory."""
    try:
        return resolve_bundle(target)
    except BundleNotFoundError:
        if (target / CURRENT).is_file():
            raise  # a version directory whose CURRENT names no bundle
        return None


def _verify_all(target: Path, lock: Path | None) -> int:
    """Verify every bundle a CURRENT names under the bundles directory ``target``."""
    try:
        catalog = Catalog.load(target, lock=find_lock(target, lock))
    except LockFileError as exc:
        _err(str(exc))
        return EXIT_USAGE
    failed = 0
    try:
        entries = catalog.entries()
        if not entries:
            print(f"FAIL {target}: no bundles found (expected <libraryId>/<version>/CURRENT)")
            return EXIT_FAILED
        for entry in entries:
            name = f"{entry.library_id}/{entry.version}"
            try:
                opened = catalog.open_entry(entry)
            except LibraryUnavailableError as exc:
                failed += 1
                print(f"FAIL {name}: {exc.reason}")
                continue
            m = opened.manifest
            print(f"OK   {name}/{m.build.build_id} ({len(m.files)} files verified)")
    finally:
        catalog.close()
    return EXIT_FAILED if failed else EXIT_OK
