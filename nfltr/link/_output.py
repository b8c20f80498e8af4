# -*- test-case-name: tests.link.test_output -*-
"""
The output side of L{nfltr.link.twisted.LinkProtocol}: what it may leave in
its transport for a peer, whatever the peer does.

  - B{Backpressure.}  The link is a streaming producer on its transport.
    While the transport is full (paused us) no DATA is written: it waits in
    the session queues (L{nfltr.link.LinkConnection.hold}), and each session
    that writes meanwhile is told to pause its own producer.  When the
    transport drains, held DATA goes out L{RELEASE_LIMIT} bytes per write
    while the transport takes it, and the sessions paused that way resume.
    Only those: nothing walks all sessions.
  - B{Answers the peer does not read.}  WINDOW, PONG, RESET and refusals
    still go out while the transport is full: they answer the peer, which
    may stop reading and keep asking.  The bytes written while the transport
    is full, in answer to this link's own reads, are counted; over
    C{config.reply_bound} the link stops reading the peer until the
    transport drains, and if it has not within C{config.unread_timeout} the
    link ends with C{ENHANCE_YOUR_CALM}.  DATA within credit cannot get
    there (see L{nfltr.link.LinkConfig.reply_bound}), so two peers sending
    bulk both ways never both stop reading.
  - B{The process's account.}  With a L{nfltr.link.memory.LinkMemory},
    the link reports what it holds (session queues, and what it wrote since
    its transport was full) after each write; when pressed it pauses its
    sessions that queue more and takes no new session.

Closing.  A transport with a producer registered closes only once the
producer is unregistered (Twisted's TCP and TLS transports alike), and code
that owns a link closes it with C{link.transport.loseConnection()}; a close
also waits for the peer to read what the transport holds, for ever if it
never reads.  So a link's C{transport} is a L{TransportView} of the real
one, whose C{loseConnection} unregisters the link first and aborts the
connection if it is not closed within C{config.unread_timeout}.
"""

from __future__ import annotations

from typing import Any

from ._connection import LinkConnection
from ._errors import ErrorCode
from ._frames import MAX_PAYLOAD

#: Bytes of held DATA one transport write sends once the transport drained.
RELEASE_LIMIT = 4 * MAX_PAYLOAD


class _Reading:
    """
    The links whose output waits for the end of the link read being
    processed (see L{nfltr.link.twisted}): one per process, used on the
    reactor thread only.

    @ivar depth: how many link reads are being processed (nested reads are
        rare: a link carried by a protocol over another link).
    @ivar pending: the links to flush once the outermost read ends.
    """

    def __init__(self) -> None:
        self.depth = 0
        self.pending: list[Any] = []

    def flush(self) -> None:
        """
        Flush every pending link, those made pending meanwhile included.
        """
        pending = self.pending
        while pending:
            self.pending = []
            for link in pending:
                link._flush()
            pending = self.pending


#: The one L{_Reading} of the process.
reading = _Reading()


class TransportView:
    """
    A link's view of its transport: the transport itself (every attribute is
    read from it, C{write} one call away), except that C{loseConnection}
    first unregisters the transport's producer, the link, and aborts the
    connection if it is not closed C{linger} seconds later (see the module).

    @ivar wrapped: the transport.
    """

    def __init__(self, transport: Any, clock: Any, linger: float) -> None:
        self.wrapped = transport
        self._clock = clock
        self._linger = linger
        self._abortCall: Any = None
        self._gone = False

    def write(self, data: bytes) -> None:
        """
        Write to the transport (once per flush, not per frame).
        """
        self.wrapped.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)

    def loseConnection(self) -> None:
        """
        Unregister the link, then close the transport (after what it holds).
        """
        transport = self.wrapped
        unregister = getattr(transport, "unregisterProducer", None)
        if unregister is not None and getattr(transport, "producer", True) is not None:
            unregister()
        transport.loseConnection()
        if self._abortCall is None and not self._gone:
            self._abortCall = self._clock.callLater(self._linger, self._abort)

    @property
    def closing(self) -> bool:
        """
        Whether this side called L{loseConnection} and the connection is
        not gone yet.
        """
        return self._abortCall is not None

    def _abort(self) -> None:
        self._abortCall = None
        transport = self.wrapped
        getattr(transport, "abortConnection", transport.loseConnection)()

    def closed(self) -> None:
        """
        The connection is gone: no abort is due, nor will be.
        """
        self._gone = True
        call, self._abortCall = self._abortCall, None
        if call is not None and call.active():
            call.cancel()

    def __repr__(self) -> str:
        return f"<TransportView of {self.wrapped!r}>"


class LinkOutput:
    """
    The IPushProducer of a link on its transport, and its output bounds
    (see the module).  Mixed into L{nfltr.link.twisted.LinkProtocol}, which
    defines the rest.

    @ivar writePaused: the transport is full.
    @ivar readPaused: this side stopped reading the peer for its unread
        answers.
    @ivar unsent: bytes written since the transport was last full, the
        write that filled it included (0 while it is not).
    @ivar replies: of those, the bytes that answered this link's reads.
    @ivar memory: the process's L{nfltr.link.memory.LinkMemory}, if any.
    @ivar pressed: the memory account pressed this link.
    """

    transport: Any
    connection: LinkConnection | None
    config: Any
    clock: Any
    bytesSent: int
    failure: Exception | None
    _lost: bool

    writePaused = False
    readPaused = False
    unsent = 0
    replies = 0
    memory: Any = None
    pressed = False
    _reported = 0
    _recheck = False
    _replyBound: int | None = None
    _replyTimer: Any = None

    # -- IPushProducer, for the transport ----------------------------------------

    def pauseProducing(self) -> None:
        """
        The transport is full: hold DATA.
        """
        conn = self.connection
        if conn is None or self._lost or self.writePaused:
            return
        self.writePaused = True
        conn.hold()

    def resumeProducing(self) -> None:
        """
        The transport drained: read again if this side stopped, and send what
        was held.
        """
        conn = self.connection
        if conn is None or self._lost or not self.writePaused:
            return
        self.writePaused = False
        self.unsent = self.replies = 0
        timer, self._replyTimer = self._replyTimer, None
        if timer is not None and timer.active():
            timer.cancel()
        if self.readPaused:
            self.readPaused = False
            self.transport.resumeProducing()
        self._dispatch(conn.release(RELEASE_LIMIT))
        self._flush()
        while conn.has_backlog() and not self.writePaused and not self._lost:
            self._dispatch(conn.release(RELEASE_LIMIT))
            self._flush()

    def stopProducing(self) -> None:
        """
        The transport is going: its C{connectionLost} follows, which ends
        everything.
        """

    # -- writing --------------------------------------------------------------

    def _write(self, data: bytes, reply: bool) -> None:
        """
        Write C{data} to the transport; C{reply}: it answers this link's
        own read.
        """
        self.bytesSent += len(data)
        was = self.writePaused
        self.transport.write(data)
        if self.writePaused:
            self.unsent += len(data)
            if was and reply:
                self.replies += len(data)
                bound = self._replyBound
                if bound is not None and self.replies > bound and not self.readPaused:
                    self._stopReading()

    def _stopReading(self) -> None:
        self.readPaused = True
        self.transport.pauseProducing()
        self._warn(
            "unread", "link {peer}: stopped reading: {replies} bytes of answers unread",
            replies=self.replies,
        )
        self._replyTimer = self.clock.callLater(self.config.unread_timeout, self._repliesUnread)

    def _repliesUnread(self) -> None:
        self._replyTimer = None
        conn = self.connection
        if conn is None or self._lost or not self.readPaused:
            return
        why = (
            f"{self.replies} bytes of answers unread for {self.config.unread_timeout:g}s"
        )
        self._warn("calm", "link {peer} ended: ENHANCE_YOUR_CALM: {reason}", reason=why)
        self.failure = ConnectionError(f"ENHANCE_YOUR_CALM: {why}")
        conn.goaway(ErrorCode.ENHANCE_YOUR_CALM, why)
        self._flush()
        # The peer reads nothing: no point waiting for it to read the GOAWAY.
        self.transport.abortConnection()

    # -- the process's account ----------------------------------------------------

    def _account(self) -> None:
        """
        Report what this link holds to the process's account, and follow
        its verdict.
        """
        conn = self.connection
        memory = self.memory
        if conn is None or memory is None:
            return
        held = conn.queued_bytes + self.unsent
        if held == self._reported and not self._recheck:
            return
        pressed = memory.change(self, self._reported, held)
        self._reported = held
        self._recheck = False
        if pressed != self.pressed and not self._lost:
            self.pressed = pressed
            self._dispatch(conn.set_pressure(pressed))

    def memoryRelieved(self) -> None:
        """
        The account is back under its low water: check again at the next
        flush.
        """
        self._recheck = True
        self._scheduleFlush()

    def _forgetAccount(self) -> None:
        memory, self.memory = self.memory, None
        if memory is not None:
            memory.forget(self, self._reported)
        self._reported = 0
        timer, self._replyTimer = self._replyTimer, None
        if timer is not None and timer.active():
            timer.cancel()

    # -- defined by LinkProtocol --------------------------------------------------

    def _dispatch(self, events: list[Any]) -> None:
        raise NotImplementedError  # pragma: no cover

    def _flush(self) -> None:
        raise NotImplementedError  # pragma: no cover

    def _scheduleFlush(self) -> None:
        raise NotImplementedError  # pragma: no cover

    def _warn(self, kind: str, text: str, **fields: Any) -> None:
        raise NotImplementedError  # pragma: no cover
