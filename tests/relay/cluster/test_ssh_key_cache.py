"""
Tests for L{nfltr.relay.cluster.ssh_key_cache}: the SSH keys a replica
checked, remembered for a directory outage, and forgotten when removed
(with a L{Clock}).
"""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.cluster.ssh_key_cache import SSHKeyCache
from nfltr.relay.store_health import StoreHealth
from nfltr.store import StoreCorrupt, StoreUnavailable, parse_ssh_public_key

LIMIT = 60.0


def public_line() -> str:
    """
    A new ed25519 public key, as C{TYPE BASE64}.
    """
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(serialization.Encoding.OpenSSH,
                            serialization.PublicFormat.OpenSSH).decode("ascii")


class _Directory:
    """
    SSH keys' accounts in memory; C{down}: every look-up fails with
    L{StoreUnavailable}; C{error}: with that error; C{holding}: look-ups
    wait (in C{held}) until L{release}.
    """

    def __init__(self) -> None:
        self.accounts: dict[str, str] = {}
        self.down = False
        self.error: Exception | None = None
        self.holding = False
        self.held: list[tuple[Deferred[str | None], str]] = []

    def ask(self, line: str) -> Deferred[str | None]:
        if self.down:
            return fail(StoreUnavailable("Redis at the test is not reachable"))
        if self.error is not None:
            return fail(self.error)
        if self.holding:
            d: Deferred[str | None] = Deferred()
            self.held.append((d, line))
            return d
        return succeed(self.accounts.get(line))

    def release(self) -> None:
        """
        Answer the look-ups held, from the accounts now.
        """
        held, self.held = self.held, []
        for d, line in held:
            d.callback(self.accounts.get(line))


class SSHKeyCacheTests(SynchronousTestCase):
    """
    L{SSHKeyCache.lookup} and the removal rules.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.health = StoreHealth("the test store", self.clock)
        self.health.log = Logger(observer=lambda event: None)
        self.events: list[dict[str, Any]] = []
        self.cache = SSHKeyCache(self.clock, self.health, entries=10, limit=LIMIT)
        self.cache.log = Logger(observer=self.events.append)
        self.directory = _Directory()
        self.line = public_line()
        self.fingerprint = parse_ssh_public_key(self.line).fingerprint
        self.directory.accounts[self.line] = "alice"

    def lookup(self, line: str | None = None) -> Any:
        """
        The result of one look-up (an account, L{None}, or a L{Failure}),
        which must have fired; while the directory is down, as the relay
        asks (the outage counted by the store's health).
        """
        line = self.line if line is None else line
        results: list[Any] = []

        def ask() -> Deferred[str | None]:
            d = self.directory.ask(line)
            return d.addErrback(lambda f: (self.health.failed(f), f)[1])

        self.cache.lookup(line, ask).addBoth(results.append)
        return results[0]

    def lines(self) -> list[str]:
        return [str(e["log_format"]) for e in self.events]

    def test_upAndAway(self) -> None:
        """
        With the directory up, its answer is given and kept; while it is
        away, the account kept is given (counted), with one line for the
        outage, none per look-up.
        """
        self.assertEqual(self.lookup(), "alice")
        self.directory.down = True
        self.assertEqual([self.lookup(), self.lookup()], ["alice", "alice"])
        self.assertEqual(self.cache.recalled, 2)
        self.assertEqual(len(self.lines()), 1)
        self.assertIn("the directory cannot check SSH keys", self.lines()[0])
        self.assertNotIn(self.line.split()[1], repr(self.events))

    def test_unknownDuringOutage(self) -> None:
        """
        A key never checked here is refused while the directory is away:
        the look-up fails with the directory's L{StoreUnavailable}, the
        clear error the SSH port and the replica link turn into their
        refusal; nothing is logged.
        """
        self.directory.down = True
        failure = self.lookup()
        self.assertIsInstance(failure, Failure)
        self.assertTrue(failure.check(StoreUnavailable))
        self.assertEqual(self.lines(), [])

    def test_removedRefused(self) -> None:
        """
        A key seen removed is forgotten (one line, with its fingerprint):
        refused from memory during an outage; a second announcement of the
        same removal (the poll's) logs nothing more.
        """
        self.assertEqual(self.lookup(), "alice")
        self.cache.removed(self.fingerprint)
        self.cache.removed(self.fingerprint)
        self.assertEqual([e.get("fingerprint") for e in self.events], [self.fingerprint])
        self.directory.down = True
        self.assertTrue(self.lookup().check(StoreUnavailable))
        self.assertEqual(self.cache.recalled, 0)

    def test_removedDuringLookup(self) -> None:
        """
        A look-up under way when a removal is seen is not kept, even if the
        directory answered it with an account (it may have answered before
        the removal): the key is refused in a later outage.
        """
        self.directory.holding = True
        results: list[Any] = []
        self.cache.lookup(self.line, lambda: self.directory.ask(self.line)).addBoth(
            results.append)
        self.cache.removed(public_line_fingerprint())  # any removal, even another key's
        self.directory.release()
        self.assertEqual(results, ["alice"])
        self.directory.holding, self.directory.down = False, True
        self.assertTrue(self.lookup().check(StoreUnavailable))

    def test_addedAgain(self) -> None:
        """
        A key removed, then found registered by a look-up that started
        after the removal was seen, is kept again.
        """
        self.assertEqual(self.lookup(), "alice")
        self.cache.removed(self.fingerprint)
        self.assertEqual(self.lookup(), "alice")
        self.directory.down = True
        self.assertEqual(self.lookup(), "alice")

    def test_unregisteredForgotten(self) -> None:
        """
        A key the directory says is no account's is forgotten.
        """
        self.assertEqual(self.lookup(), "alice")
        del self.directory.accounts[self.line]
        self.assertIsNone(self.lookup())
        self.directory.down = True
        self.assertTrue(self.lookup().check(StoreUnavailable))

    def test_tooOld(self) -> None:
        """
        A key checked more than the stale limit ago is refused.
        """
        self.assertEqual(self.lookup(), "alice")
        self.clock.advance(LIMIT + 1)
        self.directory.down = True
        self.assertTrue(self.lookup().check(StoreUnavailable))

    def test_otherErrors(self) -> None:
        """
        A failure other than the directory being unavailable is passed on,
        never answered from memory.
        """
        self.assertEqual(self.lookup(), "alice")
        self.directory.error = StoreCorrupt("Redis key nfltr:ssh:X is not a record")
        self.assertTrue(self.lookup().check(StoreCorrupt))

    def test_malformed(self) -> None:
        """
        A line that is not an accepted public key is asked about, never
        kept.
        """
        self.directory.accounts["ssh-dss AAAA"] = "mallory"
        self.assertEqual(self.lookup("ssh-dss AAAA"), "mallory")
        self.assertEqual(len(self.cache), 0)


def public_line_fingerprint() -> str:
    """
    The fingerprint of a new key.
    """
    return parse_ssh_public_key(public_line()).fingerprint
