"""
Helpers for the Twisted adapter's tests: a pair of real L{LinkProtocol}s
joined by L{twisted.test.iosim} on a L{Clock}, and protocols that stream
and check deterministic bytes.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from twisted.internet import interfaces
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.test.iosim import FakeTransport, IOPump, connect
from zope.interface import implementer

from nfltr.link import DIALER, LISTENER, LinkConfig
from nfltr.link.twisted import LinkHandler, LinkProtocol, LinkSession

CHUNK = 64 * 1024


def pattern(seed: int, size: int) -> bytes:
    """
    Deterministic pseudo-random bytes.
    """
    return random.Random(seed).randbytes(size)


class RecordingHandler(LinkHandler):
    """
    Accepts sessions with protocols from C{protocolFor(session)} and records
    what happened.
    """

    def __init__(self, protocolFor: Any = None) -> None:
        self.protocolFor = protocolFor
        self.sessions: list[LinkSession] = []
        self.controls: list[dict[str, Any]] = []
        self.lost: list[Failure] = []
        self.established = 0
        self.goingAway = 0

    def linkEstablished(self, link: LinkProtocol) -> None:
        self.established += 1

    def sessionRequested(self, session: LinkSession) -> None:
        self.sessions.append(session)
        if self.protocolFor is None:
            super().sessionRequested(session)
        else:
            session.accept(self.protocolFor(session))

    def controlReceived(self, link: LinkProtocol, message: dict[str, Any]) -> None:
        self.controls.append(message)

    def linkGoingAway(self, link: LinkProtocol) -> None:
        self.goingAway += 1

    def linkLost(self, link: LinkProtocol, reason: Failure) -> None:
        self.lost.append(reason)


class LinkPair:
    """
    A dialer and a listener link joined in memory.
    """

    def __init__(
        self, dialerHandler: Any = None, listenerHandler: Any = None,
        config: LinkConfig | None = None, listenerConfig: LinkConfig | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.clock = clock or Clock()
        self.dialerHandler = dialerHandler or RecordingHandler()
        self.listenerHandler = listenerHandler or RecordingHandler()
        self.dialer = LinkProtocol(DIALER, self.dialerHandler, self.clock, config)
        self.listener = LinkProtocol(
            LISTENER, self.listenerHandler, self.clock, listenerConfig or config
        )
        self.dialerIO = FakeTransport(self.dialer, isServer=False)
        self.listenerIO = FakeTransport(self.listener, isServer=True)
        self.pump: IOPump = connect(
            self.listener, self.listenerIO, self.dialer, self.dialerIO, greet=False,
            clock=self.clock,
        )
        self.run()

    def run(self, rounds: int = 100_000) -> int:
        """
        Pump until nothing moves; return how many rounds moved data.
        """
        for n in range(rounds):
            if not self.pump.pump():
                return n
        raise AssertionError("the links never went quiet")

    def cut(self, reason: Exception) -> None:
        """
        Drop the connection under both links without a goodbye.
        """
        self.dialerIO.disconnectReason = reason
        self.listenerIO.disconnectReason = reason
        self.dialer.connectionLost(Failure(reason))
        self.listener.connectionLost(Failure(reason))


@implementer(interfaces.IPushProducer, interfaces.IHalfCloseableProtocol)
class Streamer(Protocol):
    """
    Streams C{size} deterministic bytes as a producer (respecting pauses),
    then half-closes; checks the bytes it receives against C{expectSeed}.
    """

    def __init__(
        self, seed: int | None, size: int, expectSeed: int | None = None,
        expectSize: int = 0, stuck: bool = False,
    ) -> None:
        self.toSend = pattern(seed, size) if seed is not None else b""
        self.sent = 0
        self.paused = False
        self.expected = (
            hashlib.sha256(pattern(expectSeed, expectSize)).hexdigest()
            if expectSeed is not None else None
        )
        self.hash = hashlib.sha256()
        self.received = 0
        self.stuck = stuck
        self.readEnded = False
        self.lost: Failure | None = None

    def connectionMade(self) -> None:
        self.transport.registerProducer(self, True)
        if self.stuck:
            self.transport.pauseProducing()
        self.resumeProducing()

    def resumeProducing(self) -> None:
        self.paused = False
        while not self.paused and self.sent < len(self.toSend):
            chunk = self.toSend[self.sent:self.sent + CHUNK]
            self.sent += len(chunk)
            self.transport.write(chunk)
        if self.sent >= len(self.toSend) and not self.paused and self.transport is not None:
            self.transport.unregisterProducer()
            self.transport.loseWriteConnection()
            self.sent += 1  # finished: never again

    def pauseProducing(self) -> None:
        self.paused = True

    def stopProducing(self) -> None:
        self.paused = True

    def dataReceived(self, data: bytes) -> None:
        self.hash.update(data)
        self.received += len(data)

    def readConnectionLost(self) -> None:
        self.readEnded = True

    def writeConnectionLost(self) -> None:
        pass

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.lost = reason

    def verified(self) -> bool:
        """
        Everything expected arrived, intact, before a clean end of input.
        """
        return self.readEnded and self.hash.hexdigest() == self.expected


class BoundedTransport(FakeTransport):
    """
    An iosim transport with a send buffer, as Twisted's TCP transport: a
    streaming producer registered on it is paused once more than
    C{bufferSize} bytes are buffered and resumed once the buffer is empty;
    C{pauseProducing} stops its protocol being fed (L{BoundedPair} delivers
    nothing to it) until C{resumeProducing}.

    @ivar buffered: bytes written, not yet taken by the peer.
    @ivar peak: the most C{buffered} held.
    @ivar reading: whether the protocol is fed.
    @ivar readPauses: how many times the protocol stopped its reading.
    @ivar producerPauses: how many times the buffer paused the producer.
    @ivar aborted: C{abortConnection} was called.
    """

    def __init__(self, protocol: Any, isServer: bool, bufferSize: int) -> None:
        super().__init__(protocol, isServer)
        self.bufferSize = bufferSize
        self.buffered = bytearray()
        self.peak = 0
        self.producerPaused = False
        self.reading = True
        self.readPauses = 0
        self.producerPauses = 0
        self.aborted = False

    def write(self, data: bytes) -> None:
        if self.disconnecting:
            return
        self.buffered += data
        self.peak = max(self.peak, len(self.buffered))
        producer = self.producer
        if (
            producer is not None and self.streamingProducer and not self.producerPaused
            and len(self.buffered) > self.bufferSize
        ):
            self.producerPaused = True
            self.producerPauses += 1
            producer.pauseProducing()

    def take(self, size: int) -> bytes:
        """
        What the peer reads: up to C{size} bytes; the producer resumes once
        the buffer is empty.
        """
        data = bytes(self.buffered[:size])
        del self.buffered[:size]
        if not self.buffered and self.producerPaused and self.producer is not None:
            self.producerPaused = False
            self.producer.resumeProducing()
        return data

    def pauseProducing(self) -> None:
        if self.reading:
            self.readPauses += 1
        self.reading = False

    def resumeProducing(self) -> None:
        self.reading = True

    def abortConnection(self) -> None:
        self.aborted = True
        self.disconnecting = True


class BoundedPair:
    """
    A dialer and a listener link over L{BoundedTransport}s on a L{Clock}:
    each pump round moves at most C{readSize} bytes each way, to a side that
    reads, and runs the calls due now.  The listener (a relay's side) may
    report to a L{nfltr.link.memory.LinkMemory}, C{listenerMemory}.

    @ivar peerReads: whether each side's peer takes what it sent, by role
        (C{False}: a peer that never reads).
    """

    def __init__(
        self, dialerHandler: Any = None, listenerHandler: Any = None, *,
        config: LinkConfig | None = None, listenerConfig: LinkConfig | None = None,
        bufferSize: int = 64 * 1024, readSize: int = 64 * 1024, listenerMemory: Any = None,
    ) -> None:
        self.clock = Clock()
        self.readSize = readSize
        self.dialerHandler = dialerHandler or RecordingHandler()
        self.listenerHandler = listenerHandler or RecordingHandler()
        self.dialer = LinkProtocol(DIALER, self.dialerHandler, self.clock, config)
        self.listener = LinkProtocol(
            LISTENER, self.listenerHandler, self.clock, listenerConfig or config,
            **({"memory": listenerMemory} if listenerMemory is not None else {}),
        )
        self.dialerIO = BoundedTransport(self.dialer, False, bufferSize)
        self.listenerIO = BoundedTransport(self.listener, True, bufferSize)
        self.peerReads = {DIALER: True, LISTENER: True}
        self.dialer.makeConnection(self.dialerIO)
        self.listener.makeConnection(self.listenerIO)
        self.run()

    def pump(self) -> bool:
        """
        One round: run the calls due now, then move bytes; whether any byte
        moved.
        """
        self.clock.advance(0)
        moved = False
        for role, source, sink in self._ends():
            if source.buffered and sink.reading and self.peerReads[role] and not sink.disconnected:
                sink.protocol.dataReceived(source.take(self.readSize))
                moved = True
        for io, other in ((self.dialerIO, self.listenerIO), (self.listenerIO, self.dialerIO)):
            if io.disconnecting and not io.disconnected and (io.aborted or not io.buffered):
                io.disconnected = other.disconnected = True
                io.reportDisconnect()
                other.reportDisconnect()
                moved = True
        return moved

    def _ends(self) -> list[tuple[str, BoundedTransport, BoundedTransport]]:
        return [
            (DIALER, self.dialerIO, self.listenerIO), (LISTENER, self.listenerIO, self.dialerIO)
        ]

    def run(self, rounds: int = 200_000) -> int:
        """
        Pump until nothing moves; return how many rounds moved data.
        """
        quiet = 0
        for n in range(rounds):
            quiet = 0 if self.pump() else quiet + 1
            if quiet == 2:
                return n
        raise AssertionError("the links never went quiet")


@implementer(interfaces.IPushProducer, interfaces.IHalfCloseableProtocol)
class Trickler(Protocol):
    """
    A producer that writes C{chunk} bytes per reactor turn (as a socket
    read forwarded each turn) while not paused, C{size} in all, then
    half-closes; it counts the pauses and resumptions it was asked for, and
    ignores what it receives.
    """

    def __init__(self, clock: Clock, size: int, chunk: int = CHUNK) -> None:
        self.clock = clock
        self.size = size
        self.chunk = chunk
        self.sent = 0
        self.paused = False
        self.pauses = self.resumes = 0
        self._call: Any = None
        self.lost: Failure | None = None

    def connectionMade(self) -> None:
        self.transport.registerProducer(self, True)
        self._schedule()

    def _schedule(self) -> None:
        if self._call is None and not self.paused and self.sent < self.size:
            self._call = self.clock.callLater(0, self._tick)

    def _tick(self) -> None:
        self._call = None
        if self.paused or self.lost is not None:
            return
        n = min(self.chunk, self.size - self.sent)
        self.sent += n
        self.transport.write(b"t" * n)
        if self.sent >= self.size:
            self.transport.unregisterProducer()
            self.transport.loseWriteConnection()
        else:
            self._schedule()

    def pauseProducing(self) -> None:
        self.pauses += 1
        self.paused = True

    def resumeProducing(self) -> None:
        self.resumes += 1
        self.paused = False
        self._schedule()

    def stopProducing(self) -> None:
        self.paused = True

    def readConnectionLost(self) -> None:
        pass

    def writeConnectionLost(self) -> None:
        pass

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.lost = reason
