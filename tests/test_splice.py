"""
Tests for L{nfltr.streams._splice}.
"""

from __future__ import annotations

from twisted.internet import abstract, error
from twisted.internet.testing import MemoryReactor, StringTransport
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from nfltr.streams import splice


class HalfClosingTransport(StringTransport):
    """
    A StringTransport that records half-closes and aborts.
    """

    writeClosed = False
    aborted = False

    def loseWriteConnection(self) -> None:
        self.writeClosed = True

    def abortConnection(self) -> None:
        self.aborted = True
        self.disconnecting = True


class SocketLikeTransport(abstract.FileDescriptor):
    """
    Twisted's own write path (L{abstract.FileDescriptor}: its buffer, its
    producer handling, its C{doWrite}), over a socket that takes
    C{room} bytes at a time; C{doWrite} is called by the test, as the
    reactor would once the socket is writable.

    @ivar sent: what the socket took.
    @ivar writeClosed: the write side was shut down (the peer sees EOF).
    """

    bufferSize = 1024

    def __init__(self, reactor: MemoryReactor) -> None:
        super().__init__(reactor)
        self.connected = True
        self.room = 0
        self.sent = bytearray()
        self.writeClosed = False

    def writeSomeData(self, data: bytes) -> int:
        n = min(len(data), self.room)
        self.sent += data[:n]
        return n

    def drain(self) -> None:
        """
        The socket takes all there is now: write it, as the reactor would.
        """
        self.room = 1 << 30
        self.doWrite()

    def _closeWriteConnection(self) -> None:
        self.writeClosed = True

    def abortConnection(self) -> None:
        self.disconnecting = True


class SpliceTests(SynchronousTestCase):
    """
    Two ends forward to each other with flow control and close semantics.
    """

    def connected(self):
        a, b = splice()
        ta, tb = HalfClosingTransport(), HalfClosingTransport()
        a.makeConnection(ta)
        b.makeConnection(tb)
        return a, b, ta, tb

    def test_firstEndWaitsPaused(self) -> None:
        """
        An end connected before the other is paused; connecting the other
        resumes both and registers on each transport a streaming producer
        that pauses and resumes the other transport.
        """
        a, b = splice()
        ta, tb = HalfClosingTransport(), HalfClosingTransport()
        a.makeConnection(ta)
        self.assertEqual(ta.producerState, "paused")
        b.makeConnection(tb)
        self.assertEqual(ta.producerState, "producing")
        self.assertTrue(ta.streaming and tb.streaming)
        ta.producer.pauseProducing()
        self.assertEqual((ta.producerState, tb.producerState), ("producing", "paused"))
        tb.producer.pauseProducing()
        self.assertEqual(ta.producerState, "paused")
        ta.producer.resumeProducing()
        tb.producer.resumeProducing()
        self.assertEqual((ta.producerState, tb.producerState), ("producing", "producing"))

    def test_stopProducingLeavesOtherSide(self) -> None:
        """
        A transport ending calls its producer's C{stopProducing} before its
        protocol's C{connectionLost}: that must not touch the other side,
        which C{connectionLost} then ends the way this side ended (between
        two link sessions, a reset's code could not be passed on otherwise).
        """
        _a, _b, ta, tb = self.connected()
        ta.producer.stopProducing()
        self.assertFalse(tb.aborted)
        self.assertFalse(tb.disconnecting)
        self.assertEqual(tb.producerState, "producing")

    def test_bytesBothWays(self) -> None:
        """
        What one end receives is written to the other's transport.
        """
        a, b, ta, tb = self.connected()
        a.dataReceived(b"ping")
        b.dataReceived(b"pong")
        self.assertEqual(tb.value(), b"ping")
        self.assertEqual(ta.value(), b"pong")

    def test_eofHalfCloses(self) -> None:
        """
        EOF on one end half-closes the other's write side and nothing more.
        """
        a, _b, ta, tb = self.connected()
        a.readConnectionLost()
        self.assertTrue(tb.writeClosed)
        self.assertFalse(tb.disconnecting)
        self.assertFalse(ta.disconnecting)

    def test_eofBehindFullTransportHalfCloses(self) -> None:
        """
        EOF that comes in the same read as bytes that filled the other
        end's socket (a TLS C{close_notify} right after the last record)
        still half-closes it once the socket drained.  Twisted's write
        path resumes a paused producer instead of shutting the write side
        when its buffer empties, so the splice end must stop being that
        producer at EOF: otherwise the socket's peer never sees EOF.
        """
        a, b = splice()
        ta = HalfClosingTransport()
        tb = SocketLikeTransport(MemoryReactor())
        a.makeConnection(ta)
        b.makeConnection(tb)
        a.dataReceived(b"x" * 4096)
        self.assertEqual(ta.producerState, "paused")
        a.readConnectionLost()
        tb.drain()
        self.assertEqual(bytes(tb.sent), b"x" * 4096)
        self.assertTrue(tb.writeClosed)
        self.assertFalse(tb.disconnecting)

    def test_eofIntoWrapperClosesWhole(self) -> None:
        """
        A protocol wrapper (TLS) cannot half-close: EOF closes it whole
        rather than half-closing the transport underneath it, and this end
        is no longer its producer.
        """
        a, b = splice()
        ta = HalfClosingTransport()
        below = HalfClosingTransport()
        wrapper = ProtocolWrapper(WrappingFactory(None), b)
        wrapper.makeConnection(below)
        a.makeConnection(ta)
        self.assertIs(below.producer, a)
        a.readConnectionLost()
        self.assertFalse(below.writeClosed)
        self.assertTrue(below.disconnecting)
        # Twisted's TLS closes only once its producer is gone.
        self.assertIsNone(below.producer)

    def test_cleanCloseCloses(self) -> None:
        """
        A clean close on one end closes the other cleanly.
        """
        a, _b, _ta, tb = self.connected()
        a.connectionLost(Failure(error.ConnectionDone()))
        self.assertTrue(tb.disconnecting)
        self.assertFalse(tb.aborted)
        self.assertIsNone(tb.producer)

    def test_errorAborts(self) -> None:
        """
        An error on one end aborts the other, so a cut never looks like a
        clean end of stream.
        """
        a, _b, _ta, tb = self.connected()
        lost: list[Failure] = []
        a.onLost = lost.append
        a.connectionLost(Failure(error.ConnectionLost()))
        self.assertTrue(tb.aborted)
        self.assertEqual(len(lost), 1)
