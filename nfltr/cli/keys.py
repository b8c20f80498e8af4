# -*- test-case-name: tests.cli.test_keys -*-
"""
C{nfltr accounts ...} and C{nfltr keys ...}: manage a relay's accounts and
API keys in its data directory's database, directly (a running relay sees
the changes: revocations within its C{--revocation-poll}).

    nfltr accounts create NAME          creates the database if missing
    nfltr accounts list
    nfltr keys create --account NAME [--label L]
    nfltr keys list [--account NAME]
    nfltr keys revoke KEYID

Each takes C{--data-dir} (default: the relay's).  C{keys create} prints the
new key once, alone on standard output.  Errors are one line on standard
error, C{nfltr: error: ...}, with exit status 2.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nfltr.cli import Subparsers
    from nfltr.store import SQLiteStoreCore

USAGE_ERROR = 2


class CommandError(Exception):
    """
    A user-facing error; the message is printed as is.
    """


def register(subparsers: Subparsers) -> None:
    """
    Add the C{accounts} and C{keys} subcommands to C{subparsers}.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir", metavar="DIR", default=None,
        help="the relay's data directory (default: as for `nfltr relay`)",
    )
    _registerAccounts(subparsers, common)
    _registerKeys(subparsers, common)


def _registerAccounts(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("accounts", help="create and list accounts")
    commands = parser.add_subparsers(title="commands", dest="action", metavar="ACTION")
    commands.required = True
    create = commands.add_parser("create", parents=[common], help="create an account")
    create.add_argument("name", help="1-32 characters: a-z, 0-9 and '-'")
    create.set_defaults(run=_runner(_accountsCreate, create=True))
    listing = commands.add_parser("list", parents=[common], help="list the accounts")
    listing.set_defaults(run=_runner(_accountsList))


def _registerKeys(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("keys", help="create, list and revoke API keys")
    commands = parser.add_subparsers(title="commands", dest="action", metavar="ACTION")
    commands.required = True
    create = commands.add_parser(
        "create", parents=[common], help="create an API key and print it (once)"
    )
    create.add_argument("--account", required=True, help="the account the key belongs to")
    create.add_argument("--label", default=None, help="a note on what the key is for")
    create.set_defaults(run=_runner(_keysCreate))
    listing = commands.add_parser("list", parents=[common], help="list API keys")
    listing.add_argument("--account", default=None, help="only this account's keys")
    listing.set_defaults(run=_runner(_keysList))
    revoke = commands.add_parser(
        "revoke", parents=[common], help="revoke an API key (its links are closed)"
    )
    revoke.add_argument("keyid", metavar="ID", help="the key's id, as `keys list` shows it")
    revoke.set_defaults(run=_runner(_keysRevoke))
    addSSH = commands.add_parser(
        "add-ssh", parents=[common],
        help="register an SSH public key for an account (for the relay's SSH listener)",
    )
    addSSH.add_argument("--account", required=True, help="the account the key belongs to")
    addSSH.add_argument("--label", default=None, help="a note (default: the key's comment)")
    addSSH.add_argument("file", metavar="FILE", help="an OpenSSH public key file (.pub), or -")
    addSSH.set_defaults(run=_runner(_keysAddSSH))
    listSSH = commands.add_parser("list-ssh", parents=[common], help="list SSH keys")
    listSSH.add_argument("--account", default=None, help="only this account's keys")
    listSSH.set_defaults(run=_runner(_keysListSSH))
    removeSSH = commands.add_parser("remove-ssh", parents=[common], help="unregister an SSH key")
    removeSSH.add_argument("fingerprint", metavar="SHA256:...", help="as `keys list-ssh` shows")
    removeSSH.set_defaults(run=_runner(_keysRemoveSSH))


def _runner(
    action: Callable[[SQLiteStoreCore, argparse.Namespace], None], create: bool = False
) -> Callable[[argparse.Namespace], int]:
    """
    Wrap C{action}: open the store, run it, turn known errors into one line
    on standard error and exit status 2.
    """

    def run(args: argparse.Namespace) -> int:
        from nfltr.store import StoreError

        try:
            core = _openStore(args.data_dir, create)
            try:
                action(core, args)
            finally:
                core.close()
        except (CommandError, StoreError, sqlite3.Error, OSError) as e:
            print(f"nfltr: error: {e}", file=sys.stderr)
            return USAGE_ERROR
        return 0

    return run


def _openStore(dataDir: str | None, create: bool) -> SQLiteStoreCore:
    from nfltr.relay.config import database_path, default_data_dir
    from nfltr.store import SQLiteStoreCore

    directory = Path(dataDir).expanduser() if dataDir else default_data_dir()
    path = database_path(directory)
    if not create and not path.exists():
        raise CommandError(
            f"no relay database at {path}: create an account first "
            "(nfltr accounts create NAME), or pass the relay's --data-dir"
        )
    return SQLiteStoreCore(path)


def _accountsCreate(core: SQLiteStoreCore, args: argparse.Namespace) -> None:
    account = core.create_account(args.name)
    print(f"created account {account.name}")


def _accountsList(core: SQLiteStoreCore, args: argparse.Namespace) -> None:
    rows = [(a.name, _time(a.created_at)) for a in core.list_accounts()]
    _table(("NAME", "CREATED"), rows)


def _keysCreate(core: SQLiteStoreCore, args: argparse.Namespace) -> None:
    info, plaintext = core.create_key(args.account, args.label)
    print(plaintext)
    sys.stdout.flush()
    print(
        f"API key {info.keyid} for account {info.account}: it is shown only this once; "
        "give it to agents and clients with --key or NFLTR_KEY",
        file=sys.stderr,
    )


def _keysList(core: SQLiteStoreCore, args: argparse.Namespace) -> None:
    rows = [
        (
            k.keyid, k.account, k.label if k.label is not None else "-", _time(k.created_at),
            _time(k.revoked_at) if k.revoked_at is not None else "-",
        )
        for k in core.list_keys(args.account)
    ]
    _table(("ID", "ACCOUNT", "LABEL", "CREATED", "REVOKED"), rows)


def _keysRevoke(core: SQLiteStoreCore, args: argparse.Namespace) -> None:
    info = core.revoke_key(args.keyid)
    print(f"revoked API key {info.keyid} of account {info.account}")
    print(
        "running relays close its links at their next revocation check", file=sys.stderr
    )


def _keysAddSSH(core: SQLiteStoreCore, args: argparse.Namespace) -> None:
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text("ascii")
    except (OSError, UnicodeDecodeError) as e:
        raise CommandError(f"cannot read {args.file}: {e}") from None
    info = core.add_ssh_key(args.account, text, args.label)
    print(f"added SSH key {info.fingerprint} ({info.algorithm}) for account {info.account}")


def _keysListSSH(core: SQLiteStoreCore, args: argparse.Namespace) -> None:
    rows = [
        (k.fingerprint, k.account, k.algorithm, k.label if k.label is not None else "-",
         _time(k.created_at))
        for k in core.list_ssh_keys(args.account)
    ]
    _table(("FINGERPRINT", "ACCOUNT", "TYPE", "LABEL", "CREATED"), rows)


def _keysRemoveSSH(core: SQLiteStoreCore, args: argparse.Namespace) -> None:
    info = core.remove_ssh_key(args.fingerprint)
    print(f"removed SSH key {info.fingerprint} of account {info.account}")


def _time(posix: float) -> str:
    return datetime.fromtimestamp(posix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """
    Print C{rows} under C{header}, in columns separated by two spaces.
    """
    lines = [tuple(header), *(tuple(str(c) for c in row) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
