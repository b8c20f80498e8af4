# -*- test-case-name: tests.store.test_admin_tokens -*-
"""
Admin tokens (L{nfltr.store._admin}) in the Redis directory, a mixin of
L{nfltr.store.RedisStore}, under its prefix C{P}:

    P admin-token:<id>   hash   label (absent: none), read_only (0/1),
                                digest (SHA-256, hex), created_at, revoked_at
    P admin-tokens       zset   every token id, scored by creation time
"""

from __future__ import annotations

import hmac
from typing import Any

import txredisapi
from twisted.internet.defer import Deferred

from ._admin import (
    DUMMY_TOKEN_HASH,
    AdminTokenInfo,
    UnknownAdminToken,
    hash_admin_token,
    is_tokenid,
    new_admin_token,
    parse_admin_token,
)
from ._model import StoreCorrupt, StoreError, check_label
from ._redis_records import (
    LIST_SCRIPT,
    _fields,
    _optional_text,
    _pairs,
    _text,
    _time,
    digest_field,
    float_text,
)

_ATTEMPTS = 5

# KEYS: admin-token:<id>, admin-tokens.  ARGV: id, digest, created_at, read_only, has label, label
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.error_reply('NFLTR tokenid-taken')
end
redis.call('HSET', KEYS[1], 'digest', ARGV[2], 'created_at', ARGV[3], 'read_only', ARGV[4])
if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'label', ARGV[6]) end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
"""

# KEYS: admin-token:<id>.  ARGV: revoked_at.
_REVOKE = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NFLTR unknown-token')
end
if redis.call('HEXISTS', KEYS[1], 'revoked_at') == 0 then
  redis.call('HSET', KEYS[1], 'revoked_at', ARGV[1])
end
return redis.call('HGETALL', KEYS[1])
"""

def token_info(tokenid: str, reply: Any, key: str) -> tuple[AdminTokenInfo, bytes]:
    """
    An admin token's record and stored digest from an C{HGETALL} of C{key}.

    @raise StoreCorrupt: a field is missing or malformed.
    """
    fields = _fields(reply, key)
    digest = digest_field(fields, key)
    read_only = _text(fields, "read_only", key)
    if read_only not in ("0", "1"):
        raise StoreCorrupt(f"Redis key {key} has a malformed 'read_only'")
    revoked_at = _time(fields, "revoked_at", key) if "revoked_at" in fields else None
    info = AdminTokenInfo(tokenid, _optional_text(fields, "label", key), read_only == "1",
                          _time(fields, "created_at", key), revoked_at)
    return info, digest


class RedisAdminTokens:
    """
    L{nfltr.store.IAdminTokens}' methods; the class they are mixed into
    provides C{_k}, C{_eval}, C{_redis}, C{_reactor} and C{_log}.
    """

    _reactor: Any
    _redis: Any
    _log: Any

    def _k(self, *parts: str) -> str:
        raise NotImplementedError

    def _eval(self, what: str, script: str, keys: list[str], args: list[object]
              ) -> Deferred[Any]:
        raise NotImplementedError

    def create_admin_token(
        self, label: str | None = None, read_only: bool = False,
    ) -> Deferred[tuple[AdminTokenInfo, str]]:
        """
        See L{nfltr.store.IAdminTokens.create_admin_token}.
        """

        async def create() -> tuple[AdminTokenInfo, str]:
            check_label(label)
            created_at = self._reactor.seconds()
            for _ in range(_ATTEMPTS):
                tokenid, plaintext = new_admin_token()
                try:
                    await self._eval(
                        "create an admin token", _CREATE,
                        [f"admin-token:{tokenid}", "admin-tokens"],
                        [tokenid, hash_admin_token(plaintext).hex(), float_text(created_at),
                         "1" if read_only else "0", "0" if label is None else "1",
                         label or ""],
                    )
                except txredisapi.ResponseError as e:
                    if str(e) == "NFLTR tokenid-taken":
                        continue
                    raise StoreError(f"unexpected Redis reply: {e}") from None
                break
            else:  # pragma: no cover - 48 random bits colliding five times in a row
                raise StoreError("could not draw an unused admin token id")
            self._log.info("created admin token {tokenid}", tokenid=tokenid)
            return AdminTokenInfo(tokenid, label, read_only, created_at), plaintext

        return Deferred.fromCoroutine(create())

    def verify_admin_token(self, plaintext: str) -> Deferred[AdminTokenInfo | None]:
        """
        See L{nfltr.store.IAdminTokens.verify_admin_token}.
        """
        tokenid = parse_admin_token(plaintext)
        digest = hash_admin_token(plaintext) if tokenid is not None else DUMMY_TOKEN_HASH
        key = self._k("admin-token:", tokenid or "")

        def check(reply: list[bytes]) -> AdminTokenInfo | None:
            if tokenid is None or not reply:
                hmac.compare_digest(digest, DUMMY_TOKEN_HASH)
                return None
            info, stored = token_info(tokenid, reply, key)
            return info if hmac.compare_digest(digest, stored) else None

        if tokenid is None:
            return Deferred.fromCoroutine(_checked(check))
        return self._redis.execute("verify an admin token", "HGETALL", key).addCallback(check)

    def list_admin_tokens(self) -> Deferred[list[AdminTokenInfo]]:
        """
        See L{nfltr.store.IAdminTokens.list_admin_tokens}.
        """
        prefix = self._k("admin-token:")
        d = self._eval("list admin tokens", LIST_SCRIPT, ["admin-tokens", "accounts"],
                       [prefix, ""])
        return d.addCallback(
            lambda reply: [token_info(i, r, k)[0] for i, r, k in _pairs(reply, prefix)]
        )

    def revoke_admin_token(self, tokenid: str) -> Deferred[AdminTokenInfo]:
        """
        See L{nfltr.store.IAdminTokens.revoke_admin_token}.
        """

        async def revoke() -> AdminTokenInfo:
            if not is_tokenid(tokenid):
                raise UnknownAdminToken(str(tokenid))
            try:
                reply = await self._eval("revoke an admin token", _REVOKE,
                                         [f"admin-token:{tokenid}"],
                                         [float_text(self._reactor.seconds())])
            except txredisapi.ResponseError as e:
                if str(e) == "NFLTR unknown-token":
                    raise UnknownAdminToken(tokenid) from None
                raise StoreError(f"unexpected Redis reply: {e}") from None
            info, _ = token_info(tokenid, reply, self._k("admin-token:", tokenid))
            self._log.info("revoked admin token {tokenid}", tokenid=tokenid)
            return info

        return Deferred.fromCoroutine(revoke())


async def _checked(check: Any) -> AdminTokenInfo | None:
    result: AdminTokenInfo | None = check([])
    return result
