"""
Tests for L{nfltr.relay.revocation}: the store is polled on a Clock, and
announcements come from an in-memory feed; revocations, and SSH key
removals.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet.defer import Deferred, fail, succeed
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.relay.cluster.ssh_key_cache import SSHKeyCache
from nfltr.relay.revocation import RevocationListener, RevocationPoller
from nfltr.relay.store_health import StoreHealth
from nfltr.store import (
    IRevocationFeed,
    IRevocationSubscription,
    ISSHKeyRemovals,
    StoreUnavailable,
    parse_ssh_public_key,
)

from .cluster.test_ssh_key_cache import public_line
from .helpers import FakeStore, RelayHarness

A_KEY, B_KEY = "aaaaaaaaaaaa", "bbbbbbbbbbbb"


class RevocationPollerTests(SynchronousTestCase):
    """
    L{RevocationPoller} acts on the store's revision changes.
    """

    def setUp(self) -> None:
        self.h = RelayHarness()
        self.keyA = self.h.store.addKey(A_KEY, "acme")
        self.keyB = self.h.store.addKey(B_KEY, "bravo")
        self.poller = RevocationPoller(self.h.store, self.h.relay, self.h.clock, 2.0, 0)
        self.logged: list[dict] = []
        self.poller.log = Logger(observer=self.logged.append)
        self.poller.start()
        self.addCleanup(self.poller.stop)

    def test_interval(self) -> None:
        """
        The first poll comes one interval after the start, then one per
        interval.
        """
        self.h.clock.advance(1.999)
        self.assertEqual(self.h.store.revisionCalls, 0)
        self.h.clock.advance(0.001)
        self.assertEqual(self.h.store.revisionCalls, 1)
        self.h.clock.advance(2.0)
        self.assertEqual(self.h.store.revisionCalls, 2)

    def test_revocationClosesLinks(self) -> None:
        """
        A key revoked in the store (by another process) is found at the next
        poll: its agent gets C{revoked} "API key ID was revoked" and is closed;
        another key's agent stays.
        """
        agent = self.h.agent(self.keyA, "web")
        other = self.h.agent(self.keyB, "api")
        self.h.store.revoke(A_KEY)
        self.h.clock.advance(2.0)
        self.h.run()
        self.assertEqual(
            agent.controls[-1],
            {"type": "refused", "reason": "revoked", "message": f"API key {A_KEY} was revoked"},
        )
        self.assertTrue(agent.closed)
        self.assertFalse(other.closed)
        self.assertEqual(self.poller.revision, 1)

    def test_unchangedRevision(self) -> None:
        """
        While the revision does not move, no key is revoked.
        """
        agent = self.h.agent(self.keyA, "web")
        self.h.store.revocations.append((0, A_KEY))  # listed, but not newer
        self.h.clock.advance(10.0)
        self.h.run()
        self.assertFalse(agent.closed)
        self.assertFalse(self.h.relay.directory.isRevoked(A_KEY))

    def test_onlyNewRevocations(self) -> None:
        """
        Each poll asks only for keys revoked after the revision it last saw.
        """
        self.h.store.revoke(A_KEY)
        self.h.clock.advance(2.0)
        asked: list[int] = []
        original = self.h.store.revoked_since
        self.h.store.revoked_since = lambda rev: asked.append(rev) or original(rev)
        self.h.store.revoke(B_KEY)
        self.h.clock.advance(2.0)
        self.assertEqual(asked, [1])
        self.assertTrue(self.h.relay.directory.isRevoked(B_KEY))

    def test_failureLoggedAndRetried(self) -> None:
        """
        A failing poll is logged and the next tick polls again.
        """
        self.h.store.revisionError = OSError("database is locked")
        self.h.clock.advance(2.0)
        self.assertEqual(len(self.logged), 1)
        self.assertIn("database is locked", str(self.logged[0]["log_failure"]))
        self.h.store.revisionError = None
        self.h.store.revoke(A_KEY)
        self.h.clock.advance(2.0)
        self.assertTrue(self.h.relay.directory.isRevoked(A_KEY))

    def test_noOverlap(self) -> None:
        """
        A poll that has not finished delays the next one.
        """
        slow: Deferred[int] = Deferred()
        self.h.store.pendingRevision = slow
        self.h.clock.advance(2.0)
        self.h.clock.advance(10.0)
        self.assertEqual(self.h.store.revisionCalls, 1)
        self.h.store.pendingRevision = None
        slow.callback(0)
        self.h.clock.advance(2.0)
        self.assertEqual(self.h.store.revisionCalls, 2)

    def test_stop(self) -> None:
        """
        After L{RevocationPoller.stop}, the store is not polled.
        """
        self.poller.stop()
        self.h.clock.advance(10.0)
        self.assertEqual(self.h.store.revisionCalls, 0)


class PollerStartTests(SynchronousTestCase):
    """
    A poller that starts without a revision, and one whose store goes down.
    """

    def setUp(self) -> None:
        self.h = RelayHarness()
        self.keyA = self.h.store.addKey(A_KEY, "acme")
        self.keyB = self.h.store.addKey(B_KEY, "bravo")
        self.health = StoreHealth("the test store", self.h.clock)
        self.logged: list[dict] = []
        self.health.log = Logger(observer=self.logged.append)

    def poller(self, revision: int | None) -> RevocationPoller:
        poller = RevocationPoller(self.h.store, self.h.relay, self.h.clock, 10.0, revision,
                                  self.health, retry=1.0)
        poller.log = Logger(observer=self.logged.append)
        poller.start()
        self.addCleanup(poller.stop)
        return poller

    def test_firstReadingIsTheStart(self) -> None:
        """
        Without a revision to start from (the store was down at start), the
        first reading is the start: keys revoked before it are not acted on
        (a key check after it sees them revoked), keys revoked after are.
        """
        self.h.store.revoke(A_KEY)
        poller = self.poller(None)
        self.h.clock.advance(10.0)
        self.assertEqual(poller.revision, 1)
        self.assertFalse(self.h.relay.directory.isRevoked(A_KEY))
        agent = self.h.agent(self.keyB, "api")
        self.h.store.revoke(B_KEY)
        self.h.clock.advance(10.0)
        self.h.run()
        self.assertTrue(agent.closed)
        self.assertEqual(poller.revision, 2)

    def test_retryWhileDown(self) -> None:
        """
        While the store is unavailable the poll runs every C{retry} seconds,
        logs nothing of its own (the outage is one warning), and the first
        reading that succeeds marks the store up; then it is back to its
        interval.
        """
        self.poller(0)
        self.h.store.revisionError = StoreUnavailable("gone")
        self.h.clock.advance(10.0)
        self.assertFalse(self.health.available)
        self.h.clock.advance(1.0)
        self.h.clock.advance(1.0)
        self.assertEqual(self.h.store.revisionCalls, 3)
        self.assertEqual(len(self.logged), 1)
        self.h.store.revisionError = None
        self.h.clock.advance(1.0)
        self.assertTrue(self.health.available)
        self.assertEqual(self.h.store.revisionCalls, 4)
        self.h.clock.advance(9.9)
        self.assertEqual(self.h.store.revisionCalls, 4)
        self.h.clock.advance(0.1)
        self.assertEqual(self.h.store.revisionCalls, 5)

    def test_revokedOnce(self) -> None:
        """
        A key announced, then found by the poll, is turned away once: one
        line about it.
        """
        poller = self.poller(0)
        agent = self.h.agent(self.keyA, "web")
        poller.revoked(A_KEY)
        self.h.run()
        self.assertTrue(agent.closed)
        self.h.store.revoke(A_KEY)
        self.h.clock.advance(10.0)
        revoked = [m for m in self.h.messages() if "was revoked: closing" in m]
        self.assertEqual(revoked, [f"API key {A_KEY} was revoked: closing 1 link(s)"])


@implementer(ISSHKeyRemovals)
class RemovalStore(FakeStore):
    """
    A L{FakeStore} that logs SSH key removals under its revision, as a
    Redis directory does.
    """

    def __init__(self) -> None:
        super().__init__()
        self.removals: list[tuple[int, str]] = []

    def removeSSHKey(self, line: str) -> str:
        """
        Remove an SSH key as another process would; its fingerprint.
        """
        del self.sshKeys[line]
        fingerprint = parse_ssh_public_key(line).fingerprint
        self.rev += 1
        self.removals.append((self.rev, fingerprint))
        return fingerprint

    def ssh_keys_removed_since(self, revision: int) -> Deferred[list[str]]:
        return succeed([f for rev, f in self.removals if rev > revision])


class SSHKeyRemovalTests(SynchronousTestCase):
    """
    SSH key removals, polled and announced, make a relay that remembers SSH
    keys (L{nfltr.relay.cluster.ssh_key_cache}) forget them.
    """

    def setUp(self) -> None:
        self.store = RemovalStore()
        self.h = RelayHarness(self.store)
        relay = self.h.relay
        relay.sshKeys = SSHKeyCache(self.h.clock, relay.storeHealth, entries=10, limit=60.0)
        relay.sshKeys.log = relay.storeHealth.log = Logger(observer=lambda event: None)
        self.line = public_line()
        self.store.sshKeys[self.line] = "acme"
        self.assertEqual(self.successResultOf(relay.sshKeyAccount(self.line)), "acme")
        self.poller = RevocationPoller(self.store, relay, self.h.clock, 2.0, 0)

    def assertRefusedInOutage(self) -> None:
        """
        With the store down, the key is refused: not remembered.
        """
        self.h.relay.storeHealth.failed(StoreUnavailable("Redis at the test is away"))
        self.failureResultOf(self.h.relay.sshKeyAccount(self.line), StoreUnavailable)

    def test_remembered(self) -> None:
        """
        Without a removal, the key is taken from memory while the store is
        down (what the tests below take away).
        """
        self.h.relay.storeHealth.failed(StoreUnavailable("Redis at the test is away"))
        self.assertEqual(self.successResultOf(self.h.relay.sshKeyAccount(self.line)), "acme")

    def test_polled(self) -> None:
        """
        The poll finds a removal after the revision it last saw: the key is
        forgotten, and the poll goes on from the new revision.
        """
        self.store.removeSSHKey(self.line)
        self.successResultOf(self.poller.poll())
        self.assertEqual(self.poller.revision, 1)
        self.assertRefusedInOutage()

    def test_announced(self) -> None:
        """
        A removal announced on a feed that carries them is forgotten at once,
        with no poll.
        """
        feed = MemoryFeed()
        listener = RevocationListener(feed, self.poller.revoked, self.h.clock,
                                      removed=self.poller.sshKeyRemoved)
        self.successResultOf(listener.start())
        feed.announceRemoval(self.store.removeSSHKey(self.line))
        self.assertEqual(self.store.revisionCalls, 0)
        self.assertRefusedInOutage()


@implementer(IRevocationSubscription)
class MemorySubscription:
    channel = "nfltr:revoked"

    def __init__(self, feed: MemoryFeed) -> None:
        self.feed = feed

    def stop(self) -> Deferred[None]:
        self.feed.listeners.clear()
        self.feed.stops += 1
        return succeed(None)


@implementer(IRevocationFeed)
class MemoryFeed:
    """
    Announcements in memory; C{error} makes subscribing fail.
    """

    def __init__(self) -> None:
        self.listeners: list[Callable[[str], object]] = []
        self.removalListeners: list[Callable[[str], object]] = []
        self.error: Exception | None = None
        self.stops = 0

    def subscribe_revocations(
        self, callback: Callable[[str], object],
        removed: Callable[[str], object] | None = None,
    ) -> Deferred[IRevocationSubscription]:
        if self.error is not None:
            return fail(self.error)
        self.listeners.append(callback)
        if removed is not None:
            self.removalListeners.append(removed)
        return succeed(MemorySubscription(self))

    def announce(self, keyid: str) -> None:
        for listener in list(self.listeners):
            listener(keyid)

    def announceRemoval(self, fingerprint: str) -> None:
        for listener in list(self.removalListeners):
            listener(fingerprint)


class RevocationListenerTests(SynchronousTestCase):
    """
    L{RevocationListener} ends a key's links as its revocation is announced.
    """

    def setUp(self) -> None:
        self.h = RelayHarness()
        self.keyA = self.h.store.addKey(A_KEY, "acme")
        self.feed = MemoryFeed()
        self.poller = RevocationPoller(self.h.store, self.h.relay, self.h.clock, 3600.0, 0)
        self.listener = self.listen()

    def listen(self) -> RevocationListener:
        listener = RevocationListener(self.feed, self.poller.revoked, self.h.clock, retry=5.0)
        self.logged: list[dict] = []
        listener.log = Logger(observer=self.logged.append)
        return listener

    def test_feed(self) -> None:
        """
        The in-memory feed these tests use provides the interfaces.
        """
        self.assertTrue(verifyObject(IRevocationFeed, self.feed))
        self.assertTrue(verifyObject(IRevocationSubscription, MemorySubscription(self.feed)))

    def test_atOnce(self) -> None:
        """
        An announced revocation ends the key's agent at once, with no poll:
        the clock does not move.
        """
        self.successResultOf(self.listener.start())
        agent = self.h.agent(self.keyA, "web")
        self.feed.announce(A_KEY)
        self.h.run()
        self.assertEqual(
            agent.controls[-1],
            {"type": "refused", "reason": "revoked", "message": f"API key {A_KEY} was revoked"},
        )
        self.assertTrue(agent.closed)
        self.assertEqual(self.h.store.revisionCalls, 0)

    def test_retried(self) -> None:
        """
        A subscription that cannot start is tried again every C{retry}
        seconds, with one warning for the streak.
        """
        self.feed.error = StoreUnavailable("gone")
        self.successResultOf(self.listener.start())
        self.h.clock.advance(5.0)
        self.assertIsNone(self.listener.subscription)
        self.assertEqual(len(self.logged), 1)
        self.assertEqual(self.logged[0]["error"], "gone")
        self.feed.error = None
        self.h.clock.advance(4.9)
        self.assertIsNone(self.listener.subscription)
        self.h.clock.advance(0.1)
        self.assertIsNotNone(self.listener.subscription)
        self.assertEqual(len(self.feed.listeners), 1)

    def test_stop(self) -> None:
        """
        Stopping ends the subscription; one that was waiting to be tried
        again is not.
        """
        self.successResultOf(self.listener.start())
        self.successResultOf(self.listener.stop())
        self.assertEqual((self.feed.listeners, self.feed.stops), ([], 1))
        waiting = self.listen()
        self.feed.error = StoreUnavailable("gone")
        self.successResultOf(waiting.start())
        self.successResultOf(waiting.stop())
        self.feed.error = None
        self.h.clock.advance(60.0)
        self.assertIsNone(waiting.subscription)
        self.assertEqual(self.feed.listeners, [])
