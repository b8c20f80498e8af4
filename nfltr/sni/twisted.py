# -*- test-case-name: tests.sni.test_twisted -*-
"""
The SNI router: L{nfltr.sni}'s parser on a Twisted connection.

L{SNIRouter} reads the start of a connection with a L{ClientHelloParser},
without ending TLS and under a handshake timeout, then asks its factory's
chooser what to do with the L{ClientHello}:

  - L{HandOver}: a protocol from the given factory takes the connection over
    and is fed every byte read so far, unchanged, as its first read (the
    relay's own TLS stack, which then runs the handshake as if it had read
    the hello itself);
  - L{Splice}: the connection is spliced (L{nfltr.streams.splice}) to a backend (a
    share), which receives every byte read so far before anything else;
    each side is then the other's streaming producer;
  - L{Refuse}: a fatal TLS C{unrecognized_name} alert, then close;
  - L{Later}: one of those, once its Deferred fires (a replica of a cluster
    asks the directory first); the connection is not read meanwhile, and
    one that is gone by then is left alone.  The wait is the chooser's to
    bound (the directory's command timeout): the handshake timeout is over
    once the hello is complete.

First bytes that are no usable ClientHello close the connection; a plain
HTTP request (C{not_tls}) is first answered with a short C{400} saying the
port speaks TLS.  A hello not complete within the timeout closes the
connection too.  Each refusal is counted by a reason from a closed set
(L{REFUSALS}) in L{SNIRouterFactory.refused}.

Bounds: until its hello is complete a connection holds at most
L{nfltr.sni.MAX_HELLO_WIRE_SIZE} bytes plus one read (the parser refuses more from the
headers), and the read that completes the hello is handed on at once.
Connections share nothing but the factory's counters: a slow or silent
client delays no other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twisted.internet import error, interfaces
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import Interface, implementer

from nfltr.streams import AdmittingFactory, PrefixReader, SpliceEnd
from nfltr.wire.constants import canned_response

from ._errors import ClientHelloError, Reason
from ._hello import ClientHello
from ._parser import NEED_DATA, ClientHelloParser

#: Seconds a connection has to send its whole ClientHello.
HANDSHAKE_TIMEOUT = 10.0

#: The alert record: content type alert (21), record version 0x0303 (what
#: TLS 1.2 and 1.3 write, RFC 8446 section 5.1), two bytes of payload:
#: level fatal (2), description unrecognized_name (112, RFC 6066 section 3).
ALERT = 21
FATAL = 2
UNRECOGNIZED_NAME = 112
UNRECOGNIZED_NAME_ALERT = bytes([ALERT, 3, 3, 0, 2, FATAL, UNRECOGNIZED_NAME])

NOT_TLS_BODY = b"this port speaks TLS: use https:// or an nfltr client\n"
NOT_TLS_RESPONSE = canned_response(b"400 Bad Request", NOT_TLS_BODY)

#: Refusals that are not the parser's: no complete hello within the timeout,
#: and a server name nobody here answers to.
TIMEOUT = "timeout"
UNKNOWN_NAME = "unrecognized_name"
#: Every reason a connection is refused for: the keys of
#: L{SNIRouterFactory.refused}, a closed set fit to label a metric.
REFUSALS: tuple[str, ...] = (*(reason.value for reason in Reason), TIMEOUT, UNKNOWN_NAME)

#: The keys of L{SNIRouterFactory.routed}: what was done with a good hello.
HANDED_OVER = "hand_over"
SPLICED = "splice"


class ISpliceBackend(Interface):
    """
    Where L{Splice} sends a connection's raw bytes (a share).
    """

    def connect(protocol: interfaces.IProtocol, visitor: interfaces.IAddress) -> None:
        """
        Connect C{protocol} to the backend, now or later, for the visitor
        whose address is C{visitor}: call its
        C{makeConnection} with a transport whose writes reach the backend,
        and give it what the backend sends.  The protocol writes the bytes
        read so far (the ClientHello and whatever followed it) in its
        C{connectionMade}, before anything else; so a link session opened
        with it (L{nfltr.link.twisted.LinkProtocol.openSession}) carries them
        in its OPEN.

        If the backend cannot be reached, call C{protocol.connectionLost}
        with the reason instead (without C{makeConnection}): the visitor's
        connection is then aborted.  Never raise.
        """


@dataclass(frozen=True)
class HandOver:
    """
    Give the connection to a protocol of C{factory}; it is fed every byte
    read so far as its first read, then every later event.
    """

    factory: interfaces.IProtocolFactory


@dataclass(frozen=True)
class Splice:
    """
    Splice the connection to C{backend}, which receives every byte read so
    far first.
    """

    backend: ISpliceBackend


@dataclass(frozen=True)
class Refuse:
    """
    Answer a fatal C{unrecognized_name} alert and close.
    """


REFUSE = Refuse()


@dataclass(frozen=True)
class Later:
    """
    The route is known once C{decision} fires (with a L{HandOver}, a
    L{Splice} or a L{Refuse}); it never fails.
    """

    decision: Deferred[HandOver | Splice | Refuse]


Route = HandOver | Splice | Refuse | Later
#: Decides a route from a complete hello; called once per connection.
Chooser = Callable[[ClientHello], Route]


class _ReplayEnd(SpliceEnd):
    """
    The backend's end of a splice: writes the bytes read so far before
    anything else, and aborts at once if the visitor already left.
    """

    def __init__(self, replay: bytes) -> None:
        super().__init__()
        self.replay = replay

    def connectionMade(self) -> None:
        """
        Write the replay, then join the visitor's end (or abort: it left).
        """
        other = self.other
        if other is not None and other.closed:
            self.connected = True
            self.transport.abortConnection()
            return
        replay, self.replay = self.replay, b""
        self.transport.write(replay)
        super().connectionMade()


@implementer(interfaces.IHalfCloseableProtocol)
class SNIRouter(PrefixReader):
    """
    Routes one connection by the server name of its ClientHello.

    The factory (an L{SNIRouterFactory}) holds the chooser, clock, timeout
    and counters; C{inner} is L{HandOver}'s protocol or the visitor's end of
    a L{Splice}.

    @ivar parser: reads the hello; L{None} once it was complete, refused,
        timed out or the connection was lost.
    """

    log = Logger()
    #: The connection was lost (while a L{Later} route was pending, too).
    gone = False

    def __init__(self, factory: SNIRouterFactory, addr: Any) -> None:
        super().__init__(factory, addr)
        self.parser: ClientHelloParser | None = ClientHelloParser()

    def prefixReceived(self, data: bytes) -> None:
        """
        Feed the parser until the hello is complete, then route.
        """
        parser = self.parser
        if parser is None or not data:
            return
        try:
            hello = parser.receive_data(data)
        except ClientHelloError as e:
            self._invalid(e)
            return
        if hello is NEED_DATA:
            return
        self.parser = None
        self.cancelTimer()
        self._route(hello, parser.buffered())

    def _route(self, hello: ClientHello, replay: bytes) -> None:
        route = self.factory.choose(hello)
        if isinstance(route, Later):
            self.transport.pauseProducing()
            route.decision.addCallback(self._decided, hello, replay).addErrback(
                self._undecided, hello)
            return
        self._follow(route, hello, replay)

    def _decided(self, route: HandOver | Splice | Refuse, hello: ClientHello,
                 replay: bytes) -> None:
        """
        A L{Later} route fired: follow it, unless the visitor left meanwhile.
        """
        if self.gone:
            return
        self.transport.resumeProducing()
        self._follow(route, hello, replay)

    def _undecided(self, failure: Failure, hello: ClientHello) -> None:
        """
        A L{Later} route failed (against its contract), or following it
        raised: it costs one visitor.
        """
        self.log.failure("TLS port: routing {name} failed", failure, name=hello.server_name)
        if not self.gone:
            self.transport.abortConnection()

    def _follow(self, route: HandOver | Splice | Refuse, hello: ClientHello,
                replay: bytes) -> None:
        if isinstance(route, HandOver):
            self.factory.routed[HANDED_OVER] += 1
            self.handOver(route.factory, replay)
        elif isinstance(route, Splice):
            self.factory.routed[SPLICED] += 1
            self._splice(route.backend, replay)
        else:
            self._refuse(UNKNOWN_NAME, UNRECOGNIZED_NAME_ALERT, f"name {hello.server_name!r}")

    def _splice(self, backend: ISpliceBackend, replay: bytes) -> None:
        visitor, remote = SpliceEnd(), _ReplayEnd(replay)
        visitor.other, remote.other = remote, visitor
        self.takeOver(visitor)
        # Reading pauses here until the backend's end is connected.
        visitor.makeConnection(self.transport)
        try:
            backend.connect(remote, self.addr)
        except Exception:  # noqa: BLE001 - a backend that breaks its contract costs one visitor
            self.log.failure("splice backend {backend!r} raised", backend=backend)
            remote.abort()
            visitor.abort()

    def _invalid(self, e: ClientHelloError) -> None:
        self.parser = None
        self.cancelTimer()
        answer = NOT_TLS_RESPONSE if e.reason is Reason.NOT_TLS else b""
        self._refuse(e.reason.value, answer, e.detail)

    def _refuse(self, reason: str, answer: bytes, detail: str) -> None:
        self.factory.refused[reason] += 1
        self.log.debug(
            "TLS port: {peer} refused ({reason}: {detail})",
            peer=self.peer(), reason=reason, detail=detail,
        )
        if answer:
            self.transport.write(answer)
        self.transport.loseConnection()

    def timedOut(self) -> None:
        """
        No complete hello in time: count and abort.
        """
        self.parser = None
        self.factory.refused[TIMEOUT] += 1
        self.log.debug(
            "TLS port: no ClientHello from {peer} within {timeout}s: closed",
            peer=self.peer(), timeout=self.factory.timeout,
        )
        self.transport.abortConnection()

    def readConnectionLost(self) -> None:
        """
        EOF from the peer: before the hello, a truncated hello; after a
        hand-over, a half-close for a protocol that takes one, else a close.
        """
        inner = self.inner
        if inner is not None:
            halfCloseable = interfaces.IHalfCloseableProtocol(inner, None)
            if halfCloseable is not None:
                halfCloseable.readConnectionLost()
            else:
                self.transport.loseConnection()
            return
        if self.parser is not None:
            self._endedEarly()
            self.transport.loseConnection()

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        """
        Pass the loss on to the protocol that took over, or count a
        connection that ended before its hello was complete.
        """
        self.gone = True
        super().connectionLost(reason)
        if self.inner is None and self.parser is not None:
            self._endedEarly()

    def _endedEarly(self) -> None:
        self.parser = None
        self.cancelTimer()
        self.factory.refused[Reason.TRUNCATED.value] += 1
        self.log.debug("TLS port: {peer} left before its ClientHello", peer=self.peer())


class SNIRouterFactory(AdmittingFactory):
    """
    Builds an L{SNIRouter} for each connection.

    @ivar choose: the L{Chooser}.
    @ivar clock: schedules the handshake timeouts.
    @ivar timeout: seconds a connection has to send its whole ClientHello.
    @ivar refused: connections refused, by reason: every key of
        L{REFUSALS}, from 0.
    @ivar routed: connections routed, by kind (L{HANDED_OVER}, L{SPLICED}).
    """

    noisy = False

    def __init__(
        self, choose: Chooser, clock: interfaces.IReactorTime,
        timeout: float = HANDSHAKE_TIMEOUT,
    ) -> None:
        self.choose = choose
        self.clock = clock
        self.timeout = timeout
        self.refused: dict[str, int] = dict.fromkeys(REFUSALS, 0)
        self.routed: dict[str, int] = dict.fromkeys((HANDED_OVER, SPLICED), 0)

    def makeReader(self, addr: Any) -> SNIRouter:
        """
        A router for one admitted connection.
        """
        return SNIRouter(self, addr)

