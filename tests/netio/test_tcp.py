"""
Tests for L{nfltr.netio._tcp}: nfltr's TCP transport on real loopback
sockets (what it changes is when bytes reach the kernel).
"""

from __future__ import annotations

import socket
from typing import Any

from twisted.internet import error, interfaces, reactor
from twisted.internet.defer import Deferred
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase
from zope.interface import implementer

from nfltr.netio import IOSettings, TunedReactor


class Accepted(Protocol):
    """
    The server side of a test connection; its factory's C{accepted} fires
    with it.
    """

    reason: Failure | None = None

    def connectionMade(self) -> None:
        self.lost: Deferred[None] = Deferred()
        self.factory.accepted.callback(self)

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        self.reason = reason
        self.lost.callback(None)


@implementer(interfaces.IPushProducer)
class Producer:
    """
    A streaming producer that records being paused and resumed.
    """

    def __init__(self) -> None:
        self.events: list[str] = []

    def pauseProducing(self) -> None:
        self.events.append("pause")

    def resumeProducing(self) -> None:
        self.events.append("resume")

    def stopProducing(self) -> None:
        self.events.append("stop")


@implementer(interfaces.IPullProducer)
class PullProducer:
    """
    A pull producer that writes one chunk each time it is asked.
    """

    def __init__(self, transport: Any, chunks: list[bytes]) -> None:
        self.transport = transport
        self.chunks = chunks
        self.asked = 0

    def resumeProducing(self) -> None:
        self.asked += 1
        if self.chunks:
            self.transport.write(self.chunks.pop(0))
        else:
            self.transport.unregisterProducer()

    def stopProducing(self) -> None:
        pass


class WriteNowTests(TestCase):
    """
    A write goes to the socket at once when nothing is queued, and to
    Twisted's queue otherwise; what the queue does is unchanged.
    """

    def connect(self, **settings: Any) -> Deferred[tuple[Accepted, socket.socket]]:
        """
        A connection to nfltr's port from a plain socket: the accepted
        protocol and the socket (non-blocking).
        """
        tuned = TunedReactor(reactor, IOSettings(**settings))
        factory = Factory.forProtocol(Accepted)
        factory.accepted = Deferred()  # type: ignore[attr-defined]
        port = tuned.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        sock = socket.create_connection(("127.0.0.1", port.getHost().port))
        sock.setblocking(False)
        self.addCleanup(sock.close)

        def both(protocol: Accepted) -> tuple[Accepted, socket.socket]:
            def abort() -> Deferred[None]:
                protocol.transport.abortConnection()
                return protocol.lost

            self.addCleanup(abort)
            return protocol, sock

        d: Deferred[tuple[Accepted, socket.socket]] = factory.accepted  # type: ignore[attr-defined]
        return d.addCallback(both)

    async def test_sentAtOnce(self) -> None:
        """
        With nothing queued, the bytes are in the peer's socket when
        C{write} returns, and nothing is queued or waiting for writability.
        """
        protocol, sock = await self.connect()
        transport = protocol.transport
        transport.write(b"now")
        transport.writeSequence([b" and ", b"again"])
        self.assertEqual(sock.recv(100), b"now and again")
        self.assertEqual((transport.dataBuffer, transport._tempDataLen), (b"", 0))
        self.assertNotIn(transport, reactor.getWriters())

    async def test_switchedOff(self) -> None:
        """
        With C{write_now} off, the write is queued for a later turn, as in
        Twisted.
        """
        protocol, sock = await self.connect(write_now=False)
        protocol.transport.write(b"later")
        self.assertRaises(BlockingIOError, sock.recv, 100)
        self.assertEqual(protocol.transport._tempDataLen, 5)

    async def test_partialWriteQueuesRest(self) -> None:
        """
        What the socket does not take is queued, later writes queue behind
        it, a streaming producer is paused once the queue is over the read
        size and resumed once it drained; every byte arrives, in order.
        """
        protocol, sock = await self.connect(read_size=65536)
        transport = protocol.transport
        transport.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        producer = Producer()
        transport.registerProducer(producer, True)
        big = bytes(range(256)) * (8 * 4096)  # 8 MiB
        transport.write(big)
        self.assertGreater(transport._tempDataLen, 0)
        self.assertLess(transport._tempDataLen, len(big))
        self.assertEqual(producer.events, ["pause"])
        transport.write(b"tail")
        received = bytearray()
        while len(received) < len(big) + 4:
            try:
                received += sock.recv(1 << 20)
            except BlockingIOError:
                await _turn()
        self.assertEqual(bytes(received), big + b"tail")
        while transport._tempDataLen or transport.dataBuffer:
            await _turn()
        # Twisted pauses again on each write to a full queue.
        self.assertEqual(set(producer.events[:-1]), {"pause"})
        self.assertEqual(producer.events[-1], "resume")

    async def test_pullProducerKeepsQueue(self) -> None:
        """
        With a pull producer, writes take Twisted's path, whose emptied
        queue asks the producer for more: every chunk is asked for.
        """
        protocol, sock = await self.connect()
        transport = protocol.transport
        producer = PullProducer(transport, [b"a", b"b", b"c"])
        transport.registerProducer(producer, False)
        received = b""
        while len(received) < 3:
            try:
                received += sock.recv(100)
            except BlockingIOError:
                await _turn()
        self.assertEqual(received, b"abc")
        self.assertGreaterEqual(producer.asked, 3)

    async def test_notAfterLoseConnection(self) -> None:
        """
        Once the connection is closing, a write takes Twisted's path (it is
        still sent, before the close).
        """
        protocol, sock = await self.connect()
        transport = protocol.transport
        transport.loseConnection()
        transport.write(b"last")
        self.assertEqual(transport._tempDataLen, 4)
        await protocol.lost
        sock.setblocking(True)
        self.assertEqual(sock.recv(100), b"last")

    async def test_errorReportedLater(self) -> None:
        """
        A write to a connection the peer reset does not raise; the
        protocol hears of the loss on a later turn, as in Twisted.
        """
        protocol, sock = await self.connect()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()
        await _turn()
        for _ in range(3):
            protocol.transport.write(b"x" * 1000)
        await protocol.lost
        reason = protocol.reason
        assert reason is not None
        self.assertTrue(reason.check(error.ConnectionLost, error.ConnectionDone), reason)

    async def test_readSize(self) -> None:
        """
        One read takes up to the read size.
        """
        protocol, sock = await self.connect(read_size=300_000)
        self.assertEqual(protocol.transport.bufferSize, 300_000)
        reads: list[int] = []
        protocol.dataReceived = lambda data: reads.append(len(data))  # type: ignore[method-assign]
        sock.setblocking(True)
        sock.sendall(b"y" * 200_000)
        while sum(reads) < 200_000:
            await _turn()
        self.assertGreater(max(reads), 65536)


def _turn() -> Deferred[None]:
    d: Deferred[None] = Deferred()
    reactor.callLater(0.001, d.callback, None)
    return d
