# -*- test-case-name: tests.store.test_behaviour -*-
"""
What every L{IStore} must do, written once in L{StoreBehaviourMixin} and run
per kind of store: L{SQLiteStore} on a thread pool, L{RedisStore} on a real
C{redis-server}.  The real reactor runs them (the stores do I/O).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from twisted.python.threadpool import ThreadPool
from twisted.trial import unittest
from zope.interface.verify import verifyObject

from nfltr.store import (
    AccountExists,
    InvalidLabel,
    InvalidName,
    InvalidSSHKey,
    IStore,
    RedisStore,
    SQLiteStore,
    StoreError,
    UnknownAccount,
    UnknownKey,
    parse_redis_url,
)
from tests.redis_helpers import REDIS_SERVER, SKIP_REASON, redis_command, start_redis
from tests.store.test_sqlite import KEY_FORMAT, _replace_char, _secret
from tests.store.test_ssh import keygen

#: A short command timeout keeps a failing Redis test from hanging.
TEST_COMMAND_TIMEOUT = 3.0


class StoreBehaviourMixin:
    """
    The behaviour tests; a subclass provides C{makeStore}.
    """

    store: Any

    async def makeStore(self) -> Any:
        raise NotImplementedError

    async def setUp(self) -> None:  # type: ignore[override]
        self.store = await self.makeStore()

    def test_interface(self) -> None:
        """
        The store provides L{IStore}, every method with its signature.
        """
        self.assertTrue(verifyObject(IStore, self.store))  # type: ignore[attr-defined]

    async def test_accounts(self) -> None:
        """
        Accounts are created once each and listed by name; a malformed name
        is L{InvalidName}, a taken one L{AccountExists}.
        """
        t: Any = self
        t.assertEqual(await self.store.list_accounts(), [])
        bravo = await self.store.create_account("bravo")
        alpha = await self.store.create_account("alpha-1")
        t.assertEqual((bravo.name, alpha.name), ("bravo", "alpha-1"))
        t.assertEqual(await self.store.list_accounts(), [alpha, bravo])
        await t.assertFailure(self.store.create_account("bravo"), AccountExists)
        for bad in ("", "-x", "Upper", "a" * 33, "sp ace"):
            await t.assertFailure(self.store.create_account(bad), InvalidName)
        t.assertEqual(await self.store.list_accounts(), [alpha, bravo])

    async def test_keys(self) -> None:
        """
        A key is created for an existing account only, verifies to its
        record (label kept, or L{None}), and is listed oldest first, all or
        by account.
        """
        t: Any = self
        await self.store.create_account("acme")
        await self.store.create_account("bravo")
        first, plain1 = await self.store.create_key("acme", "ci")
        second, plain2 = await self.store.create_key("bravo")
        third, plain3 = await self.store.create_key("acme", "")
        t.assertEqual(KEY_FORMAT.fullmatch(plain1).group(1), first.keyid)
        t.assertEqual((first.account, first.label, first.revoked), ("acme", "ci", False))
        t.assertEqual(await self.store.verify_key(plain1), first)
        t.assertEqual(await self.store.verify_key(plain2), second)
        t.assertEqual((await self.store.verify_key(plain3)).label, "")
        t.assertIsNone(second.label)
        t.assertEqual(await self.store.list_keys(), [first, second, third])
        t.assertEqual(await self.store.list_keys("acme"), [first, third])
        t.assertEqual(await self.store.list_keys("bravo"), [second])
        await t.assertFailure(self.store.create_key("nobody"), UnknownAccount)
        await t.assertFailure(self.store.list_keys("nobody"), UnknownAccount)
        await t.assertFailure(self.store.create_key("No!"), InvalidName)
        await t.assertFailure(self.store.create_key("acme", "a\nb"), InvalidLabel)
        t.assertEqual(len(await self.store.list_keys()), 3)

    async def test_wrongKeys(self) -> None:
        """
        A tampered secret, a key id that names no key, a malformed key and
        non-text all verify to L{None}.
        """
        t: Any = self
        await self.store.create_account("acme")
        _, plaintext = await self.store.create_key("acme")
        secret = _secret(plaintext)
        tampered = plaintext[: -len(secret)] + _replace_char(secret, 5)
        unknown = "nfltr_0123456789ab_" + secret
        for wrong in (tampered, unknown, "garbage", "", plaintext + "x", plaintext.upper()):
            t.assertIsNone(await self.store.verify_key(wrong), wrong)
        t.assertIsNone(await self.store.verify_key(None))

    async def test_revocation(self) -> None:
        """
        Revoking bumps the revision and logs the key id under it; the key
        still verifies, marked revoked; revoking again changes nothing; an
        unknown or malformed id is L{UnknownKey}.
        """
        t: Any = self
        await self.store.create_account("acme")
        one, plain1 = await self.store.create_key("acme")
        two, _ = await self.store.create_key("acme")
        t.assertEqual(await self.store.revision(), 0)
        t.assertEqual(await self.store.revoked_since(0), [])
        revoked = await self.store.revoke_key(two.keyid)
        t.assertTrue(revoked.revoked)
        t.assertEqual(revoked.keyid, two.keyid)
        t.assertEqual(await self.store.revision(), 1)
        await self.store.revoke_key(one.keyid)
        t.assertEqual(await self.store.revision(), 2)
        t.assertEqual(await self.store.revoked_since(0), [two.keyid, one.keyid])
        t.assertEqual(await self.store.revoked_since(1), [one.keyid])
        t.assertEqual(await self.store.revoked_since(2), [])
        again = await self.store.revoke_key(one.keyid)
        t.assertEqual(await self.store.revision(), 2)
        verified = await self.store.verify_key(plain1)
        t.assertEqual(verified, again)
        t.assertTrue(verified.revoked)
        t.assertEqual([k.revoked for k in await self.store.list_keys()], [True, True])
        await t.assertFailure(self.store.revoke_key("0123456789ab"), UnknownKey)
        await t.assertFailure(self.store.revoke_key("junk"), UnknownKey)

    async def test_sshKeys(self) -> None:
        """
        An SSH key is registered once, to one account, by its fingerprint;
        it maps to its account (the exact key only) until removed.
        """
        t: Any = self
        if shutil.which("ssh-keygen") is None:
            raise unittest.SkipTest("ssh-keygen not found: install openssh-client")
        directory = Path(t.mktemp())
        directory.mkdir()
        await self.store.create_account("acme")
        await self.store.create_account("bravo")
        line, printed = keygen(directory, "ed25519")
        other, _ = keygen(directory, "ecdsa", 256)
        info = await self.store.add_ssh_key("acme", line)
        t.assertEqual((info.fingerprint, info.account, info.algorithm, info.label),
                      (printed, "acme", "ssh-ed25519", "test ed25519"))
        t.assertEqual(await self.store.ssh_key_account(line.split(" test")[0]), "acme")
        t.assertIsNone(await self.store.ssh_key_account(other))
        t.assertIsNone(await self.store.ssh_key_account("not a key"))
        await t.assertFailure(self.store.add_ssh_key("bravo", line), StoreError)
        await t.assertFailure(self.store.add_ssh_key("nobody", other), UnknownAccount)
        await t.assertFailure(self.store.add_ssh_key("acme", "ssh-dss AAAA"), InvalidSSHKey)
        labelled = await self.store.add_ssh_key("bravo", other, "mine")
        t.assertEqual(labelled.label, "mine")
        t.assertEqual(await self.store.list_ssh_keys(), [info, labelled])
        t.assertEqual(await self.store.list_ssh_keys("acme"), [info])
        await t.assertFailure(self.store.list_ssh_keys("nobody"), UnknownAccount)
        t.assertEqual(await self.store.remove_ssh_key(printed), info)
        t.assertIsNone(await self.store.ssh_key_account(line))
        t.assertEqual(await self.store.list_ssh_keys("acme"), [])
        await t.assertFailure(self.store.remove_ssh_key(printed), UnknownKey)

    async def test_onlyDigests(self) -> None:
        """
        Whatever the store keeps, the plaintext key is not in it.
        """
        t: Any = self
        await self.store.create_account("acme")
        _, plaintext = await self.store.create_key("acme")
        t.assertNotIn(_secret(plaintext).encode("ascii"), await self.storedBytes())

    async def storedBytes(self) -> bytes:
        raise NotImplementedError


class SQLiteStoreMaker:
    """
    Makes an L{SQLiteStore} on a thread pool, in a test's temporary
    directory (a mixin of trial test cases, before the behaviour mixin).
    """

    store: Any

    async def makeStore(self) -> SQLiteStore:
        from twisted.internet import reactor

        t: Any = self
        pool = ThreadPool(minthreads=1, maxthreads=2, name="nfltr-store-test")
        pool.start()
        t.addCleanup(pool.stop)
        self.path = Path(t.mktemp()) / "nfltr.sqlite3"
        store = SQLiteStore(self.path, reactor, pool)
        t.addCleanup(store.close)
        return store

    async def storedBytes(self) -> bytes:
        await self.store.close()
        return b"".join(p.read_bytes() for p in self.path.parent.iterdir())


class RedisStoreMaker:
    """
    Makes a L{RedisStore} on a real C{redis-server} of the test's own.
    """

    if REDIS_SERVER is None:
        skip = SKIP_REASON

    async def makeStore(self) -> RedisStore:
        from twisted.internet import reactor

        t: Any = self
        self.server = await start_redis(t)
        store = RedisStore(reactor, parse_redis_url(self.server.url),
                           command_timeout=TEST_COMMAND_TIMEOUT)
        t.addCleanup(store.close)
        return store

    async def storedBytes(self) -> bytes:
        keys = await redis_command(self.server, "KEYS", "*")
        dumps = [await redis_command(self.server, "DUMP", key) for key in keys]
        return b"".join(keys + dumps)


class SQLiteStoreBehaviourTests(SQLiteStoreMaker, StoreBehaviourMixin, unittest.TestCase):
    """
    The behaviour of L{SQLiteStore}.
    """


class RedisStoreBehaviourTests(RedisStoreMaker, StoreBehaviourMixin, unittest.TestCase):
    """
    The behaviour of L{RedisStore}, on a real C{redis-server}.
    """
