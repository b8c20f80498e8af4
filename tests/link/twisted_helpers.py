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
