"""
Tests for L{nfltr.streams._prefix}: L{PrefixReader} reads a prefix, hands
the connection over, and then passes every event on.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.netio import ITransientReader
from nfltr.streams import PrefixReader

ADDRESS = IPv4Address("TCP", "127.0.0.1", 40000)


class Recorder(Protocol):
    """
    Records its reads and its loss.
    """

    def __init__(self) -> None:
        self.reads: list[bytes] = []
        self.lost: Failure | None = None

    def dataReceived(self, data: bytes) -> None:
        self.reads.append(data)

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        self.lost = reason


class FirstLine(PrefixReader):
    """
    Reads up to a newline, then hands the connection to its factory's
    C{inner} factory with everything read.
    """

    def __init__(self, factory: Any, addr: Any) -> None:
        super().__init__(factory, addr)
        self.buffer = b""
        self.expired = False

    def prefixReceived(self, data: bytes) -> None:
        self.buffer += data
        if b"\n" in self.buffer:
            self.cancelTimer()
            self.handOver(self.factory.inner, self.buffer)

    def timedOut(self) -> None:
        self.expired = True
        self.transport.abortConnection()


class ReaderFactory:
    """
    What a L{PrefixReader} needs of its factory.
    """

    def __init__(self, inner: Any) -> None:
        self.clock = Clock()
        self.timeout = 5.0
        self.inner = inner


class HandOverTests(SynchronousTestCase):
    """
    Before a hand-over reads are the reader's; after, the new protocol's.
    """

    def setUp(self) -> None:
        self.app = Recorder()
        self.factory = ReaderFactory(Factory.forProtocol(lambda: self.app))
        self.reader = FirstLine(self.factory, ADDRESS)
        self.transport = StringTransport()
        self.reader.makeConnection(self.transport)

    def test_handOver(self) -> None:
        """
        The prefix, however it was split, reaches the new protocol as its
        first read; every later read follows as it came; the timeout is
        stopped.
        """
        self.reader.dataReceived(b"HEL")
        self.reader.dataReceived(b"LO\nre")
        self.reader.dataReceived(b"st")
        self.assertEqual(self.app.reads, [b"HELLO\nre", b"st"])
        self.assertIs(self.app.transport, self.transport)
        self.assertEqual(self.factory.clock.getDelayedCalls(), [])

    def test_lentInput(self) -> None:
        """
        Lent bytes reach the reader's prefix as a copy, then a protocol
        that took over lent if it can be lent them (L{ITransientReader}),
        a copy otherwise.
        """
        verifyObject(ITransientReader, self.reader)
        self.reader.transientDataReceived(memoryview(bytearray(b"go\nx")))
        self.reader.transientDataReceived(memoryview(b"y"))
        self.assertEqual(self.app.reads, [b"go\nx", b"y"])
        self.assertEqual([type(read) for read in self.app.reads], [bytes, bytes])

        @implementer(ITransientReader)
        class Borrower(Recorder):
            lent: list[memoryview] = []

            def transientDataReceived(self, data: memoryview) -> None:
                self.lent.append(data)

        borrower = Borrower()
        reader = FirstLine(ReaderFactory(Factory.forProtocol(lambda: borrower)), ADDRESS)
        reader.makeConnection(StringTransport())
        reader.dataReceived(b"go\n")
        lent = memoryview(b"z")
        reader.transientDataReceived(lent)
        self.assertEqual(borrower.lent, [lent])

        class Watching(FirstLine):
            seen: list[bytes] = []

            def dataReceived(self, data: bytes) -> None:
                self.seen.append(data)
                super().dataReceived(data)

        watched = Borrower()
        watcher = Watching(ReaderFactory(Factory.forProtocol(lambda: watched)), ADDRESS)
        watcher.makeConnection(StringTransport())
        watcher.dataReceived(b"go\n")
        watcher.transientDataReceived(memoryview(b"w"))
        self.assertEqual(watcher.seen, [b"go\n", b"w"])
        self.assertEqual(watched.reads, [b"go\n", b"w"])

    def test_peerWritten(self) -> None:
        """
        The reader names its peer for the log as C{HOST:PORT} (IPv6
        bracketed), never as a Python repr.
        """
        for address, written in [
            (IPv4Address("TCP", "192.0.2.7", 4321), "192.0.2.7:4321"),
            (IPv6Address("TCP", "2001:db8::7", 4321), "[2001:db8::7]:4321"),
        ]:
            reader = FirstLine(self.factory, address)
            reader.makeConnection(StringTransport(peerAddress=address))
            self.assertEqual(reader.peer(), written)

    def test_nothingPatched(self) -> None:
        """
        The hand-over changes neither protocol's methods: the reader's reads
        still go through its class's C{dataReceived}.
        """
        self.reader.dataReceived(b"go\n")
        self.assertNotIn("dataReceived", vars(self.reader))
        self.assertNotIn("dataReceived", vars(self.app))

    def test_lossPassedOn(self) -> None:
        """
        The loss of a connection handed over reaches the new protocol with
        its reason.
        """
        self.reader.dataReceived(b"go\n")
        self.reader.connectionLost(Failure(error.ConnectionLost("cut")))
        assert self.app.lost is not None
        self.assertTrue(self.app.lost.check(error.ConnectionLost))

    def test_timeout(self) -> None:
        """
        No decision within the timeout: the reader is told.
        """
        self.factory.clock.advance(self.factory.timeout)
        self.assertTrue(self.reader.expired)
        self.assertEqual(self.app.reads, [])

    def test_declined(self) -> None:
        """
        A factory that builds no protocol closes the connection.
        """

        class Declining(Factory):
            def buildProtocol(self, addr: Any) -> None:
                return None

        self.factory.inner = Declining()
        self.reader.dataReceived(b"go\n")
        self.assertTrue(self.transport.disconnecting)
