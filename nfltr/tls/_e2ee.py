# -*- test-case-name: tests.test_e2ee -*-
"""
The end-to-end TLS layer of a TCP tunnel: the agent ends TLS for each
session with its own key, the client pins that key, and the relay carries
ciphertext.

L{E2EETLSProtocol} is nfltr's memory-BIO TLS (L{BatchingTLSProtocol}, on
Twisted's L{TLSMemoryBIOProtocol}) with two changes that a byte-stream
tunnel needs:

  - B{half-close.}  Its application may call C{loseWriteConnection}: the
    TLS C{close_notify} goes out after the data written before, followed by
    a half-close of the transport below (a session FIN), and reading goes
    on.  When the peer's C{close_notify} arrives, an application that
    provides C{IHalfCloseableProtocol} (and has not called
    C{loseConnection}) gets C{readConnectionLost} and may keep writing; any
    other application sees the connection closed, as with Twisted's TLS.
    An end of the stream below without a C{close_notify} is a truncation,
    reported as C{ConnectionLost}.
  - B{honest reasons.}  When the transport below fails (a session reset by
    the peer with a code, a lost link), the application's C{connectionLost}
    gets that failure, not the TLS layer's "unexpected EOF"; a refused
    certificate still reports the refusal (L{nfltr.tls.PinMismatch}); a TLS
    error after the handshake (bytes altered on the way) is a
    L{TunnelTLSBroken}, which the connector and the agent log.

It relies on private attributes of L{TLSMemoryBIOProtocol} (Twisted
26.10, listed in L{nfltr.netio.internals}); the tests run it over real
pyOpenSSL so that a change in them fails here.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from OpenSSL.SSL import Error
from twisted.internet import error, interfaces
from twisted.internet.protocol import Factory
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.netio import io_settings

from ._batching import BatchingTLSProtocol
from ._contexts import ClientTLS
from ._resume import ResumingServerTLS
from ._sessions import SessionMemory


class TunnelTLSBroken(Error):
    """
    A tunnel's end-to-end TLS failed after its handshake: a record did not
    authenticate (its bytes were altered between the two ends: by the relay,
    or on the network), or the peer's alert says one of ours did not.
    OpenSSL's reasons are in C{args}, as in any C{SSL.Error} (which this is).
    """


@implementer(interfaces.IHalfCloseableProtocol)
class E2EETLSProtocol(BatchingTLSProtocol):
    """
    TLS over a session (or any stream transport) with half-close.

    @ivar _closeNotifyPending: C{loseWriteConnection} was called and the
        C{close_notify} waits for the handshake or buffered writes.
    @ivar _writeShut: our C{close_notify} went out through
        C{loseWriteConnection}.
    @ivar _readClosed: the peer's C{close_notify} arrived and the
        application got C{readConnectionLost}.
    """

    transport: Any  # the stream below: a session or a TCP connection
    _closeNotifyPending = False
    _writeShut = False
    #: Where the session is kept once its tickets arrived (a client whose
    #: creator resumes), until it was.
    _keepSession: SessionMemory | None = None

    def __init__(self, factory: Any, wrappedProtocol: Any, _connectWrapped: bool = True) -> None:
        super().__init__(factory, wrappedProtocol, _connectWrapped)
        self._keepSession = getattr(factory, "sessions", None)

    def dataReceived(self, data: bytes) -> None:
        """
        As the batching TLS's; a resuming client keeps its session from the
        first read after the handshake (TLS 1.3 tickets come right after).
        """
        waiting = self._keepSession is not None and self._handshakeDone
        super().dataReceived(data)
        if waiting:
            self._storeSession()

    def _storeSession(self) -> None:
        memory, self._keepSession = self._keepSession, None
        if memory is not None and self._tlsConnection is not None:
            memory.keep(self._tlsConnection)

    def write(self, data: bytes) -> None:
        """
        Encrypt and send C{data}; dropped once C{loseWriteConnection} was
        called.
        """
        if self._closeNotifyPending or self._writeShut:
            return
        super().write(data)

    # -- the application's transport -------------------------------------

    def loseWriteConnection(self) -> None:
        """
        Send C{close_notify} after what was written, then half-close the
        transport below; reading goes on.  Later writes are dropped.
        """
        if self._writeShut or self._closeNotifyPending or self.disconnecting:
            return
        if not self.connected or self._lostTLSConnection:
            return
        self._closeNotifyPending = True
        self._maybeSendCloseNotify()

    def _maybeSendCloseNotify(self) -> None:
        if not self._closeNotifyPending or not self._handshakeDone or self._appSendBuffer:
            return
        if self._lostTLSConnection:
            return
        self._closeNotifyPending = False
        self._writeShut = True
        with suppress(Error):  # reported by the next read, if it matters
            self._tlsConnection.shutdown()
        self._flushSendBIO()
        if self._readClosed:
            self.transport.loseConnection()
        else:
            halfClose = getattr(self.transport, "loseWriteConnection", None)
            if halfClose is not None:
                halfClose()

    def _checkHandshakeStatus(self) -> None:
        super()._checkHandshakeStatus()
        self._maybeSendCloseNotify()

    def _unbufferPendingWrites(self) -> None:
        super()._unbufferPendingWrites()
        self._maybeSendCloseNotify()

    # -- from the transport below -----------------------------------------

    def _closeNotifyReceived(self) -> None:
        """
        The peer's C{close_notify}: tell a half-closeable application and
        keep the connection up for writing; close any other.
        """
        if not self._halfCloseable():
            super()._closeNotifyReceived()
            return
        self._readClosed = True
        self._flushSendBIO()
        interfaces.IHalfCloseableProtocol(self.wrappedProtocol).readConnectionLost()
        if self._writeShut and not self._lostTLSConnection:
            self.transport.loseConnection()  # both directions are done

    def _halfCloseable(self) -> bool:
        return bool(
            interfaces.IHalfCloseableProtocol.providedBy(self.wrappedProtocol)
            and not self.disconnecting
        )

    def _tlsShutdownFinished(self, reason: Failure | None) -> None:
        """
        As Twisted's, with a TLS error after the handshake reported as a
        L{TunnelTLSBroken}: the reason Twisted kept, once it turned an
        unexpected end of the stream into C{ConnectionLost} (its subclasses
        of C{SSL.Error}, an end of stream, stay as they are).
        """
        super()._tlsShutdownFinished(reason)
        kept = self._reason
        if kept is not None and type(kept.value) is Error and self._handshakeDone:
            self._reason = Failure(TunnelTLSBroken(*kept.value.args))

    def readConnectionLost(self) -> None:
        """
        The stream below ended.  After the peer's C{close_notify} that is
        expected; before it, the TLS stream was cut short.
        """
        if self._readClosed or self._lostTLSConnection:
            return
        self._tlsConnection.bio_shutdown()
        self._flushReceiveBIO()
        if not self._lostTLSConnection and not self._readClosed:
            # OpenSSL saw nothing wrong (mid-handshake, say): still a cut.
            self._tlsShutdownFinished(Failure(error.ConnectionLost("TLS stream truncated")))

    def writeConnectionLost(self) -> None:
        """
        The transport below will send no more: nothing to do.
        """

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        """
        Report why the transport below failed, in preference to the TLS
        layer's view of the same event.
        """
        if (
            self._reason is None and not self._lostTLSConnection
            and not reason.check(error.ConnectionDone)
        ):
            self._reason = reason
        if self._keepSession is not None and self._handshakeDone:
            self._storeSession()
        super().connectionLost(reason)


class E2EETLSFactory(TLSMemoryBIOFactory):
    """
    Makes L{E2EETLSProtocol}s around application protocols, one connection
    creator for all.
    """

    protocol = E2EETLSProtocol

    def __init__(
        self, creator: Any, isClient: bool, clock: interfaces.IReactorTime,
        batch: bool | None = None,
    ) -> None:
        """
        @param creator: an C{IOpenSSLClientConnectionCreator} (C{isClient})
            or C{IOpenSSLServerConnectionCreator}.
        @param clock: the time (Twisted's TLS factories want one): the
            reactor, whose I/O settings (L{nfltr.netio.io_settings}) choose
            what C{batch} does not.
        @param batch: whether the connections batch records (see
            L{BatchingTLSProtocol.batch}); default: the reactor's
            C{NFLTR_TLS_BATCH}.
        """
        super().__init__(creator, isClient, Factory(), clock=clock)
        #: The client's session memory when its creator resumes.
        self.sessions: SessionMemory | None = None
        if isinstance(creator, ClientTLS) and isClient:
            self.sessions = creator.sessions
        if isinstance(creator, ResumingServerTLS):
            creator.bind(clock)
        chosen = io_settings(clock)
        self.batch = chosen.tls_batch if batch is None else batch
        self.direct = chosen.tls_direct
        self.releaseBuffers = chosen.tls_release_buffers

    def wrap(self, application: Any) -> E2EETLSProtocol:
        """
        A TLS protocol that runs C{application} over the transport it will
        be connected to.
        """
        protocol: E2EETLSProtocol = self.protocol(self, application)
        return protocol


def half_close_other(other: Any) -> bool:
    """
    For a splice end whose local peer sent EOF: if the other end runs over
    an end-to-end TLS layer that can half-close, send its C{close_notify}
    and keep reading (a plain splice end would close TLS whole).

    @param other: the other splice end, or L{None}.
    @return: whether it was half-closed (else the caller closes as usual).
    """
    if (
        other is not None and other.connected and not other.closed
        and isinstance(other.transport, E2EETLSProtocol)
    ):
        other.transport.loseWriteConnection()
        return True
    return False
