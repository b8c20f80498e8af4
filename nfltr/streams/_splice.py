# -*- test-case-name: tests.test_splice -*-
"""
Join two byte streams: a link session and a TCP connection, two sessions,
or a session and a TLS connection inside it.

L{splice} makes two L{SpliceEnd} protocols, one for each transport.  Once
both are connected each transport is registered as the other's streaming
producer, so a slow reader on one side pauses the other; half-close travels
across (EOF on one side becomes C{loseWriteConnection} on the other), a
clean close becomes a clean close, and an error becomes an abort, so a cut
never looks like a clean end of stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import error, interfaces
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.protocols.policies import ProtocolWrapper
from twisted.python.failure import Failure
from zope.interface import implementer


@implementer(interfaces.IHalfCloseableProtocol, interfaces.IPushProducer)
class SpliceEnd(Protocol):
    """
    One end of a splice: bytes received here are written to the other end's
    transport, and each end is the producer registered on the other end's
    transport (L{pauseProducing}: a relay holds two ends per session it
    splices, and no other object).

    @ivar other: the other end.
    @ivar onLost: called with the failure once this end's connection is gone.
    @ivar joined: both ends are connected and registered as producers.
    @ivar registered: this end is the producer registered on the other
        end's transport (from the join until L{leaveOther}).
    @ivar closed: this end's connection is gone.
    """

    # Set by makeConnection; stream transports with the whole ITCPTransport
    # surface (pause/resume, half-close, abort) in practice.
    transport: Any

    log = Logger()

    def __init__(self) -> None:
        self.other: SpliceEnd | None = None
        self.onLost: Callable[[Failure], None] | None = None
        self.joined = False
        self.registered = False
        self.closed = False

    def connectionMade(self) -> None:
        """
        Join if the other end is there; otherwise stop reading until it is.
        """
        self.connected = True
        other = self.other
        if other is not None and other.connected and not other.closed:
            _join(self, other)
        else:
            self.transport.pauseProducing()

    def dataReceived(self, data: bytes) -> None:
        """
        Forward to the other end.
        """
        other = self.other
        if other is not None and other.connected and not other.closed:
            other.transport.write(data)

    def readConnectionLost(self) -> None:
        """
        EOF here: stop being the other end's producer (nothing more comes
        from here), then half-close the other end's write side.
        """
        other = self.other
        if other is None or not other.connected or other.closed:
            self.transport.loseConnection()
            return
        self.leaveOther()
        transport = other.transport
        # A protocol wrapper (TLS) forwards unknown attributes to the transport
        # below it: half-closing that would truncate TLS, so close it whole.
        halfClose = None if isinstance(transport, ProtocolWrapper) else getattr(
            transport, "loseWriteConnection", None
        )
        if halfClose is not None:
            halfClose()
        else:
            transport.loseConnection()

    def writeConnectionLost(self) -> None:
        """
        Our write side is shut: nothing to do.
        """

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        """
        Close the other end the same way: cleanly after a clean close,
        with an abort after an error.
        """
        self.closed = True
        other = self.other
        if other is not None and other.connected and not other.closed:
            self.leaveOther()
            if reason.check(error.ConnectionDone):
                other.transport.loseConnection()
            else:
                other.transport.abortConnection()
        if self.onLost is not None:
            self.onLost(reason)

    def leaveOther(self) -> None:
        """
        Unregister this end as the producer on the other end's transport,
        once: this end writes nothing more to it.

        Needed before that transport is closed or half-closed: Twisted's
        TCP transport, when its buffer empties, resumes a paused producer
        I{instead of} shutting its write side (its C{doWrite}), and never
        looks again if the producer has nothing more to write: the peer
        would never see the end of the stream.  (Twisted's TLS likewise
        closes only once its producer is gone.)  EOF here can come while
        that transport is full and has paused this end: a TLS
        C{close_notify} read together with the records before it.
        """
        if self.registered:
            self.registered = False
            other = self.other
            if other is not None and other.connected and not other.closed:
                other.transport.unregisterProducer()

    def abort(self) -> None:
        """
        Abort this end's connection, if it is up.
        """
        if self.connected and not self.closed:
            self.transport.abortConnection()

    # -- IPushProducer, registered on the other end's transport -------------

    def pauseProducing(self) -> None:
        """
        The other end's transport is full: stop reading this end's.
        """
        self.transport.pauseProducing()

    def resumeProducing(self) -> None:
        """
        The other end's transport drained: read this end's again.
        """
        self.transport.resumeProducing()

    def stopProducing(self) -> None:
        """
        Nothing, unlike pause and resume: the other end's transport calls it
        just before its protocol's C{connectionLost}, and
        L{SpliceEnd.connectionLost} then ends this side the way that side
        ended; acting on it would abort this side first, with no reason (a
        link session would send C{CANCEL} instead of the reset's code).
        """


def _join(a: SpliceEnd, b: SpliceEnd) -> None:
    a.joined = b.joined = True
    a.registered = b.registered = True
    a.transport.registerProducer(b, True)
    b.transport.registerProducer(a, True)
    a.transport.resumeProducing()
    b.transport.resumeProducing()


def splice() -> tuple[SpliceEnd, SpliceEnd]:
    """
    Two ends that forward to each other; connect each to its transport (in
    either order, at any time).
    """
    a, b = SpliceEnd(), SpliceEnd()
    a.other, b.other = b, a
    return a, b

