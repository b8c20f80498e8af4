# -*- test-case-name: tests.test_tls_batching -*-
"""
Memory-BIO TLS that moves data in batches, not records.

Twisted's L{TLSMemoryBIOProtocol} hands OpenSSL 16 KiB at a time: one
C{SSL_write}, one C{bio_read} (an allocation and a copy) and one transport
write per record going out, and one C{dataReceived} per record coming in.
L{BatchingTLSProtocol} keeps its state machine and changes the data path:

  - B{out:} one C{SSL_write} per application write (the contexts of
    L{nfltr.tls} clear C{SSL_MODE_ENABLE_PARTIAL_WRITE}, so OpenSSL
    encrypts every record of it into the memory BIO at once), then the
    whole send BIO read out and given to the transport in one write;
  - B{in:} every record the bytes of one read complete is decrypted, and
    the plaintext delivered in one C{dataReceived} (bounded by the read:
    at most one transport read of plaintext is held), or lent, without a
    copy, to a protocol that provides L{nfltr.netio.ITransientReader};
  - after every read the send BIO is flushed, as Twisted does: TLS 1.3
    answers some post-handshake messages (a C{KeyUpdate} asking for one)
    from inside C{SSL_read}, and a peer waiting for that answer stalls if
    it stays in the BIO.

There is no aggregation of small writes over a reactor turn (Twisted's
L{BufferingTLSTransport} holds them until the next turn): each write is
encrypted at once, so a link's frames, already batched per turn by the
link, leave in the turn they were written.

Once the handshake is done, the data path calls OpenSSL through
L{nfltr.tls._direct.DirectIO} (no per-call allocation, copy or exception of
pyOpenSSL's), and hands the send BIO's bytes to nfltr's TCP transport
(L{nfltr.netio.send_now}) straight from its buffer: a whole TLS
read or write costs a handful of C calls.  C{NFLTR_TLS_DIRECT=0} keeps
pyOpenSSL's calls.

L{tls_factory} chooses this protocol or Twisted's by the I/O settings its
reactor carries (C{NFLTR_TLS_BATCH}, L{nfltr.netio.io_settings}), and
gives its connections C{NFLTR_TLS_RELEASE_BUFFERS};
L{TLSClientEndpoint} is C{wrapClientTLS} with it.  The private attributes
of L{TLSMemoryBIOProtocol} used here are listed in L{nfltr.netio.internals}.
"""

from __future__ import annotations

from typing import Any

from OpenSSL.SSL import Error, WantReadError, ZeroReturnError
from twisted.internet import defer, interfaces
from twisted.protocols.policies import ProtocolWrapper
from twisted.protocols.tls import TLSMemoryBIOFactory, TLSMemoryBIOProtocol
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.netio import ITransientReader, io_settings, send_now
from nfltr.wire.constants import TLS_RECORD_PAYLOAD

from ._direct import DirectIO, Problem, available

#: The most plaintext one TLS record carries (RFC 8446 section 5.1): what
#: one C{SSL_read} returns at most.
RECORD_SIZE = TLS_RECORD_PAYLOAD
#: Ciphertext bytes a TLS 1.3 record adds to its plaintext: a 5-byte
#: header, the content type byte and a 16-byte AEAD tag (TLS 1.2 GCM adds
#: 29); a first guess at the size of the send BIO after a write.
RECORD_OVERHEAD = 29
#: What one C{bio_read} asks for when the size is not known (handshake
#: messages, alerts, answers to post-handshake messages).
SMALL_READ = 1 << 15


class BatchingTLSProtocol(TLSMemoryBIOProtocol):
    """
    L{TLSMemoryBIOProtocol} with the batched data path of the module.

    @ivar batch: C{False} restores Twisted's data path (16 KiB per
        C{SSL_write}, one C{dataReceived} per record), for comparison.
    @ivar direct: use L{DirectIO} once the handshake is done.
    @ivar lender: the wrapped protocol if it is an L{ITransientReader}:
        then it is lent what a read decrypted (see L{nfltr.netio._lent}).
    @ivar _readClosed: no more plaintext will be read (a subclass that
        keeps writing after the peer's C{close_notify} sets it).
    @ivar _direct: the connection's L{DirectIO}, once in use.
    @ivar _sendNow: the immediate send (L{nfltr.netio.send_now}) of
        C{_sendNowOf}, the transport it was looked up for: once per
        transport, which may be replaced after the handshake.
    """

    transport: Any  # the stream below
    batch = True
    direct = True
    _readClosed = False
    _direct: DirectIO | None = None
    _sendNowOf: Any = None
    _sendNow: Any = None

    def __init__(self, factory: Any, wrappedProtocol: Any, _connectWrapped: bool = True) -> None:
        super().__init__(factory, wrappedProtocol, _connectWrapped)
        self.batch = getattr(factory, "batch", True)
        self.direct = self.batch and available() and getattr(factory, "direct", True)
        self.lender: ITransientReader | None = None
        if self.direct and ITransientReader.providedBy(wrappedProtocol):
            self.lender = ITransientReader(wrappedProtocol)

    def _startDirect(self) -> DirectIO | None:
        """
        The L{DirectIO} of the connection, made once the handshake is done
        (C{None} before, and when not used).
        """
        if self.direct and self._handshakeDone and self._tlsConnection is not None:
            self._direct = DirectIO(self._tlsConnection)
        return self._direct

    def dataReceived(self, data: bytes) -> None:
        """
        Give the ciphertext to OpenSSL and deliver what it decrypts; the
        handshake goes Twisted's way.
        """
        direct = self._direct
        if direct is None or self._lostTLSConnection:
            super().dataReceived(data)
            return
        try:
            direct.feed(data)
        except Problem as p:
            self._tlsShutdownFinished(Failure(p.error))
            return
        if self._appSendBuffer:
            self._unbufferPendingWrites()
        self._flushReceiveBIO()

    def _write(self, data: bytes) -> None:
        """
        Encrypt all of C{data} with one C{SSL_write}; buffer it whole if the
        handshake is not done.
        """
        if not self.batch:
            super()._write(data)
            return
        if self._lostTLSConnection or not data:
            return  # SSL_write of nothing is an error in OpenSSL
        direct = self._direct or self._startDirect()
        try:
            if direct is None:
                self._tlsConnection.send(data)
            else:
                try:
                    direct.write(data)
                except Problem as p:
                    raise p.error from None
        except WantReadError:
            self._bufferedWrite(data)
            return
        except Error:
            self._tlsShutdownFinished(Failure())
            return
        if direct is not None:
            self._drainDirect(direct)
            return
        records = -(-len(data) // RECORD_SIZE)
        self._flushSendBIO(len(data) + records * RECORD_OVERHEAD)

    def _drainDirect(self, direct: DirectIO) -> None:
        """
        Hand the send BIO's bytes to the transport: offered to its
        C{sendNow} from the buffer when it has one, the rest written.
        """
        transport = self.transport
        if transport is not self._sendNowOf:
            self._sendNowOf, self._sendNow = transport, send_now(transport)
        rest = direct.drain(self._sendNow)
        if rest:
            transport.write(rest)

    def _flushSendBIO(self, expected: int = SMALL_READ) -> None:
        """
        Read everything in the send BIO and write it to the transport at
        once.

        @param expected: about how many bytes are there: the size of the
            first read (more are read while a read comes back full).
        """
        if not self.batch:
            super()._flushSendBIO()
            return
        direct = self._direct or self._startDirect()
        if direct is not None:
            self._drainDirect(direct)
            return
        connection = self._tlsConnection
        size = max(expected, SMALL_READ)
        chunks = []
        while True:
            try:
                chunk = connection.bio_read(size)
            except WantReadError:
                break
            chunks.append(chunk)
            if len(chunk) < size:
                break
        if chunks:
            self.transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def _flushReceiveBIO(self) -> None:
        """
        Decrypt every complete record, deliver the plaintext in one
        C{dataReceived}, then flush the send BIO.
        """
        direct = self._direct or self._startDirect()
        if direct is not None:
            self._flushReceiveDirect(direct)
            return
        connection = self._tlsConnection
        chunks: list[bytes] = []
        while not self._lostTLSConnection and not self._readClosed:
            try:
                data = connection.recv(RECORD_SIZE)
            except WantReadError:
                break
            except ZeroReturnError:
                chunks = self._deliver(chunks)
                if not self._lostTLSConnection and not self._readClosed:
                    self._closeNotifyReceived()
            except Error:
                failure = Failure()
                chunks = self._deliver(chunks)
                if not self._lostTLSConnection:
                    self._tlsShutdownFinished(failure)
            else:
                if self.batch:
                    chunks.append(data)
                elif not self._aborted:
                    ProtocolWrapper.dataReceived(self, data)
        self._deliver(chunks)
        if self._tlsConnection is not None:
            self._flushSendBIO()

    def _flushReceiveDirect(self, direct: DirectIO) -> None:
        """
        L{_flushReceiveBIO} through L{DirectIO}: the same order of delivery,
        close and errors.
        """
        if not self._lostTLSConnection and not self._readClosed:
            try:
                data = direct.read(self.lender is not None)
                error = None
            except Problem as p:
                data, error = p.data, p.error
            if data and not self._aborted:
                if isinstance(data, bytes):
                    self.wrappedProtocol.dataReceived(data)
                elif self.lender is not None:
                    self.lender.transientDataReceived(data)
            if error is not None and not self._lostTLSConnection and not self._readClosed:
                if isinstance(error, ZeroReturnError):
                    self._closeNotifyReceived()
                elif not isinstance(error, WantReadError):
                    self._tlsShutdownFinished(Failure(error))
        if self._tlsConnection is not None:
            self._drainDirect(direct)

    def connectionLost(self, reason: Failure) -> None:  # type: ignore[override]
        """
        As Twisted's, and drop the L{DirectIO}.
        """
        super().connectionLost(reason)
        self._direct = None
        self._sendNowOf = self._sendNow = None

    def _deliver(self, chunks: list[bytes]) -> list[bytes]:
        """
        Give C{chunks} to the application in one C{dataReceived}; an empty
        list to start again with.
        """
        if chunks and not self._aborted:
            self.wrappedProtocol.dataReceived(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        return []

    def _closeNotifyReceived(self) -> None:
        """
        The peer's C{close_notify} arrived: answer it, and end the
        connection with the reason from the transport below (as Twisted
        does).
        """
        self._shutdownTLS()
        self._tlsShutdownFinished(None)

    def writeSequence(self, iovec: Any) -> None:
        """
        Write the concatenation of C{iovec}.
        """
        self.write(b"".join(iovec))


class TunedTLSFactory(TLSMemoryBIOFactory):
    """
    L{TLSMemoryBIOFactory} carrying nfltr's per-factory TLS settings.

    @ivar direct: its connections call OpenSSL directly once the handshake
        is done (L{BatchingTLSProtocol.direct}; Twisted's own protocol
        ignores it).
    @ivar releaseBuffers: its connections release their record buffers
        while idle (read by nfltr's connection creators).
    """

    direct = True
    releaseBuffers = True


class BatchingTLSFactory(TunedTLSFactory):
    """
    L{TunedTLSFactory} making L{BatchingTLSProtocol}s.
    """

    protocol = BatchingTLSProtocol


def tls_factory(
    creator: Any, isClient: bool, wrappedFactory: Any, clock: interfaces.IReactorTime,
    batch: bool | None = None,
) -> TunedTLSFactory:
    """
    A factory adding TLS with C{creator} to C{wrappedFactory}'s protocols:
    batching (L{BatchingTLSFactory}) or Twisted's own, as C{batch} says
    (default: C{NFLTR_TLS_BATCH} of the settings C{clock}, the reactor,
    carries: L{nfltr.netio.io_settings}), which also choose whether its
    connections call OpenSSL directly and release idle buffers (read by
    nfltr's connection creators, L{nfltr.tls._contexts}).
    """
    chosen = io_settings(clock)
    if batch is None:
        batch = chosen.tls_batch
    kind = BatchingTLSFactory if batch else TunedTLSFactory
    factory = kind(creator, isClient, wrappedFactory, clock=clock)
    factory.noisy = False
    factory.direct = chosen.tls_direct
    factory.releaseBuffers = chosen.tls_release_buffers
    return factory


@implementer(interfaces.IStreamClientEndpoint)
class TLSClientEndpoint:
    """
    TLS with C{creator} over the connections of C{endpoint}, like Twisted's
    C{wrapClientTLS}, with the protocol L{tls_factory} chooses.
    """

    def __init__(self, creator: Any, endpoint: Any, clock: interfaces.IReactorTime) -> None:
        self.creator = creator
        self.endpoint = endpoint
        self.clock = clock

    def connect(self, factory: Any) -> defer.Deferred[Any]:
        """
        Connect, and fire with C{factory}'s protocol (not the TLS wrapper).
        """
        tls = tls_factory(self.creator, True, factory, self.clock)
        d: defer.Deferred[Any] = self.endpoint.connect(tls)
        return d.addCallback(lambda protocol: protocol.wrappedProtocol)
