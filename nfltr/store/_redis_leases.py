# -*- test-case-name: tests.store.test_redis_leases -*-
"""
Name leases in a Redis directory (L{INameLeaseTable}), beside the accounts
and keys of L{nfltr.store.RedisStore}, on its connection and under its
prefix (C{P}):

    P lease:<name>   hash   account -> the account that holds the name;
                            relay:<id> -> 1 for each relay with holders of it

While relays have holders of a name its key lives for the relays' C{ttl}
(renewed by each relay while it has holders); when the last relay releases
it, for the lease time, then Redis deletes it.  A relay that dies without
releasing leaves its mark until the C{ttl} it last set runs out: the lease
outlives it, as it would have outlived its holders.

Each change is one Lua script, so two relays cannot both take a name: the
check of every name and the writes are atomic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import txredisapi
from twisted.internet.defer import Deferred
from zope.interface import implementer

from nfltr.store._model import LeaseTaken, StoreError
from nfltr.store._redis_client import RedisConnection
from nfltr.store.interfaces import INameLeaseTable

# KEYS: lease:<name> for each name.  ARGV: account, relay field, ttl (ms).
_RESERVE = """
for i, key in ipairs(KEYS) do
  local owner = redis.call('HGET', key, 'account')
  if owner and owner ~= ARGV[1] then
    return redis.error_reply('NFLTR leased ' .. (i - 1))
  end
end
for _, key in ipairs(KEYS) do
  if not redis.call('HGET', key, 'account') then
    redis.call('DEL', key)
    redis.call('HSET', key, 'account', ARGV[1])
  end
  redis.call('HSET', key, ARGV[2], '1')
  if redis.call('PTTL', key) < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', key, ARGV[3])
  end
end
return 1
"""

# KEYS: lease:<name>.  ARGV: account, relay field, lease time (ms; 0: none).
_RELEASE = """
if redis.call('HGET', KEYS[1], 'account') ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[2])
if redis.call('HLEN', KEYS[1]) <= 1 then
  if tonumber(ARGV[3]) > 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  else
    redis.call('DEL', KEYS[1])
  end
end
return 1
"""


def _ms(seconds: float) -> int:
    """
    Whole milliseconds, rounded up (a lease never ends early).
    """
    return max(0, math.ceil(seconds * 1000))


@implementer(INameLeaseTable)
class RedisLeaseTable:
    """
    L{INameLeaseTable} in Redis; see the module.
    """

    def __init__(self, redis: RedisConnection, prefix: str) -> None:
        self._redis = redis
        self._prefix = prefix

    def _key(self, name: str) -> str:
        return f"{self._prefix}lease:{name}"

    def reserve(self, names: Sequence[str], account: str, relay: str, ttl: float
                ) -> Deferred[None]:
        """
        See L{INameLeaseTable.reserve}.
        """
        names = list(names)

        async def reserve() -> None:
            if not names:
                return
            try:
                await self._redis.eval("reserve names", _RESERVE,
                                       [self._key(n) for n in names],
                                       [account, f"relay:{relay}", str(max(1, _ms(ttl)))])
            except txredisapi.ResponseError as e:
                what = str(e)
                if what.startswith("NFLTR leased "):
                    raise LeaseTaken(names[int(what.rsplit(" ", 1)[1])]) from None
                raise StoreError(f"unexpected Redis reply: {what}") from None

        return Deferred.fromCoroutine(reserve())

    def release(self, name: str, account: str, relay: str, lease_time: float
                ) -> Deferred[bool]:
        """
        See L{INameLeaseTable.release}.
        """
        d = self._redis.eval("release a name", _RELEASE, [self._key(name)],
                             [account, f"relay:{relay}", str(_ms(lease_time))])
        return d.addCallback(lambda done: done == 1)

    def holder(self, name: str) -> Deferred[str | None]:
        """
        See L{INameLeaseTable.holder}.
        """

        def text(reply: Any) -> str | None:
            return None if reply is None else bytes(reply).decode("utf-8", "replace")

        d = self._redis.execute("read a lease", "HGET", self._key(name), "account")
        return d.addCallback(text)
