# -*- test-case-name: tests.relay.cluster.test_presence,tests.relay.cluster.test_groups -*-
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

A load-balancing group's record (the caller's fields name a C{group}) is
held by every replica that holds a member, each with one more field:

    member:<replica>   <deadline>[ <state>] (Redis time, ms since the
                       epoch): the replica holds a member until then (it
                       rewrites it with every refresh); the caller's
                       C{state} field, if any, follows it (a group's
                       record has no C{state} field of its own)

A replica that writes a group's record with the same C{group} and
C{account} as the one there joins it (the other fields are the last
writer's; C{replica} names the last writer, so a replica older than groups
routes to one member); one that writes anything else over it, with
C{take}, replaces every member (a refresh without C{take} then finds its
member gone: L{False}).  A removal takes one member out (the record goes
with the last).  A read leaves out the members whose deadline passed (a
replica that died) and answers no record when none is left; deadlines are
Redis's clock, so replicas' clocks need not agree.  At most
L{MAX_MEMBERS} replicas hold members of one name: a write beyond that
changes nothing (and answers L{True}: the replica's own visitors reach its
members; no other replica's do).  A record written before groups (no
C{group}, no C{member:} field) reads as before.
"""

from __future__ import annotations

import math
from typing import Any

import txredisapi
from twisted.internet.defer import Deferred, fail
from zope.interface import implementer

from nfltr.store._model import StoreError
from nfltr.store._redis_client import RedisConnection
from nfltr.store.interfaces import PRESENCE_MEMBER as MEMBER
from nfltr.store.interfaces import IPresenceTable

#: Fields of one record, at most (the caller's and the replica's).
MAX_FIELDS = 16
#: Bytes of one field's name or value, at most: a longer one is refused
#: when written and ignored when read (another program wrote it).
MAX_FIELD = 4096

#: Replicas that may hold members of one group's record, at most (a member field each, under
#: L{MAX_FIELDS} with the record's own fields).
MAX_MEMBERS = 8

# Sets `now` to Redis's time (ms); lets an older Redis (before 5) write after reading it.
_NOW = """
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function live(value) local d = tonumber(string.match(value, '^%d+')) return d and d > now end
"""

# KEYS: presence:<kind>:<name>.  ARGV: replica, ttl (ms), take (1/0), max members, then
# field, value...
_ANNOUNCE = _NOW + """
local replica, ttl, take = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local group, account, state = nil, nil, ''
for i = 5, #ARGV, 2 do
  if ARGV[i] == 'group' then group = ARGV[i + 1] elseif ARGV[i] == 'account' then
    account = ARGV[i + 1] elseif ARGV[i] == 'state' then state = ' ' .. ARGV[i + 1] end
end
local holder = redis.call('HGET', KEYS[1], 'replica')
local joins = group and holder and redis.call('HGET', KEYS[1], 'group') == group
  and redis.call('HGET', KEYS[1], 'account') == account
local mine = 'member:' .. replica
if joins then
  local fields = redis.call('HGETALL', KEYS[1])
  local others, gone = 0, {}
  for i = 1, #fields, 2 do
    local f = fields[i]
    if string.sub(f, 1, 7) ~= 'member:' then
      if f ~= 'replica' then gone[#gone + 1] = f end
    elseif not live(fields[i + 1]) then gone[#gone + 1] = f
    elseif f ~= mine then others = others + 1 end
  end
  if others >= tonumber(ARGV[4]) and not redis.call('HGET', KEYS[1], mine) then
    return 1  -- full: this replica's members serve its own visitors only
  end
  for _, f in ipairs(gone) do redis.call('HDEL', KEYS[1], f) end
else
  if holder and holder ~= replica and not take then return 0 end
  if holder and holder == replica and not take and group
    and not redis.call('HGET', KEYS[1], mine) then return 0 end
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], 'replica', replica)
for i = 5, #ARGV, 2 do
  if not (group and ARGV[i] == 'state') then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
if group then redis.call('HSET', KEYS[1], mine, tostring(now + ttl) .. state) end
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
"""

# KEYS: presence:<kind>:<name>.  ARGV: replica.
_WITHDRAW = _NOW + """
local holder = redis.call('HGET', KEYS[1], 'replica')
if not holder then return 0 end
if not redis.call('HGET', KEYS[1], 'group') then
  if holder ~= ARGV[1] then return 0 end
  redis.call('DEL', KEYS[1])
  return 1
end
if redis.call('HDEL', KEYS[1], 'member:' .. ARGV[1]) == 0 then return 0 end
local fields = redis.call('HGETALL', KEYS[1])
local left = nil
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 7) == 'member:' and live(fields[i + 1]) then
    left = string.sub(fields[i], 8) end
end
if not left then redis.call('DEL', KEYS[1]) elseif holder == ARGV[1] then
  redis.call('HSET', KEYS[1], 'replica', left) end
return 1
"""

# KEYS: presence:<kind>:<name>.  The record's fields, a group's members whose deadline passed
# left out; none for a group with none left.
_LOOKUP = _NOW + """
local fields = redis.call('HGETALL', KEYS[1])
local out, group, members = {}, false, 0
for i = 1, #fields, 2 do
  local f, v = fields[i], fields[i + 1]
  if f == 'group' then group = true end
  if string.sub(f, 1, 7) ~= 'member:' then
    out[#out + 1] = f out[#out + 1] = v
  elseif live(v) then
    out[#out + 1] = f out[#out + 1] = v members = members + 1
  end
end
if group and members == 0 then return {} end
return out
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
            or k.startswith(MEMBER)
            for k, v in fields.items()
        ):
            return fail(StoreError(f"presence record {kind}:{name}: too many or too long fields"))
        args: list[object] = [replica, str(_ms(ttl)), "1" if take else "0", str(MAX_MEMBERS)]
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
                reply = await self._redis.eval("read presence", _LOOKUP,
                                               [self._key(kind, name)], [])
            except txredisapi.ResponseError as e:
                raise StoreError(f"unexpected Redis reply: {e}") from None
            return parse_record(reply)

        return Deferred.fromCoroutine(lookup())
