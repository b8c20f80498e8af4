# -*- test-case-name: tests.link.test_twisted -*-
"""
The Twisted adapter of the link codec: L{LinkProtocol} runs a
L{LinkConnection} over any stream transport (TLS in practice) and turns its
sessions into L{LinkSession} transports.

The reactor's time (C{IReactorTime}) is injected; nothing here touches the
global reactor.  Frames queued during one reactor turn leave in one
transport write: at the end of the read being processed when a link's read
queued them (on this link or another: a relay forwards between links with
no extra reactor turn); otherwise, when the clock is nfltr's reactor
(L{nfltr.netio.EPollReactor.callAfterEvents}), once every event of the poll
being handled was (the reads of 50 local connections in one poll leave in
one write per link), and else on the next turn (C{callLater(0)}).

What a link may leave in its transport for its peer is bounded whatever the
peer announces or does (L{nfltr.link._output}): the link is its transport's
producer, and its answers to a peer that does not read are counted.  Every
string a peer chose (GOAWAY and RESET reasons) is logged through
L{nfltr.wire.peerText}, and the lines a peer can provoke are throttled per
source address (L{nfltr.wire.LogThrottle}, one per factory).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from twisted.internet import defer, error, interfaces
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.netio import ITransientReader, after_events
from nfltr.wire import LogThrottle, format_address, peerText

from ._calls import SessionCalls
from ._config import LinkConfig
from ._connection import LinkConnection
from ._control import Hello
from ._errors import ErrorCode, RemoteProtocolError, code_name
from ._events import (
    ControlReceived,
    DataReceived,
    FinReceived,
    GoAwayReceived,
    LinkEstablished,
    LinkTimedOut,
    PongReceived,
    SessionAccepted,
    SessionClosed,
    SessionOpened,
    SessionReset,
    SessionWritable,
)
from ._output import LinkOutput, TransportView
from ._output import reading as _reading
from .handler import OVERLOADED_REASON, ILinkHandler, LinkHandler, LinkOverloaded, LinkUnavailable
from .transport import LinkAddress, LinkSession, SessionResetError

__all__ = [
    "ILinkHandler", "LinkAddress", "LinkFactory", "LinkHandler", "LinkOverloaded", "LinkProtocol",
    "LinkSession", "LinkUnavailable", "SessionResetError",
]

@implementer(interfaces.IPushProducer, ITransientReader)
class LinkProtocol(LinkOutput, SessionCalls, Protocol):
    """
    One link over one transport, and its transport's producer.

    @ivar connection: the codec, once connected.
    @ivar peerHello: the peer's L{Hello} once established.
    @ivar rtt: the last measured round-trip time, seconds, or C{None}.
    @ivar failure: the link-level error that ended the link, if any.
    @ivar bytesReceived: bytes read from the transport, framing included.
    @ivar bytesSent: bytes written to the transport, framing included.
    @ivar logThrottle: limits the lines one source can make this link log.
    """

    # Set by makeConnection; stream transports with the whole ITCPTransport
    # surface (pause/resume, half-close, abort) in practice.
    transport: Any

    log = Logger()

    def __init__(
        self, role: str, handler: Any, clock: interfaces.IReactorTime,
        config: LinkConfig | None = None, appHello: dict[str, Any] | None = None,
        memory: Any = None, logThrottle: LogThrottle | None = None,
    ) -> None:
        self.role = role
        self.handler = handler
        self.clock = clock
        # nfltr's reactor runs functions once the events of a poll are
        # handled; any other clock (and a call from a timer) takes callLater.
        self._afterEvents: Any = after_events(clock)
        self.config = config or LinkConfig()
        self._appHello = appHello
        self.connection: LinkConnection | None = None
        self.peerHello: Hello | None = None
        self.rtt: float | None = None
        self.failure: Exception | None = None
        self.bytesReceived = 0
        self.bytesSent = 0
        self._sessions: dict[int, LinkSession] = {}
        self._events: deque[Any] = deque()
        self._dispatching = False
        self._flushCall: Any = None
        self._flushPending = False
        self._timer: Any = None
        self._waiting: list[defer.Deferred[LinkProtocol]] = []
        self._drained: list[defer.Deferred[None]] = []
        self._drainTimer: Any = None
        self._lost = False
        self.memory = memory
        self.logThrottle = logThrottle if logThrottle is not None else LogThrottle(clock.seconds)

    # -- life cycle -----------------------------------------------------------

    def makeConnection(self, transport: Any) -> None:
        """
        Connect to a L{TransportView} of C{transport}.
        """
        super().makeConnection(
            TransportView(transport, self.clock, self.config.unread_timeout)
        )

    def connectionMade(self) -> None:
        """
        Start the codec: a dialer sends its preamble and hello at once.
        """
        transport = self.transport
        setNoDelay = getattr(transport, "setTcpNoDelay", None)
        if setNoDelay is not None:
            setNoDelay(True)
        register = getattr(transport, "registerProducer", None)
        if register is not None:
            register(self, True)
        self._replyBound = self.config.reply_limit
        self.connection = LinkConnection(
            self.role, self.config, clock=self.clock.seconds, app_hello=self._appHello
        )
        self._flush()
        self._armTimer()

    def whenEstablished(self) -> defer.Deferred[LinkProtocol]:
        """
        A Deferred that fires with this link once the peer's hello arrived,
        or fails if the connection ends first.
        """
        if self.peerHello is not None:
            return defer.succeed(self)
        if self._lost:
            return defer.fail(error.ConnectionLost("link ended before it was established"))
        d: defer.Deferred[LinkProtocol] = defer.Deferred()
        self._waiting.append(d)
        return d

    def dataReceived(self, data: bytes | memoryview) -> None:
        """
        Feed the codec and dispatch its events.
        """
        conn = self.connection
        if conn is None or self._lost or self.failure is not None:
            return
        self.bytesReceived += len(data)
        reading = _reading
        reading.depth += 1
        try:
            try:
                events = conn.receive_data(data)
            except RemoteProtocolError as e:
                self._dispatch(e.events)
                self._linkFailed(e)
                return
            if events:
                self._dispatch(events)
            if not self._lost:
                # What the codec queued meanwhile (not scheduled by anyone).
                out = conn.data_to_send()
                if out:
                    self._write(out, True)
                if self.memory is not None:
                    self._account()
                if conn.goaway_sent or conn.goaway_received:
                    self._closeIfDrained()
        finally:
            reading.depth -= 1
            if not reading.depth and reading.pending:
                reading.flush()

    transientDataReceived = dataReceived  # ITransientReader: receive_data copies what it keeps

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        """
        End every session with an error, never a clean end of stream.
        """
        self._lost = True
        for call in (self._flushCall, self._timer, self._drainTimer):
            if call is not None and call.active():
                call.cancel()
        self._forgetAccount()
        if isinstance(self.transport, TransportView):
            self.transport.closed()
        why = self.failure or reason.value
        if self.connection is not None:
            self.connection.connection_lost()
        self._events.clear()
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            session.sessionEnded(Failure(error.ConnectionLost(f"link lost: {why}")))
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.errback(Failure(error.ConnectionLost(f"link lost before hello: {why}")))
        for drained in self._drained:
            drained.callback(None)
        self._drained = []
        self.handler.linkLost(self, reason)

    def _linkFailed(self, e: Exception) -> None:
        self.failure = e
        code = getattr(e, "code", ErrorCode.INTERNAL_ERROR)
        self._warn(
            "failed", "link {peer} failed: {code}: {reason}",
            code=code_name(code), reason=peerText(getattr(e, "reason", str(e))),
        )
        self._flush()
        self.transport.loseConnection()

    def _peerName(self) -> str:
        return "?" if self.transport is None else format_address(self.transport.getPeer())

    def _warn(self, kind: str, text: str, level: str = "warn", **fields: Any) -> None:
        """
        Log a line a peer can cause, at most as often as the log throttle
        lets lines of this C{kind} from its address through.
        """
        peer = None if self.transport is None else self.transport.getPeer()
        left = self.logThrottle.allow(str(getattr(peer, "host", peer)), kind)
        if left is None:
            return
        if left:
            text += " ({left} similar lines left out)"
        getattr(self.log, level)(text, peer=self._peerName(), left=left, **fields)

    # -- events -------------------------------------------------------------

    def _dispatch(self, events: list[Any]) -> None:
        """
        Deliver events in order.  The codec has already processed the whole
        input when its events are delivered, so what the application does
        meanwhile may add events (a session closed by our FIN): they queue
        behind the events still to deliver.  Nothing is delivered once the
        link is lost.
        """
        if self._dispatching:
            self._events.extend(events)
            return
        self._dispatching = True
        queue = self._events
        if queue:
            # Left by an exception in an earlier dispatch: they go first.
            queue.extend(events)
            events = list(queue)
            queue.clear()
        batch = iter(events)
        try:
            while True:
                for event in batch:
                    if self._lost:
                        return
                    if type(event) is DataReceived:
                        sid, data = event
                        session = self._sessions.get(sid)
                        if session is not None:
                            session.dataReceived(data)
                        else:
                            self.consumed(sid, len(data))
                    else:
                        _HANDLERS[type(event)](self, event)
                if not queue:
                    return
                batch = iter(list(queue))
                queue.clear()
        except BaseException:
            # Keep what was not delivered, ahead of what was queued since.
            queue.extendleft(reversed(list(batch)))
            raise
        finally:
            self._dispatching = False

    def _onEstablished(self, event: LinkEstablished) -> None:
        self.peerHello = event.hello
        if self.connection is not None:
            self._replyBound = self.config.reply_bound(self.connection.window)
        self._armTimer()
        self.handler.linkEstablished(self)
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.callback(self)

    def _onOpened(self, event: SessionOpened) -> None:
        session = LinkSession(self, event.session_id, event.target)
        self._sessions[event.session_id] = session
        if event.first_bytes:
            session.dataReceived(event.first_bytes)
        if self.pressed:
            self.memory.refused += 1
            session.refuse(ErrorCode.OVERLOADED, OVERLOADED_REASON)
            return
        self.handler.sessionRequested(session)

    def _onAccepted(self, event: SessionAccepted) -> None:
        session = self._sessions.get(event.session_id)
        if session is not None:
            session.accepted()

    def _onFin(self, event: FinReceived) -> None:
        session = self._sessions.get(event.session_id)
        if session is not None:
            session.finReceived()

    def _onClosed(self, event: SessionClosed) -> None:
        session = self._sessions.pop(event.session_id, None)
        if session is not None:
            session.sessionEnded(Failure(error.ConnectionDone()))

    def _onReset(self, event: SessionReset) -> None:
        session = self._sessions.pop(event.session_id, None)
        if session is not None:
            if not event.remote:
                self._warn(
                    "reset", "link {peer}: session {sid} reset: {code}: {reason}",
                    sid=event.session_id, code=code_name(event.code),
                    reason=peerText(event.reason),
                )
            session.sessionEnded(Failure(SessionResetError(event.code, event.reason)))

    def _onWritable(self, event: SessionWritable) -> None:
        session = self._sessions.get(event.session_id)
        if session is not None:
            session.writable()

    def _onControl(self, event: ControlReceived) -> None:
        self.handler.controlReceived(self, event.message)

    def _onPong(self, event: PongReceived) -> None:
        self.rtt = event.rtt

    def _onGoAway(self, event: GoAwayReceived) -> None:
        if event.code != ErrorCode.NO_ERROR:
            reason = peerText(event.reason)
            self.failure = error.ConnectionLost(
                f"closed by the peer: {code_name(event.code)} {reason}"
            )
            self._warn(
                "goaway", "link {peer} closed by the peer: {code}: {reason}",
                code=code_name(event.code), reason=reason,
            )
        else:
            # No news on a link this side already closes (its hello refused, say).
            level = "debug" if getattr(self.transport, "closing", False) else "info"
            self._warn("drain", "link {peer}: the peer is going away", level=level)
            self.handler.linkGoingAway(self)
            for session in list(self._sessions.values()):
                session.linkGoingAway()

    def _onTimedOut(self, event: LinkTimedOut) -> None:
        self.failure = error.TimeoutError(string=event.reason)
        self._warn("dead", "link {peer} is dead: {reason}", reason=event.reason)
        self._flush()
        abort = getattr(self.transport, "abortConnection", self.transport.loseConnection)
        abort()

    # -- the application's actions -----------------------------------------

    def openSession(self, target: str, protocol: Any, firstBytes: bytes = b"",
                    wantAccept: bool = False) -> LinkSession:
        """
        Open a session to C{target} and attach C{protocol} to it;
        C{firstBytes}, then whatever the protocol writes in its
        C{connectionMade}, travel with the OPEN.  If the peer refuses, the
        protocol's C{connectionLost} gets a L{SessionResetError}.  With
        C{wantAccept}, a peer that announced C{accepts} answers the OPEN:
        see L{LinkSession.whenAccepted}.

        @raise LinkUnavailable: no session can be opened on this link now
            (L{LinkOverloaded}: the process holds its limit of unsent bytes).
        """
        conn = self.connection
        if self.pressed:
            self.memory.refused += 1
            raise LinkOverloaded(OVERLOADED_REASON)
        if conn is None or self._lost or not conn.can_open():
            raise LinkUnavailable(self._unavailableReason())
        session = LinkSession(self, 0, target)
        early = session.connectOpening(protocol)
        if self._lost or not conn.can_open():
            session.sessionEnded(Failure(LinkUnavailable(self._unavailableReason())))
            return session
        sid = conn.open_session(target, firstBytes + early, wantAccept)
        self._sessions[sid] = session
        self._scheduleFlush()
        session.opened(sid, conn.is_over_high(sid))
        return session

    def _unavailableReason(self) -> str:
        conn = self.connection
        if conn is None or self._lost or not conn.established:
            return "link not established"
        if conn.goaway_sent or conn.goaway_received:
            return "link is going away"
        return "the peer's session limit is reached"

    def canOpen(self) -> bool:
        """
        Whether L{openSession} would succeed now.
        """
        return (
            self.connection is not None and not self._lost and not self.pressed
            and self.connection.can_open()
        )

    def sendControl(self, message: dict[str, Any]) -> None:
        """
        Send an application control message.
        """
        if self.connection is None or self._lost:
            raise LinkUnavailable("link not connected")
        self.connection.send_control(message)
        self._scheduleFlush()

    def drain(self, timeout: float | None = None) -> defer.Deferred[None]:
        """
        Send GOAWAY: sessions in flight finish, no new ones start; the
        connection closes once none is left, or after C{timeout} seconds
        (remaining sessions are then reset).  Fires when the link is closed.
        """
        d: defer.Deferred[None] = defer.Deferred()
        if self._lost or self.connection is None:
            d.callback(None)
            return d
        self._drained.append(d)
        self.connection.goaway(ErrorCode.NO_ERROR, "draining")
        self._flush()
        if timeout is not None and self._drainTimer is None:
            self._drainTimer = self.clock.callLater(timeout, self._drainTimedOut)
        self._closeIfDrained()
        return d

    def _drainTimedOut(self) -> None:
        self._drainTimer = None
        for session in list(self._sessions.values()):
            session.abortWith(ErrorCode.GOING_AWAY, "drain timeout")
        self._flush()
        self.transport.loseConnection()

    def _closeIfDrained(self) -> None:
        conn = self.connection
        if conn is not None and not self._lost and conn.is_drained():
            self._flush()
            self.transport.loseConnection()

    # -- output and time ------------------------------------------------------

    def _scheduleFlush(self) -> None:
        if self._flushCall is not None or self._flushPending or self._lost:
            return
        if _reading.depth:
            self._flushPending = True
            _reading.pending.append(self)
        elif self._afterEvents is not None and self._afterEvents(self._flush):
            self._flushPending = True
        else:
            self._flushCall = self.clock.callLater(0, self._flush)

    def _flush(self) -> None:
        self._flushPending = False
        if self._flushCall is not None:
            if self._flushCall.active():
                self._flushCall.cancel()
            self._flushCall = None
        if self.connection is None or self._lost:
            return
        data = self.connection.data_to_send()
        if data:
            self._write(data, False)
        if self.memory is not None:
            self._account()

    def _armTimer(self) -> None:
        if self.connection is None or self._lost:
            return
        deadline = self.connection.next_deadline()
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if deadline is not None:
            delay = max(0.0, deadline - self.clock.seconds())
            self._timer = self.clock.callLater(delay, self._onTimer)

    def _onTimer(self) -> None:
        self._timer = None
        if self.connection is None or self._lost:
            return
        events = self.connection.tick()
        self._dispatch(events)
        self._flush()
        if not self._lost and self.failure is None:
            self._armTimer()


_HANDLERS: dict[type, Any] = {
    LinkEstablished: LinkProtocol._onEstablished,
    SessionOpened: LinkProtocol._onOpened,
    SessionAccepted: LinkProtocol._onAccepted,
    FinReceived: LinkProtocol._onFin,
    SessionClosed: LinkProtocol._onClosed,
    SessionReset: LinkProtocol._onReset,
    SessionWritable: LinkProtocol._onWritable,
    ControlReceived: LinkProtocol._onControl,
    PongReceived: LinkProtocol._onPong,
    GoAwayReceived: LinkProtocol._onGoAway,
    LinkTimedOut: LinkProtocol._onTimedOut,
}


class LinkFactory(Factory):
    """
    Builds L{LinkProtocol}s with one role, clock and configuration; each
    link gets the handler C{handlerFactory()} returns.

    @ivar memory: the L{nfltr.link.memory.LinkMemory} every link reports to
        (a relay's), or L{None}.
    @ivar logThrottle: the log throttle the links share.
    """

    def __init__(
        self, role: str, handlerFactory: Any, clock: interfaces.IReactorTime,
        config: LinkConfig | None = None, appHello: dict[str, Any] | None = None,
        memory: Any = None,
    ) -> None:
        self.role = role
        self.handlerFactory = handlerFactory
        self.clock = clock
        self.config = config or LinkConfig()
        self.appHello = appHello
        self.memory = memory
        self.logThrottle = LogThrottle(clock.seconds)

    def buildProtocol(self, addr: Any) -> LinkProtocol:
        """
        A new link with a new handler.
        """
        handler = self.handlerFactory()
        return LinkProtocol(
            self.role, handler, self.clock, self.config, self.appHello, self.memory,
            self.logThrottle,
        )

