"""``docbundle``: serve documentation bundles over MCP, and search, inspect or verify them from a shell.

Commands: ``serve`` (stdio or streamable HTTP), ``search``, ``info``, ``verify``.

Exit codes: 0 success; 1 something failed (a bundle did not verify, a library could not be opened, the
HTTP port could not be bound); 2 usage or configuration error (bad arguments, unknown library, missing
bundles directory, malformed lock file).

Only ``serve`` imports the MCP SDK, so ``search``, ``info`` and ``verify`` start quickly. Logs go to
stderr; in stdio mode stdout belongs to MCP.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from docbundle.bundle.errors import BundleError
from docbundle.bundle.layout import CURRENT
from docbundle.bundle.manifest import MANIFEST_NAME

from .catalog import Catalog, find_lock
from .errors import LibraryUnavailableError, LockFileError, ServerError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
ENV_BUNDLES = "DOCBUNDLE_BUNDLES"
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")

log = logging.getLogger("docbundle.server")


def _default_bundles() -> Path:
    return Path(os.environ.get(ENV_BUNDLES) or "bundles")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="docbundle",
        description="Serve prebuilt documentation bundles to AI assistants over MCP (read-only, no network).",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level (stderr)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp: argparse.ArgumentParser) -> None:
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

    s = sub.add_parser("serve", help="run the MCP server", description="Run the read-only MCP server.")
    common(s)
    s.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default: stdio")
    s.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default: 127.0.0.1)")
    s.add_argument("--port", type=int, default=8000, help="HTTP port (default: 8000; 0 picks a free one)")

    q = sub.add_parser("search", help="search one library", description="Search one library's bundle.")
    common(q)
    q.add_argument("library", metavar="LIBRARY", help="library id")
    q.add_argument("query", metavar="QUERY", help="what to search for")
    q.add_argument("--version", dest="doc_version", default=None, help="docs version (default: latest)")
    q.add_argument("--mode", choices=("balanced", "broad", "precise"), default="balanced")
    q.add_argument("--limit", type=int, default=5, help="hits (1-20, default 5)")
    q.add_argument("--max-tokens", type=int, default=5000, help="budget for the hits' text (500-50000)")
    q.add_argument("--json", action="store_true", help="print the search_documents result as JSON")

    i = sub.add_parser("info", help="describe libraries", description="Describe the installed libraries.")
    common(i)
    i.add_argument("library", metavar="LIBRARY", nargs="?", help="one library's versions and details")
    i.add_argument("--json", action="store_true", help="print JSON")

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
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``docbundle`` command."""
    args = _parser().parse_args(argv)
    # Before the MCP SDK is imported: MCPServer() configures root logging at INFO unless a handler exists.
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
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
        return _verify(args)
    except LibraryUnavailableError as exc:
        _err(str(exc))
        return EXIT_FAILED
    except (ServerError, FileNotFoundError, NotADirectoryError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_FAILED


def _err(message: str) -> None:
    print(f"docbundle: error: {message}", file=sys.stderr)


def _load(args: argparse.Namespace) -> Catalog:
    root: Path = args.bundles or _default_bundles()
    return Catalog.load(root, lock=find_lock(root, args.lock))


# -- serve ------------------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    catalog = _load(args)
    n = len(catalog.library_ids())
    if n == 0:
        log.warning("no library bundles under %s; build some with docbundle-index build", catalog.root)
    from .app import bind_socket, create_server, http_server

    server = create_server(catalog)
    try:
        if args.transport == "stdio":
            print(
                f"docbundle: serving {n} libraries from {catalog.root} over stdio",
                file=sys.stderr,
                flush=True,
            )
            server.run("stdio")
            return EXIT_OK
        host: str = args.host
        try:
            sock = bind_socket(host, args.port)
        except OSError as exc:
            _err(f"cannot listen on {host}:{args.port}: {exc}")
            return EXIT_FAILED
        port = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
        if host not in LOOPBACK:
            log.warning(
                "listening on %s: the HTTP transport has no authentication yet; keep it on loopback", host
            )
        print(
            f"docbundle: serving {n} libraries from {catalog.root} over streamable HTTP at "
            f"http://{shown}:{port}/mcp (unauthenticated)",
            file=sys.stderr,
            flush=True,
        )
        http_server(server, host).run(sockets=[sock])
        return EXIT_OK
    except KeyboardInterrupt:
        # Ctrl-C (or SIGINT from a supervisor) is how a server is meant to stop.
        return EXIT_OK
    finally:
        catalog.close()


# -- search -----------------------------------------------------------------------------------------


def _snippet(text: str, width: int = 240) -> str:
    flat = " ".join(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("```"))
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def _search(args: argparse.Namespace) -> int:
    from .service import Docs, hit_title

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
    from .service import Docs

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


# -- verify -----------------------------------------------------------------------------------------


def _verify(args: argparse.Namespace) -> int:
    from docbundle.bundle.layout import current_bundle
    from docbundle.bundle.reader import open_bundle

    target: Path = args.dir or _default_bundles()
    single: Path | None = None
    if (target / MANIFEST_NAME).is_file():
        single = target
    elif (target / CURRENT).is_file():
        try:
            single = current_bundle(target)
        except BundleError as exc:
            print(f"FAIL {target}: {exc}")
            return EXIT_FAILED
    if single is not None:
        if args.lock is not None:
            _err("--lock applies to a bundles directory, not to one bundle")
            return EXIT_USAGE
        try:
            bundle = open_bundle(single, use_mmap=False)
        except BundleError as exc:
            print(f"FAIL {single}: {exc}")
            return EXIT_FAILED
        m = bundle.manifest
        bundle.close()
        print(f"OK   {m.library.id}/{m.version.name}/{m.build.build_id} ({len(m.files)} files verified)")
        return EXIT_OK
    try:
        catalog = Catalog.load(target, lock=find_lock(target, args.lock))
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
