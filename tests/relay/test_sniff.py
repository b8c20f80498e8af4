"""
Tests for L{nfltr.relay._sniff}: link connections are handed over, anything
else gets a 400, silence gets aborted.
"""

from __future__ import annotations

from twisted.internet import error
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import MAGIC, PREAMBLE
from nfltr.relay._sniff import NOT_A_LINK_RESPONSE, SNIFF_TIMEOUT, SniffingFactory

HTTP_GET = b"GET / HTTP/1.1\r\nHost: relay\r\n\r\n"


class Inner(Protocol):
    """
    Records what the protocol that takes over is given.
    """

    def __init__(self) -> None:
        self.received = b""
        self.made = 0
        self.lost: Failure | None = None

    def connectionMade(self) -> None:
        self.made += 1

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.lost = reason


class SniffingTests(SynchronousTestCase):
    """
    L{SniffingProtocol} reads at most the magic's length, then decides.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.built: list[Inner] = []
        inner = Factory.forProtocol(lambda: self.built.append(Inner()) or self.built[-1])
        self.factory = SniffingFactory(inner, self.clock)
        self.transport = StringTransport()
        self.protocol = self.factory.buildProtocol(None)
        self.protocol.makeConnection(self.transport)

    def feed(self, data: bytes, split: bool) -> None:
        if split:
            for i in range(len(data)):
                self.protocol.dataReceived(data[i:i + 1])
        else:
            self.protocol.dataReceived(data)

    def _checkLink(self, split: bool) -> None:
        stream = PREAMBLE + b"frames follow"
        self.feed(stream, split)
        self.assertEqual(len(self.built), 1)
        self.assertEqual(self.built[0].made, 1)
        self.assertEqual(self.built[0].received, stream)
        self.assertIs(self.built[0].transport, self.transport)
        self.assertEqual(self.transport.value(), b"")
        self.assertFalse(self.transport.disconnecting)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_linkWhole(self) -> None:
        """
        A preamble and frames in one read go, whole and in order, to one
        protocol from the wrapped factory; nothing is written and the timeout
        is cancelled.
        """
        self._checkLink(split=False)

    def test_linkByteByByte(self) -> None:
        """
        The same stream split into one-byte reads reaches the protocol intact.
        """
        self._checkLink(split=True)

    def test_noVerdictBeforeMagic(self) -> None:
        """
        Until the whole magic has arrived nothing is built, written or closed.
        """
        self.protocol.dataReceived(MAGIC[:-1])
        self.assertEqual(self.built, [])
        self.assertEqual(self.transport.value(), b"")
        self.assertFalse(self.transport.disconnecting)
        self.protocol.dataReceived(MAGIC[-1:])
        self.assertEqual(len(self.built), 1)

    def test_laterDataForwarded(self) -> None:
        """
        After the hand-over, later reads and the connection's end go to the
        protocol that took over.
        """
        self.protocol.dataReceived(PREAMBLE)
        self.protocol.dataReceived(b"more")
        reason = Failure(error.ConnectionDone())
        self.protocol.connectionLost(reason)
        self.assertEqual(self.built[0].received, PREAMBLE + b"more")
        self.assertIs(self.built[0].lost, reason)

    def test_laterReadsGoDirectly(self) -> None:
        """
        After the hand-over the transport's reads reach the protocol that
        took over as they are, one call each, nothing buffered (the reader
        forwards them: nothing is patched onto either instance).
        """
        self.protocol.dataReceived(PREAMBLE)
        inner = self.built[0]
        self.assertIs(self.protocol.inner, inner)
        got: list[bytes] = []
        inner.dataReceived = got.append  # type: ignore[method-assign]
        self.protocol.dataReceived(b"later")
        self.protocol.dataReceived(b"reads")
        self.assertEqual(got, [b"later", b"reads"])

    def _checkHTTP(self, split: bool) -> None:
        self.feed(HTTP_GET, split)
        self.assertEqual(self.built, [])
        self.assertEqual(self.transport.value(), NOT_A_LINK_RESPONSE)
        self.assertTrue(self.transport.disconnecting)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_httpWhole(self) -> None:
        """
        An HTTP request gets the 400 response, once, and the connection is
        closed.
        """
        self._checkHTTP(split=False)

    def test_httpByteByByte(self) -> None:
        """
        The same request in one-byte reads gets the same single response.
        """
        self._checkHTTP(split=True)

    def test_response(self) -> None:
        """
        The response is a complete HTTP/1.1 400 whose body says what the port
        speaks, with a matching length.
        """
        head, _, body = NOT_A_LINK_RESPONSE.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 400 Bad Request\r\n"))
        self.assertIn(b"Content-Length: %d" % len(body), head)
        self.assertIn(b"Connection: close", head)
        self.assertEqual(body, b"this port speaks the nfltr link protocol\n")

    def test_nearMiss(self) -> None:
        """
        Bytes that start like the magic and then differ are refused too.
        """
        self.protocol.dataReceived(MAGIC[:5] + b"X")
        self.assertEqual(self.built, [])
        self.assertEqual(self.transport.value(), NOT_A_LINK_RESPONSE)

    def test_timeout(self) -> None:
        """
        A connection that has not shown the whole magic within the timeout is
        aborted, and not a moment earlier; later bytes are ignored.
        """
        self.assertEqual(SNIFF_TIMEOUT, 10.0)
        self.protocol.dataReceived(MAGIC[:3])
        self.clock.advance(SNIFF_TIMEOUT - 0.001)
        self.assertFalse(self.transport.disconnecting)
        self.clock.advance(0.001)
        self.assertTrue(self.transport.disconnecting)
        self.assertEqual(self.transport.value(), b"")
        self.protocol.dataReceived(MAGIC[3:])
        self.assertEqual(self.built, [])

    def test_lostBeforeVerdict(self) -> None:
        """
        A connection lost before its first bytes leaves no timer behind.
        """
        self.protocol.connectionLost(Failure(error.ConnectionDone()))
        self.assertEqual(self.clock.getDelayedCalls(), [])
