# -*- test-case-name: tests.ssh.test_channel -*-
"""
L{ForwardChannel}: a forwarded TCP connection in an SSH channel
(C{direct-tcpip} the client opened for C{ssh -L}/C{-W}, or
C{forwarded-tcpip} the relay opens for a visitor of an C{ssh -R} share),
presented to a protocol as a stream transport with backpressure both ways.

Conch's own channels return window credit as soon as bytes arrive and buffer
without bound; these do neither:

  - client to relay: the window the relay grants (C{SSHConfig.window}) is
    credited back only for bytes handed to the protocol while the consumer
    downstream has not paused this channel (C{pauseProducing}); a paused
    channel keeps its credit, so the client stops sending on it and on it
    alone;
  - relay to client: bytes beyond the client's window wait in a queue, and
    the producer registered on this transport (the other side of the
    splice) is paused until the client opens its window again.  A writer
    that ignores the pause and queues more than C{SSHConfig.max_buffer} has
    its channel reset.

Ends: the peer's EOF is the protocol's C{readConnectionLost}; a close after
EOF (or after the relay's own clean close) is a clean C{connectionLost}; a
close without EOF, or the SSH connection's end, is a C{ConnectionLost}, so a
cut never looks like a clean end of stream.  A reset of the far end
(L{ForwardChannel.abortWith}) closes without EOF, and on a channel the client
opened tells it why in an SSH debug message: the channel was confirmed
before the far end answered, so no open failure can carry the reason.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from twisted.conch.ssh.channel import SSHChannel
from twisted.internet import defer, error, interfaces
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.streams.windowed import IAcceptedSession, WindowedStream
from nfltr.wire import peerText

from ._config import SSHConfig


@implementer(interfaces.ITransport, interfaces.IConsumer, interfaces.IPushProducer,
             IAcceptedSession)
class ForwardChannel(WindowedStream, SSHChannel):
    """
    One forwarded connection; see the module.

    @ivar protocol: the protocol this channel is the transport of.
    @ivar opened: the channel is open on both sides.
    @ivar connected: the protocol is connected to this channel.
    @ivar disconnecting: the protocol asked for a close.
    @ivar _queue: bytes written beyond the client's window, oldest first;
        C{_queued} their total.
    @ivar _producer: the producer registered on this transport.
    @ivar _producerPaused: this channel paused it.
    @ivar _readPaused: the consumer downstream paused this channel: no
        credit goes back.
    @ivar _owed: bytes delivered but not credited back yet.
    @ivar _eofWanted: a half-close waits for the queue to drain;
        C{_closeWanted} likewise for a close.
    @ivar _eofReceived: the client sent EOF.
    @ivar _cleanClose: the relay closed the channel cleanly.
    @ivar _lost: the protocol was told the connection is gone.
    """

    log = Logger()
    connected = False
    # No clock here: pull producers are paused and resumed like push ones.
    supportsPull = False
    # conch's connection (typed optional there; always set here).
    conn: Any

    def __init__(
        self, protocol: Any, config: SSHConfig, conn: Any, name: bytes,
        remoteWindow: int = 0, remoteMaxPacket: int = 0,
    ) -> None:
        super().__init__(
            localWindow=config.window, localMaxPacket=config.max_packet,
            remoteWindow=remoteWindow, remoteMaxPacket=remoteMaxPacket, conn=conn,
        )
        self.name = name
        self.protocol = protocol
        self.maxBuffer = config.max_buffer
        self.opened = False
        self.disconnecting = False
        self._queue: deque[bytes] = deque()
        self._queued = 0
        self._readPaused = False
        self._owed = 0
        self._eofWanted = False
        self._closeWanted = False
        self._eofReceived = False
        self._cleanClose = False
        self._lost = False

    def logPrefix(self) -> str:
        """
        Logs name the channel, not its peer.
        """
        return f"SSHChannel {self.name.decode('ascii')} ({self.id})"

    def connect(self) -> None:
        """
        Connect the protocol to this channel (at once for a channel the relay
        opens, like a link session; once open for one the client opened).
        """
        if not self.connected and not self._lost:
            self.connected = True
            self.protocol.makeConnection(self)

    # -- conch's channel events -----------------------------------------------

    def channelOpen(self, specificData: bytes) -> None:
        """
        Open: connect the protocol if it is not, send what waited.
        """
        self.opened = True
        self.connect()
        self._flush()

    def openFailed(self, reason: Any) -> None:
        """
        The client refused the channel (it has no such forward, or could not
        connect to its service): the protocol's connection is refused.
        """
        why = getattr(reason, "desc", None) or str(reason)
        self._lose(error.ConnectionRefusedError(f"the SSH client refused: {why}"))

    def addWindowBytes(self, data: int) -> None:
        """
        The client opened its window: send what waited.
        """
        self.remoteWindowLeft += data
        self._flush()

    def dataReceived(self, data: bytes) -> None:
        """
        Hand the bytes to the protocol, then credit them back unless the
        consumer downstream paused this channel.
        """
        if self._lost:
            return
        self.protocol.dataReceived(data)
        self._owed += len(data)
        self._credit()

    def extReceived(self, dataType: int, data: bytes) -> None:
        """
        Forwarded connections carry no extended data: ignored, credited.
        """
        self._owed += len(data)
        self._credit()

    def eofReceived(self) -> None:
        """
        The client will send nothing more: half-close towards the protocol.
        """
        self._eofReceived = True
        if self._lost or not self.connected:
            return
        if interfaces.IHalfCloseableProtocol.providedBy(self.protocol):
            self.protocol.readConnectionLost()
        else:
            self.loseConnection()

    def closeReceived(self) -> None:
        """
        The client closed: it reads nothing more, so drop what waits and
        close too.
        """
        self._queue.clear()
        self._queued = 0
        if not self.localClosed:
            self.conn.sendClose(self)

    def closed(self) -> None:
        """
        Closed on both sides: tell the protocol how it ended.
        """
        if self._eofReceived or self._cleanClose:
            self._lose(error.ConnectionDone("the SSH channel closed"))
        else:
            self._lose(error.ConnectionLost("the SSH channel closed without EOF"))

    def requestReceived(self, requestType: bytes, data: bytes) -> bool:
        """
        Forwarded connections take no requests.
        """
        return False

    # -- ITransport -----------------------------------------------------------

    def write(self, data: bytes) -> None:
        """
        Send C{data} within the client's window; queue the rest and pause
        the producer.
        """
        if not data or self._lost or self.localClosed:
            return
        if self._queue or not self.opened:
            self._enqueue(bytes(data))
            return
        sent = self._send(data)
        if sent < len(data):
            self._enqueue(bytes(data[sent:]))

    def writeSequence(self, data: Any) -> None:
        """
        See L{write}.
        """
        self.write(b"".join(data))

    def loseWriteConnection(self) -> None:
        """
        Send EOF once what waits is sent.
        """
        self._eofWanted = True
        self._finish()

    def loseConnection(self) -> None:
        """
        Send what waits, then EOF and close.
        """
        if self._lost:
            return
        self.disconnecting = True
        self._eofWanted = self._closeWanted = True
        self._finish()

    def abortConnection(self) -> None:
        """
        Close at once, dropping what waits; the protocol learns of it now.
        """
        if self._lost:
            return
        self._queue.clear()
        self._queued = 0
        if self.opened and not self.localClosed:
            self.conn.sendClose(self)
        self._lose(error.ConnectionAborted("aborted"))

    def whenAccepted(self) -> defer.Deferred[None]:
        """
        Fired at once: as the holder of an agent's names (C{ssh -R}), the
        relay does not wait for the SSH client's confirmation of the
        channel (see L{nfltr.relay.interfaces.IAgentHolder.openSession}).
        """
        return defer.succeed(None)

    def abortWith(self, code: int, reason: str) -> None:
        """
        The far end of the stream was reset with link error C{code} and the
        words C{reason} (the agent could not reach its service, the replica
        holding the agent refused the session): close at once, without EOF.

        SSH has no error for a channel already open, and the relay confirmed
        this one before the far end answered (the link carries no acceptance
        to wait for: docs/ssh.md).  So on a channel the client opened
        (C{direct-tcpip}) the client is told why in an SSH debug message
        (OpenSSH prints it with C{-v}, as C{Remote: ...}); a channel the
        relay opened towards an C{ssh -R} client is not told: its far end
        is a visitor, whose end is not the client's error.
        """
        if self.name == b"direct-tcpip" and self.opened and not self._lost \
                and not self.localClosed:
            number = self.conn.channelsToRemoteChannel.get(self, "?")
            why = peerText(reason) or f"error code {code}"
            text = f"channel {number} ({self.name.decode('ascii')}) reset: {why}"
            self.conn.transport.sendDebug(text.encode("utf-8"), alwaysDisplay=True)
        self.abortConnection()

    def getPeer(self) -> Any:
        """
        The SSH client's address.
        """
        return self.conn.transport.getPeer()

    def getHost(self) -> Any:
        """
        The relay's address on the SSH connection.
        """
        return self.conn.transport.getHost()

    # -- IConsumer (see WindowedStream) --------------------------------------

    def _streamGone(self) -> bool:
        return self._lost

    def _sendBacklogged(self) -> bool:
        return bool(self._queue)

    # -- IPushProducer: the consumer downstream of this channel's bytes ----------

    def pauseProducing(self) -> None:
        """
        Keep the client's credit: it stops sending on this channel.
        """
        self._readPaused = True

    def resumeProducing(self) -> None:
        """
        Return the credit owed.
        """
        self._readPaused = False
        self._credit()

    def stopProducing(self) -> None:
        """
        Nobody will read more: reset the channel.
        """
        self.abortConnection()

    # -- internals ------------------------------------------------------------

    def _credit(self) -> None:
        if self._readPaused or self._lost or self.localClosed or not self._owed:
            return
        if self._owed >= self.localWindowSize // 2 or not self.localWindowLeft:
            owed, self._owed = self._owed, 0
            self.conn.adjustWindow(self, owed)

    def _send(self, data: bytes) -> int:
        top = min(len(data), self.remoteWindowLeft)
        size = self.remoteMaxPacket or top
        view = memoryview(data)
        for offset in range(0, top, size):
            self.conn.sendData(self, bytes(view[offset : min(offset + size, top)]))
        self.remoteWindowLeft -= top
        return top

    def _enqueue(self, data: bytes) -> None:
        self._queue.append(data)
        self._queued += len(data)
        if self._queued > self.maxBuffer:
            self.log.warn(
                "{channel}: {queued} bytes wait for the SSH client, over the limit of "
                "{limit}: the channel is reset", channel=self.logPrefix(), queued=self._queued,
                limit=self.maxBuffer,
            )
            self.abortConnection()
            return
        self._pauseProducer()

    def _flush(self) -> None:
        if not self.opened or self._lost:
            return
        queue = self._queue
        while queue and self.remoteWindowLeft > 0:
            head = queue.popleft()
            sent = self._send(head)
            self._queued -= sent
            if sent < len(head):
                queue.appendleft(head[sent:])
                break
        if not queue:
            self.writable()
            self._finish()

    def _finish(self) -> None:
        if self._queue or not self.opened or self._lost or self.localClosed:
            return
        if self._eofWanted:
            self._eofWanted = False
            self.conn.sendEOF(self)
        if self._closeWanted:
            self._closeWanted = False
            self._cleanClose = True
            self.conn.sendClose(self)

    def _lose(self, reason: Exception) -> None:
        if self._lost:
            return
        self._lost = True
        self._queue.clear()
        self._queued = 0
        self._producer = None
        if not self.connected:
            # Refused before the protocol was connected: connect it so its
            # connectionLost means what a refused connection means.
            self.connected = True
            self.protocol.makeConnection(self)
        self.connected = False
        self.protocol.connectionLost(Failure(reason))
