"""
Helpers for the agent's and the client's tests: a small relay made of real
link protocols joined by iosim on a Clock, fake local services, and log
capture.

L{TestRelay} stands in for nfltr's relay the way the tests need it: it
welcomes or refuses each dialer by a policy, and routes a client's session
C{tcp:AGENT:PORT} to a new session C{tcp:PORT} on that agent's link,
passing a reset's code back to the client the way the real relay does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer, error
from twisted.internet.address import IPv4Address
from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.python.failure import Failure
from twisted.test.iosim import FakeTransport, IOPump, connect
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from nfltr.link import LISTENER, RefusalReason, refusal
from nfltr.link.twisted import LinkHandler, LinkProtocol, LinkSession, SessionResetError
from nfltr.streams import SpliceEnd
from nfltr.wire.messages import (
    NOT_FOUND_CODE,
    NOT_FOUND_REASON,
    MessageError,
    agent_target,
    parse_client_target,
    welcome,
)

ADDRESS = IPv4Address("TCP", "127.0.0.1", 40000)
_LEVELS = [LogLevel.debug, LogLevel.info, LogLevel.warn, LogLevel.error, LogLevel.critical]


class Network:
    """
    Every iosim pump of a test, run together on one clock, over
    L{MemoryTransport}s.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or Clock()
        self.pumps: list[IOPump] = []
        self.kicked = False

    def join(self, server: Any, client: Any, serverIO: Any = None, clientIO: Any = None) -> IOPump:
        """
        Connect two protocols in memory; the new pump runs with the others.
        """
        serverIO = serverIO or MemoryTransport(server, isServer=True)
        clientIO = clientIO or MemoryTransport(client, isServer=False)
        for io, peer in ((serverIO, clientIO), (clientIO, serverIO)):
            if isinstance(io, MemoryTransport):
                io.peer, io.network = peer, self
        pump = connect(server, serverIO, client, clientIO, greet=False, clock=self.clock)
        self.pumps.append(pump)
        return pump

    def run(self, rounds: int = 100_000) -> None:
        """
        Pump everything until nothing moves.
        """
        for _ in range(rounds):
            moved = False
            for pump in list(self.pumps):
                moved = pump.pump() or moved
            moved, self.kicked = moved or self.kicked, False
            if not moved:
                return
        raise AssertionError("the network never went quiet")

    def advance(self, seconds: float, step: float = 1.0) -> None:
        """
        Let C{seconds} pass, pumping at least every C{step} seconds (so
        keepalives are answered as on a live network).
        """
        self.run()
        while seconds > 0:
            tick = min(step, seconds)
            self.clock.advance(tick)
            self.run()
            seconds -= tick


_EOF = object()


class MemoryTransport(FakeTransport):
    """
    iosim's fake TCP transport, more like TCP: it honours
    C{pauseProducing} (bytes for a paused protocol wait, as in the kernel),
    and C{loseWriteConnection} reaches the peer as an end of input after
    the bytes before it (C{readConnectionLost} for a half-closeable
    protocol, a close for any other).  It records what it sent and received.
    """

    def __init__(self, protocol: Any, isServer: bool) -> None:
        super().__init__(protocol, isServer)
        self.paused = False
        self.held: list[Any] = []
        self.sent: list[bytes] = []
        self.received: list[bytes] = []
        self.noDelay = False
        self.writeClosed = False
        self.peer: Any = None
        self.network: Network | None = None
        self._eofSent = False

    def write(self, data: bytes) -> None:
        if self.writeClosed:
            return
        if not self.disconnecting:
            self.sent.append(data)
        super().write(data)

    def loseWriteConnection(self) -> None:
        self.writeClosed = True

    def getOutBuffer(self) -> Any:
        data = super().getOutBuffer()
        if data is None and self.writeClosed and not self._eofSent and not self.disconnecting:
            self._eofSent = True
            if isinstance(self.peer, MemoryTransport) and self.network is not None:
                # At the start of the next pump, as data would be: what the
                # peer writes in answer then leaves before any close.
                self.network.clock.callLater(0, self.peer.bufferReceived, _EOF)
                self.network.kicked = True
        return data

    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False
        while self.held and not self.paused and not self.disconnected:
            self._deliver(self.held.pop(0))

    def bufferReceived(self, buf: Any) -> None:
        if self.paused or self.held:
            self.held.append(buf)
        else:
            self._deliver(buf)

    def _deliver(self, buf: Any) -> None:
        if buf is not _EOF:
            if isinstance(buf, bytes):
                self.received.append(buf)
            super().bufferReceived(buf)
            return
        halfCloseable = IHalfCloseableProtocol(self.protocol, None)
        if halfCloseable is not None:
            halfCloseable.readConnectionLost()
        else:
            self.loseConnection()

    def setTcpNoDelay(self, enabled: bool) -> None:
        self.noDelay = enabled


# Names the tests use for the same transport.
PausableTransport = RecordingTransport = MemoryTransport


class Recorder(Protocol):
    """
    A protocol that records what happens to it; optionally writes
    C{greeting} once connected.
    """

    def __init__(self, greeting: bytes = b"") -> None:
        self.greeting = greeting
        self.received = b""
        self.made = False
        self.lost: Failure | None = None

    def connectionMade(self) -> None:
        self.made = True
        if self.greeting:
            self.transport.write(self.greeting)

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Failure | None = None) -> None:
        self.lost = reason


class Echo(Recorder):
    """
    Writes back what it receives, and records it.
    """

    def dataReceived(self, data: bytes) -> None:
        super().dataReceived(data)
        self.transport.write(data)


@implementer(IHalfCloseableProtocol)
class Asker(Recorder):
    """
    Writes its question, half-closes, and records the answer and the end of
    input.
    """

    readEnded = False

    def connectionMade(self) -> None:
        super().connectionMade()
        self.transport.loseWriteConnection()

    def readConnectionLost(self) -> None:
        self.readEnded = True
        self.transport.loseConnection()

    def writeConnectionLost(self) -> None:
        pass


@implementer(IHalfCloseableProtocol)
class AnswersAtEnd(Recorder):
    """
    A service that answers only once its input ended, then closes.
    """

    def readConnectionLost(self) -> None:
        self.transport.write(b"answer to " + self.received)
        self.transport.loseConnection()

    def writeConnectionLost(self) -> None:
        pass


class FakeServices:
    """
    Local services for an agent, in memory: C{connect(port, protocol)} and
    C{dial(attempt)} as L{nfltr.agent.ServiceConnector} does them.

    @ivar services: the protocols connected on each port.
    @ivar stopped: C{stop} was called.
    """

    def __init__(self, network: Network, factories: dict[int, Callable[[], Protocol]]) -> None:
        self.network = network
        self.factories = factories
        self.services: dict[int, list[Protocol]] = {}
        self.transports: list[PausableTransport] = []
        self.stopped = False

    def connect(self, port: int, protocol: Any) -> defer.Deferred[Any]:
        make = self.factories.get(port)
        if make is None:
            return defer.fail(error.ConnectionRefusedError("refused"))
        self._join(port, make, protocol)
        return defer.succeed(protocol)

    def dial(self, attempt: Any) -> None:
        make = self.factories.get(attempt.port)
        if make is None:
            attempt.fail(Failure(error.ConnectionRefusedError("refused")))
            return
        self._join(attempt.port, make, attempt.buildProtocol(ADDRESS))

    def stop(self) -> None:
        self.stopped = True

    def _join(self, port: int, make: Callable[[], Protocol], protocol: Any) -> None:
        service = make()
        self.services.setdefault(port, []).append(service)
        agentSide = PausableTransport(protocol, isServer=False)
        self.transports.append(agentSide)
        self.network.join(service, protocol, clientIO=agentSide)


class RelayHandler(LinkHandler):
    """
    The relay's side of one link in L{TestRelay}.
    """

    def __init__(self, relay: TestRelay) -> None:
        self.relay = relay
        self.link: LinkProtocol | None = None
        self.name: str | None = None

    def linkEstablished(self, link: LinkProtocol) -> None:
        self.link = link
        assert link.peerHello is not None
        app = link.peerHello.app
        self.relay.hellos.append(app)
        verdict = self.relay.policy(app)
        if verdict is None:
            return  # no answer at all
        if isinstance(verdict, tuple):
            link.sendControl(refusal(verdict[0], verdict[1]))
            link.drain(0)
            return
        if app.get("role") == "agent":
            self.name = app["name"]
            self.relay.agents[app["name"]] = link
        link.sendControl(verdict)

    def sessionRequested(self, session: LinkSession) -> None:
        try:
            name, port = parse_client_target(session.target)
        except MessageError:
            name, port = "", 0
        agentLink = self.relay.agents.get(name)
        if agentLink is None or not agentLink.canOpen():
            session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)
            return
        clientEnd, agentEnd = ResetPassingEnd(), ResetPassingEnd()
        clientEnd.other, agentEnd.other = agentEnd, clientEnd
        agentLink.openSession(agent_target(port), agentEnd)
        session.accept(clientEnd)

    def controlReceived(self, link: LinkProtocol, message: dict[str, Any]) -> None:
        self.relay.controls.append(message)
        answer = self.relay.answer(message)
        if answer is not None:
            link.sendControl(answer)

    def linkLost(self, link: LinkProtocol, reason: Failure) -> None:
        if self.name is not None and self.relay.agents.get(self.name) is link:
            del self.relay.agents[self.name]


class ResetPassingEnd(SpliceEnd):
    """
    A splice end between two sessions that passes a reset on with its code.
    """

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        other = self.other
        if reason.check(SessionResetError) and other is not None and other.connected \
                and not other.closed:
            if self.joined:
                other.transport.unregisterProducer()
            self.closed = True
            other.transport.abortWith(reason.value.code, reason.value.reason)
        super().connectionLost(reason)


def welcomeAll(app: dict[str, Any]) -> dict[str, Any]:
    """
    The default policy: welcome everybody into account C{acme}.
    """
    return welcome("acme", app.get("name"))


class TestRelay:
    """
    A relay for tests, with an endpoint per dialer (L{TestRelay.endpoint}).

    @ivar policy: given a dialer's hello, returns a C{welcome} message, a
        C{(RefusalReason, text)} refusal, or L{None} for no answer.
    @ivar hellos: the dialers' hellos, in order.
    @ivar agents: the agents' links by name.
    """

    def __init__(self, network: Network, policy: Callable[[dict[str, Any]], Any] = welcomeAll):
        self.network = network
        self.policy = policy
        self.hellos: list[dict[str, Any]] = []
        self.agents: dict[str, LinkProtocol] = {}
        self.links: list[LinkProtocol] = []
        # The control messages dialers sent after their hello, and what
        # answers each (None: no answer).
        self.controls: list[dict[str, Any]] = []
        self.answer: Callable[[dict[str, Any]], dict[str, Any] | None] = lambda message: None
        # The relay side's link configuration (its session limit, say).
        self.config: Any = None

    def endpoint(self, tls: tuple[Any, Any] | None = None) -> RelayEndpoint:
        """
        An endpoint that connects to this relay, over TLS when C{tls} is
        C{(serverCreator, clientCreator)}.
        """
        return RelayEndpoint(self, tls)


class RelayEndpoint:
    """
    C{IStreamClientEndpoint} to a L{TestRelay}.

    @ivar attempts: how many times C{connect} was called.
    @ivar refuse: fail connections as if nobody listened.
    @ivar relayIOs: the relay side's transports, with every byte the relay
        received from a dialer.
    """

    def __init__(self, relay: TestRelay, tls: tuple[Any, Any] | None) -> None:
        self.relay = relay
        self.tls = tls
        self.attempts = 0
        self.refuse = False
        self.pumps: list[IOPump] = []
        self.relayIOs: list[RecordingTransport] = []

    def connect(self, factory: Any) -> defer.Deferred[Any]:
        self.attempts += 1
        if self.refuse:
            return defer.fail(error.ConnectionRefusedError("refused"))
        relay = self.relay
        relayLink = LinkProtocol(
            LISTENER, RelayHandler(relay), relay.network.clock, relay.config
        )
        relay.links.append(relayLink)
        dialer = factory.buildProtocol(ADDRESS)
        server, client = relayLink, dialer
        if self.tls is not None:
            clock = relay.network.clock
            server = TLSMemoryBIOFactory(
                self.tls[0], False, _Of(relayLink), clock=clock
            ).buildProtocol(ADDRESS)
            client = TLSMemoryBIOFactory(
                self.tls[1], True, _Of(dialer), clock=clock
            ).buildProtocol(ADDRESS)
        relayIO = RecordingTransport(server, isServer=True)
        self.relayIOs.append(relayIO)
        self.pumps.append(relay.network.join(server, client, serverIO=relayIO))
        return defer.succeed(dialer)

    def cut(self, reason: Exception | None = None) -> None:
        """
        Drop the newest connection under both sides without a goodbye.
        """
        pump = self.pumps[-1]
        why = reason or error.ConnectionLost("cut")
        for io in (pump.clientIO, pump.serverIO):
            io.disconnectReason = why
            io.disconnecting = io.disconnected = True
        pump.client.connectionLost(Failure(why))
        pump.server.connectionLost(Failure(why))


class _Of(Factory):
    """
    A factory that hands out one given protocol.
    """

    def __init__(self, protocol: Any) -> None:
        self.protocol_ = protocol

    def buildProtocol(self, addr: Any) -> Any:
        return self.protocol_


class LogCapture:
    """
    Collects the log events emitted during a test.
    """

    def __init__(self, case: SynchronousTestCase) -> None:
        self.events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(self.events.append)
        case.addCleanup(globalLogPublisher.removeObserver, self.events.append)

    def lines(self, level: LogLevel = LogLevel.warn) -> list[str]:
        """
        The text of the events at C{level} or above.
        """
        wanted = _LEVELS[_LEVELS.index(level):]
        return [formatEvent(e) for e in self.events if e.get("log_level") in wanted]

    def allText(self) -> str:
        """
        Every event's text, for checking what must never be logged.
        """
        return "\n".join(formatEvent(e) for e in self.events)


__all__ = [
    "ADDRESS", "Echo", "FakeServices", "LogCapture", "Network", "PausableTransport", "Recorder",
    "RefusalReason", "RelayEndpoint", "TestRelay", "welcomeAll",
]
