# -*- test-case-name: tests.test_prefix,tests.relay.test_sniff,tests.test_admission -*-
"""
L{PrefixReader}: the common shape of a protocol that reads the first bytes
of a connection under a timeout, then hands the connection over to another
protocol (which is fed what was read) or refuses it.  The relay's SNI router
(before TLS), its link sniffer (after TLS) and its plain-HTTP host router
are each one.

After a hand-over the reader stays the transport's protocol and passes every
event on to the protocol that took over, with one method call per read:
nothing is patched onto either instance.  L{AdmittingFactory} admits each
connection before it has a reader (L{nfltr.streams._admission}).
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error, interfaces
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.netio import ITransientReader
from nfltr.wire import format_address

from ._admission import Admission

_log = Logger()


@implementer(ITransientReader)
class PrefixReader(Protocol):
    """
    Reads a prefix, then forwards every event to the protocol that took
    over.  Subclasses define L{prefixReceived} and L{timedOut}.  Lent bytes
    (L{ITransientReader}) go on lent to a protocol that took over and can
    be lent them, unless a subclass reads every read itself (overrides
    C{dataReceived}); otherwise they are copied first.

    @ivar factory: provides C{clock} and C{timeout} (seconds to decide).
    @ivar addr: the peer's address, given to the factory of the protocol
        that takes over.
    @ivar inner: the protocol that took over, once one did.
    @ivar lender: C{inner} if it is an L{ITransientReader}.
    @ivar _timer: the pending timeout, until a decision.
    """

    # Set by makeConnection; stream transports with the whole ITCPTransport
    # surface (pause/resume, half-close, abort) in practice.
    transport: Any

    def __init__(self, factory: Any, addr: Any) -> None:
        self.factory = factory
        self.addr = addr
        self.inner: Any = None
        self.lender: ITransientReader | None = None
        self._timer: interfaces.IDelayedCall | None = None
        # Set by an AdmittingFactory that admitted this connection.
        self.admission: Admission | None = None
        self._handshaking = True

    def connectionMade(self) -> None:
        """
        Start the timeout; send without Nagle's delay (a response held back
        until the peer's delayed ACK costs a visitor 40 ms).
        """
        setNoDelay = getattr(self.transport, "setTcpNoDelay", None)
        if setNoDelay is not None:
            setNoDelay(True)
        self._timer = self.factory.clock.callLater(self.factory.timeout, self._expired)

    def dataReceived(self, data: bytes) -> None:
        """
        Before a hand-over, to L{prefixReceived}; after, to the protocol
        that took over.
        """
        inner = self.inner
        if inner is None:
            self.prefixReceived(data)
        else:
            inner.dataReceived(data)

    def transientDataReceived(self, data: memoryview) -> None:
        """
        Lent bytes: see the class.
        """
        lender = self.lender
        if lender is not None:
            lender.transientDataReceived(data)
        else:
            self.dataReceived(bytes(data))

    def takeOver(self, inner: Any) -> None:
        """
        Make C{inner} the protocol every later read goes to.
        """
        self.inner = inner
        # A subclass that looks at every read (the PROXY header guard) gets it.
        forwards = type(self).dataReceived is PrefixReader.dataReceived
        self.lender = ITransientReader(inner, None) if forwards else None

    def writeConnectionLost(self) -> None:
        """
        Our write side is shut: tell the protocol that took over, if it
        cares (for a subclass that declares C{IHalfCloseableProtocol}).
        """
        halfCloseable = interfaces.IHalfCloseableProtocol(self.inner, None)
        if halfCloseable is not None:
            halfCloseable.writeConnectionLost()

    def prefixReceived(self, data: bytes) -> None:
        """
        Bytes arrived before any hand-over.
        """
        raise NotImplementedError  # pragma: no cover

    def timedOut(self) -> None:
        """
        No decision within the timeout.
        """
        raise NotImplementedError  # pragma: no cover

    def _expired(self) -> None:
        self._timer = None
        self.timedOut()

    def handOver(self, factory: interfaces.IProtocolFactory, received: bytes) -> bool:
        """
        Give the connection to a protocol from C{factory}, fed C{received}
        as its first read; close the connection if the factory declines.

        @return: whether a protocol took over.
        """
        inner = factory.buildProtocol(self.addr)
        if inner is None:
            self.transport.loseConnection()
            return False
        self.takeOver(inner)
        inner.makeConnection(self.transport)
        inner.dataReceived(received)
        return True

    def cancelTimer(self) -> None:
        """
        Stop the timeout: a decision was made (the connection no longer
        counts as in its handshake).
        """
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if self._handshaking and self.admission is not None:
            self.admission.routed()
        self._handshaking = False

    def peer(self) -> str:
        """
        The peer's address, for logs.
        """
        return format_address(self.transport.getPeer()) if self.transport is not None else "?"

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        """
        Pass the loss on to the protocol that took over, if any.
        """
        if self.admission is not None:
            self.admission.closed(source_of(self.addr), self.factory.clock.seconds(),
                                  self._handshaking)
            self._handshaking = False
        self.cancelTimer()
        if self.inner is not None:
            self.inner.connectionLost(reason)


def source_of(addr: Any) -> str:
    """
    The source address a connection is counted under: its IP address (a
    UNIX socket's peers are all one source).
    """
    host = getattr(addr, "host", None)
    return host if isinstance(host, str) else "local"


class AdmittingFactory(Factory):
    """
    A factory of L{PrefixReader}s that admits each connection first
    (L{nfltr.streams.Admission}): a refused one gets no protocol, so it is closed
    before a byte is read.

    @ivar admission: the admission limits, or L{None} for none.
    @ivar clock: the time.
    """

    noisy = False
    admission: Admission | None = None
    clock: interfaces.IReactorTime

    def buildProtocol(self, addr: Any) -> PrefixReader | None:
        """
        A protocol if C{addr} is admitted; L{None} (closing it) otherwise.
        """
        admission = self.admission
        if admission is not None:
            reason = admission.admit(source_of(addr), self.clock.seconds())
            if reason is not None:
                _log.debug(
                    "refused a connection from {peer}: {reason}",
                    peer=format_address(addr), reason=reason,
                )
                return None
        protocol = self.makeReader(addr)
        protocol.admission = admission
        return protocol

    def makeReader(self, addr: Any) -> PrefixReader:
        """
        The protocol of one admitted connection.
        """
        raise NotImplementedError  # pragma: no cover
