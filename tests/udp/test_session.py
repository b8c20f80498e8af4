# -*- test-case-name: tests.udp.test_session -*-
"""
Tests for L{nfltr.udp.DatagramSession} and L{nfltr.udp.LinkDatagramOpener},
alone on a L{StringTransport} and between two real links in memory.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IPushProducer
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.link import LinkConfig
from nfltr.link.twisted import LinkSession
from nfltr.udp import (
    DatagramDecoder,
    DatagramLimits,
    DatagramSession,
    LinkDatagramOpener,
    SessionTable,
    encode_datagram,
)
from nfltr.udp.interfaces import IDatagramOpener, IDatagramPeer
from nfltr.wire.udp import parse_udp_target, udp_target
from tests.link.twisted_helpers import LinkPair, RecordingHandler


class DatagramSessionTests(SynchronousTestCase):
    """
    The protocol on one datagram session.
    """

    def setUp(self) -> None:
        self.delivered: list[bytes] = []
        self.ended: list[bool] = []
        self.session = DatagramSession(self.delivered.append, lambda: self.ended.append(True))
        self.transport = StringTransport()
        self.session.makeConnection(self.transport)

    def test_interfaces(self) -> None:
        """
        A datagram session is an L{IDatagramPeer} and the session's producer.
        """
        self.assertTrue(verifyObject(IDatagramPeer, self.session))
        self.assertTrue(verifyObject(IPushProducer, self.session))
        self.assertIs(self.transport.producer, self.session)

    def test_framesEachDatagram(self) -> None:
        """
        Each datagram sent is written framed; each that arrives, in any
        reads, is delivered whole.
        """
        self.assertTrue(self.session.send(b"one"))
        self.assertTrue(self.session.send(b""))
        self.assertEqual(DatagramDecoder().feed(self.transport.value()), [b"one", b""])
        wire = encode_datagram(b"abc") + encode_datagram(b"de")
        for i in range(len(wire)):
            self.session.dataReceived(wire[i:i + 1])
        self.assertEqual(self.delivered, [b"abc", b"de"])

    def test_pausedDrops(self) -> None:
        """
        While the session is paused, datagrams are dropped and counted, not
        queued; once resumed they go out again.
        """
        self.session.pauseProducing()
        self.assertFalse(self.session.send(b"lost"))
        self.assertEqual((self.transport.value(), self.session.dropped), (b"", 1))
        self.session.resumeProducing()
        self.assertTrue(self.session.send(b"sent"))
        self.assertEqual(self.session.sent, 1)

    def test_closeEnds(self) -> None:
        """
        Closing ends the session; C{ended} is called once when it is lost,
        and later datagrams are dropped.
        """
        self.session.close()
        self.assertTrue(self.transport.disconnecting)
        self.session.connectionLost()
        self.session.connectionLost()
        self.assertEqual(self.ended, [True])
        self.assertFalse(self.session.send(b"late"))


def echoing(session: LinkSession) -> DatagramSession:
    """
    A datagram session that answers each datagram with itself.
    """
    proto = DatagramSession(print)
    proto.deliver = proto.send
    return proto


class LinkDatagramTests(SynchronousTestCase):
    """
    Datagram sessions between two real links.
    """

    def setUp(self) -> None:
        self.accepted: list[tuple[str, DatagramSession]] = []

        def accept(session: LinkSession) -> DatagramSession:
            proto = echoing(session)
            self.accepted.append((session.target, proto))
            return proto

        config = LinkConfig(session_window=64 * 1024, send_high_water=64 * 1024)
        self.pair = LinkPair(
            listenerHandler=RecordingHandler(accept), config=config, clock=Clock(),
        )
        self.replies: list[tuple[bytes, Any]] = []
        self.opener = LinkDatagramOpener(lambda: self.pair.dialer, lambda a: udp_target(53))
        self.table = SessionTable(
            self.opener, self.pair.clock, lambda p, a: self.replies.append((p, a)),
            DatagramLimits(idle_timeout=30.0),
        )

    def test_interfaces(self) -> None:
        """
        The opener keeps its contract.
        """
        self.assertTrue(verifyObject(IDatagramOpener, self.opener))

    def test_echo(self) -> None:
        """
        Datagrams cross the link with their boundaries, one session per
        visitor, and the answers come back to each visitor.
        """
        self.table.datagramReceived(b"hello", ("192.0.2.1", 1))
        self.table.datagramReceived(b"world!", ("192.0.2.1", 1))
        self.table.datagramReceived(b"x" * 65535, ("192.0.2.2", 2))
        self.pair.run()
        self.assertEqual(sorted(self.replies, key=len), [
            (b"hello", ("192.0.2.1", 1)), (b"world!", ("192.0.2.1", 1)),
            (b"x" * 65535, ("192.0.2.2", 2)),
        ])
        self.assertEqual([parse_udp_target(t) for t, _ in self.accepted], [(None, 53)] * 2)

    def test_idleEndsBothSides(self) -> None:
        """
        An idle visitor's session ends on both links.
        """
        self.table.datagramReceived(b"hello", ("192.0.2.1", 1))
        self.pair.run()
        self.pair.clock.advance(31)
        self.pair.run()
        self.assertEqual(len(self.table), 0)
        self.assertFalse(self.accepted[0][1].open)

    def test_linkDown(self) -> None:
        """
        Without a link the datagram is dropped and counted.
        """
        opener = LinkDatagramOpener(lambda: None, lambda a: udp_target(53))
        table = SessionTable(opener, self.pair.clock, lambda p, a: None)
        table.datagramReceived(b"x", ("192.0.2.1", 1))
        self.assertEqual(table.dropped, 1)

    def test_floodDoesNotBlockOthers(self) -> None:
        """
        A visitor whose session the far side stops reading fills only its
        own session: its datagrams beyond the high-water mark are dropped
        and counted, and another visitor's datagrams still cross, all of
        them.
        """
        flooder, other = ("192.0.2.1", 1), ("192.0.2.2", 2)
        self.table.datagramReceived(b"start", flooder)
        self.pair.run()
        stuck = self.pair.listenerHandler.sessions[0]
        stuck.pauseProducing()
        for _ in range(2000):
            self.table.datagramReceived(b"f" * 1000, flooder)
            self.pair.run()
        self.assertGreater(self.table.dropped, 0)
        self.replies.clear()
        for i in range(100):
            self.table.datagramReceived(b"%d" % i, other)
            self.pair.run()
        answers = [p for p, a in self.replies if a == other]
        self.assertEqual(answers, [b"%d" % i for i in range(100)])
