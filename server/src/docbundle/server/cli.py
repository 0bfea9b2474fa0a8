"""``docbundle``: serve documentation bundles over MCP, and search, inspect or verify them from a shell.

Commands: ``serve`` (stdio or streamable HTTP), ``search``, ``info``, ``verify``, ``install``, ``pull``,
``keys`` (API keys for the HTTP transport: ``create``, ``list``, ``revoke``). Each is registered in
``COMMANDS`` (at the end of the module): the ``_add_<command>`` function adding its parser, and its handler.

Every command reads one bundles folder: ``--bundles DIR``, else ``$DOCBUNDLE_BUNDLES``, else the per-user
data folder that ``docbundle-index build`` writes to as well (``docbundle.bundle.userdirs``). The keys
file is ``--keys FILE``, else ``$DOCBUNDLE_KEYS``, else the per-user ``keys.toml``, for ``keys`` and
``serve`` alike. Messages speak to a shell user: errors and next steps in ``words.SHELL`` (commands
and options, no MCP tool names).

Exit codes: 0 success; 1 something failed (a bundle did not verify, a library could not be opened, the
HTTP port could not be bound); 2 usage or configuration error (bad arguments, unknown library, missing
bundles directory, malformed lock file, missing or malformed keys file, HTTP with neither keys nor
``--no-auth``, unknown key id); 141 (128 + SIGPIPE) when the reader of stdout went away (``| head``).

Only ``serve`` imports the MCP SDK, so the other commands start quickly. Logs go to stderr (JSON lines
when serving HTTP); in stdio mode stdout belongs to MCP.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docbundle.bundle.errors import BundleError, BundleNotFoundError
from docbundle.bundle.layout import CURRENT, resolve_bundle
from docbundle.bundle.query import SEARCH_MODES
from docbundle.bundle.userdirs import ENV_BUNDLES, ENV_KEYS, bundles_origin, default_bundles, default_keys

from .catalog import DEFAULT_RELOAD_SECONDS, WARM_TERMS, Catalog, VersionEntry
from .errors import LibraryUnavailableError, LockFileError, ServerError, UnknownLibraryError
from .lockfile import find_lock
from .terminal import printable
from .words import SHELL, plural

if TYPE_CHECKING:
    from .http.app import HttpApp, HttpOptions
    from .keys import KeyStore

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a command whose reader closed the pipe
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8000
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

log = logging.getLogger(__name__)


def _default_bundles() -> Path:
    return default_bundles()


def _version() -> str:
    """The installed distribution's version: its metadata (from pyproject) is the one source."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("docbundle-server")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def _bundles_help() -> str:
    return f"bundles directory (default: ${ENV_BUNDLES}, else the per-user data folder: see `docbundle info`)"


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
    return default_keys()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="docbundle",
        description="Serve prebuilt documentation bundles to AI assistants over MCP (read-only, no network).",
    )
    p.add_argument("--version", action="version", version=f"docbundle {_version()}")
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level (stderr)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add, _run in COMMANDS.values():
        add(sub)
    return p


def _common(
    sp: argparse.ArgumentParser,
    lock_help: str = "lock file pinning content hashes (default: DIR/bundles.lock when it exists)",
) -> None:
    """Options every command reading a bundles directory takes."""
    sp.add_argument("--bundles", type=Path, default=None, metavar="DIR", help=_bundles_help())
    sp.add_argument("--lock", type=Path, default=None, metavar="FILE", help=lock_help)


def _non_negative_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 (never) or a positive number of seconds")
    return value


def _add_serve(sub: Subparsers) -> None:
    s = sub.add_parser("serve", help="run the MCP server", description="Run the read-only MCP server.")
    _common(s)
    s.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default: stdio")
    s.add_argument(
        "--reload-interval",
        type=_non_negative_seconds,
        default=DEFAULT_RELOAD_SECONDS,
        metavar="SECONDS",
        help=f"look for new builds, libraries and removals this often and serve them without a restart "
        f"(0: never; default: {DEFAULT_RELOAD_SECONDS:g})",
    )
    _add_http_options(s.add_argument_group("HTTP transport"))
    s.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=None,
        help="default: info over HTTP (JSON lines on stderr, one per request), warning over stdio",
    )


def _add_http_options(h: argparse._ArgumentGroup) -> None:
    """The options of ``serve`` that apply to HTTP only (``HTTP_ONLY``)."""
    h.add_argument("--host", default=None, help=f"bind address (default: {DEFAULT_HOST})")
    h.add_argument(
        "--port", type=int, default=None, help=f"port (default: {DEFAULT_PORT}; 0 picks a free one)"
    )
    h.add_argument(
        "--keys",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"API keys file (default: ${ENV_KEYS}, else the per-user keys.toml `docbundle keys create` "
        "writes, when it exists); HTTP refuses to start without one unless --no-auth",
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
    q.add_argument(
        "--mode",
        choices=SEARCH_MODES,
        default=None,
        help="hybrid (words and meaning; the default when the library has vectors), semantic (meaning), "
        "fulltext = balanced (most words; the default without vectors), broad (any word), precise (every word)",
    )
    q.add_argument("--limit", type=int, default=5, help="hits (1-20, default 5)")
    q.add_argument("--max-tokens", type=int, default=5000, help="budget for the hits' text (500-50000)")
    q.add_argument("--json", action="store_true", help="print the result as JSON")


def _add_info(sub: Subparsers) -> None:
    i = sub.add_parser(
        "info",
        help="describe libraries",
        description="Describe the installed libraries, and say where they were looked for. Each bundle's "
        "file sizes are checked against its manifest; with LIBRARY, every file's sha256 too.",
    )
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
    v.add_argument("--json", action="store_true", help="print a JSON list, one object per bundle")


def _add_install(sub: Subparsers) -> None:
    n = sub.add_parser(
        "install",
        help="install a release archive (offline)",
        description="Check a release archive against SHA256SUMS, unpack it safely, verify it against its "
        "manifest and the lock file, then point CURRENT at it. Needs no network.",
    )
    n.add_argument(
        "archive", metavar="ARCHIVE", type=Path, nargs="+", help="<libraryId>-<version>-<buildId>.tar.gz ..."
    )
    _common(n, "lock file (default: DIR/bundles.lock)")
    n.add_argument(
        "--sums", type=Path, default=None, metavar="FILE", help="SHA256SUMS (default: beside the archive)"
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
    _common(n, "lock file (default: DIR/bundles.lock)")


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
        help=f"keys file (default: ${ENV_KEYS}, else the per-user keys.toml: {_default_keys()})",
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
        code = COMMANDS[args.command][1](args)
        sys.stdout.flush()  # inside the try: a closed pipe shows up here as often as in print
        return code
    except BrokenPipeError:
        return _reader_gone()
    except UnknownLibraryError as exc:
        if exc.available:
            _err(exc.told(SHELL))
        else:  # nothing installed: say where we looked and how to get a library, not "see docbundle info"
            _err(f"unknown library {exc.library_id!r}: no library is installed" + _where_to_get(args))
        return EXIT_USAGE
    except LibraryUnavailableError as exc:
        _err(exc.told(SHELL))
        return EXIT_FAILED
    except ServerError as exc:
        _err(exc.told(SHELL))
        return EXIT_USAGE
    except (FileNotFoundError, NotADirectoryError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_FAILED


def _reader_gone() -> int:
    """stdout's reader closed the pipe (``docbundle search ... --json | head``): stop quietly.

    Python would print a traceback when it flushes stdout at exit; pointing stdout at /dev/null first
    makes that flush silent.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return EXIT_PIPE


def _install(args: argparse.Namespace) -> int:
    """Install each archive in turn; one that fails does not stop the others (exit 1 if any failed)."""
    from .errors import InstallError
    from .install import install, served_note  # whoosh and tarfile only for this command

    bundles: Path = args.bundles or _default_bundles()
    if args.sums is not None and len(args.archive) > 1:
        sums_dirs = {a.parent.resolve() for a in args.archive}
        if len(sums_dirs) > 1:
            _err(
                "--sums names one SHA256SUMS: give archives of one release folder, or install them one by one"
            )
            return EXIT_USAGE
    failed = 0
    installed = []
    for archive in args.archive:
        if not archive.is_file():
            _err(f"{archive} not found")
            failed += 1
            continue
        try:
            done = install(archive, bundles, sums=args.sums, lock=args.lock)
        except InstallError as exc:
            _err(str(exc))
            failed += 1
            continue
        installed.append(done)
        note = " (already present; CURRENT points at it)" if done.already_present else ""
        print(
            f"installed {done.library}@{done.version} build {done.build_id} "
            f"(content {done.content_hash[:12]}){note} in {bundles}"
        )
    if installed:
        print(served_note(installed), file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def _pull(args: argparse.Namespace) -> int:
    from .errors import InstallError
    from .install import served_note
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
    print(served_note([done]), file=sys.stderr)
    return EXIT_OK


def _err(message: str) -> None:
    # Messages quote what a release, a redirect or a bundle said: no escape sequence reaches the terminal.
    print(f"docbundle: error: {printable(message, 4000, lines=True)}", file=sys.stderr)


def _root(args: argparse.Namespace) -> Path:
    """The bundles folder a command reads: ``--bundles``, else the default (created when missing)."""
    if args.bundles is not None:
        return Path(args.bundles)
    root = _default_bundles()
    # The default folder is this program's own: an absent one is an empty one, not a usage error.
    root.mkdir(parents=True, exist_ok=True)
    return root


def _load(args: argparse.Namespace) -> Catalog:
    root = _root(args)
    return Catalog.load(root, lock=find_lock(root, args.lock))


def _where(root: Path, args: argparse.Namespace) -> str:
    """``/path (the per-user default)``: a bundles folder and why it is the one used."""
    why = "--bundles" if getattr(args, "bundles", None) is not None else bundles_origin()
    return f"{root} ({why})"


def _where_to_get(args: argparse.Namespace) -> str:
    """Where the bundles were looked for, and the commands that put a library there."""
    root = args.bundles if getattr(args, "bundles", None) is not None else _default_bundles()
    lines = [
        f". Looked in {_where(root, args)}; --bundles DIR or ${ENV_BUNDLES} look elsewhere.",
        "Get a library:",
    ]
    if "pull" in COMMANDS:
        lines.append("  docbundle pull --list                      what the project's release offers")
    lines += [
        "  docbundle install ARCHIVE                  a release archive you have (offline)",
        "  docbundle-index build --config FILE        build from a catalogue (it writes to this folder)",
    ]
    return "\n".join(lines)


# -- serve ------------------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    if args.transport != "http":
        given = [f"--{name.replace('_', '-')}" for name in HTTP_ONLY if getattr(args, name) is not None]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            _err(
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
    log.warning("serving no library: none is installed in %s; %s", _where(catalog.root, args), _ways())


def _ways() -> str:
    """``get one with `docbundle pull LIBRARY`, ... or `docbundle-index build --config FILE```."""
    ways = ["docbundle install ARCHIVE", "docbundle-index build --config FILE"]
    if "pull" in COMMANDS:
        ways.insert(0, "docbundle pull LIBRARY")
    return "get one with " + ", ".join(f"`{w}`" for w in ways[:-1]) + f" or `{ways[-1]}`"


def _serve_stdio(args: argparse.Namespace) -> int:
    catalog = _load(args)
    catalog.warm_terms = WARM_TERMS  # a server caches each opened bundle's commonest postings
    n = len(catalog.library_ids())
    if n == 0:
        _no_libraries_warning(catalog, args)
    import anyio

    from .mcp.server import create_server
    from .stdio import exit_when_threads_linger, serve_stdio

    server = create_server(catalog)
    # Semantic search's query encoder loads in a background thread while the client connects (only when
    # a library has vectors and the extra is installed; numpy and the model are not imported otherwise).
    catalog.start_encoder()
    background = None
    if args.reload_interval > 0:
        from .reload import watch_bundles

        server.announce_resource_changes()
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
    default = _default_keys()
    keys_path: Path | None = args.keys or (default if os.environ.get(ENV_KEYS) or default.is_file() else None)
    if args.no_auth and args.keys is not None:
        _err("--keys and --no-auth exclude each other")
        return EXIT_USAGE
    if args.no_auth:
        keys_path = None
    elif keys_path is None:
        _err(
            f"the HTTP transport needs API keys, and there is no keys file at {default}: create a key with "
            "`docbundle keys create --name NAME` (it writes that file, which serve then reads; --keys FILE "
            f"or ${ENV_KEYS} name another), or pass --no-auth to serve without authentication on 127.0.0.1"
        )
        return EXIT_USAGE
    from . import logs
    from .keys import KeyStore

    keys = KeyStore(keys_path) if keys_path is not None else None
    # From here on every line on stderr is JSON (the catalogue's warnings included).
    handler = logs.configure(args.log_level or "info")
    catalog = _load(args)
    catalog.warm_terms = WARM_TERMS  # a server caches each opened bundle's commonest postings
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
        _no_libraries_warning(catalog, args)
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


# -- search -----------------------------------------------------------------------------------------


def _snippet(text: str, width: int = 240) -> str:
    flat = " ".join(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("```"))
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def _search(args: argparse.Namespace) -> int:
    from .docs import Docs
    from .render import hit_title

    with _catalog_quiet():  # a version that cannot be served is said once, by the error below
        catalog = _load(args)
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
        print(f"   {printable(_snippet(h.text), 240)}")
    if result.message:
        print(f"\n{result.message}")
        for step in SHELL.advice(result.next_steps):
            print(f"  - {step}")
    return EXIT_OK


# -- info -------------------------------------------------------------------------------------------


def _info(args: argparse.Namespace) -> int:
    try:
        with _catalog_quiet():
            catalog = _load(args)
    except LockFileError as exc:
        if args.lock is not None:
            raise  # named with --lock: checking against it is what was asked
        # info is how one gets the hash for a new pin: a broken bundles.lock must not block it.
        print(f"docbundle: warning: {printable(str(exc), 600)}; shown without the lock file", file=sys.stderr)
        with _catalog_quiet():
            catalog = Catalog.load(_root(args))
    try:
        with _catalog_quiet():
            return _info_library(args, catalog) if args.library else _info_all(args, catalog)
    finally:
        catalog.close()


@contextlib.contextmanager
def _catalog_quiet() -> Iterator[None]:
    """Silence the catalogue's log lines about bundles that fail to open: the command prints the reasons
    itself, in the user's terms (the level is restored afterwards)."""
    logger = logging.getLogger("docbundle.server.catalog")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _info_all(args: argparse.Namespace, catalog: Catalog) -> int:
    """Every library, its default version checked by size (a stat per file: cheap)."""
    from .docs import Docs

    listed = Docs(catalog).list_libraries()
    by_id = {lib.id: lib for lib in catalog.libraries()}
    summaries = []
    for s in listed.libraries:
        problem = _size_problem(by_id[s.id].default) if s.status != "failed" else None
        summaries.append(s.model_copy(update={"status": "failed", "reason": problem}) if problem else s)
    if args.json:
        print(listed.model_copy(update={"libraries": summaries}).model_dump_json(by_alias=True, indent=2))
        return EXIT_OK
    if not summaries:
        print("no libraries installed" + _where_to_get(args))
        return EXIT_OK
    print(f"{plural(len(summaries), 'library', 'libraries')} in {_where(catalog.root, args)}")
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
    from .docs import Docs

    lib_entry = catalog.library(args.library)
    if any(e.manifest is not None and e.manifest.vectors is not None for e in lib_entry.versions.values()):
        catalog.encoder.get()  # to say whether this install's encoder is the one that made the vectors
    for entry in lib_entry.versions.values():
        problem = _size_problem(entry)
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
    print(f"  from {_where(catalog.root, args)}")
    return EXIT_OK


def _print_vectors(catalog: Catalog, entry: VersionEntry) -> None:
    """The version's semantic vectors: the model that made them, and whether this install can use them."""
    from .libraries import vectors_summary

    summary = vectors_summary(catalog, entry)
    if summary is not None:
        print(f"    vectors: {printable(summary, 400)}")
    else:
        print("    no semantic vectors: searched by keywords")


def _print_safety(entry: VersionEntry, shown: int = 5) -> None:
    """The content-safety findings the build recorded: text a model must read as data."""
    findings = entry.manifest.safety if entry.manifest else []
    if not findings:
        return
    kinds = sorted({printable(f.kind, 40) for f in findings})
    print(
        f"    {plural(len(findings), 'safety finding', 'safety findings')} ({', '.join(kinds)}): "
        "documentation text that may try to steer an AI assistant; it is served as data"
    )
    for f in findings[:shown]:
        where = printable(f.path) + (f" chunk {f.chunk}" if f.chunk is not None else "")
        print(f"      {printable(f.kind, 40)} in {where}: {printable(f.detail)}")
    if len(findings) > shown:
        print(f"      ... and {len(findings) - shown} more (`docbundle-index audit` lists them all)")


def _size_problem(entry: VersionEntry) -> str | None:
    """Why a bundle's files do not match its manifest by size (a stat each), or None."""
    if entry.problem or entry.manifest is None or entry.bundle_path is None:
        return None
    for f in entry.manifest.files:
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
    results: list[dict[str, Any]] = []
    try:
        single = _one_bundle(target)
    except BundleError as exc:
        results.append(_verified(str(target), error=str(exc)))
        return _report_verify(args, results)
    if single is None:
        return _verify_all(args, target, results)
    if args.lock is not None:
        _err("--lock applies to a bundles directory, not to one bundle")
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
        _err(str(exc))
        return EXIT_USAGE
    try:
        entries = catalog.entries()
        if not entries:
            how = "" if args.dir is not None else f" in the default folder ({bundles_origin()}); " + _ways()
            results.append(
                _verified(
                    str(target), error=f"no bundles found (expected <libraryId>/<version>/CURRENT){how}"
                )
            )
        for entry in entries:
            name = f"{entry.library_id}/{entry.version}"
            try:
                with _catalog_quiet():
                    opened = catalog.open_entry(entry)
            except LibraryUnavailableError as exc:
                results.append(_verified(name, entry.build_id, error=exc.reason))
                continue
            m = opened.manifest
            results.append(_verified(name, m.build.build_id, len(m.files)))
    finally:
        catalog.close()
    return _report_verify(args, results)


#: The commands, in the order ``--help`` lists them: the function adding each one's parser, and its
#: handler (which returns the exit code). A command is added here and nowhere else.
COMMANDS: dict[str, tuple[Callable[[Subparsers], None], Callable[[argparse.Namespace], int]]] = {
    "serve": (_add_serve, _serve),
    "search": (_add_search, _search),
    "info": (_add_info, _info),
    "verify": (_add_verify, _verify),
    "install": (_add_install, _install),
    "pull": (_add_pull, _pull),
    "keys": (_add_keys, _keys),
}
