# -*- test-case-name: tests.store.test_redis_presence -*-
"""
Presence in a Redis directory (L{IPresenceTable}), beside the accounts,
keys and leases of L{nfltr.store.RedisStore}, on its connection and under
its prefix (C{P}):

    P presence:<kind>:<name>   hash   replica -> the replica that wrote it;
                                      the caller's fields beside it

Each key carries the TTL its replica set (C{PEXPIRE}); the replica rewrites
it while it holds what it says, so a dead replica's records run out by
themselves.  A write or a removal is one Lua script: two replicas cannot
both hold one record, and a replica removes only its own.
"""

from __future__ import annotations

import math
from typing import Any

import txredisapi
from twisted.internet.defer import Deferred, fail
from zope.interface import implementer

from nfltr.store._model import StoreError
from nfltr.store._redis_client import RedisConnection
from nfltr.store.interfaces import IPresenceTable

#: Fields of one record, at most (the caller's and the replica's).
MAX_FIELDS = 16
#: Bytes of one field's name or value, at most: a longer one is refused
#: when written and ignored when read (another program wrote it).
MAX_FIELD = 4096

# KEYS: presence:<kind>:<name>.  ARGV: replica, ttl (ms), take (1/0), then field, value...
_ANNOUNCE = """
local holder = redis.call('HGET', KEYS[1], 'replica')
if holder and holder ~= ARGV[1] and ARGV[3] ~= '1' then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'replica', ARGV[1])
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

# KEYS: presence:<kind>:<name>.  ARGV: replica.
_WITHDRAW = """
if redis.call('HGET', KEYS[1], 'replica') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
"""


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def _text(value: Any) -> str | None:
    if not isinstance(value, bytes) or len(value) > MAX_FIELD:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def parse_record(reply: Any) -> dict[str, str] | None:
    """
    The fields of an C{HGETALL} reply, or L{None} for none.

    @raise StoreError: the reply is not a record nfltr wrote (odd length,
        not text, too long, too many fields, no replica).
    """
    if reply is None or reply == []:
        return None
    if not isinstance(reply, list) or len(reply) % 2 or len(reply) > 2 * (MAX_FIELDS + 1):
        raise StoreError("a presence record is not a map of nfltr's fields")
    fields: dict[str, str] = {}
    for raw_key, raw_value in zip(reply[::2], reply[1::2], strict=True):
        key, value = _text(raw_key), _text(raw_value)
        if key is None or value is None:
            raise StoreError("a presence record holds a field that is not short UTF-8 text")
        fields[key] = value
    if not fields.get("replica"):
        raise StoreError("a presence record names no replica")
    return fields


@implementer(IPresenceTable)
class RedisPresenceTable:
    """
    L{IPresenceTable} in Redis; see the module.
    """

    def __init__(self, redis: RedisConnection, prefix: str) -> None:
        self._redis = redis
        self._prefix = prefix

    def _key(self, kind: str, name: str) -> str:
        return f"{self._prefix}presence:{kind}:{name}"

    def announce(self, kind: str, name: str, fields: dict[str, str], ttl: float,
                 replica: str, take: bool) -> Deferred[bool]:
        """
        See L{IPresenceTable.announce}.
        """
        if len(fields) > MAX_FIELDS or any(
            len(k.encode()) > MAX_FIELD or len(v.encode()) > MAX_FIELD or k == "replica"
            for k, v in fields.items()
        ):
            return fail(StoreError(f"presence record {kind}:{name}: too many or too long fields"))
        args: list[object] = [replica, str(_ms(ttl)), "1" if take else "0"]
        for key, value in fields.items():
            args += [key, value]
        d = self._redis.eval("announce presence", _ANNOUNCE, [self._key(kind, name)], args)
        return d.addCallback(lambda done: done == 1)

    def withdraw(self, kind: str, name: str, replica: str) -> Deferred[bool]:
        """
        See L{IPresenceTable.withdraw}.
        """
        d = self._redis.eval("withdraw presence", _WITHDRAW, [self._key(kind, name)], [replica])
        return d.addCallback(lambda done: done == 1)

    def lookup(self, kind: str, name: str) -> Deferred[dict[str, str] | None]:
        """
        See L{IPresenceTable.lookup}.
        """

        async def lookup() -> dict[str, str] | None:
            try:
                reply = await self._redis.execute("read presence", "HGETALL",
                                                  self._key(kind, name))
            except txredisapi.ResponseError as e:
                raise StoreError(f"unexpected Redis reply: {e}") from None
            return parse_record(reply)

        return Deferred.fromCoroutine(lookup())
