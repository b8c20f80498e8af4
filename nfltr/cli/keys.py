# -*- test-case-name: tests.cli.test_keys -*-
"""
C{nfltr accounts ...} and C{nfltr keys ...}: manage a relay's accounts and
API keys in its data directory's database, or in the Redis directory several
relays share, directly (a running relay sees the changes: revocations within
its C{--revocation-poll}, at once for relays subscribed to a Redis
directory).

    nfltr accounts create NAME          creates the database if missing
    nfltr accounts list
    nfltr keys create --account NAME [--label L]
    nfltr keys list [--account NAME]
    nfltr keys revoke KEYID

Each takes C{--data-dir} (default: the relay's), C{--directory URL} (a
Redis URL, L{nfltr.store.parse_redis_url}: then the command runs under
L{twisted.internet.task.react} with L{nfltr.store.RedisStore}), or C{--api
URL --admin-token-file FILE} (a running relay's API:
L{nfltr.cli.api_client}).  C{keys
create} prints the new key once, alone on standard output.  Errors are one
line on standard error, C{nfltr: error: ...}, with exit status 2.

The actions are written once, against L{nfltr.store.IStore}; for SQLite they
run on the synchronous core through L{_Immediate}, whose Deferreds have fired
when they are returned, so no reactor runs (and the tests run the command in
their own process).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

    from nfltr.cli import Subparsers
    from nfltr.store import SQLiteStoreCore

# An action: what a subcommand does with a store (an IStore provider).
Action = Callable[[Any, argparse.Namespace], Coroutine[Any, Any, None]]

USAGE_ERROR = 2


class CommandError(Exception):
    """
    A user-facing error; the message is printed as is.
    """


def register(subparsers: Subparsers) -> None:
    """
    Add the C{accounts} and C{keys} subcommands to C{subparsers}.
    """
    common = store_options()
    _registerAccounts(subparsers, common)
    _registerKeys(subparsers, common)


def store_options() -> argparse.ArgumentParser:
    """
    The options that say where the store is (a parent parser).
    """
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_mutually_exclusive_group()
    where.add_argument(
        "--data-dir", metavar="DIR", default=None,
        help="the relay's data directory (default: as for `nfltr relay`)",
    )
    where.add_argument(
        "--directory", metavar="URL", default=None,
        help="the Redis directory several relays share: redis://HOST:PORT/DB, "
        "rediss://HOST:PORT/DB?ca=FILE or redis+unix:///PATH?db=N (password in the URL "
        "or in NFLTR_REDIS_PASSWORD)",
    )
    where.add_argument(
        "--api", metavar="URL", default=None,
        help="a running relay's admin listener, http://HOST:PORT: manage its store "
        "through its API (with --admin-token-file)",
    )
    common.add_argument(
        "--admin-token-file", metavar="FILE", default=None,
        help="a file holding an admin token (nfltr admin token create), for --api",
    )
    return common


def _registerAccounts(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("accounts", help="create and list accounts")
    commands = parser.add_subparsers(title="commands", dest="action", metavar="ACTION")
    commands.required = True
    create = commands.add_parser("create", parents=[common], help="create an account")
    create.add_argument("name", help="1-32 characters: a-z, 0-9 and '-'")
    create.set_defaults(run=runner(_accountsCreate, create=True))
    listing = commands.add_parser("list", parents=[common], help="list the accounts")
    listing.set_defaults(run=runner(_accountsList))


def _registerKeys(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("keys", help="create, list and revoke API keys")
    commands = parser.add_subparsers(title="commands", dest="action", metavar="ACTION")
    commands.required = True
    create = commands.add_parser(
        "create", parents=[common], help="create an API key and print it (once)"
    )
    create.add_argument("--account", required=True, help="the account the key belongs to")
    create.add_argument("--label", default=None, help="a note on what the key is for")
    create.set_defaults(run=runner(_keysCreate))
    listing = commands.add_parser("list", parents=[common], help="list API keys")
    listing.add_argument("--account", default=None, help="only this account's keys")
    listing.set_defaults(run=runner(_keysList))
    revoke = commands.add_parser(
        "revoke", parents=[common], help="revoke an API key (its links are closed)"
    )
    revoke.add_argument("keyid", metavar="ID", help="the key's id, as `keys list` shows it")
    revoke.set_defaults(run=runner(_keysRevoke))
    addSSH = commands.add_parser(
        "add-ssh", parents=[common],
        help="register an SSH public key for an account (for the relay's SSH listener)",
    )
    addSSH.add_argument("--account", required=True, help="the account the key belongs to")
    addSSH.add_argument("--label", default=None, help="a note (default: the key's comment)")
    addSSH.add_argument("file", metavar="FILE", help="an OpenSSH public key file (.pub), or -")
    addSSH.set_defaults(run=runner(_keysAddSSH))
    listSSH = commands.add_parser("list-ssh", parents=[common], help="list SSH keys")
    listSSH.add_argument("--account", default=None, help="only this account's keys")
    listSSH.set_defaults(run=runner(_keysListSSH))
    removeSSH = commands.add_parser("remove-ssh", parents=[common], help="unregister an SSH key")
    removeSSH.add_argument("fingerprint", metavar="SHA256:...", help="as `keys list-ssh` shows")
    removeSSH.set_defaults(run=runner(_keysRemoveSSH))


def runner(action: Action, create: bool = False) -> Callable[[argparse.Namespace], int]:
    """
    Wrap C{action}: open the store, run it, turn known errors into one line
    on standard error and exit status 2.
    """

    def run(args: argparse.Namespace) -> int:
        import sqlite3  # here: every command imports this module (agents need no SQLite)

        from nfltr.store import StoreError

        try:
            if args.api is not None:
                return _runApi(action, args)
            if args.admin_token_file is not None:
                raise CommandError("--admin-token-file goes with --api")
            if args.directory is not None:
                return _runRedis(args.directory, action, args)
            core = _openStore(args.data_dir, create)
            try:
                _runNow(action(_Immediate(core), args))
            finally:
                core.close()
        except (CommandError, StoreError, sqlite3.Error, OSError) as e:
            return _error(e)
        return 0

    return run


def _error(e: BaseException) -> int:
    print(f"nfltr: error: {e}", file=sys.stderr)
    return USAGE_ERROR


class _Immediate:
    """
    The synchronous SQLite core with L{IStore}'s face: each method runs at
    once and returns a L{Deferred} that has fired.
    """

    def __init__(self, core: SQLiteStoreCore) -> None:
        self._core = core

    def __getattr__(self, name: str) -> Callable[..., Deferred[Any]]:
        from twisted.internet.defer import maybeDeferred

        method = getattr(self._core, name)
        return lambda *args: maybeDeferred(method, *args)


def _runNow(coroutine: Coroutine[Any, Any, None]) -> None:
    """
    Run a coroutine that awaits only fired L{Deferred}s to its end; raise
    what it raised.
    """
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

    outcome: list[Any] = []
    Deferred.fromCoroutine(coroutine).addBoth(outcome.append)
    assert outcome, "an SQLite action waited on something"
    if isinstance(outcome[0], Failure):
        outcome[0].raiseException()


def _runApi(action: Action, args: argparse.Namespace) -> int:
    """
    Run C{action} through a relay's API (L{nfltr.cli.api_client}).
    """
    from nfltr.cli.api_client import ApiError, ApiStore, read_token

    if args.admin_token_file is None:
        raise CommandError("--api needs --admin-token-file FILE (nfltr admin token create)")
    try:
        _runNow(action(ApiStore(args.api, read_token(args.admin_token_file)), args))
    except ApiError as e:
        raise CommandError(str(e)) from None
    return 0


def _runRedis(url: str, action: Action, args: argparse.Namespace) -> int:
    """
    Run C{action} on a L{RedisStore} at C{url}, under the global reactor
    (L{react}: this process runs nothing else).
    """
    from twisted.internet.defer import Deferred
    from twisted.internet.task import react

    from nfltr.store import RedisStore, StoreError, parse_redis_url

    address = parse_redis_url(url)
    status = [USAGE_ERROR]

    async def main(reactor: Any) -> None:
        store = RedisStore(reactor, address)
        try:
            await action(store, args)
            status[0] = 0
        except (CommandError, StoreError, OSError) as e:
            status[0] = _error(e)
        finally:
            await store.close()

    def start(reactor: Any) -> Deferred[None]:
        return Deferred.fromCoroutine(main(reactor))

    try:
        react(start)
    except SystemExit as e:
        if e.code not in (0, None):
            return int(e.code) if isinstance(e.code, int) else 1
    return status[0]


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


async def _accountsCreate(store: Any, args: argparse.Namespace) -> None:
    account = await store.create_account(args.name)
    print(f"created account {account.name}")


async def _accountsList(store: Any, args: argparse.Namespace) -> None:
    rows = [(a.name, utc(a.created_at)) for a in await store.list_accounts()]
    table(("NAME", "CREATED"), rows)


async def _keysCreate(store: Any, args: argparse.Namespace) -> None:
    info, plaintext = await store.create_key(args.account, args.label)
    print(plaintext)
    sys.stdout.flush()
    print(
        f"API key {info.keyid} for account {info.account}: it is shown only this once; "
        "give it to agents and clients with --key or NFLTR_KEY",
        file=sys.stderr,
    )


async def _keysList(store: Any, args: argparse.Namespace) -> None:
    rows = [
        (
            k.keyid, k.account, k.label if k.label is not None else "-", utc(k.created_at),
            utc(k.revoked_at) if k.revoked_at is not None else "-",
        )
        for k in await store.list_keys(args.account)
    ]
    table(("ID", "ACCOUNT", "LABEL", "CREATED", "REVOKED"), rows)


async def _keysRevoke(store: Any, args: argparse.Namespace) -> None:
    info = await store.revoke_key(args.keyid)
    print(f"revoked API key {info.keyid} of account {info.account}")
    when = (
        "at once (they are told through the directory)" if args.directory
        else "at once on the relay that took the request, within their --revocation-poll "
        "(2 s unless set) on others" if args.api
        else "within their --revocation-poll (2 s unless set)"
    )
    print(
        f"relays running on this store end the links and SSH connections that use this key "
        f"{when}",
        file=sys.stderr,
    )


async def _keysAddSSH(store: Any, args: argparse.Namespace) -> None:
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text("ascii")
    except (OSError, UnicodeDecodeError) as e:
        raise CommandError(f"cannot read {args.file}: {e}") from None
    info = await store.add_ssh_key(args.account, text, args.label)
    print(f"added SSH key {info.fingerprint} ({info.algorithm}) for account {info.account}")


async def _keysListSSH(store: Any, args: argparse.Namespace) -> None:
    rows = [
        (k.fingerprint, k.account, k.algorithm, k.label if k.label is not None else "-",
         utc(k.created_at))
        for k in await store.list_ssh_keys(args.account)
    ]
    table(("FINGERPRINT", "ACCOUNT", "TYPE", "LABEL", "CREATED"), rows)


async def _keysRemoveSSH(store: Any, args: argparse.Namespace) -> None:
    info = await store.remove_ssh_key(args.fingerprint)
    print(f"removed SSH key {info.fingerprint} of account {info.account}")


def utc(posix: float) -> str:
    return datetime.fromtimestamp(posix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """
    Print C{rows} under C{header}, in columns separated by two spaces.
    """
    lines = [tuple(header), *(tuple(str(c) for c in row) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
