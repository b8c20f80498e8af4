# -*- test-case-name: tests.store.test_sqlite -*-
"""
Tests for L{nfltr.store._sqlite} and the key format in L{nfltr.store._model}.
"""

from __future__ import annotations

import base64
import os
import re
import sqlite3
import stat
import threading
from pathlib import Path

from twisted.internet.task import Clock
from twisted.python.threadpool import ThreadPool
from twisted.trial import unittest

from nfltr.store import (
    SCHEMA_VERSION,
    AccountExists,
    AccountInfo,
    InvalidLabel,
    InvalidName,
    KeyInfo,
    SchemaTooNew,
    SQLiteStore,
    SQLiteStoreCore,
    StoreError,
    UnknownAccount,
    UnknownKey,
    _sqlite,
)

KEY_FORMAT = re.compile(r"nfltr_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")


def _secret(plaintext: str) -> str:
    """
    The secret part of a key (which may itself contain '_').
    """
    match = KEY_FORMAT.fullmatch(plaintext)
    assert match is not None, plaintext
    return match.group(2)


def _replace_char(text: str, index: int) -> str:
    """
    Return C{text} with the character at C{index} swapped for another one of
    the base64url alphabet.
    """
    replacement = "A" if text[index] != "A" else "B"
    return text[:index] + replacement + text[index + 1 :]


class _CoreMixin:
    """
    Open a fresh L{SQLiteStoreCore} in a temporary directory, on a L{Clock}.
    """

    def open_core(self, test: unittest.SynchronousTestCase) -> SQLiteStoreCore:
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.dbpath = Path(test.mktemp()) / "nfltr.sqlite"
        core = SQLiteStoreCore(self.dbpath, now=self.clock.seconds)
        test.addCleanup(core.close)
        return core


class AccountTests(_CoreMixin, unittest.SynchronousTestCase):
    """
    Accounts in L{SQLiteStoreCore}.
    """

    def setUp(self) -> None:
        self.core = self.open_core(self)

    def test_create_and_list(self) -> None:
        """
        A created account is listed with its creation time; the list is in
        name order.
        """
        created = self.core.create_account("zeta")
        self.clock.advance(5)
        self.core.create_account("alpha")
        self.assertEqual(created, AccountInfo("zeta", 1_700_000_000))
        self.assertEqual(
            self.core.list_accounts(),
            [AccountInfo("alpha", 1_700_000_005), AccountInfo("zeta", 1_700_000_000)],
        )

    def test_empty(self) -> None:
        """
        A new store has no accounts.
        """
        self.assertEqual(self.core.list_accounts(), [])

    def test_valid_names(self) -> None:
        """
        Names of 1 to 32 characters from a-z, 0-9 and '-', not starting with
        '-', are accepted.
        """
        for name in ["a", "0", "a" * 32, "team-7", "7-", "x-y-z"]:
            self.assertEqual(self.core.create_account(name).name, name)

    def test_invalid_names(self) -> None:
        """
        Any other name raises L{InvalidName}, whose message states the rule,
        and creates nothing.
        """
        bad = ["", "-a", "A", "Alice", "a" * 33, "a_b", "a.b", "a b", " a", "a\n", "é", "a/b"]
        for name in bad:
            error = self.assertRaises(InvalidName, self.core.create_account, name)
            self.assertIn(repr(name), str(error))
            self.assertIn("a-z, 0-9 and '-'", str(error))
            self.assertIsInstance(error, ValueError)
        self.assertEqual(self.core.list_accounts(), [])

    def test_duplicate(self) -> None:
        """
        Creating an account twice raises L{AccountExists} naming it, and
        leaves the first one as it was.
        """
        self.core.create_account("alice")
        self.clock.advance(1)
        error = self.assertRaises(AccountExists, self.core.create_account, "alice")
        self.assertEqual(str(error), "an account named 'alice' already exists")
        self.assertEqual(self.core.list_accounts(), [AccountInfo("alice", 1_700_000_000)])


class KeyTests(_CoreMixin, unittest.SynchronousTestCase):
    """
    API keys in L{SQLiteStoreCore}.
    """

    def setUp(self) -> None:
        self.core = self.open_core(self)
        self.core.create_account("alice")
        self.core.create_account("bob")

    def test_format(self) -> None:
        """
        A key reads C{nfltr_<12 hex>_<secret>} where the secret is 32 bytes of
        unpadded base64url, and its record carries its id, account and label.
        """
        info, plaintext = self.core.create_key("alice", label="laptop")
        match = KEY_FORMAT.fullmatch(plaintext)
        assert match is not None, plaintext
        self.assertEqual(match.group(1), info.keyid)
        self.assertEqual(len(base64.urlsafe_b64decode(match.group(2) + "=")), 32)
        self.assertEqual(info, KeyInfo(info.keyid, "alice", "laptop", 1_700_000_000))
        self.assertFalse(info.revoked)

    def test_keys_differ(self) -> None:
        """
        Two keys share neither their id nor their secret.
        """
        first, one = self.core.create_key("alice")
        second, two = self.core.create_key("alice")
        self.assertNotEqual(first.keyid, second.keyid)
        self.assertNotEqual(_secret(one), _secret(two))

    def test_unknown_account(self) -> None:
        """
        A key for an account that does not exist raises L{UnknownAccount},
        whose message says how to create the account.
        """
        error = self.assertRaises(UnknownAccount, self.core.create_key, "carol")
        self.assertIn("nfltr accounts create carol", str(error))
        self.assertEqual(self.core.list_keys(), [])

    def test_malformed_account(self) -> None:
        """
        A malformed account name raises L{InvalidName}, not L{UnknownAccount}
        (whose advice would then fail).
        """
        self.assertRaises(InvalidName, self.core.create_key, "Carol")

    def test_invalid_label(self) -> None:
        """
        A label that is too long or holds control characters raises
        L{InvalidLabel}; at the limit it is accepted.
        """
        self.assertRaises(InvalidLabel, self.core.create_key, "alice", "x" * 101)
        self.assertRaises(InvalidLabel, self.core.create_key, "alice", "evil\x1b[2J")
        self.assertRaises(InvalidLabel, self.core.create_key, "alice", "two\nlines")
        self.assertEqual(self.core.create_key("alice", "x" * 100)[0].label, "x" * 100)
        self.assertEqual(len(self.core.list_keys()), 1)

    def test_only_hash_stored(self) -> None:
        """
        Neither the key nor its secret is written to the database files.
        """
        _, plaintext = self.core.create_key("alice")
        secret = _secret(plaintext).encode("ascii")
        stored = b"".join(
            path.read_bytes() for path in self.dbpath.parent.iterdir() if path.is_file()
        )
        self.assertIn(b"alice", stored)
        self.assertNotIn(secret, stored)
        self.assertNotIn(base64.urlsafe_b64decode(secret + b"="), stored)

    def test_verify(self) -> None:
        """
        The plaintext verifies to the key's record.
        """
        info, plaintext = self.core.create_key("alice", "ci")
        self.assertEqual(self.core.verify_key(plaintext), info)

    def test_verify_tampered_secret(self) -> None:
        """
        A key whose secret differs in one character, anywhere, does not
        verify.
        """
        _, plaintext = self.core.create_key("alice")
        start = len("nfltr_") + 12 + 1
        for index in (start, start + 20, len(plaintext) - 1):
            tampered = _replace_char(plaintext, index)
            self.assertIsNone(self.core.verify_key(tampered), tampered)

    def test_verify_wrong_keyid(self) -> None:
        """
        A valid secret under another existing key id, or under an unknown
        one, does not verify.
        """
        first, one = self.core.create_key("alice")
        second, _ = self.core.create_key("bob")
        swapped = f"nfltr_{second.keyid}_{_secret(one)}"
        unknown_id = "0" * 12 if first.keyid != "0" * 12 else "1" * 12
        unknown = f"nfltr_{unknown_id}_{_secret(one)}"
        self.assertIsNone(self.core.verify_key(swapped))
        self.assertIsNone(self.core.verify_key(unknown))

    def test_verify_garbage(self) -> None:
        """
        Malformed input returns L{None} and raises nothing.
        """
        _, plaintext = self.core.create_key("alice")
        keyid = plaintext.split("_")[1]
        garbage: list[object] = [
            "",
            "nfltr_",
            "garbage",
            f"nfltr_{keyid}_",
            plaintext + "x",
            plaintext + "=",
            plaintext[:-1],
            " " + plaintext,
            plaintext + "\n",
            plaintext.replace("nfltr_", "NFLTR_"),
            plaintext[:-1] + "é",
            "x" * 100_000,
            plaintext.encode("ascii"),
            None,
            42,
        ]
        if keyid.upper() != keyid:
            garbage.append(f"nfltr_{keyid.upper()}_{_secret(plaintext)}")
        for text in garbage:
            self.assertIsNone(self.core.verify_key(text), repr(text))  # type: ignore[arg-type]

    def test_unknown_keyid_compares(self) -> None:
        """
        A well-formed key with an unknown id costs a constant-time digest
        comparison too, as a wrong secret does.
        """
        compared: list[tuple[bytes, bytes]] = []

        class RecordingHmac:
            @staticmethod
            def compare_digest(a: bytes, b: bytes) -> bool:
                compared.append((a, b))
                return a == b

        self.patch(_sqlite, "hmac", RecordingHmac)
        _, plaintext = self.core.create_key("alice")
        unknown = "nfltr_" + "f" * 12 + plaintext[len("nfltr_") + 12 :]
        self.assertIsNone(self.core.verify_key(unknown))
        self.assertEqual(len(compared), 1)
        self.assertEqual([len(a) for a in compared[0]], [32, 32])

    def test_list_keys(self) -> None:
        """
        L{SQLiteStoreCore.list_keys} lists every key oldest first, or one
        account's keys; an unknown account raises L{UnknownAccount}.
        """
        a1, _ = self.core.create_key("alice", "one")
        self.clock.advance(1)
        b1, _ = self.core.create_key("bob")
        self.clock.advance(1)
        a2, _ = self.core.create_key("alice", "two")
        self.assertEqual(self.core.list_keys(), [a1, b1, a2])
        self.assertEqual(self.core.list_keys("alice"), [a1, a2])
        self.assertEqual(self.core.list_keys("bob"), [b1])
        self.assertRaises(UnknownAccount, self.core.list_keys, "carol")
        self.assertRaises(InvalidName, self.core.list_keys, "Carol")


class RevocationTests(_CoreMixin, unittest.SynchronousTestCase):
    """
    Revoking keys, and the revision counter.
    """

    def setUp(self) -> None:
        self.core = self.open_core(self)
        self.core.create_account("alice")

    def test_revoke(self) -> None:
        """
        A revoked key still verifies, to a record marked revoked with the time
        of revocation, and is listed so.
        """
        info, plaintext = self.core.create_key("alice")
        self.clock.advance(60)
        revoked = self.core.revoke_key(info.keyid)
        expected = KeyInfo(info.keyid, "alice", None, 1_700_000_000, 1_700_000_060)
        self.assertEqual(revoked, expected)
        self.assertTrue(revoked.revoked)
        self.assertEqual(self.core.verify_key(plaintext), expected)
        self.assertEqual(self.core.list_keys(), [expected])

    def test_revoke_leaves_others(self) -> None:
        """
        Revoking one key leaves the account's other keys valid.
        """
        first, _ = self.core.create_key("alice")
        _, plaintext = self.core.create_key("alice")
        self.core.revoke_key(first.keyid)
        verified = self.core.verify_key(plaintext)
        assert verified is not None
        self.assertFalse(verified.revoked)

    def test_revoke_unknown(self) -> None:
        """
        Revoking an id that no key has, or that is malformed, raises
        L{UnknownKey} naming it, and does not bump the revision.
        """
        for keyid in ["0123456789ab", "nope", ""]:
            error = self.assertRaises(UnknownKey, self.core.revoke_key, keyid)
            self.assertEqual(str(error), f"no API key with id {keyid!r}")
        self.assertEqual(self.core.revision(), 0)

    def test_revision(self) -> None:
        """
        The revision starts at 0 and grows by one per revocation; revoking a
        revoked key again changes nothing.
        """
        one, _ = self.core.create_key("alice")
        two, _ = self.core.create_key("alice")
        self.assertEqual(self.core.revision(), 0)
        self.core.revoke_key(one.keyid)
        self.assertEqual(self.core.revision(), 1)
        self.clock.advance(10)
        again = self.core.revoke_key(one.keyid)
        self.assertEqual(again.revoked_at, 1_700_000_000)
        self.assertEqual(self.core.revision(), 1)
        self.core.revoke_key(two.keyid)
        self.assertEqual(self.core.revision(), 2)

    def test_revoked_since(self) -> None:
        """
        L{SQLiteStoreCore.revoked_since} names the keys revoked after a given
        revision, in revocation order.
        """
        keys = [self.core.create_key("alice")[0].keyid for _ in range(3)]
        self.core.revoke_key(keys[2])
        seen = self.core.revision()
        self.core.revoke_key(keys[0])
        self.core.revoke_key(keys[1])
        self.assertEqual(self.core.revoked_since(0), [keys[2], keys[0], keys[1]])
        self.assertEqual(self.core.revoked_since(seen), [keys[0], keys[1]])
        self.assertEqual(self.core.revoked_since(self.core.revision()), [])


class FileTests(unittest.SynchronousTestCase):
    """
    The database file: mode, journal, schema versioning, sharing.
    """

    def setUp(self) -> None:
        self.directory = Path(self.mktemp()) / "data"
        self.path = self.directory / "nfltr.sqlite"

    def open(self) -> SQLiteStoreCore:
        core = SQLiteStoreCore(self.path)
        self.addCleanup(core.close)
        return core

    def test_private_files(self) -> None:
        """
        The database and its WAL files are created 0600 in a directory
        created 0700, even under a permissive umask.
        """
        old = os.umask(0)
        try:
            core = self.open()
            core.create_account("alice")
        finally:
            os.umask(old)
        self.assertEqual(stat.S_IMODE(self.directory.stat().st_mode), 0o700)
        files = sorted(p.name for p in self.directory.iterdir())
        self.assertIn("nfltr.sqlite-wal", files)
        for name in files:
            mode = stat.S_IMODE((self.directory / name).stat().st_mode)
            self.assertEqual(mode, 0o600, name)

    def test_wal_and_version(self) -> None:
        """
        The database is in WAL mode and records the schema version.
        """
        self.open()
        other = sqlite3.connect(self.path)
        self.addCleanup(other.close)
        self.assertEqual(other.execute("PRAGMA journal_mode").fetchone(), ("wal",))
        self.assertEqual(
            other.execute("SELECT version FROM schema_version").fetchall(), [(SCHEMA_VERSION,)]
        )

    def test_reopen(self) -> None:
        """
        Reopening keeps the data and the schema version row single.
        """
        first = self.open()
        first.create_account("alice")
        info, plaintext = first.create_key("alice")
        first.close()
        second = self.open()
        self.assertEqual([a.name for a in second.list_accounts()], ["alice"])
        self.assertEqual(second.verify_key(plaintext), info)
        (rows,) = second._db.execute("SELECT count(*) FROM schema_version").fetchone()
        self.assertEqual(rows, 1)

    def test_schema_too_new(self) -> None:
        """
        A database from a newer nfltr is refused with L{SchemaTooNew}, and
        left unchanged.
        """
        self.open().close()
        other = sqlite3.connect(self.path)
        with other:
            other.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
        other.close()
        error = self.assertRaises(SchemaTooNew, SQLiteStoreCore, self.path)
        self.assertIsInstance(error, StoreError)
        self.assertIn("upgrade nfltr", str(error))
        other = sqlite3.connect(self.path)
        self.addCleanup(other.close)
        self.assertEqual(
            other.execute("SELECT version FROM schema_version").fetchone(), (SCHEMA_VERSION + 1,)
        )

    def test_two_cores(self) -> None:
        """
        Two cores on one file (the relay and the CLI) see each other's
        accounts, keys and revocations, and the revision counter tells the
        other one what changed.
        """
        relay = self.open()
        cli = self.open()
        cli.create_account("alice")
        info, plaintext = cli.create_key("alice")
        self.assertEqual(relay.verify_key(plaintext), info)
        seen = relay.revision()
        cli.revoke_key(info.keyid)
        self.assertEqual(relay.revision(), seen + 1)
        self.assertEqual(relay.revoked_since(seen), [info.keyid])
        verified = relay.verify_key(plaintext)
        assert verified is not None
        self.assertTrue(verified.revoked)
        self.assertRaises(AccountExists, relay.create_account, "alice")


class SQLiteStoreTests(unittest.TestCase):
    """
    L{SQLiteStore} on a real L{ThreadPool}; the reactor only carries results
    back from the pool.
    """

    def setUp(self) -> None:
        from twisted.internet import reactor

        self.pool = ThreadPool(minthreads=1, maxthreads=2, name="nfltr-store-test")
        self.pool.start()
        self.addCleanup(self.pool.stop)
        self.store = SQLiteStore(Path(self.mktemp()) / "nfltr.sqlite", reactor, self.pool)
        self.addCleanup(self.store.close)

    async def test_round_trip(self) -> None:
        """
        Every method returns a L{Deferred} of what the core returns.
        """
        account = await self.store.create_account("alice")
        self.assertEqual(account.name, "alice")
        self.assertEqual(await self.store.list_accounts(), [account])
        info, plaintext = await self.store.create_key("alice", "ci")
        self.assertEqual(await self.store.verify_key(plaintext), info)
        self.assertIsNone(await self.store.verify_key("garbage"))
        self.assertEqual(await self.store.list_keys(), [info])
        self.assertEqual(await self.store.list_keys("alice"), [info])
        self.assertEqual(await self.store.revision(), 0)
        revoked = await self.store.revoke_key(info.keyid)
        self.assertTrue(revoked.revoked)
        self.assertEqual(await self.store.revision(), 1)
        self.assertEqual(await self.store.revoked_since(0), [info.keyid])

    async def test_runs_in_pool(self) -> None:
        """
        The work happens in a pool thread, never in the caller's: the
        L{Deferred} has not fired when the call returns.
        """
        threads: list[int] = []
        original = SQLiteStoreCore.list_accounts

        def recording(core: SQLiteStoreCore) -> list[AccountInfo]:
            threads.append(threading.get_ident())
            return original(core)

        self.patch(SQLiteStoreCore, "list_accounts", recording)
        d = self.store.list_accounts()
        self.assertFalse(d.called)
        self.assertEqual(await d, [])
        self.assertEqual(len(threads), 1)
        self.assertNotEqual(threads[0], threading.get_ident())

    async def test_typed_errors(self) -> None:
        """
        The core's typed errors arrive as the L{Deferred}'s failure.
        """
        await self.store.create_account("alice")
        await self.assertFailure(self.store.create_account("alice"), AccountExists)
        await self.assertFailure(self.store.create_account("-"), InvalidName)
        await self.assertFailure(self.store.create_key("bob"), UnknownAccount)
        await self.assertFailure(self.store.revoke_key("0123456789ab"), UnknownKey)
