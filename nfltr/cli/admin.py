# -*- test-case-name: tests.cli.test_admin -*-
"""
C{nfltr admin token ...}: the admin tokens of the relay's API and dashboard
(L{nfltr.relay.api}), kept as digests in the relay's store, so they work
with SQLite and with a Redis directory alike.

    nfltr admin token create [--read-only] [--label L]   prints the token once
    nfltr admin token list
    nfltr admin token revoke ID

Where the store is: as for C{nfltr keys} (C{--data-dir}, C{--directory} or
C{--api} with C{--admin-token-file}), with the same errors.  A read-only
token reads everything and changes nothing: give that one to dashboards.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from nfltr.cli.keys import runner, store_options, table, utc

if TYPE_CHECKING:
    from nfltr.cli import Subparsers


def register(subparsers: Subparsers) -> None:
    """
    Add the C{admin} command to C{subparsers}.
    """
    common = store_options()
    parser = subparsers.add_parser("admin", help="admin tokens of the relay's API and dashboard")
    commands = parser.add_subparsers(title="commands", dest="what", metavar="WHAT")
    commands.required = True
    token = commands.add_parser("token", help="create, list and revoke admin tokens")
    actions = token.add_subparsers(title="commands", dest="action", metavar="ACTION")
    actions.required = True
    create = actions.add_parser("create", parents=[common],
                                help="create an admin token and print it (once)")
    create.add_argument("--read-only", action="store_true",
                        help="it may read, not change (for dashboards and monitoring)")
    create.add_argument("--label", default=None, help="a note on what the token is for")
    create.set_defaults(run=runner(_create, create=True))
    listing = actions.add_parser("list", parents=[common], help="list the admin tokens")
    listing.set_defaults(run=runner(_list))
    revoke = actions.add_parser("revoke", parents=[common], help="revoke an admin token")
    revoke.add_argument("tokenid", metavar="ID", help="the token's id, as `list` shows it")
    revoke.set_defaults(run=runner(_revoke))


async def _create(store: Any, args: argparse.Namespace) -> None:
    info, plaintext = await store.create_admin_token(args.label, args.read_only)
    print(plaintext)
    sys.stdout.flush()
    kind = "read-only admin token" if info.read_only else "admin token"
    print(f"{kind} {info.tokenid}: it is shown only this once; give it to the API as "
          "Authorization: Bearer TOKEN, or log in to the dashboard with it", file=sys.stderr)


async def _list(store: Any, args: argparse.Namespace) -> None:
    rows = [
        (t.tokenid, "read-only" if t.read_only else "read-write",
         t.label if t.label is not None else "-", utc(t.created_at),
         utc(t.revoked_at) if t.revoked_at is not None else "-")
        for t in await store.list_admin_tokens()
    ]
    table(("ID", "ACCESS", "LABEL", "CREATED", "REVOKED"), rows)


async def _revoke(store: Any, args: argparse.Namespace) -> None:
    info = await store.revoke_admin_token(args.tokenid)
    print(f"revoked admin token {info.tokenid}")
