# -*- test-case-name: tests.link.test_twisted -*-
"""
L{LinkSession}: one session of a link as a Twisted transport.

A session is an C{ITransport} for the protocol attached to it, an
C{IPushProducer} of the data it delivers (a consumer that cannot keep up
pauses it, and the peer then runs out of credit), and an C{IConsumer} of the
data written to it (a producer registered on it is paused while the
session's send queue is over its high-water mark).  A local TCP connection
and a session join the idiomatic way: each registers the other as its
producer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.internet import defer, error, interfaces
from twisted.python.failure import Failure
from zope.interface import Interface, implementer

from ..streams.windowed import IAcceptedSession, WindowedStream
from ._errors import ErrorCode, code_name

if TYPE_CHECKING:
    from .twisted import LinkProtocol


class SessionResetError(error.ConnectionLost):
    """
    The session was reset, by the peer or because the peer broke the
    protocol on it.

    @ivar code: the wire error code (an L{ErrorCode} value).
    @ivar reason: the peer's or our explanation.
    """

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"session reset: {code_name(code)} {reason}".rstrip())
        self.code = code
        self.reason = reason


@implementer(interfaces.IAddress)
class LinkAddress:
    """
    The address of one end of a session: the session's target and id.
    """

    __slots__ = ("target", "session_id")

    def __init__(self, target: str, session_id: int) -> None:
        self.target = target
        self.session_id = session_id

    def __repr__(self) -> str:
        return f"LinkAddress({self.target!r}, {self.session_id})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LinkAddress) and (self.target, self.session_id) == (
            other.target, other.session_id
        )

    def __hash__(self) -> int:
        return hash((self.target, self.session_id))


class IFramedWriter(Interface):
    """
    A transport that sends a header and its payload together without joining them first (the
    records of L{nfltr.resume}: one frame each, with no copy of the payload to prepend five
    bytes).
    """

    def writeFramed(head: bytes, data: bytes) -> None:
        """
        Send C{head} then C{data}, as C{write(head + data)} would.
        """


@implementer(
    interfaces.ITransport, interfaces.ITCPTransport, interfaces.IConsumer,
    interfaces.IPushProducer, IFramedWriter, IAcceptedSession,
)
class LinkSession(WindowedStream):
    """
    One session of a L{LinkProtocol}.

    @ivar link: the link carrying it.
    @ivar sessionId: its id on the link.
    @ivar target: what the opener asked to reach.
    @ivar openedAt: when it was made, on the link's clock (for listings).
    @ivar protocol: the attached protocol, C{None} until accepted.
    @ivar disconnecting: C{loseConnection} was called.
    @ivar _queue: received bytes not yet delivered (bounded by the window);
        L{None} while nothing waits.
    @ivar _paused: our consumer asked us to stop delivering.
    @ivar _finReceived: the peer sent FIN; delivered after C{_queue}.
    @ivar _closed: the session ended; C{_closeReason} is delivered to the
        protocol once C{_queue} is empty.
    @ivar _peer: the address L{getPeer} gives, if one was set (see
        L{peerAddress}).
    @ivar _goingAway: what L{whenLinkGoesAway} was given, if anything.
    @ivar _accepting: what L{whenAccepted} returned and has not fired, if
        anything.

    A relay holds one of these per session of each link it carries, idle
    ones included (a forwarded session is two on each replica): its state is
    in slots, and what an idle session does not need (its receive queue, its
    peer's address, the calls for a drain) is made only when needed.
    """

    __slots__ = (
        "link", "sessionId", "target", "openedAt", "protocol", "disconnecting", "disconnected",
        "_peer", "_queue", "_paused", "_delivering", "_finReceived", "_finDelivered",
        "_writeClosed", "_closed", "_closeReason", "_early", "_earlyBytes", "_goingAway",
        "_accepting",
    )

    def __init__(self, link: LinkProtocol, sessionId: int, target: str) -> None:
        super().__init__()
        self.link = link
        self.sessionId = sessionId
        self.target = target
        self.openedAt: float = link.clock.seconds()
        self.protocol: Any = None
        self.disconnecting = False
        self.disconnected = False
        self._peer: Any = None
        self._queue: deque[bytes] | None = None
        self._paused = False
        self._delivering = False
        self._finReceived = False
        self._finDelivered = False
        self._writeClosed = False
        self._closed = False
        self._closeReason: Failure | None = None
        self._early: list[bytes] | None = None
        self._earlyBytes = 0
        self._goingAway: list[Callable[[], object]] | None = None
        self._accepting: list[defer.Deferred[None]] | None = None

    @property
    def peerAddress(self) -> Any:
        """
        The peer's address: by default a L{LinkAddress} of the session's
        target and id; whoever knows better (the visitor's address a
        forwarding replica gave) sets it.
        """
        peer = self._peer
        return LinkAddress(self.target, self.sessionId) if peer is None else peer

    @peerAddress.setter
    def peerAddress(self, address: Any) -> None:
        self._peer = address

    def __repr__(self) -> str:
        return f"<LinkSession {self.sessionId} {self.target!r}>"

    # -- accepting a session the peer opened ---------------------------------

    def accept(self, protocol: Any, confirm: bool = True) -> None:
        """
        Attach C{protocol} to a session the peer opened, and answer its
        OPEN with ACCEPT if it asked for one; with C{confirm} false, the
        ACCEPT waits for L{confirm} (the service is reached), or this
        side's first bytes, and a refusal is a reset (L{abortWith}).
        """
        if self.protocol is not None:
            raise RuntimeError(f"{self!r} already has a protocol")
        self.protocol = protocol
        protocol.makeConnection(self)
        if confirm:
            self.confirm()
        self._deliver()

    @property
    def acceptOwed(self) -> bool:
        """
        The peer's OPEN asked for an answer this side has not given yet
        (see L{accept}).
        """
        conn = self.link.connection
        return conn is not None and conn.owes_accept(self.sessionId)

    def confirm(self) -> None:
        """
        Answer the peer's OPEN with ACCEPT, if it asked for one and had
        none yet (see L{accept}).
        """
        if not self._closed:
            self.link.acceptSession(self.sessionId)

    def whenAccepted(self) -> defer.Deferred[None]:
        """
        For a session this side opened with C{wantAccept}: fires once the
        peer accepted it, at once if the peer does not answer OPENs (an
        older peer: acceptance is implied), and fails with what ended the
        session if it ended first (a L{SessionResetError}: the peer's
        refusal).  Cancelling it resets the session with C{CANCEL}.
        """
        conn = self.link.connection
        if self._closed:
            assert self._closeReason is not None
            return defer.fail(self._closeReason)
        if conn is None or not conn.awaits_accept(self.sessionId):
            return defer.succeed(None)

        def cancel(d: defer.Deferred[None]) -> None:
            if self._accepting is not None and d in self._accepting:
                self._accepting.remove(d)
            self.abortWith(ErrorCode.CANCEL, "the session was not accepted in time")

        d: defer.Deferred[None] = defer.Deferred(cancel)
        if self._accepting is None:
            self._accepting = []
        self._accepting.append(d)
        return d

    def accepted(self) -> None:
        """
        The peer accepted this session (see L{whenAccepted}).
        """
        waiting, self._accepting = self._accepting, None
        for d in waiting or ():
            d.callback(None)

    def connectOpening(self, protocol: Any) -> bytes:
        """
        Attach C{protocol} to a session this side is opening, before the
        OPEN leaves: what it writes from C{connectionMade} is returned, to
        travel with the OPEN.  The link then calls L{opened}.
        """
        self._early = []
        self._earlyBytes = 0
        self.protocol = protocol
        protocol.makeConnection(self)
        early, self._early = b"".join(self._early), None
        return early

    def opened(self, sessionId: int, overHigh: bool) -> None:
        """
        The OPEN left with id C{sessionId}: act on what the protocol asked
        for meanwhile (a half-close, an abort), and pause its producer if
        what it wrote filled the send queue (C{overHigh}).
        """
        self.sessionId = sessionId
        if overHigh:
            self._pauseProducer()
        elif self._producerPaused:
            self.writable()
        if self._closed:
            self.link.resetSession(sessionId, ErrorCode.CANCEL, "aborted")
        elif self._writeClosed:
            self.link.sendFin(sessionId)
        self._deliver()

    def refuse(self, code: int = ErrorCode.REFUSED, reason: str = "") -> None:
        """
        Refuse a session the peer opened.
        """
        self._abort(code, reason, error.ConnectionRefusedError(reason or code_name(code)))

    def whenLinkGoesAway(self, call: Callable[[], object]) -> None:
        """
        Call C{call} once if the link's peer says it goes away (a GOAWAY
        without error: it drains) while this session lives, or at once if
        it said so already: a protocol that can end its session where its
        own peer expects it (an HTTP response's end) does so, and the
        session does not hold the draining peer until its timeout.
        """
        conn = self.link.connection
        if conn is not None and conn.goaway_received:
            call()
        elif not self._closed:
            if self._goingAway is None:
                self._goingAway = []
            self._goingAway.append(call)

    def linkGoingAway(self) -> None:
        """
        The link's peer goes away: tell those who asked (L{whenLinkGoesAway}).
        """
        calls, self._goingAway = self._goingAway, None
        for call in calls or ():
            call()

    # -- ITransport -----------------------------------------------------------

    def write(self, data: bytes) -> None:
        """
        Send C{data}; ignored once the session is closing for writes.
        """
        if self._writeClosed or self._closed or not data:
            return
        if self._early is not None:
            self._early.append(data)
            self._earlyBytes += len(data)
            if self._earlyBytes > self.link.config.high_water:
                self._pauseProducer()
            return
        if self.link.sendData(self.sessionId, data):
            self._pauseProducer()
        elif not self._streaming:
            self._schedulePull()

    def writeFramed(self, head: bytes, data: bytes) -> None:
        """
        Send C{head} then C{data}, in one frame when they fit its credit (L{IFramedWriter}).
        """
        if self._writeClosed or self._closed or self._early is not None:
            self.write(head + data)
            return
        if self.link.sendData(self.sessionId, data, head):
            self._pauseProducer()
        elif not self._streaming:
            self._schedulePull()

    def writeSequence(self, data: Any) -> None:
        """
        Send the concatenation of C{data}.
        """
        self.write(b"".join(data))

    def loseConnection(self) -> None:
        """
        Send FIN after the queued data; the session ends when the peer's FIN
        arrives.  Data received meanwhile is dropped.
        """
        if self._closed or self.disconnecting:
            return
        self.disconnecting = True
        self._queue_drop()
        self.loseWriteConnection()

    def loseWriteConnection(self) -> None:
        """
        Half-close: FIN after the queued data; receiving goes on.
        """
        if self._writeClosed or self._closed:
            return
        self._writeClosed = True
        if self._early is None:
            self.link.sendFin(self.sessionId)

    def abortConnection(self) -> None:
        """
        Reset the session at once.
        """
        self._abort(ErrorCode.CANCEL, "aborted", error.ConnectionAborted())

    def abortWith(self, code: int, reason: str) -> None:
        """
        Reset the session with a given code; the protocol sees a
        L{SessionResetError}.
        """
        self._abort(code, reason, SessionResetError(code, reason))

    def _abort(self, code: int, reason: str, why: Exception) -> None:
        if self._closed:
            return
        if self._early is None:
            self.link.resetSession(self.sessionId, code, reason)
        self._queue_drop()
        self.sessionEnded(Failure(why))

    def getPeer(self) -> Any:
        """
        The peer's address: by default the session's target.
        """
        return self.peerAddress

    def getHost(self) -> LinkAddress:  # type: ignore[override]  # a session has no IP address
        """
        This end's address.
        """
        return LinkAddress(self.target, self.sessionId)

    def setTcpNoDelay(self, enabled: bool) -> None:
        """
        Sessions have no Nagle algorithm: ignored.
        """

    def getTcpNoDelay(self) -> bool:
        """
        Always true: frames leave on the next reactor turn.
        """
        return True

    def setTcpKeepAlive(self, enabled: bool) -> None:
        """
        Liveness is the link's: ignored.
        """

    def getTcpKeepAlive(self) -> bool:
        """
        The link keeps itself alive.
        """
        return True

    # -- IPushProducer: what we deliver to the protocol ----------------------

    def pauseProducing(self) -> None:
        """
        Stop delivering received data; credit stops going back to the peer.
        """
        self._paused = True

    def resumeProducing(self) -> None:
        """
        Deliver queued data again.
        """
        self._paused = False
        self._deliver()

    def stopProducing(self) -> None:
        """
        Our consumer is gone: abort.
        """
        self.abortConnection()

    # -- IConsumer: what is written to us (see WindowedStream) -------------

    def _streamGone(self) -> bool:
        return self._closed

    def _callSoon(self, f: Any) -> None:
        self.link.clock.callLater(0, f)

    # -- called by the link ---------------------------------------------------

    def dataReceived(self, data: bytes) -> None:
        """
        Bytes arrived for this session.
        """
        if self.disconnecting or self._closed:
            self.link.consumed(self.sessionId, len(data))
            return
        if self._queue or self._paused or self._delivering or self.protocol is None:
            queue = self._queue
            if queue is None:
                queue = self._queue = deque()
            queue.append(data)
            self._deliver()
            return
        # Nothing queued and nothing in the way: deliver at once, as
        # _deliver would, without the queue.
        self._delivering = True
        try:
            self.protocol.dataReceived(data)
            self.link.consumed(self.sessionId, len(data))
        finally:
            self._delivering = False
        if self._queue or self._finReceived or self._closed:
            # The protocol's reaction queued data (a nested read) or ended
            # the session: finish as _deliver does.
            self._deliver()

    def finWasReceived(self) -> bool:
        """
        Whether the peer's FIN has reached this session.
        """
        return self._finReceived

    def finReceived(self) -> None:
        """
        The peer half-closed; delivered after the queued data.
        """
        self._finReceived = True
        self._deliver()

    def sessionEnded(self, reason: Failure) -> None:
        """
        The session is gone from the link; the protocol hears of it once
        every queued byte was delivered (at once, for an error).
        """
        if self._closed:
            return
        self._closed = True
        self._closeReason = reason
        self._goingAway = None
        waiting, self._accepting = self._accepting, None
        for d in waiting or ():
            d.errback(reason)
        if not reason.check(error.ConnectionDone):
            self._queue_drop()
        self._deliver()

    def _queue_drop(self) -> None:
        queue = self._queue
        if not queue:
            return
        dropped = sum(len(chunk) for chunk in queue)
        queue.clear()  # _deliver lets the empty queue go
        self.link.consumed(self.sessionId, dropped)

    def _deliver(self) -> None:
        if self._delivering or self.protocol is None:
            return
        self._delivering = True
        try:
            queue = self._queue
            if queue is not None:
                # Data received meanwhile (a nested read) joins this queue:
                # only here is it replaced.
                while queue and not self._paused:
                    chunk = queue.popleft()
                    self.protocol.dataReceived(chunk)
                    self.link.consumed(self.sessionId, len(chunk))
                if queue:
                    return
                self._queue = None
            if self._paused and self._closeReason is None:
                return
            if self._finReceived and not self._finDelivered and not self._closed:
                self._finDelivered = True
                self._readEnded()
            if self._closed and not self.disconnected:
                self._finish()
        finally:
            self._delivering = False

    def _readEnded(self) -> None:
        if interfaces.IHalfCloseableProtocol.providedBy(self.protocol):
            self.protocol.readConnectionLost()
        else:
            self.loseConnection()

    def _finish(self) -> None:
        self.disconnected = True
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.stopProducing()
        protocol, self.protocol = self.protocol, None
        reason = self._closeReason
        assert reason is not None
        protocol.connectionLost(reason)


def open_sessions(link: LinkProtocol) -> list[LinkSession]:
    """
    The sessions open on C{link} now, for listings (the relay's API).
    """
    return list(link._sessions.values())
