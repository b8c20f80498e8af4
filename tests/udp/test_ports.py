# -*- test-case-name: tests.udp.test_ports -*-
"""
Tests for L{nfltr.udp.UDPEntrance} and L{nfltr.udp.ServiceExit}, on a fake
UDP reactor and L{StringTransport}s.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from nfltr.udp import DatagramDecoder, ServiceExit, UDPEntrance, encode_datagram
from nfltr.udp.interfaces import Address, IDatagramOpener, IDatagramPeer

from .helpers import FakeUDPPort, FakeUDPReactor


@implementer(IDatagramPeer)
class Peer:
    def __init__(self, deliver: Callable[[bytes], None]) -> None:
        self.deliver = deliver
        self.sent: list[bytes] = []
        self.dropped = 0
        self.closed = False

    def send(self, payload: bytes) -> bool:
        self.sent.append(payload)
        return True

    def close(self) -> None:
        self.closed = True


@implementer(IDatagramOpener)
class Opener:
    def __init__(self) -> None:
        self.peers: dict[Address, Peer] = {}

    def openPeer(self, address: Address, deliver: Callable[[bytes], None],
                 ended: Callable[[], None]) -> Peer:
        self.peers[address] = Peer(deliver)
        return self.peers[address]


class UDPEntranceTests(SynchronousTestCase):
    """
    The listening socket of a connector.
    """

    def setUp(self) -> None:
        self.opener = Opener()
        self.entrance = UDPEntrance(self.opener, Clock())
        self.port = FakeUDPPort(self.entrance, "127.0.0.1")

    def test_visitorsAndAnswers(self) -> None:
        """
        Each visitor's datagrams go to its own session; answers are written
        back to the visitor's address.
        """
        self.entrance.datagramReceived(b"q", ("127.0.0.1", 1000))
        self.entrance.datagramReceived(b"r", ("127.0.0.1", 1001))
        self.assertEqual(self.opener.peers[("127.0.0.1", 1000)].sent, [b"q"])
        self.opener.peers[("127.0.0.1", 1001)].deliver(b"answer")
        self.assertEqual(self.port.written, [(b"answer", ("127.0.0.1", 1001))])

    def test_stopEndsSessions(self) -> None:
        """
        Closing the socket ends every visitor's session.
        """
        self.entrance.datagramReceived(b"q", ("::1", 1000, 0, 0))
        self.port.stopListening()
        self.assertTrue(self.opener.peers[("::1", 1000)].closed)
        self.assertEqual(len(self.entrance.table), 0)


class ServiceExitTests(SynchronousTestCase):
    """
    The agent's end of one datagram session.
    """

    def setUp(self) -> None:
        self.reactor = FakeUDPReactor()

    def test_bothWays(self) -> None:
        """
        A socket connected to the service: the session's datagrams are sent
        to it, its answers go back on the session, and it closes with the
        session.
        """
        exit = ServiceExit(self.reactor, "127.0.0.1", 53)
        port = self.reactor.ports[0]
        self.assertEqual(port.connected, ("127.0.0.1", 53))
        link = StringTransport()
        exit.session.makeConnection(link)
        exit.session.dataReceived(encode_datagram(b"query"))
        self.assertEqual(port.written, [(b"query", ("127.0.0.1", 53))])
        port.protocol.datagramReceived(b"answer", ("127.0.0.1", 53))
        self.assertEqual(DatagramDecoder().feed(link.value()), [b"answer"])
        exit.session.connectionLost()
        self.assertFalse(port.listening)

    def test_bound(self) -> None:
        """
        The socket to a loopback service is bound to its address (nothing
        else reaches it); to another, to any address of its family.
        """
        for host, bound in [("127.0.0.1", "127.0.0.1"), ("::1", "::1"), ("192.0.2.1", ""),
                            ("2001:db8::1", "::")]:
            ServiceExit(self.reactor, host, 53)
            self.assertEqual(self.reactor.ports[-1].interface, bound, host)

    def test_stop(self) -> None:
        """
        Stopping ends the session and closes the socket.
        """
        exit = ServiceExit(self.reactor, "127.0.0.1", 53)
        link = StringTransport()
        exit.session.makeConnection(link)
        exit.stop()
        self.assertTrue(link.disconnecting)
        self.assertFalse(self.reactor.ports[0].listening)

    def test_writeFailureCounted(self) -> None:
        """
        A datagram the service's socket cannot take is counted as dropped.
        """
        exit = ServiceExit(self.reactor, "127.0.0.1", 53)
        exit.session.makeConnection(StringTransport())
        self.reactor.ports[0].failWrites = True
        exit.session.dataReceived(encode_datagram(b"x"))
        self.assertEqual(exit.session.dropped, 1)
