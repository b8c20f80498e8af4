# -*- test-case-name: tests.store.test_admin_tokens -*-
"""
Admin tokens (L{nfltr.store._admin}) in the SQLite store: the table
C{admin_tokens} (schema version 3) and L{IAdminTokens}' methods, as mixins
of L{nfltr.store._sqlite.SQLiteStoreCore} (synchronous) and
L{nfltr.store._sqlite.SQLiteStore} (in its thread pool).
"""

from __future__ import annotations

import hmac
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from ._admin import (
    DUMMY_TOKEN_HASH,
    AdminTokenInfo,
    UnknownAdminToken,
    hash_admin_token,
    is_tokenid,
    new_admin_token,
    parse_admin_token,
)
from ._model import StoreError, check_label

_T = TypeVar("_T")
_ATTEMPTS = 5

#: The migration that adds the table (appended to the store's migrations).
ADMIN_TOKENS_MIGRATION: tuple[str, ...] = (
    """CREATE TABLE admin_tokens (
        tokenid TEXT PRIMARY KEY,
        label TEXT,
        read_only INTEGER NOT NULL,
        token_hash BLOB NOT NULL,
        created_at REAL NOT NULL,
        revoked_at REAL
    )""",
)

_COLUMNS = "tokenid, label, read_only, created_at, revoked_at"


def _info(row: tuple[Any, ...]) -> AdminTokenInfo:
    tokenid, label, read_only, created_at, revoked_at = row
    return AdminTokenInfo(tokenid, label, bool(read_only), created_at, revoked_at)


class AdminTokensCore:
    """
    The synchronous methods; the class they are mixed into provides
    C{_transaction} and C{_now}.
    """

    _log = Logger()
    _now: Callable[[], float]

    def _transaction(self, *, write: bool) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def create_admin_token(
        self, label: str | None = None, read_only: bool = False,
    ) -> tuple[AdminTokenInfo, str]:
        """
        See L{nfltr.store.IAdminTokens.create_admin_token}.
        """
        check_label(label)
        created_at = self._now()
        with self._transaction(write=True) as db:
            for _ in range(_ATTEMPTS):
                tokenid, plaintext = new_admin_token()
                try:
                    db.execute(
                        "INSERT INTO admin_tokens (tokenid, label, read_only, token_hash,"
                        " created_at) VALUES (?, ?, ?, ?, ?)",
                        (tokenid, label, int(read_only), hash_admin_token(plaintext),
                         created_at),
                    )
                except sqlite3.IntegrityError:
                    continue
                break
            else:  # pragma: no cover - 48 random bits colliding five times in a row
                raise StoreError("could not draw an unused admin token id")
        self._log.info("created admin token {tokenid}", tokenid=tokenid)
        return AdminTokenInfo(tokenid, label, read_only, created_at), plaintext

    def verify_admin_token(self, plaintext: str) -> AdminTokenInfo | None:
        """
        See L{nfltr.store.IAdminTokens.verify_admin_token}.
        """
        tokenid = parse_admin_token(plaintext)
        if tokenid is None:
            return None
        digest = hash_admin_token(plaintext)
        with self._transaction(write=False) as db:
            row = db.execute(
                f"SELECT {_COLUMNS}, token_hash FROM admin_tokens WHERE tokenid = ?", (tokenid,)
            ).fetchone()
        if row is None:
            hmac.compare_digest(digest, DUMMY_TOKEN_HASH)
            return None
        if not hmac.compare_digest(digest, row[-1]):
            return None
        return _info(row[:-1])

    def list_admin_tokens(self) -> list[AdminTokenInfo]:
        """
        See L{nfltr.store.IAdminTokens.list_admin_tokens}.
        """
        with self._transaction(write=False) as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM admin_tokens ORDER BY created_at, tokenid"
            ).fetchall()
        return [_info(row) for row in rows]

    def revoke_admin_token(self, tokenid: str) -> AdminTokenInfo:
        """
        See L{nfltr.store.IAdminTokens.revoke_admin_token}.
        """
        if not is_tokenid(tokenid):
            raise UnknownAdminToken(str(tokenid))
        with self._transaction(write=True) as db:
            found = db.execute(
                f"SELECT {_COLUMNS} FROM admin_tokens WHERE tokenid = ?", (tokenid,)
            ).fetchone()
            if found is None:
                raise UnknownAdminToken(tokenid)
            info = _info(found)
            if info.revoked:
                return info
            revoked_at = self._now()
            db.execute("UPDATE admin_tokens SET revoked_at = ? WHERE tokenid = ?",
                       (revoked_at, tokenid))
        self._log.info("revoked admin token {tokenid}", tokenid=tokenid)
        return AdminTokenInfo(info.tokenid, info.label, info.read_only, info.created_at,
                              revoked_at)


class AdminTokensDeferred:
    """
    The same methods behind L{Deferred}s; the class they are mixed into
    provides C{_defer} (a call on its core, in its thread pool).
    """

    def _defer(self, call: Callable[[Any], _T]) -> Deferred[_T]:
        raise NotImplementedError

    def create_admin_token(
        self, label: str | None = None, read_only: bool = False,
    ) -> Deferred[tuple[AdminTokenInfo, str]]:
        """
        See L{AdminTokensCore.create_admin_token}.
        """
        return self._defer(lambda core: core.create_admin_token(label, read_only))

    def verify_admin_token(self, plaintext: str) -> Deferred[AdminTokenInfo | None]:
        """
        See L{AdminTokensCore.verify_admin_token}.
        """
        return self._defer(lambda core: core.verify_admin_token(plaintext))

    def list_admin_tokens(self) -> Deferred[list[AdminTokenInfo]]:
        """
        See L{AdminTokensCore.list_admin_tokens}.
        """
        return self._defer(lambda core: core.list_admin_tokens())

    def revoke_admin_token(self, tokenid: str) -> Deferred[AdminTokenInfo]:
        """
        See L{AdminTokensCore.revoke_admin_token}.
        """
        return self._defer(lambda core: core.revoke_admin_token(tokenid))
