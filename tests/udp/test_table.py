# -*- test-case-name: tests.udp.test_table -*-
"""
Tests for L{nfltr.udp.SessionTable}.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.udp import DatagramLimits, SessionTable
from nfltr.udp.interfaces import Address, IDatagramOpener, IDatagramPeer


@implementer(IDatagramPeer)
class FakePeer:
    def __init__(self, deliver: Callable[[bytes], None], ended: Callable[[], None]) -> None:
        self.deliver = deliver
        self.ended = ended
        self.sent: list[bytes] = []
        self.full = False
        self.closed = False
        self.dropped = 0

    def send(self, payload: bytes) -> bool:
        if self.full:
            self.dropped += 1
            return False
        self.sent.append(payload)
        return True

    def close(self) -> None:
        self.closed = True


@implementer(IDatagramOpener)
class FakeOpener:
    def __init__(self) -> None:
        self.peers: dict[Address, FakePeer] = {}
        self.refuse = False
        self.endAtOnce = False

    def openPeer(
        self, address: Address, deliver: Callable[[bytes], None], ended: Callable[[], None],
    ) -> FakePeer | None:
        if self.refuse:
            return None
        peer = FakePeer(deliver, ended)
        self.peers[address] = peer
        if self.endAtOnce:
            ended()
        return peer


A = ("192.0.2.1", 4000)
B = ("192.0.2.2", 4000)


class SessionTableTests(SynchronousTestCase):
    """
    One session per visitor address, ended when idle, bounded, counted.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.opener = FakeOpener()
        self.replies: list[tuple[bytes, Address]] = []
        self.table = SessionTable(
            self.opener, self.clock, lambda p, a: self.replies.append((p, a)),
            DatagramLimits(idle_timeout=10.0, max_sessions=2),
        )

    def test_interfaces(self) -> None:
        """
        The fakes keep the contracts the table relies on.
        """
        self.assertTrue(verifyObject(IDatagramOpener, self.opener))
        self.assertTrue(verifyObject(IDatagramPeer, FakePeer(print, print)))

    def test_onePerAddress(self) -> None:
        """
        Each visitor address gets its own session, reused for its later
        datagrams; answers go back to the address they belong to.
        """
        self.table.datagramReceived(b"a1", A)
        self.table.datagramReceived(b"b1", B)
        self.table.datagramReceived(b"a2", A)
        self.assertEqual(self.opener.peers[A].sent, [b"a1", b"a2"])
        self.assertEqual(self.opener.peers[B].sent, [b"b1"])
        self.opener.peers[B].deliver(b"answer")
        self.assertEqual(self.replies, [(b"answer", B)])
        table = self.table
        self.assertEqual((table.received, table.forwarded, table.returned), (3, 3, 1))

    def test_idleTimeout(self) -> None:
        """
        A session is closed C{idle_timeout} seconds after its last datagram
        either way, not before; the visitor's next datagram opens a new one.
        """
        self.table.datagramReceived(b"1", A)
        peer = self.opener.peers[A]
        self.clock.advance(6)
        peer.deliver(b"answer")
        self.clock.advance(6)
        self.assertFalse(peer.closed)
        self.clock.advance(4)
        self.assertTrue(peer.closed)
        self.assertEqual(len(self.table), 0)
        self.table.datagramReceived(b"2", A)
        self.assertIsNot(self.opener.peers[A], peer)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)

    def test_fullSessionDrops(self) -> None:
        """
        A datagram its session cannot take is dropped and counted; the other
        visitors' datagrams go on.
        """
        self.table.datagramReceived(b"a", A)
        self.table.datagramReceived(b"b", B)
        self.opener.peers[A].full = True
        for _ in range(5):
            self.table.datagramReceived(b"flood", A)
        self.table.datagramReceived(b"b2", B)
        self.assertEqual(self.table.dropped, 5)
        self.assertEqual(self.opener.peers[B].sent, [b"b", b"b2"])

    def test_maxSessions(self) -> None:
        """
        A visitor beyond C{max_sessions} is dropped and counted until a
        session ends.
        """
        self.table.datagramReceived(b"a", A)
        self.table.datagramReceived(b"b", B)
        self.table.datagramReceived(b"c", ("192.0.2.3", 1))
        self.assertEqual(self.table.dropped, 1)
        self.opener.peers[A].ended()
        self.table.datagramReceived(b"c", ("192.0.2.3", 1))
        self.assertEqual(len(self.table), 2)
        self.assertEqual(self.table.dropped, 1)

    def test_refusedOrEndedAtOnce(self) -> None:
        """
        No session (the link is down, or the session ends as it opens):
        the datagram is dropped and counted, and nothing is kept.
        """
        self.opener.refuse = True
        self.table.datagramReceived(b"a", A)
        self.opener.refuse = False
        self.opener.endAtOnce = True
        self.table.datagramReceived(b"a", A)
        self.assertEqual((self.table.dropped, len(self.table)), (2, 0))
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_endedForgets(self) -> None:
        """
        A session that ends (its link went) is forgotten with its timer.
        """
        self.table.datagramReceived(b"a", A)
        self.opener.peers[A].ended()
        self.assertEqual((len(self.table), self.clock.getDelayedCalls()), (0, []))

    def test_close(self) -> None:
        """
        Closing the table closes every session.
        """
        self.table.datagramReceived(b"a", A)
        self.table.datagramReceived(b"b", B)
        self.table.close()
        self.assertTrue(self.opener.peers[A].closed and self.opener.peers[B].closed)
        self.assertEqual((len(self.table), self.clock.getDelayedCalls()), (0, []))

    def test_limitsChecked(self) -> None:
        """
        Limits that cannot work are refused.
        """
        self.assertRaises(ValueError, DatagramLimits, idle_timeout=0)
        self.assertRaises(ValueError, DatagramLimits, max_sessions=0)
