"""
Tests for L{nfltr.relay.revocation}: the store is polled on a Clock.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.revocation import RevocationPoller

from .helpers import RelayHarness

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
