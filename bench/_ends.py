# -*- test-case-name: tests.test_bench_link -*-
"""
The protocols of the two benchmark ends (see L{bench._child}).  Nothing
here imports the global reactor: the ends are given the epoll reactor that
L{bench._child} installed.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import time
from collections.abc import Callable
from typing import Any

from twisted.internet import interfaces
from twisted.internet.protocol import ClientFactory, Factory, Protocol
from twisted.protocols.basic import LineReceiver
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.link import DIALER, LISTENER, LinkConfig
from nfltr.link.twisted import LinkFactory, LinkHandler, LinkProtocol, LinkSession
from nfltr.tls import client_creator, server_context_factory, tls_factory

ACK = b"A"


def mark() -> dict[str, float]:
    """
    The monotonic wall clock (comparable across processes on Linux), this
    process's CPU seconds and its minor page faults so far.
    """
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "t": time.monotonic(), "user": usage.ru_utime, "sys": usage.ru_stime,
        "minflt": usage.ru_minflt,
    }


def _setNoDelay(transport: Any) -> None:
    # A TLS transport forwards unknown attributes to the TCP transport below.
    setNoDelay = getattr(transport, "setTcpNoDelay", None)
    if setNoDelay is not None:
        setNoDelay(True)


def _linkConfig(config: dict[str, Any]) -> LinkConfig | None:
    """
    The library's defaults, unless the run asks for another session window.
    """
    window = config.get("window")
    return None if window is None else LinkConfig(session_window=window)


def _tlsInfo(tls: Any) -> dict[str, Any]:
    """
    What the TLS connection under C{tls} (a TLSMemoryBIOProtocol) negotiated,
    and whether its TCP socket has TCP_NODELAY.
    """
    handle = tls.getHandle()
    sock = tls.transport.getHandle()
    return {
        "version": handle.get_protocol_version_name(),
        "cipher": handle.get_cipher_name(),
        "tcp_nodelay": bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)),
    }


class End:
    """
    What both ends share: the reactor, the configuration, and reporting to
    the parent.

    @ivar finished: this end did its part (the process exits 0).
    """

    def __init__(self, reactor: Any, config: dict[str, Any], die: Callable[[str], None]) -> None:
        self.reactor = reactor
        self.config = config
        self.die = die
        self.control: Control | None = None
        self.finished = False

    def emit(self, event: str, **fields: Any) -> None:
        """
        Send one event line to the parent.
        """
        assert self.control is not None and self.control.transport is not None
        # The real reactor under nfltr's TunedReactor.
        real = getattr(self.reactor, "reactor", self.reactor)
        line = json.dumps({
            "event": event, "pid": os.getpid(), "reactor": type(real).__name__,
            **fields,
        })
        self.control.transport.write(line.encode() + b"\n")

    def lost(self, what: str, reason: Failure | None) -> None:
        """
        A connection or session ended: fatal unless this end is finished.
        """
        if not self.finished:
            why = "" if reason is None else f": {reason.getErrorMessage()}"
            self.die(f"{what} ended before the run finished{why}")

    def start(self) -> None:
        raise NotImplementedError

    def go(self) -> None:
        raise NotImplementedError


class Control(LineReceiver):
    """
    The parent's commands on standard input: C{go}; end of input means exit.
    """

    delimiter = b"\n"

    def __init__(self, end: End, reactor: Any) -> None:
        self.end = end
        self.reactor = reactor
        end.control = self

    def lineReceived(self, line: bytes) -> None:
        if line.strip() == b"go":
            self.end.go()
        else:
            self.end.die(f"unknown command {line!r}")

    def connectionLost(self, reason: Failure | None = None) -> None:
        if self.reactor.running:
            self.reactor.stop()


@implementer(interfaces.IConsumer)
class Sink(Protocol):
    """
    Counts the bytes of one stream and answers L{ACK} once C{expected}
    arrived.

    It is the consumer of its transport: a real relay joins a session to a
    socket that way, and would pause the session when the socket falls
    behind.  Counting never falls behind, so this consumer never pauses its
    producer.
    """

    def __init__(self, expected: int, onComplete: Callable[[Sink], None], end: End) -> None:
        self.expected = expected
        self.onComplete = onComplete
        self.end = end
        self.received = 0
        self.producer: Any = None
        self.complete = False

    def connectionMade(self) -> None:
        _setNoDelay(self.transport)
        self.registerProducer(self.transport, True)

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        self.producer = producer

    def unregisterProducer(self) -> None:
        self.producer = None

    def write(self, data: bytes) -> None:
        self.received += len(data)
        if self.received >= self.expected and not self.complete:
            self.complete = True
            self.transport.write(ACK)
            self.onComplete(self)

    dataReceived = write

    def connectionLost(self, reason: Failure | None = None) -> None:
        self.unregisterProducer()
        if not self.complete:
            self.end.lost("a sink's stream", reason)


@implementer(interfaces.IPushProducer, interfaces.IHandshakeListener)
class Source(Protocol):
    """
    Streams C{total} bytes in writes of C{block} as a streaming producer of
    its transport, then waits for the sink's L{ACK}.

    @ivar autostart: start streaming in C{connectionMade} (a link session);
        otherwise (plain TLS) C{handshakeCompleted} is reported to
        C{onReady} and L{startStreaming} is called later.
    """

    def __init__(
        self, total: int, block: bytes, onAck: Callable[[Source], None], end: End,
        autostart: bool, onReady: Callable[[Source], None] | None = None,
    ) -> None:
        self.remaining = total
        self.block = block
        self.onAck = onAck
        self.end = end
        self.autostart = autostart
        self.onReady = onReady
        self.paused = False
        self.acked = False

    def connectionMade(self) -> None:
        _setNoDelay(self.transport)
        if self.autostart:
            self.startStreaming()

    def handshakeCompleted(self) -> None:
        if self.onReady is not None:
            self.onReady(self)

    def startStreaming(self) -> None:
        self.transport.registerProducer(self, True)
        self.resumeProducing()

    def resumeProducing(self) -> None:
        self.paused = False
        write = self.transport.write
        block = self.block
        size = len(block)
        while not self.paused and self.remaining >= size:
            self.remaining -= size
            write(block)
        if not self.paused and 0 < self.remaining < size:
            write(block[: self.remaining])
            self.remaining = 0
        if self.remaining == 0 and not self.paused and self.transport is not None:
            self.remaining = -1  # finished: never again
            self.transport.unregisterProducer()

    def pauseProducing(self) -> None:
        self.paused = True

    def stopProducing(self) -> None:
        self.paused = True

    def dataReceived(self, data: bytes) -> None:
        if data == ACK and not self.acked:
            self.acked = True
            self.onAck(self)
        else:
            self.end.die(f"unexpected answer from a sink: {data[:20]!r}")

    def connectionLost(self, reason: Failure | None = None) -> None:
        if not self.acked:
            self.end.lost("a source's stream", reason)


class _SinkHandler(LinkHandler):
    """
    Accepts every session with a L{Sink}.
    """

    def __init__(self, end: ListenerEnd) -> None:
        self.end = end

    def sessionRequested(self, session: LinkSession) -> None:
        session.accept(self.end.newSink())

    def linkLost(self, link: LinkProtocol, reason: Failure) -> None:
        self.end.lost("the link", reason)


class ListenerEnd(End):
    """
    TLS (and the link) on the socket the parent handed down; every stream
    goes to a L{Sink}.
    """

    def start(self) -> None:
        c = self.config
        tls = server_context_factory(c["cert"], c["key"])
        inner: Any
        if c["mode"] == "link":
            inner = LinkFactory(
                LISTENER, lambda: _SinkHandler(self), self.reactor, _linkConfig(c)
            )
        else:
            inner = Factory.forProtocol(self.newSink)
        factory = tls_factory(tls, False, _OneConnection(inner, self), self.reactor)
        self.port = self.reactor.adoptStreamPort(c["fd"], socket.AF_INET, factory)
        os.close(c["fd"])
        self.expectedSinks = c["sessions"] if c["mode"] == "link" else 1
        self.complete = 0
        self.received = 0
        self.started: dict[str, float] | None = None
        self.emit("listening")

    def stopListening(self) -> None:
        """
        One connection per run: close the listening socket once it came.
        """
        self.reactor.callLater(0, self.port.stopListening)

    def newSink(self) -> Sink:
        return Sink(self.config["per_session"], self._sinkComplete, self)

    def go(self) -> None:
        self.started = mark()

    def _sinkComplete(self, sink: Sink) -> None:
        self.complete += 1
        self.received += sink.received
        if self.complete == self.expectedSinks:
            self.finished = True
            self.emit("done", start=self.started, end=mark(), bytes=self.received)


class _OneConnection(Factory):
    """
    Wraps the listener's protocol factory: stops listening after the first
    connection.
    """

    def __init__(self, inner: Any, end: ListenerEnd) -> None:
        self.inner = inner
        self.end = end

    def buildProtocol(self, addr: Any) -> Any:
        self.end.stopListening()
        return self.inner.buildProtocol(addr)


class DialerEnd(End):
    """
    Connects, then on C{go} streams on every session and waits for every
    sink's answer.
    """

    def start(self) -> None:
        c = self.config
        self.block = os.urandom(c["block"])
        creator = client_creator("127.0.0.1", pin=c["pin"], role="relay")
        self.link: LinkProtocol | None = None
        self.plain: Source | None = None
        self.acked = 0
        self.started: dict[str, float] | None = None
        inner = _DialerFactory(self, c["mode"])
        factory = tls_factory(creator, True, inner, self.reactor)
        self.reactor.connectTCP("127.0.0.1", c["port"], factory, timeout=10)

    def plainSource(self) -> Source:
        self.plain = Source(
            self.config["per_session"], self.block, self._acked, self, autostart=False,
            onReady=lambda source: self.emit("ready", tls=_tlsInfo(source.transport)),
        )
        return self.plain

    def linkBuilt(self, link: LinkProtocol) -> None:
        self.link = link
        link.whenEstablished().addCallbacks(
            lambda _: self.emit("ready", tls=_tlsInfo(link.transport)),
            lambda f: self.die(f"the link failed to come up: {f.getErrorMessage()}"),
        )

    def go(self) -> None:
        c = self.config
        self.started = mark()
        if self.link is not None:
            for n in range(c["sessions"]):
                source = Source(c["per_session"], self.block, self._acked, self, autostart=True)
                self.link.openSession(f"sink:{n}", source)
        elif self.plain is not None:
            self.plain.startStreaming()
        else:
            self.die("go before the connection")

    def _acked(self, source: Source) -> None:
        self.acked += 1
        expected = self.config["sessions"] if self.link is not None else 1
        if self.acked == expected:
            self.finished = True
            total = expected * self.config["per_session"]
            self.emit("done", start=self.started, end=mark(), bytes=total)


class _DialerFactory(ClientFactory):
    """
    Builds the dialer's protocol (a link, or one L{Source} on plain TLS) and
    hands it to the L{DialerEnd}.
    """

    def __init__(self, end: DialerEnd, mode: str) -> None:
        self.end = end
        self.mode = mode
        self.links = LinkFactory(
            DIALER, lambda: _DialerHandler(end), end.reactor, _linkConfig(end.config)
        )

    def buildProtocol(self, addr: Any) -> Protocol:
        if self.mode == "plain":
            return self.end.plainSource()
        link = self.links.buildProtocol(addr)
        self.end.linkBuilt(link)
        return link

    def clientConnectionFailed(self, connector: Any, reason: Failure) -> None:
        self.end.die(f"cannot connect: {reason.getErrorMessage()}")


class _DialerHandler(LinkHandler):
    """
    Refuses sessions from the listener (none come) and treats a lost link
    as fatal.
    """

    def __init__(self, end: DialerEnd) -> None:
        self.end = end

    def linkLost(self, link: LinkProtocol, reason: Failure) -> None:
        self.end.lost("the link", reason)
