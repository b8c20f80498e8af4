# -*- test-case-name: tests.resume.test_twisted -*-
"""
Twisted adapter of a resumable session: L{ResumableSession} is the transport of the protocol
that would have been a link session's (a splice end, or the end-to-end TLS layer around it),
and outlives the link sessions it runs over one after the other (L{LinkSide}).

A link session lost without the peer's ABORT suspends it: the local connection stays open and
is paused, and C{onSuspended} is told (the connector resumes it on its next link, the agent waits
for the connector's resume). If it is not resumed within C{timeout} seconds the local connection
is aborted with a TCP RST.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet import error, interfaces
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.link import ErrorCode
from nfltr.link.transport import IFramedWriter
from nfltr.wire.resume import RESUME_REFUSED, RESUME_UNSUPPORTED

from ._records import MAX_RECORD_DATA, Record, RecordError
from ._stream import Phase, Received, ResumableStream

#: The reasons of link resets that end a session for good rather than suspend it: the agent
#: could not reach its service, the agent refused the resume, the agent does not resume.
FINAL_REASONS = frozenset({RESUME_REFUSED, RESUME_UNSUPPORTED})
FINAL_CODES = frozenset({ErrorCode.CONNECT_FAILED})


class RecordsBroken(error.ConnectionLost):
    """
    The bytes from the peer are not a valid record sequence: altered on the way (by the relay,
    or the network), or a faulty peer. The session ends for good.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "bad resumable session"


def is_final(reason: Failure) -> bool:
    """
    Whether a link session's end C{reason} ends its resumable session for good.
    """
    value = reason.value
    return (getattr(value, "code", None) in FINAL_CODES
            or getattr(value, "reason", None) in FINAL_REASONS)


def abort_with_rst(transport: Any) -> None:
    """
    Abort C{transport}'s connection so that the peer sees a TCP RST, never a clean end.
    """
    handle = getattr(transport, "getHandle", None)
    if handle is not None:
        with contextlib.suppress(OSError, AttributeError):
            handle().setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abortConnection()


@implementer(interfaces.IHalfCloseableProtocol)
class LinkSide(Protocol):
    """
    The protocol of one link session that carries a L{ResumableSession}.
    """

    transport: Any

    def __init__(self, owner: ResumableSession, first: list[bytes],
                 records: list[Record] | None = None) -> None:
        self.owner = owner
        self.first = first
        self.records = records
        self.lost = False

    def connectionMade(self) -> None:
        self.owner._linkUp(self)

    def dataReceived(self, data: bytes) -> None:
        owner = self.owner
        if owner.link is not self:
            return
        stream = owner.stream
        # The common cases, a DATA record (or a piece of one) or an ACK alone in a link frame:
        # no record objects.
        payload = stream.take(data)
        if payload:
            if stream.received >= stream.next_ack:
                owner._send(stream.ack())
            if not owner.ended:
                owner.upper.dataReceived(payload)
            return
        if payload is not None:
            owner._flush()
            return
        try:
            result = stream.receive(data)
        except RecordError as e:
            owner._end(Failure(RecordsBroken(f"bad resumable session: {e}")), rst=True)
            return
        owner._fromLink(result)

    def readConnectionLost(self) -> None:
        if self.owner.link is self:
            self.owner._linkFin()

    def writeConnectionLost(self) -> None:
        """
        Our FIN left: nothing to do.
        """

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        self.lost = True
        if self.owner.link is self:
            self.owner._linkLost(reason)


@implementer(interfaces.ITransport, interfaces.IPushProducer, interfaces.IConsumer)
class ResumableSession:
    """
    One end of a resumable session, as the transport of C{upper}.

    @ivar link: the link session's protocol it runs over now, or L{None} while suspended.
    @ivar onSuspended: told when the session is suspended (its link lost).
    @ivar onEnded: told once the session is over, cleanly or not.
    @ivar local: the protocol on the local TCP connection (a splice end), whose connection is
        reset with a TCP RST when the session ends for good.
    """

    log = Logger()
    disconnecting = False

    def __init__(self, stream: ResumableStream, upper: Any, clock: Any, timeout: float,
                 onSuspended: Callable[[ResumableSession], None],
                 onEnded: Callable[[ResumableSession], None]) -> None:
        self.stream = stream
        self.upper = upper
        self.clock = clock
        self.timeout = timeout
        self.onSuspended = onSuspended
        self.onEnded = onEnded
        self.link: LinkSide | None = None
        self.ended = False
        self._pending: deque[bytes | memoryview] = deque()
        self._pendingSize = 0
        self._finish = False
        self._producer: Any = None
        self._paused: set[str] = set()
        self._readPaused = False
        self._timer: Any = None
        self._started = False
        #: The link session's L{IFramedWriter.writeFramed}, while it runs over one that has it.
        self._framed: Callable[[bytes, bytes], None] | None = None
        self.local: Any = None

    # -- the link sessions ------------------------------------------------------------

    def side(self, first: list[bytes] | None = None,
             records: list[Record] | None = None) -> LinkSide:
        """
        A protocol for the next link session: it writes C{first}, then handles C{records}.
        """
        return LinkSide(self, first or [], records)

    def _linkUp(self, side: LinkSide) -> None:
        old, self.link = self.link, side
        transport = side.transport
        self._framed = transport.writeFramed if IFramedWriter.providedBy(transport) else None
        if old is not None and not old.lost:
            old.transport.abortConnection()
        if self.stream.phase is Phase.OPEN:
            self._cancelTimer()
        side.transport.registerProducer(_LinkPressure(self), True)
        self._send(side.first)
        if self._readPaused:
            side.transport.pauseProducing()
        if not self._started:
            self._started = True
            self.upper.makeConnection(self)
        if side.records:
            self._fromLink(self.stream.receive_records(side.records))
        self._flush()
        self._unpause("suspended")

    def _send(self, chunks: list[bytes]) -> None:
        # One link write per record: each fits one link frame (a join would cut them across
        # frames again).
        link = self.link
        if link is not None:
            write = link.transport.write
            for chunk in chunks:
                write(chunk)

    def _fromLink(self, result: Received | None = None) -> None:
        if result is None:
            return
        if self.stream.phase is Phase.OPEN:
            self._cancelTimer()
        self._send(result.reply)
        for data in result.data:
            if self.ended:
                return
            self.upper.dataReceived(data)
        if result.aborted:
            self._end(Failure(error.ConnectionLost("the peer reset the session")), rst=True)
            return
        if result.ended and not self.ended:
            half = getattr(self.upper, "readConnectionLost", None)
            if half is not None:
                half()
        self._flush()
        self._checkDone()

    def _linkFin(self) -> None:
        try:
            self.stream.peer_closed()
        except RecordError:
            return
        self._checkDone()

    def _linkLost(self, reason: Failure) -> None:
        self.link = self._framed = None
        # A lost link session's pressure goes with it: the next one starts unpressed.
        self._unpause("link")
        if self.ended:
            return
        stream = self.stream
        if stream.done:
            self._end(Failure(error.ConnectionDone()))
        elif stream.aborted or stream.token is None or is_final(reason):
            self._end(reason, rst=True)
        else:
            stream.suspend()
            self._pause("suspended")
            if self._timer is None:
                self._timer = self.clock.callLater(self.timeout, self._expire)
            self.onSuspended(self)

    def move(self) -> bool:
        """
        Leave the link session it runs over (its link drains: the relay is replaced) as if it
        were lost, to be resumed on another link at once; what was in flight on the old one is
        sent again from the other end's offset.  The local connection sees nothing.  Whether
        it left: a session without its token yet, ended, or not running over a link stays.
        """
        side, stream = self.link, self.stream
        if (side is None or self.ended or stream.done or stream.aborted or stream.token is None
                or stream.phase is not Phase.OPEN):
            return False
        self._linkLost(Failure(error.ConnectionLost("its link drains")))
        side.transport.abortConnection()
        return True

    def _expire(self) -> None:
        self._timer = None
        self.log.debug("a suspended session was not resumed in time: reset")
        self._end(Failure(error.ConnectionLost("the session was not resumed in time")), rst=True)

    def _cancelTimer(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _checkDone(self) -> None:
        if self.stream.done and not self.ended:
            link = self.link
            if link is not None:
                link.transport.loseConnection()
            self._end(Failure(error.ConnectionDone()))

    def _end(self, reason: Failure, rst: bool = False) -> None:
        if self.ended:
            return
        self.ended = True
        self._cancelTimer()
        link, self.link, self._framed = self.link, None, None
        if link is not None and not link.lost and not reason.check(error.ConnectionDone):
            link.transport.writeSequence(self.stream.abort())
            link.transport.abortConnection()
        if self._started:
            transport = getattr(self.local, "transport", None)
            if rst and transport is not None and getattr(self.local, "connected", False):
                abort_with_rst(transport)
            self.upper.connectionLost(reason)
        self.onEnded(self)

    @property
    def held(self) -> int:
        """
        The bytes this end holds for its peer: those not acknowledged yet (at most the window)
        and those waiting for room in it (at most what the upper protocol wrote before it was
        paused: one read of the local connection).
        """
        return self.stream.retained + self._pendingSize

    # -- what the upper protocol writes ---------------------------------------------

    def _flush(self) -> None:
        stream, pending = self.stream, self._pending
        while pending and stream.room > 0:
            # What fits, as a view of what was written: no copy before the record's.
            piece, room = pending.popleft(), stream.room
            if len(piece) > room:
                view = memoryview(piece)
                pending.appendleft(view[room:])
                piece = view[:room]
            self._pendingSize -= len(piece)
            self._send(stream.write(piece))
        if self._finish and not self._pending:
            self._finish = False
            self._send(stream.finish())
        if self._pending or stream.room < MAX_RECORD_DATA:
            self._pause("window")
        else:
            self._unpause("window")

    def write(self, data: bytes) -> None:
        """
        Number and send C{data} (or keep it until the window has room).
        """
        if self.ended or not data:
            return
        if type(data) is not bytes:
            data = bytes(data)  # kept until acknowledged: never a buffer that may change
        stream = self.stream
        if not self._pending:
            framed = self._framed
            if framed is not None:
                # The common case: one record, room for it, a link that frames it whole.
                head = stream.number(data)
                if head is not None:
                    framed(head, data)
                    if stream.window - stream.sent + stream.acked < MAX_RECORD_DATA:
                        self._pause("window")
                    return
            n, room = len(data), stream.window - stream.sent + stream.acked
            if n <= room:
                # Room in the window, nothing waiting (L{_send}, inline).
                link = self.link
                records = stream.write(data)
                if link is not None:
                    write = link.transport.write
                    for record in records:
                        write(record)
                if room - n < MAX_RECORD_DATA:
                    self._pause("window")
                return
        n = len(data)
        self._pending.append(data)
        self._pendingSize += n
        self._flush()

    def writeSequence(self, data: Any) -> None:
        """
        Write each piece.
        """
        self.write(b"".join(data))

    def loseWriteConnection(self) -> None:
        """
        End this end's stream once what it wrote left.
        """
        self._finish = True
        self._flush()

    def loseConnection(self) -> None:
        """
        The same as L{loseWriteConnection}: the session ends once both streams ended.
        """
        self.loseWriteConnection()

    def abortConnection(self) -> None:
        """
        End the session for good: the peer resets its local connection.
        """
        self._end(Failure(error.ConnectionAborted()))

    def getPeer(self) -> Any:
        link = self.link
        return link.transport.getPeer() if link is not None else None

    def getHost(self) -> Any:
        link = self.link
        return link.transport.getHost() if link is not None else None

    # -- backpressure -------------------------------------------------------------

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        self._producer = producer
        if self._paused:
            producer.pauseProducing()

    def unregisterProducer(self) -> None:
        self._producer = None

    def _pause(self, why: str) -> None:
        if not self._paused and self._producer is not None:
            self._producer.pauseProducing()
        self._paused.add(why)

    def _unpause(self, why: str) -> None:
        if why in self._paused:
            self._paused.discard(why)
            if not self._paused and self._producer is not None:
                self._producer.resumeProducing()

    def pauseProducing(self) -> None:
        """
        The upper protocol's consumer is full: stop reading the link.
        """
        self._readPaused = True
        if self.link is not None:
            self.link.transport.pauseProducing()

    def resumeProducing(self) -> None:
        """
        Read the link again.
        """
        self._readPaused = False
        if self.link is not None:
            self.link.transport.resumeProducing()

    def stopProducing(self) -> None:
        """
        The upper protocol gives up: end the session for good.
        """
        self.abortConnection()


@implementer(interfaces.IPushProducer)
class _LinkPressure:
    """
    What a link session pauses when its queue is full: the upper protocol's producer.
    """

    def __init__(self, session: ResumableSession) -> None:
        self.session = session

    def pauseProducing(self) -> None:
        self.session._pause("link")

    def resumeProducing(self) -> None:
        self.session._unpause("link")

    def stopProducing(self) -> None:
        """
        The link session is going: its loss says what follows.
        """
