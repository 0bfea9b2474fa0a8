"""``docbundle keys``: create, list and revoke the API keys of the HTTP transport.

The keys file is ``--keys FILE``, else ``$DOCBUNDLE_KEYS``, else the per-user ``keys.toml`` (the one
``serve`` reads by default). A key's secret is printed once, at creation, and never stored.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from docbundle.bundle.userdirs import ENV_KEYS, default_keys
from docbundle.common.clitable import Arg, Command, arg

from .common import EXIT_OK


def _keys_file() -> Arg:
    """The --keys option of every keys action."""
    return arg(
        "--keys",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"keys file (default: ${ENV_KEYS}, else the per-user keys.toml: {default_keys()})",
    )


def create(args: argparse.Namespace) -> int:
    """Run ``keys create``: the key on stdout, once; what it is on stderr."""
    from ..keys import create_key, parse_expiry

    path: Path = args.keys or default_keys()
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


def revoke(args: argparse.Namespace) -> int:
    """Run ``keys revoke``."""
    from ..keys import revoke_key

    record, already = revoke_key(args.keys or default_keys(), args.key_id)
    state = "was already revoked" if already else "revoked"
    print(f"{record.id} ({record.name}) {state}; a running server refuses it within a second")
    return EXIT_OK


def list_keys(args: argparse.Namespace) -> int:
    """Run ``keys list`` (ids, names and dates; never a secret)."""
    from ..keys import load_keys

    path: Path = args.keys or default_keys()
    now = datetime.now(UTC)
    rows: list[dict[str, str | None]] = [
        {
            "id": k.id,
            "name": k.name,
            "status": k.status(now),
            "created": k.created.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "expires": k.expires.isoformat() if k.expires else None,
        }
        for k in load_keys(path).values()
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


KEYS = Command(
    "keys",
    help="manage API keys for the HTTP transport",
    description="Create, list and revoke the API keys `docbundle serve --transport http --keys FILE` "
    "accepts. The file stores only a salted scrypt hash of each key's secret.",
    actions=(
        Command(
            "create",
            help="create a key and print it once",
            description="Create a key; prints it once.",
            run=create,
            args=(
                arg("--name", required=True, help="who or what the key is for (shown by keys list)"),
                arg(
                    "--expires",
                    metavar="DATE",
                    default=None,
                    help="last day (UTC) the key works: YYYY-MM-DD, or a number of days such as 90d "
                    "(default: never)",
                ),
                _keys_file(),
            ),
        ),
        Command(
            "list",
            help="list keys (never their secrets)",
            description="List the keys.",
            run=list_keys,
            args=(_keys_file(), arg("--json", action="store_true", help="print JSON")),
        ),
        Command(
            "revoke",
            help="revoke a key",
            description="Revoke a key; a running server refuses it within a second.",
            run=revoke,
            args=(arg("key_id", metavar="ID", help="the key's id (the part before the dot)"), _keys_file()),
        ),
    ),
)
