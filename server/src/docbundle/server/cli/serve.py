"""``docbundle serve``: the MCP server over stdio or streamable HTTP, and the options of each.

The MCP SDK, anyio and the HTTP stack are imported when the command runs, not when its parser is built.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import re
import sys
import threading
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docbundle.bundle.userdirs import ENV_KEYS, default_keys
from docbundle.common.clitable import Command, Group, arg
from docbundle.common.process import freeze_collector

from ..catalog import (
    DEFAULT_MAX_OPEN,
    DEFAULT_RELOAD_SECONDS,
    DEFAULT_ROUTE_LIBRARIES,
    MAX_ROUTE_LIBRARIES,
    Catalog,
    CatalogSettings,
)
from ..http.options import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_BURST,
    DEFAULT_MAX_BODY,
    DEFAULT_RATE,
    DEFAULT_WORKERS,
    HttpOptions,
)
from ..words import plural
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, bundle_args, err, load, ways, where

if TYPE_CHECKING:
    from ..http.app import HttpApp
    from ..keys import KeyStore
    from ..mcp.server import DocbundleMCP

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8000
# resolve_library's word index is built once the first tool call has answered, or after this long.
NAMES_INDEX_WAIT_SECONDS = 10.0
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
LOG_LEVELS = ("debug", "info", "warning", "error")
# serve options that only mean something over HTTP (argparse dest names, all defaulting to None).
HTTP_ONLY = (
    "host",
    "port",
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
_UNITS = {"m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}
_BINARY = {"k": 1024, "m": 1024 * 1024}

log = logging.getLogger(__name__)


def _rate(text: str) -> float:
    """``--rate``: ``N/s``, ``N/m``, ``N/h`` or ``N`` (per second) as requests per second; ``off`` is 0."""
    if text.strip().lower() in ("off", "0", "none"):
        return 0.0
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:/\s*(s|sec|second|m|min|minute|h|hour))?\s*", text.lower())
    # 400 digits parse as inf requests per second.
    if m is None or not 0 < float(m[1]) < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r}: give N/s, N/m or N/h (e.g. 10/s), or off")
    return float(m[1]) / _UNITS.get(m[2] or "s", 1)


def _size(text: str) -> int:
    """``--max-body-size``: bytes, or with a K or M suffix (binary units)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKmM]i?[bB]?)?\s*", text)
    if m is None or int(m[1]) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of bytes, e.g. 1048576 or 1M")
    return int(m[1]) * _BINARY.get((m[2] or " ")[0].lower(), 1)


def _shown_size(size: int) -> str:
    """A byte count as ``--max-body-size`` takes it: ``1M``, ``64K`` or bytes."""
    for suffix, unit in (("M", _BINARY["m"]), ("K", _BINARY["k"])):
        if size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (value > 0 and math.isfinite(value)):  # "nan" and "inf" parse as floats
            raise argparse.ArgumentTypeError(f"{text!r} must be a positive finite number")
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


def _route_libraries(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= MAX_ROUTE_LIBRARIES:
        raise argparse.ArgumentTypeError(f"must be 0..{MAX_ROUTE_LIBRARIES}, not {value}")
    return value


def _non_negative_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 (never) or a positive number of seconds")
    return value


def _index_names_soon(server: DocbundleMCP) -> None:
    """Build resolve_library's word index in a background thread, once the first answer has gone (a
    catalogue of thousands of libraries takes a second or more, which the first answer must not wait
    for; the first resolve_library then waits for it rather than building it)."""

    def build() -> None:
        server.answered.wait(NAMES_INDEX_WAIT_SECONDS)
        server.docs.resolver.index()
        server.docs.router.prepare()  # the route index too: seconds at 10,000 libraries

    threading.Thread(target=build, name="docbundle-names", daemon=True).start()


def _positive_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give 1 or more")
    return value


#: The options of ``serve`` that apply to HTTP only (``HTTP_ONLY``): each defaults to None, so that
#: one given with stdio can be named; the defaults shown are applied in ``_http_options``.
HTTP_OPTIONS = Group(
    "HTTP transport",
    (
        arg("--host", default=None, help=f"bind address (default: {DEFAULT_HOST})"),
        arg("--port", type=int, default=None, help=f"port (default: {DEFAULT_PORT}; 0 picks a free one)"),
        arg(
            "--keys",
            type=Path,
            default=None,
            metavar="FILE",
            help=f"API keys file (default: ${ENV_KEYS}, else the per-user keys.toml `docbundle keys create` "
            "writes, when it exists); HTTP refuses to start without one unless --no-auth",
        ),
        arg(
            "--no-auth",
            action="store_true",
            default=None,
            help=f"serve HTTP without API keys (binds to {DEFAULT_HOST} unless --host says otherwise)",
        ),
        arg(
            "--allowed-host",
            action="append",
            default=None,
            metavar="HOST",
            help="a Host header clients may use (NAME, NAME:PORT or *), besides localhost and the bind "
            "address; repeatable",
        ),
        arg(
            "--allowed-origin",
            action="append",
            default=None,
            metavar="ORIGIN",
            help="a browser Origin allowed besides those of the allowed hosts (scheme://host[:port|:*] or "
            "*); repeatable",
        ),
        arg(
            "--rate",
            type=_rate,
            default=None,
            metavar="RATE",
            help="requests per key (per client address with --no-auth; loopback clients then only when "
            f"given): N/s, N/m, N/h or off (default: {DEFAULT_RATE:g}/s)",
        ),
        arg(
            "--burst",
            type=_positive(int),
            default=None,
            metavar="N",
            help=f"requests a key may make at once before --rate applies (default: {DEFAULT_BURST})",
        ),
        arg(
            "--max-body-size",
            type=_size,
            default=None,
            metavar="BYTES",
            help=f"largest request body, e.g. 65536 or 1M (default: {_shown_size(DEFAULT_MAX_BODY)}); "
            "larger is refused with 413",
        ),
        arg(
            "--body-timeout",
            type=_positive(float),
            default=None,
            metavar="SECONDS",
            help=f"time a client has to send a request body (default: {DEFAULT_BODY_TIMEOUT:g}); slower "
            "is refused with 408",
        ),
        arg(
            "--trusted-proxy",
            action="append",
            type=_proxy,
            default=None,
            metavar="ADDR",
            help="the IP address or network of a reverse proxy whose X-Forwarded-For names the client; "
            "repeatable (default: none, the TCP peer is the client)",
        ),
        arg(
            "--workers",
            type=_positive(int),
            default=None,
            metavar="N",
            help=f"worker processes serving the port (default: {DEFAULT_WORKERS}); they share the rate "
            "limits and key-check budgets",
        ),
    ),
)


def serve(args: argparse.Namespace) -> int:
    """Run ``serve``: stdio, or HTTP with the defaults of the HTTP options applied."""
    if args.transport != "http":
        given = [f"--{name.replace('_', '-')}" for name in HTTP_ONLY if getattr(args, name) is not None]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            err(
                f"{', '.join(given)} {verb} only to --transport http, and this command would serve stdio "
                f"(the default transport): add --transport http, or drop {', '.join(given)}"
            )
            return EXIT_USAGE
        return _serve_stdio(args)
    args.host = args.host if args.host is not None else DEFAULT_HOST
    args.port = args.port if args.port is not None else DEFAULT_PORT
    return _serve_http(args)


def _no_libraries_warning(catalog: Catalog, args: argparse.Namespace) -> None:
    """Said once at start-up when there is nothing to serve: the server still runs, and lists nothing."""
    log.warning("serving no library: none is installed in %s; %s", where(catalog.root, args), ways())


def _raise_file_limit() -> None:
    """Raise this process's open-file limit to its hard limit: a server holds one lease (an open
    manifest) per library version, and a catalogue of thousands would pass a soft limit of 1,024."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _serving_settings(args: argparse.Namespace) -> CatalogSettings:
    """What a serving catalogue is told at load, the same over stdio and HTTP (``CatalogSettings.serving``,
    which tests and benchmarks of a server use too): its options, and the warm-up."""
    return CatalogSettings.serving(max_open=args.max_open, route_libraries=args.route_libraries)


def _serve_stdio(args: argparse.Namespace) -> int:
    _raise_file_limit()
    # The SDK first, then the catalogue: importing it creates many objects, and the cyclic collector
    # passes it sets off would each walk every entry of a big catalogue (0.2 s at 10,000 libraries).
    import anyio

    from ..catalog.watch import watch_bundles
    from ..mcp.server import create_server
    from ..stdio import exit_when_threads_linger, serve_stdio

    catalog = load(args, _serving_settings(args))
    # What exists now (modules, the catalogue) lives as long as the server: out of the collector's sight.
    freeze_collector()
    n = len(catalog.library_ids())
    if n == 0:
        _no_libraries_warning(catalog, args)
    server = create_server(catalog)
    _index_names_soon(server)
    if args.reload_interval > 0:
        server.announce_resource_changes()
    # Beside the session: semantic search's query encoder, loading in a background thread while the
    # client connects (only when a library has vectors and the extra is installed; numpy and the model
    # are not imported otherwise), and the reload loop (``catalog.watch``), as over HTTP.
    background = partial(watch_bundles, catalog, args.reload_interval)
    try:
        print(
            f"docbundle: serving {plural(n, 'library', 'libraries')} from {catalog.root} over stdio",
            file=sys.stderr,
            flush=True,
        )
        # Returns when the client leaves (end of stdin, or the parent process died), after a bounded drain.
        anyio.run(partial(serve_stdio, server, background=background))
    except KeyboardInterrupt:
        # Ctrl-C (or SIGINT from a supervisor) is how a server is meant to stop.
        pass
    finally:
        catalog.close()
    exit_when_threads_linger(EXIT_OK)
    return EXIT_OK


def _serve_http(args: argparse.Namespace) -> int:
    # The keys file `docbundle keys create` writes by default is the one serve reads by default.
    default = default_keys()
    keys_path: Path | None = args.keys or (default if os.environ.get(ENV_KEYS) or default.is_file() else None)
    if args.no_auth and args.keys is not None:
        err("--keys and --no-auth exclude each other")
        return EXIT_USAGE
    if args.no_auth:
        keys_path = None
    elif keys_path is None:
        err(
            f"the HTTP transport needs API keys, and there is no keys file at {default}: create a key with "
            "`docbundle keys create --name NAME` (it writes that file, which serve then reads; --keys FILE "
            f"or ${ENV_KEYS} name another), or pass --no-auth to serve without authentication on 127.0.0.1"
        )
        return EXIT_USAGE
    from .. import logs
    from ..keys import KeyStore

    keys = KeyStore(keys_path) if keys_path is not None else None
    # From here on every line on stderr is JSON (the catalogue's warnings included).
    handler = logs.configure(args.log_level or "info")
    _raise_file_limit()
    catalog = load(args, _serving_settings(args))
    freeze_collector()  # as over stdio (and before ``--workers`` forks: see ``freeze_collector``)
    try:
        return _run_http(args, catalog, keys, handler)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        catalog.close()


def _run_http(
    args: argparse.Namespace, catalog: Catalog, keys: KeyStore | None, handler: logging.Handler
) -> int:
    from ..http.serve import metrics_folder

    with metrics_folder(args.workers or DEFAULT_WORKERS):
        return _listen(args, catalog, keys, handler)


def _listen(
    args: argparse.Namespace, catalog: Catalog, keys: KeyStore | None, handler: logging.Handler
) -> int:
    from ..http.app import HttpApp
    from ..http.serve import bind_socket, run_http
    from ..mcp.server import create_server

    n = len(catalog.library_ids())
    if n == 0:
        _no_libraries_warning(catalog, args)
    host: str = args.host
    mcp = create_server(catalog)
    _index_names_soon(mcp)
    app = HttpApp(mcp, catalog, keys, _http_options(args))
    try:
        sock = bind_socket(host, args.port)
    except OSError as exc:
        err(f"cannot listen on {host}:{args.port}: {exc}")
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
        workers=args.workers or DEFAULT_WORKERS,
        reload_interval=args.reload_interval,
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
                "msg": f"docbundle: serving {plural(libraries, 'library', 'libraries')} from "
                f"{app.catalog.root} over streamable HTTP at {url} ({auth})",
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


SERVE = Command(
    "serve",
    help="run the MCP server",
    description="Run the read-only MCP server.",
    run=serve,
    args=(
        *bundle_args(),
        arg("--transport", choices=("stdio", "http"), default="stdio", help="default: %(default)s"),
        arg(
            "--reload-interval",
            type=_non_negative_seconds,
            default=DEFAULT_RELOAD_SECONDS,
            metavar="SECONDS",
            help="look for new builds, libraries and removals this often and serve them without a restart "
            f"(0: never; default: {DEFAULT_RELOAD_SECONDS:g})",
        ),
        arg(
            "--route-libraries",
            type=_route_libraries,
            default=DEFAULT_ROUTE_LIBRARIES,
            metavar="K",
            help="a search without libraryId searches the K libraries the route index ranks best for its "
            f"words (0: no routing, every library in turn within the time budget; 1..{MAX_ROUTE_LIBRARIES}; "
            f"default: {DEFAULT_ROUTE_LIBRARIES})",
        ),
        arg(
            "--max-open",
            type=_positive_count,
            default=DEFAULT_MAX_OPEN,
            metavar="N",
            help="keep at most N bundles open; past it the least recently used is closed and opened again "
            f"(verified) when asked (default: {DEFAULT_MAX_OPEN})",
        ),
        HTTP_OPTIONS,
        arg(
            "--log-level",
            choices=LOG_LEVELS,
            default=None,
            help="default: info over HTTP (JSON lines on stderr, one per request), warning over stdio",
        ),
    ),
)
