# -*- test-case-name: tests.store.test_sqlite -*-
"""
Accounts and API keys in an embedded SQLite database.

L{SQLiteStoreCore} is synchronous: the C{nfltr keys} and C{nfltr accounts}
commands use it directly.  L{SQLiteStore} wraps it for the relay: every method
runs the core in a thread pool and returns a L{Deferred}, so the reactor never
waits on the disk.

Several processes may open one file (the relay and the CLI, or several
relays): the database runs in WAL mode with a busy timeout, every write is one
C{BEGIN IMMEDIATE} transaction, and a revision counter bumped by every
revocation lets a running relay find out, by polling L{revision}, which keys
another process revoked.
"""

from __future__ import annotations

import hmac
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorFromThreads
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.threadpool import ThreadPool
from zope.interface import implementer

from nfltr.store._model import (
    DUMMY_HASH,
    AccountExists,
    AccountInfo,
    KeyInfo,
    SchemaTooNew,
    StoreError,
    UnknownAccount,
    UnknownKey,
    check_account_name,
    check_label,
    hash_key,
    is_keyid,
    new_key,
    parse_key,
)
from nfltr.store._sqlite_admin import ADMIN_TOKENS_MIGRATION as _ADMIN
from nfltr.store._sqlite_admin import AdminTokensCore, AdminTokensDeferred
from nfltr.store._ssh import InvalidSSHKey, SSHKeyInfo, parse_ssh_public_key
from nfltr.store.interfaces import IAdminTokens, IStore

_T = TypeVar("_T")

DEFAULT_BUSY_TIMEOUT = 5.0
_KEYID_ATTEMPTS = 5
_PRIVATE_MODE = 0o600
_PRIVATE_DIR_MODE = 0o700

# _MIGRATIONS[n] brings a database from schema version n to n + 1.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        "CREATE TABLE schema_version (version INTEGER NOT NULL)",
        """CREATE TABLE accounts (
            name TEXT PRIMARY KEY,
            created_at REAL NOT NULL
        )""",
        """CREATE TABLE api_keys (
            keyid TEXT PRIMARY KEY,
            account TEXT NOT NULL REFERENCES accounts (name),
            label TEXT,
            key_hash BLOB NOT NULL,
            created_at REAL NOT NULL,
            revoked_at REAL,
            revoked_revision INTEGER
        )""",
        "CREATE INDEX api_keys_by_account ON api_keys (account)",
        "CREATE INDEX api_keys_by_revocation ON api_keys (revoked_revision)"
        " WHERE revoked_revision IS NOT NULL",
        "CREATE TABLE revision (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL)",
        "INSERT INTO revision (id, value) VALUES (1, 0)",
    ),
    (
        """CREATE TABLE ssh_keys (
            fingerprint TEXT PRIMARY KEY,
            account TEXT NOT NULL REFERENCES accounts (name),
            algorithm TEXT NOT NULL,
            key TEXT NOT NULL,
            label TEXT,
            created_at REAL NOT NULL
        )""",
        "CREATE INDEX ssh_keys_by_account ON ssh_keys (account)",
    ),
    _ADMIN,
)
SCHEMA_VERSION = len(_MIGRATIONS)

_KEY_COLUMNS = "keyid, account, label, created_at, revoked_at"


def _key_info(row: tuple[str, str, str | None, float, float | None]) -> KeyInfo:
    keyid, account, label, created_at, revoked_at = row
    return KeyInfo(keyid, account, label, created_at, revoked_at)


class SQLiteStoreCore(AdminTokensCore):
    """
    The synchronous store.  Safe to share between threads: one lock
    serialises the use of its single connection.

    @ivar path: the database file.
    """

    _log = Logger()

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        now: Callable[[], float] = time.time,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> None:
        """
        Open the database at C{path}, creating it (mode 0600, in a directory
        made 0700 if missing) and its schema on first use.

        @param now: returns the POSIX time recorded on new accounts, keys and
            revocations.
        @param busy_timeout: seconds to wait for another process's write lock.

        @raise SchemaTooNew: the file was written by a newer nfltr.
        """
        self.path = os.fspath(path)
        self._now = now
        self._lock = threading.Lock()
        _create_private_file(self.path)
        self._db = sqlite3.connect(
            self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            self._configure(busy_timeout)
            self._migrate()
        except BaseException:
            self._db.close()
            raise

    def _configure(self, busy_timeout: float) -> None:
        db = self._db
        db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        (mode,) = db.execute("PRAGMA journal_mode = WAL").fetchone()
        if mode != "wal":
            self._log.warn(
                "SQLite store {path} cannot use WAL mode (got {mode}); continuing",
                path=self.path,
                mode=mode,
            )
        db.execute("PRAGMA synchronous = FULL")
        db.execute("PRAGMA foreign_keys = ON")

    def _migrate(self) -> None:
        with self._transaction(write=True) as db:
            found = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
            ).fetchone()
            version = 0
            if found is not None:
                (version,) = db.execute("SELECT version FROM schema_version").fetchone()
            if version > SCHEMA_VERSION:
                raise SchemaTooNew(version, SCHEMA_VERSION)
            if version == SCHEMA_VERSION:
                return
            for step in _MIGRATIONS[version:]:
                for statement in step:
                    db.execute(statement)
            db.execute("DELETE FROM schema_version")
            db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            self._log.info(
                "SQLite store {path} at schema version {version}",
                path=self.path,
                version=SCHEMA_VERSION,
            )

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """
        Run the body in one transaction under the lock; a write transaction
        takes SQLite's write lock at once (C{BEGIN IMMEDIATE}), so it waits
        for other writers up front instead of failing half way.
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        """
        Close the database.  The core is unusable afterwards.
        """
        with self._lock:
            self._db.close()

    def create_account(self, name: str) -> AccountInfo:
        """
        Create an account.

        @raise InvalidName: C{name} is malformed.
        @raise AccountExists: an account has this name already.
        """
        check_account_name(name)
        account = AccountInfo(name, self._now())
        with self._transaction(write=True) as db:
            try:
                db.execute(
                    "INSERT INTO accounts (name, created_at) VALUES (?, ?)",
                    (account.name, account.created_at),
                )
            except sqlite3.IntegrityError:
                raise AccountExists(name) from None
        self._log.info("created account {account}", account=name)
        return account

    def list_accounts(self) -> list[AccountInfo]:
        """
        All accounts, by name.
        """
        with self._transaction(write=False) as db:
            rows = db.execute("SELECT name, created_at FROM accounts ORDER BY name").fetchall()
        return [AccountInfo(name, created_at) for name, created_at in rows]

    def create_key(self, account: str, label: str | None = None) -> tuple[KeyInfo, str]:
        """
        Create an API key for C{account}.

        @return: the key's record and its plaintext, which exists nowhere else
            afterwards: hand it to the operator once.
        @raise InvalidName: C{account} is malformed.
        @raise InvalidLabel: C{label} is too long or not printable.
        @raise UnknownAccount: no account has this name.
        """
        check_account_name(account)
        check_label(label)
        created_at = self._now()
        with self._transaction(write=True) as db:
            _require_account(db, account)
            for _ in range(_KEYID_ATTEMPTS):
                keyid, plaintext = new_key()
                try:
                    db.execute(
                        "INSERT INTO api_keys (keyid, account, label, key_hash, created_at)"
                        " VALUES (?, ?, ?, ?, ?)",
                        (keyid, account, label, hash_key(plaintext), created_at),
                    )
                except sqlite3.IntegrityError:
                    continue  # a key id drawn twice: draw again
                break
            else:  # pragma: no cover - 48 random bits colliding five times in a row
                raise StoreError("could not draw an unused key id")
        self._log.info(
            "created API key {keyid} for account {account}", keyid=keyid, account=account
        )
        return KeyInfo(keyid, account, label, created_at), plaintext

    def verify_key(self, plaintext: str) -> KeyInfo | None:
        """
        Find the key that C{plaintext} is.

        @return: its record (check L{KeyInfo.revoked}!), or L{None} if
            C{plaintext} is malformed, names no stored key, or has a wrong
            secret.  An unknown key id costs the same hash comparison as a
            wrong secret.
        """
        keyid = parse_key(plaintext)
        if keyid is None:
            return None
        digest = hash_key(plaintext)
        with self._transaction(write=False) as db:
            row = db.execute(
                f"SELECT {_KEY_COLUMNS}, key_hash FROM api_keys WHERE keyid = ?", (keyid,)
            ).fetchone()
        if row is None:
            hmac.compare_digest(digest, DUMMY_HASH)
            return None
        if not hmac.compare_digest(digest, row[-1]):
            return None
        return _key_info(row[:-1])

    def list_keys(self, account: str | None = None) -> list[KeyInfo]:
        """
        The keys of C{account}, or of every account, oldest first, revoked
        ones included.

        @raise InvalidName: C{account} is malformed.
        @raise UnknownAccount: no account has this name.
        """
        with self._transaction(write=False) as db:
            if account is None:
                rows = db.execute(
                    f"SELECT {_KEY_COLUMNS} FROM api_keys ORDER BY created_at, keyid"
                ).fetchall()
            else:
                check_account_name(account)
                _require_account(db, account)
                rows = db.execute(
                    f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE account = ?"
                    " ORDER BY created_at, keyid",
                    (account,),
                ).fetchall()
        return [_key_info(row) for row in rows]

    def revoke_key(self, keyid: str) -> KeyInfo:
        """
        Revoke a key and bump the L{revision}.  Revoking a revoked key changes
        nothing and returns its record.

        @raise UnknownKey: no key has this id.
        """
        if not is_keyid(keyid):
            raise UnknownKey(str(keyid))
        with self._transaction(write=True) as db:
            row = db.execute(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE keyid = ?", (keyid,))
            found = row.fetchone()
            if found is None:
                raise UnknownKey(keyid)
            key = _key_info(found)
            if key.revoked:
                return key
            db.execute("UPDATE revision SET value = value + 1 WHERE id = 1")
            (revision,) = db.execute("SELECT value FROM revision WHERE id = 1").fetchone()
            revoked_at = self._now()
            db.execute(
                "UPDATE api_keys SET revoked_at = ?, revoked_revision = ? WHERE keyid = ?",
                (revoked_at, revision, keyid),
            )
        self._log.info(
            "revoked API key {keyid} of account {account}", keyid=keyid, account=key.account
        )
        return KeyInfo(key.keyid, key.account, key.label, key.created_at, revoked_at)

    def add_ssh_key(self, account: str, line: str, label: str | None = None) -> SSHKeyInfo:
        """
        Register an SSH public key (an OpenSSH line) for C{account}; its
        comment is the label unless one is given.

        @raise InvalidSSHKey: not an accepted key.
        @raise UnknownAccount: no account has this name.
        @raise StoreError: the key is registered already (to any account).
        """
        check_account_name(account)
        key = parse_ssh_public_key(line)
        label = label if label is not None else key.comment
        check_label(label)
        info = SSHKeyInfo(key.fingerprint, account, key.algorithm, label, self._now())
        with self._transaction(write=True) as db:
            _require_account(db, account)
            try:
                db.execute(
                    "INSERT INTO ssh_keys (fingerprint, account, algorithm, key, label,"
                    " created_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (info.fingerprint, account, info.algorithm, key.line, label,
                     info.created_at),
                )
            except sqlite3.IntegrityError:
                raise StoreError(f"SSH key {key.fingerprint} is registered already") from None
        self._log.info("added SSH key {fingerprint} for account {account}",
                       fingerprint=key.fingerprint, account=account)
        return info

    def list_ssh_keys(self, account: str | None = None) -> list[SSHKeyInfo]:
        """
        The SSH keys of C{account}, or of every account, oldest first.
        """
        query = "SELECT fingerprint, account, algorithm, label, created_at FROM ssh_keys"
        with self._transaction(write=False) as db:
            if account is None:
                rows = db.execute(query + " ORDER BY created_at").fetchall()
            else:
                check_account_name(account)
                _require_account(db, account)
                rows = db.execute(query + " WHERE account = ? ORDER BY created_at",
                                  (account,)).fetchall()
        return [SSHKeyInfo(*row) for row in rows]

    def remove_ssh_key(self, fingerprint: str) -> SSHKeyInfo:
        """
        Unregister an SSH key.

        @raise UnknownKey: no key has this fingerprint.
        """
        with self._transaction(write=True) as db:
            row = db.execute(
                "SELECT fingerprint, account, algorithm, label, created_at FROM ssh_keys"
                " WHERE fingerprint = ?", (fingerprint,),
            ).fetchone()
            if row is None:
                raise UnknownKey(fingerprint)
            db.execute("DELETE FROM ssh_keys WHERE fingerprint = ?", (fingerprint,))
        info = SSHKeyInfo(*row)
        self._log.info("removed SSH key {fingerprint} of account {account}",
                       fingerprint=fingerprint, account=info.account)
        return info

    def ssh_key_account(self, line: str) -> str | None:
        """
        The account an SSH public key (C{TYPE BASE64}) is registered to, if
        it is, exactly (the same key, not just the same fingerprint).
        """
        try:
            key = parse_ssh_public_key(line)
        except InvalidSSHKey:
            return None
        with self._transaction(write=False) as db:
            row = db.execute("SELECT account, key FROM ssh_keys WHERE fingerprint = ?",
                             (key.fingerprint,)).fetchone()
        if row is None or row[1] != key.line:
            return None
        return str(row[0])

    def revision(self) -> int:
        """
        The change counter: starts at 0 and grows by one with every
        revocation, whichever process made it.
        """
        with self._transaction(write=False) as db:
            (value,) = db.execute("SELECT value FROM revision WHERE id = 1").fetchone()
        return int(value)

    def revoked_since(self, revision: int) -> list[str]:
        """
        The ids of the keys revoked after L{revision} returned C{revision}, in
        the order of their revocation.
        """
        with self._transaction(write=False) as db:
            rows = db.execute(
                "SELECT keyid FROM api_keys WHERE revoked_revision > ? ORDER BY revoked_revision",
                (revision,),
            ).fetchall()
        return [keyid for (keyid,) in rows]


def _require_account(db: sqlite3.Connection, account: str) -> None:
    if db.execute("SELECT 1 FROM accounts WHERE name = ?", (account,)).fetchone() is None:
        raise UnknownAccount(account)


def _create_private_file(path: str) -> None:
    """
    Create C{path} with mode 0600 unless it exists, and its directory with
    mode 0700 unless that exists.  SQLite gives the C{-wal} and C{-shm} files
    it creates next to it the same mode as the database file.
    """
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, mode=_PRIVATE_DIR_MODE, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, _PRIVATE_MODE)
    try:
        mode = os.fstat(fd).st_mode & 0o777
    finally:
        os.close(fd)
    if mode & 0o077:
        SQLiteStoreCore._log.warn(
            "SQLite store {path} is readable by others (mode {mode:o}); chmod 600 it",
            path=path,
            mode=mode,
        )


@implementer(IStore, IAdminTokens)
class SQLiteStore(AdminTokensDeferred):
    """
    L{SQLiteStoreCore} behind L{Deferred}s: each call runs in C{threadpool}
    and its result (or error: the same typed L{StoreError}s) is delivered in
    the reactor thread.  The database is opened by the first call, in the
    pool.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        reactor: IReactorFromThreads,
        threadpool: ThreadPool,
    ) -> None:
        """
        @param reactor: delivers results back to the reactor thread; if it
            also provides C{seconds()} (any real reactor, or a
            L{twisted.internet.task.Clock}-based fake), that is the time
            recorded in the database.
        @param threadpool: a started thread pool to run SQLite in.
        """
        self._path = os.fspath(path)
        self._reactor = reactor
        self._threadpool = threadpool
        seconds = getattr(reactor, "seconds", None)
        self._now: Callable[[], float] = seconds if callable(seconds) else time.time
        self._core: SQLiteStoreCore | None = None
        self._open_lock = threading.Lock()

    def _get_core(self) -> SQLiteStoreCore:
        with self._open_lock:
            if self._core is None:
                self._core = SQLiteStoreCore(self._path, now=self._now)
            return self._core

    def _defer(self, call: Callable[[SQLiteStoreCore], _T]) -> Deferred[_T]:
        return deferToThreadPool(self._reactor, self._threadpool, lambda: call(self._get_core()))

    def create_account(self, name: str) -> Deferred[AccountInfo]:
        """
        See L{SQLiteStoreCore.create_account}.
        """
        return self._defer(lambda core: core.create_account(name))

    def list_accounts(self) -> Deferred[list[AccountInfo]]:
        """
        See L{SQLiteStoreCore.list_accounts}.
        """
        return self._defer(lambda core: core.list_accounts())

    def create_key(self, account: str, label: str | None = None) -> Deferred[tuple[KeyInfo, str]]:
        """
        See L{SQLiteStoreCore.create_key}.
        """
        return self._defer(lambda core: core.create_key(account, label))

    def verify_key(self, plaintext: str) -> Deferred[KeyInfo | None]:
        """
        See L{SQLiteStoreCore.verify_key}.
        """
        return self._defer(lambda core: core.verify_key(plaintext))

    def list_keys(self, account: str | None = None) -> Deferred[list[KeyInfo]]:
        """
        See L{SQLiteStoreCore.list_keys}.
        """
        return self._defer(lambda core: core.list_keys(account))

    def revoke_key(self, keyid: str) -> Deferred[KeyInfo]:
        """
        See L{SQLiteStoreCore.revoke_key}.
        """
        return self._defer(lambda core: core.revoke_key(keyid))

    def add_ssh_key(self, account: str, line: str, label: str | None = None
                    ) -> Deferred[SSHKeyInfo]:
        """
        See L{SQLiteStoreCore.add_ssh_key}.
        """
        return self._defer(lambda core: core.add_ssh_key(account, line, label))

    def list_ssh_keys(self, account: str | None = None) -> Deferred[list[SSHKeyInfo]]:
        """
        See L{SQLiteStoreCore.list_ssh_keys}.
        """
        return self._defer(lambda core: core.list_ssh_keys(account))

    def remove_ssh_key(self, fingerprint: str) -> Deferred[SSHKeyInfo]:
        """
        See L{SQLiteStoreCore.remove_ssh_key}.
        """
        return self._defer(lambda core: core.remove_ssh_key(fingerprint))

    def ssh_key_account(self, line: str) -> Deferred[str | None]:
        """
        See L{SQLiteStoreCore.ssh_key_account}.
        """
        return self._defer(lambda core: core.ssh_key_account(line))

    def revision(self) -> Deferred[int]:
        """
        See L{SQLiteStoreCore.revision}.
        """
        return self._defer(lambda core: core.revision())

    def revoked_since(self, revision: int) -> Deferred[list[str]]:
        """
        See L{SQLiteStoreCore.revoked_since}.
        """
        return self._defer(lambda core: core.revoked_since(revision))

    def close(self) -> Deferred[None]:
        """
        Close the database, if a call opened it (a later call opens it
        again).
        """

        def close() -> None:
            with self._open_lock:
                if self._core is not None:
                    self._core.close()
                    self._core = None

        return deferToThreadPool(self._reactor, self._threadpool, close)
