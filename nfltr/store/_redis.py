# -*- test-case-name: tests.store.test_redis -*-
"""
Accounts, API keys and SSH keys in Redis: the directory several relays share.

The same records and errors as L{nfltr.store.SQLiteStore}, under one key
prefix (L{DEFAULT_PREFIX}, written C{P} below):

    P accounts               hash    account name -> creation time
    P key:<keyid>            hash    account, label (absent: none), digest
                                     (SHA-256 of the key, hex), created_at,
                                     revoked_at and revoked_revision once revoked
    P keys                   zset    every key id, scored by creation time
    P account-keys:<name>    zset    an account's key ids, likewise
    P revision               string  the revision counter (absent: 0)
    P revoked                zset    revoked key ids, scored by their revision
    P ssh:<fingerprint>      hash    account, algorithm, key (TYPE BASE64),
                                     label (absent: none), created_at
    P ssh-removed            zset    removed SSH key fingerprints, scored by
                                     the revision of their last removal
    P ssh-keys               zset    every fingerprint, by creation time
    P account-ssh:<name>     zset    an account's fingerprints, likewise
    P lease:<name>           hash    a name's lease (L{lease_table},
                                     L{nfltr.store._redis_leases})
    P presence:<kind>:<name> hash    who holds an agent or share, where a
                                     replica listens (L{presence_table},
                                     L{nfltr.store._redis_presence})
    P admin-token:<id>       hash    an admin token (L{nfltr.store._redis_admin})
    P admin-tokens           zset    every admin token id, by creation time

A sorted set with equal scores orders its members as text, so "by creation
time, then by id" is one C{ZRANGE}.  Every change touching several keys is
one Lua script (atomic on the server); a revocation also publishes the key
id on the channel C{P revoked} (L{REVOKED_CHANNEL}), and an SSH key's
removal bumps the revision too and publishes its fingerprint on
C{P ssh-removed} (L{SSH_REMOVED_CHANNEL}), for the relays that subscribed
(L{RedisStore.subscribe_revocations}).  Scripts reach keys they
find on their way (an account's sets), so the store wants one Redis server
(or a replicated primary), not Redis Cluster.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any, NoReturn

import txredisapi
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from zope.interface import implementer

from nfltr.store._command_times import CommandTimes
from nfltr.store._model import (
    DUMMY_HASH,
    AccountExists,
    AccountInfo,
    KeyInfo,
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
from nfltr.store._redis_admin import RedisAdminTokens
from nfltr.store._redis_client import RedisConnection
from nfltr.store._redis_leases import RedisLeaseTable
from nfltr.store._redis_presence import RedisPresenceTable
from nfltr.store._redis_records import (
    LIST_SCRIPT as _LIST,
)
from nfltr.store._redis_records import (
    account_list,
    float_text,
    key_info,
    key_list,
    ssh_info,
    ssh_list,
)
from nfltr.store._redis_subscriber import Listened, RevocationSubscription
from nfltr.store._redis_url import (
    DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_PREFIX,
    REVOKED_CHANNEL,
    SSH_REMOVED_CHANNEL,
    RedisAddress,
)
from nfltr.store._ssh import InvalidSSHKey, SSHKeyInfo, is_fingerprint, parse_ssh_public_key
from nfltr.store.interfaces import (
    IAdminTokens,
    INameLeaseTable,
    IPresenceTable,
    IRevocationFeed,
    IRevocationSubscription,
    ISSHKeyRemovals,
    IStore,
)

_KEYID_ATTEMPTS = 5

_CREATE_ACCOUNT = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return redis.error_reply('NFLTR account-exists')
end
return 1
"""

# KEYS: accounts, key:<id>, keys, account-keys:<name>
# ARGV: account, keyid, digest, created_at, has label (1/0), label
_CREATE_KEY = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return redis.error_reply('NFLTR unknown-account')
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return redis.error_reply('NFLTR keyid-taken')
end
redis.call('HSET', KEYS[2], 'account', ARGV[1], 'digest', ARGV[3], 'created_at', ARGV[4])
if ARGV[5] == '1' then redis.call('HSET', KEYS[2], 'label', ARGV[6]) end
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[2])
return 1
"""

# KEYS: key:<id>, revision, revoked.  ARGV: keyid, revoked_at, channel.
_REVOKE_KEY = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NFLTR unknown-key')
end
if redis.call('HEXISTS', KEYS[1], 'revoked_at') == 0 then
  local revision = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'revoked_at', ARGV[2], 'revoked_revision', revision)
  redis.call('ZADD', KEYS[3], revision, ARGV[1])
  redis.call('PUBLISH', ARGV[3], ARGV[1])
end
return redis.call('HGETALL', KEYS[1])
"""

# KEYS: accounts, ssh:<fp>, ssh-keys, account-ssh:<name>
# ARGV: account, fingerprint, algorithm, key, created_at, has label, label
_ADD_SSH = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return redis.error_reply('NFLTR unknown-account')
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return redis.error_reply('NFLTR ssh-key-exists')
end
redis.call('HSET', KEYS[2], 'account', ARGV[1], 'algorithm', ARGV[3], 'key', ARGV[4],
           'created_at', ARGV[5])
if ARGV[6] == '1' then redis.call('HSET', KEYS[2], 'label', ARGV[7]) end
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[2])
return 1
"""

# KEYS: ssh:<fp>, ssh-keys, revision, ssh-removed.
# ARGV: fingerprint, prefix of account-ssh:<name>, channel.
_REMOVE_SSH = """
local record = redis.call('HGETALL', KEYS[1])
if #record == 0 then return redis.error_reply('NFLTR unknown-key') end
local account = redis.call('HGET', KEYS[1], 'account')
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if account then redis.call('ZREM', ARGV[2] .. account, ARGV[1]) end
local revision = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[4], revision, ARGV[1])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return record
"""


@implementer(IStore, IRevocationFeed, ISSHKeyRemovals, IAdminTokens)
class RedisStore(RedisAdminTokens):
    """
    L{IStore} over Redis, through txredisapi.

    @ivar prefix: the text every key name starts with.
    @ivar channel: where revocations are published (C{prefix + "revoked"}).
    @ivar removedChannel: where SSH key removals are published (C{prefix +
        "ssh-removed"}).
    """

    _log = Logger()

    def __init__(
        self,
        reactor: Any,
        address: RedisAddress,
        *,
        prefix: str = DEFAULT_PREFIX,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        command_timeout: float = DEFAULT_COMMAND_TIMEOUT,
    ) -> None:
        """
        Start connecting to C{address} (calls made meanwhile wait for the
        connection, within C{command_timeout}).

        @param reactor: the reactor (the global one: see
            L{nfltr.store._redis_client}); its C{seconds()} is the time
            recorded on new records.
        @param prefix: the start of every key name (and of the channel name:
            channels are not per database, so two directories in one server
            need two prefixes).
        @param connect_timeout: seconds for one connection attempt.
        @param command_timeout: seconds after which a call fails with
            L{nfltr.store.StoreUnavailable}.
        @raise StoreError: C{rediss} with an unusable CA file.
        """
        self.prefix = prefix
        self.channel = prefix + REVOKED_CHANNEL
        self.removedChannel = prefix + SSH_REMOVED_CHANNEL
        self._reactor = reactor
        self._address = address
        self._timeouts = (connect_timeout, command_timeout)
        #: How long its calls took (for the relay's metrics).
        self.commandTimes = CommandTimes()
        self._redis = RedisConnection(reactor, address, connect_timeout=connect_timeout,
                                      command_timeout=command_timeout)
        self._redis.times = self.commandTimes
        self._subscriptions: set[RevocationSubscription] = set()

    def _k(self, *parts: str) -> str:
        return self.prefix + "".join(parts)

    def _eval(self, what: str, script: str, keys: list[str], args: list[object]
              ) -> Deferred[Any]:
        return self._redis.eval(what, script, [self._k(k) for k in keys], args)

    def create_account(self, name: str) -> Deferred[AccountInfo]:
        """
        See L{IStore.create_account}.
        """

        async def create() -> AccountInfo:
            check_account_name(name)
            account = AccountInfo(name, self._reactor.seconds())
            try:
                await self._eval("create an account", _CREATE_ACCOUNT, ["accounts"],
                                 [name, float_text(account.created_at)])
            except txredisapi.ResponseError as e:
                _raise_nfltr(e, name)
            self._log.info("created account {account}", account=name)
            return account

        return Deferred.fromCoroutine(create())

    def list_accounts(self) -> Deferred[list[AccountInfo]]:
        """
        See L{IStore.list_accounts}.
        """
        d = self._redis.execute("list accounts", "HGETALL", self._k("accounts"))
        return d.addCallback(account_list, self._k("accounts"))

    def create_key(self, account: str, label: str | None = None) -> Deferred[tuple[KeyInfo, str]]:
        """
        See L{IStore.create_key}.
        """

        async def create() -> tuple[KeyInfo, str]:
            check_account_name(account)
            check_label(label)
            created_at = self._reactor.seconds()
            for _ in range(_KEYID_ATTEMPTS):
                keyid, plaintext = new_key()
                try:
                    await self._eval(
                        "create an API key", _CREATE_KEY,
                        ["accounts", f"key:{keyid}", "keys", f"account-keys:{account}"],
                        [account, keyid, hash_key(plaintext).hex(), float_text(created_at),
                         "0" if label is None else "1", label or ""],
                    )
                except txredisapi.ResponseError as e:
                    if str(e) == "NFLTR keyid-taken":
                        continue  # a key id drawn twice: draw again
                    _raise_nfltr(e, account)
                break
            else:  # pragma: no cover - 48 random bits colliding five times in a row
                raise StoreError("could not draw an unused key id")
            self._log.info("created API key {keyid} for account {account}",
                           keyid=keyid, account=account)
            return KeyInfo(keyid, account, label, created_at), plaintext

        return Deferred.fromCoroutine(create())

    def verify_key(self, plaintext: str) -> Deferred[KeyInfo | None]:
        """
        See L{IStore.verify_key}.
        """
        keyid = parse_key(plaintext)
        if keyid is None:
            return Deferred.fromCoroutine(_none())
        digest = hash_key(plaintext)
        key = self._k("key:", keyid)

        def check(reply: list[bytes]) -> KeyInfo | None:
            if not reply:
                hmac.compare_digest(digest, DUMMY_HASH)
                return None
            info, stored = key_info(keyid, reply, key)
            if not hmac.compare_digest(digest, stored):
                return None
            return info

        return self._redis.execute("verify an API key", "HGETALL", key).addCallback(check)

    def list_keys(self, account: str | None = None) -> Deferred[list[KeyInfo]]:
        """
        See L{IStore.list_keys}.
        """

        async def listing() -> list[KeyInfo]:
            index = "keys" if account is None else f"account-keys:{check_account_name(account)}"
            try:
                reply = await self._eval("list API keys", _LIST, [index, "accounts"],
                                         [self._k("key:"), account or ""])
            except txredisapi.ResponseError as e:
                _raise_nfltr(e, account or "")
            return key_list(reply, self._k("key:"))

        return Deferred.fromCoroutine(listing())

    def revoke_key(self, keyid: str) -> Deferred[KeyInfo]:
        """
        See L{IStore.revoke_key}; the key id is also published on
        L{channel}.
        """

        async def revoke() -> KeyInfo:
            if not is_keyid(keyid):
                raise UnknownKey(str(keyid))
            try:
                reply = await self._eval(
                    "revoke an API key", _REVOKE_KEY, [f"key:{keyid}", "revision", "revoked"],
                    [keyid, float_text(self._reactor.seconds()), self.channel],
                )
            except txredisapi.ResponseError as e:
                _raise_nfltr(e, keyid)
            info, _ = key_info(keyid, reply, self._k("key:", keyid))
            self._log.info("revoked API key {keyid} of account {account}",
                           keyid=keyid, account=info.account)
            return info

        return Deferred.fromCoroutine(revoke())

    def add_ssh_key(self, account: str, line: str, label: str | None = None
                    ) -> Deferred[SSHKeyInfo]:
        """
        See L{IStore.add_ssh_key}.
        """

        async def add() -> SSHKeyInfo:
            check_account_name(account)
            key = parse_ssh_public_key(line)
            text = label if label is not None else key.comment
            check_label(text)
            info = SSHKeyInfo(key.fingerprint, account, key.algorithm, text,
                              self._reactor.seconds())
            try:
                await self._eval(
                    "add an SSH key", _ADD_SSH,
                    ["accounts", f"ssh:{key.fingerprint}", "ssh-keys", f"account-ssh:{account}"],
                    [account, key.fingerprint, key.algorithm, key.line,
                     float_text(info.created_at), "0" if text is None else "1", text or ""],
                )
            except txredisapi.ResponseError as e:
                if str(e) == "NFLTR ssh-key-exists":
                    raise StoreError(f"SSH key {key.fingerprint} is registered already") from None
                _raise_nfltr(e, account)
            self._log.info("added SSH key {fingerprint} for account {account}",
                           fingerprint=key.fingerprint, account=account)
            return info

        return Deferred.fromCoroutine(add())

    def list_ssh_keys(self, account: str | None = None) -> Deferred[list[SSHKeyInfo]]:
        """
        See L{IStore.list_ssh_keys}.
        """

        async def listing() -> list[SSHKeyInfo]:
            index = ("ssh-keys" if account is None
                     else f"account-ssh:{check_account_name(account)}")
            try:
                reply = await self._eval("list SSH keys", _LIST, [index, "accounts"],
                                         [self._k("ssh:"), account or ""])
            except txredisapi.ResponseError as e:
                _raise_nfltr(e, account or "")
            return ssh_list(reply, self._k("ssh:"))

        return Deferred.fromCoroutine(listing())

    def remove_ssh_key(self, fingerprint: str) -> Deferred[SSHKeyInfo]:
        """
        See L{IStore.remove_ssh_key}; the removal bumps the revision, is
        logged under it (L{ssh_keys_removed_since}) and is published on
        L{removedChannel}.
        """

        async def remove() -> SSHKeyInfo:
            try:
                reply = await self._eval(
                    "remove an SSH key", _REMOVE_SSH,
                    [f"ssh:{fingerprint}", "ssh-keys", "revision", "ssh-removed"],
                    [fingerprint, self._k("account-ssh:"), self.removedChannel],
                )
            except txredisapi.ResponseError as e:
                _raise_nfltr(e, fingerprint)
            info, _ = ssh_info(fingerprint, reply, self._k("ssh:", fingerprint))
            self._log.info("removed SSH key {fingerprint} of account {account}",
                           fingerprint=fingerprint, account=info.account)
            return info

        return Deferred.fromCoroutine(remove())

    def ssh_key_account(self, line: str) -> Deferred[str | None]:
        """
        See L{IStore.ssh_key_account}.
        """
        try:
            key = parse_ssh_public_key(line)
        except InvalidSSHKey:
            return Deferred.fromCoroutine(_none())
        record = self._k("ssh:", key.fingerprint)

        def check(reply: list[bytes]) -> str | None:
            if not reply:
                return None
            info, stored = ssh_info(key.fingerprint, reply, record)
            return info.account if stored == key.line else None

        return self._redis.execute("find an SSH key", "HGETALL", record).addCallback(check)

    def revision(self) -> Deferred[int]:
        """
        See L{IStore.revision}.
        """
        key = self._k("revision")

        def read(reply: bytes | None) -> int:
            if reply is None:
                return 0
            try:
                return int(reply)
            except ValueError:
                raise StoreError(f"Redis key {key} holds {reply[:40]!r}, not a revision") from None

        return self._redis.execute("read the revision", "GET", key).addCallback(read)

    def revoked_since(self, revision: int) -> Deferred[list[str]]:
        """
        See L{IStore.revoked_since}.
        """
        d = self._redis.execute("list revocations", "ZRANGEBYSCORE", self._k("revoked"),
                                f"({int(revision)}", "+inf")
        return d.addCallback(_texts)

    def ssh_keys_removed_since(self, revision: int) -> Deferred[list[str]]:
        """
        See L{ISSHKeyRemovals.ssh_keys_removed_since}.
        """
        d = self._redis.execute("list SSH key removals", "ZRANGEBYSCORE",
                                self._k("ssh-removed"), f"({int(revision)}", "+inf")
        return d.addCallback(_texts)

    def subscribe_revocations(
        self, callback: Callable[[str], object],
        removed: Callable[[str], object] | None = None,
    ) -> Deferred[IRevocationSubscription]:
        """
        See L{IRevocationFeed.subscribe_revocations}: a second connection,
        in subscriber mode, on L{channel} (and L{removedChannel}, for
        C{removed}).
        """
        connect_timeout, command_timeout = self._timeouts
        more = {} if removed is None else {
            self.removedChannel: Listened(removed, "SSH key", is_fingerprint),
        }
        subscription = RevocationSubscription(
            self._reactor, self._address, self.channel, callback,
            connect_timeout=connect_timeout, command_timeout=command_timeout, more=more,
        )
        self._subscriptions.add(subscription)

        def forget(result: object) -> object:
            self._subscriptions.discard(subscription)
            return result

        subscription.stopped.addBoth(forget)
        return subscription.started()

    def lease_table(self) -> INameLeaseTable:
        """
        The name leases of this directory, on this store's connection.
        """
        return RedisLeaseTable(self._redis, self.prefix)

    def presence_table(self) -> IPresenceTable:
        """
        Presence of agents, shares and replicas in this directory, on this
        store's connection (L{nfltr.store._redis_presence}).
        """
        return RedisPresenceTable(self._redis, self.prefix)

    def close(self) -> Deferred[None]:
        """
        See L{IStore.close}: the subscriptions too.
        """

        async def close() -> None:
            for subscription in list(self._subscriptions):
                await subscription.stop()
            await self._redis.close()

        return Deferred.fromCoroutine(close())


async def _none() -> None:
    return None


def _texts(members: list[bytes]) -> list[str]:
    return [m.decode("ascii", "replace") for m in members]


def _raise_nfltr(error: txredisapi.ResponseError, name: str) -> NoReturn:
    """
    Raise the typed error a script's C{NFLTR ...} reply stands for.
    """
    what = str(error)
    if what == "NFLTR account-exists":
        raise AccountExists(name) from None
    if what == "NFLTR unknown-account":
        raise UnknownAccount(name) from None
    if what == "NFLTR unknown-key":
        raise UnknownKey(name) from None
    raise StoreError(f"unexpected Redis reply: {what}") from None
