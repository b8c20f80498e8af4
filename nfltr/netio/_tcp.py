# -*- test-case-name: tests.netio.test_tcp -*-
"""
Twisted's TCP transport with two changes, and the port and connector that
make it.

  - B{write now.}  Twisted queues every write and sends it on a later
    reactor turn, when the socket is reported writable: two C{epoll_ctl}
    calls and one more turn for each burst.  L{WriteNowMixin.write} sends at
    once when nothing is queued and the transport is in a plain state (no
    pull producer, no close or half-close pending, no C{startTLS}); a
    partial send, C{EAGAIN} or any error hands the rest to Twisted's queue,
    whose next C{doWrite} then reports an error the usual way.  So a
    streaming producer is paused exactly as before (only queued bytes
    count), and a protocol never hears of a lost connection from inside
    its own C{write}.
  - B{sizes.}  Reads of up to C{read_size} bytes (also the queued bytes at
    which a producer is paused, as in Twisted), queued sends of up to
    C{send_limit}.

Other layers reach the immediate send through L{send_now}, never through
this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet import tcp
from twisted.python.failure import Failure

from ._settings import IOSettings


class WriteNowMixin:
    """
    Send at once when nothing is queued; see the module.  Mixed into
    subclasses of L{tcp.Connection}.

    @ivar writeNow: whether to try; C{False} is Twisted's behaviour.
    """

    writeNow = True
    # From tcp.Connection and its bases, for the type checker.
    socket: Any
    connected: int
    disconnecting: int
    dataBuffer: bytes
    _tempDataLen: int
    _writeDisconnecting: bool
    _writeDisconnected: bool
    _aborting: bool
    producer: Any
    streamingProducer: bool
    producerPaused: bool
    TLS: bool
    bufferSize: int
    SEND_LIMIT: int

    def tune(self, settings: IOSettings) -> None:
        """
        Adopt C{settings}' write policy and sizes.
        """
        self.writeNow = settings.write_now
        self.bufferSize = settings.read_size
        self.SEND_LIMIT = settings.send_limit

    def _canWriteNow(self) -> bool:
        return bool(
            self.writeNow and not self._tempDataLen and not self.dataBuffer
            and self.connected and not self.disconnecting and not self._aborting
            and not self._writeDisconnecting and not self._writeDisconnected
            and not self.TLS
            and (self.producer is None or (self.streamingProducer and not self.producerPaused))
        )

    def write(self, data: bytes) -> None:
        """
        Send C{data} now if nothing is queued; queue what the socket did not
        take.
        """
        if type(data) is bytes and data and self._canWriteNow():
            try:
                sent = self.socket.send(data)
            except OSError:
                sent = 0  # EAGAIN, EINTR, or an error the queued send will report
            if sent == len(data):
                return
            if sent:
                data = data[sent:]
        super().write(data)  # type: ignore[misc]

    def sendNow(self, data: memoryview) -> int:
        """
        Offer C{data}, a buffer its owner reuses, to the socket if nothing
        is queued: how much it took (0 when it must be queued, or the
        socket refused).  The caller L{write}s the rest as bytes.
        """
        if not self._canWriteNow():
            return 0
        try:
            sent: int = self.socket.send(data)
        except OSError:
            return 0  # EAGAIN, EINTR, or an error the queued send will report
        return sent

    def writeSequence(self, iovec: Iterable[bytes]) -> None:
        """
        As L{write} of the concatenation, when it can go now.
        """
        if self._canWriteNow():
            chunks = list(iovec)
            if all(type(chunk) is bytes for chunk in chunks):
                self.write(b"".join(chunks))
                return
            iovec = chunks
        super().writeSequence(iovec)  # type: ignore[misc]


def send_now(transport: object) -> Callable[[memoryview], int] | None:
    """
    The immediate sender of C{transport} if it is nfltr's TCP transport
    (L{WriteNowMixin.sendNow}: offered a buffer, it returns how much the
    socket took); L{None} for any other transport.

    Only the transport itself counts: a wrapper that forwards unknown
    attributes to one of nfltr's (TLS under TLS, say) has none, since its
    C{sendNow} would skip the wrapper's own C{write}.
    """
    return transport.sendNow if isinstance(transport, WriteNowMixin) else None


class Server(WriteNowMixin, tcp.Server):
    """
    An accepted connection (see the module); tuned by its port.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        port = self.server
        # Accepted by our Port, which holds the settings; Twisted's own has none.
        self.tune(port.settings if isinstance(port, Port) else IOSettings())


class Client(WriteNowMixin, tcp.Client):
    """
    An outgoing connection (see the module); tuned by its connector.
    """

    _requiresResolution: bool
    addr: tuple[Any, ...]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tune(self.connector.settings)

    def resolveAddress(self) -> None:
        """
        Connect to an IP address literal at once; resolve a name as Twisted
        does.  (Twisted makes a L{Deferred} for a literal too.)
        """
        if self._requiresResolution:
            super().resolveAddress()
            return
        try:
            self._setRealAddress(self.addr)
        except Exception:  # noqa: BLE001 - as Twisted's errback: fail the attempt
            self.failIfNotConnected(Failure())


class Port(tcp.Port):
    """
    A listening TCP port whose connections are L{Server}s.

    @ivar settings: how they do I/O.
    """

    transport = Server

    def __init__(self, *args: Any, settings: IOSettings | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = settings or IOSettings()


class Connector(tcp.Connector):
    """
    Connects a L{Client}.

    @ivar settings: how it does I/O.
    """

    def __init__(self, *args: Any, settings: IOSettings, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = settings

    def _makeTransport(self) -> Client:
        return Client(self.host, self.port, self.bindAddress, self, self.reactor)

    def connectionLost(self, reason: Failure) -> None:
        """
        As Twisted's, then forget the lost transport (it and this connector
        point at each other: a cycle per connection for the garbage
        collector), unless the factory connected again meanwhile.
        """
        lost = self.transport
        super().connectionLost(reason)
        if self.transport is lost:
            self.transport = None
