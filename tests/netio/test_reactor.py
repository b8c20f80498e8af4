"""
Tests for L{nfltr.netio._reactor}.
"""

from __future__ import annotations

import shutil
import socket
from typing import Any

from twisted.internet import defer, error, interfaces, reactor
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import serverFromString
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock, deferLater
from twisted.internet.testing import MemoryReactorClock
from twisted.logger import LogLevel, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase, TestCase

from nfltr.netio import (
    IOSettings,
    Port,
    TunedReactor,
    heap_trimmer,
    io_settings,
    tune_process,
)
from nfltr.netio import _reactor as module
from nfltr.netio._malloc import trimmable_libc


class TunedReactorTests(TestCase):
    """
    The wrapper is the reactor but for the TCP ports and connections it
    makes.
    """

    def test_passesThrough(self) -> None:
        """
        It provides the real reactor's interfaces and attributes.
        """
        tuned = TunedReactor(reactor, IOSettings())
        for interface in (
            interfaces.IReactorTCP, interfaces.IReactorTime, interfaces.IReactorCore,
            interfaces.IReactorPluggableNameResolver, interfaces.IReactorThreads,
        ):
            self.assertTrue(interface.providedBy(tuned), interface)
        self.assertEqual(tuned.callLater, reactor.callLater)
        self.assertIs(tuned.nameResolver, reactor.nameResolver)

    def test_methodsLookedUpOnce(self) -> None:
        """
        The reactor's methods are looked up once and kept; plain attributes
        are read from the reactor every time.
        """
        tuned = TunedReactor(reactor, IOSettings())
        first = tuned.callLater
        self.assertIs(tuned.__dict__["callLater"], first)
        self.assertNotIn("running", tuned.__dict__)
        self.assertEqual(tuned.running, reactor.running)
        self.assertNotIn("running", tuned.__dict__)

    def test_listenAndConnect(self) -> None:
        """
        C{listenTCP} makes nfltr's L{Port}, C{connectTCP} nfltr's client
        transport; a connection between them carries bytes, and both ends
        have the wrapper's settings.
        """
        chosen = IOSettings(read_size=100_000, send_limit=200_000)
        tuned = TunedReactor(reactor, chosen)
        accepted: list[Protocol] = []

        class Server(Protocol):
            def connectionMade(self) -> None:
                accepted.append(self)
                self.transport.write(b"hello")

        port = tuned.listenTCP(0, Factory.forProtocol(Server), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.assertIsInstance(port, Port)
        received = []
        done: Deferred[None] = Deferred()

        class Client(Protocol):
            def dataReceived(self, data: bytes) -> None:
                received.append(data)
                self.transport.loseConnection()

            def connectionLost(self, reason: object = None) -> None:
                done.callback(None)

        connector = tuned.connectTCP("127.0.0.1", port.getHost().port, _ClientFactory(Client))

        def check(_: object) -> None:
            self.assertEqual(b"".join(received), b"hello")
            client = connector.transport
            server = accepted[0].transport
            for transport in (client, server):
                self.assertEqual(
                    (transport.bufferSize, transport.SEND_LIMIT), (100_000, 200_000)
                )
            self.assertEqual(type(client).__module__, "nfltr.netio._tcp")
            accepted[0].transport.loseConnection()

        return done.addCallback(check)

    async def test_backlogFromEndpoint(self) -> None:
        """
        A C{tcp:} endpoint string's C{backlog=} reaches the socket of the
        port the wrapper makes (what C{ss -ltn} shows as its Send-Q), as
        the relay's listeners rely on (L{nfltr.relay.backlog}).
        """
        tuned = TunedReactor(reactor, IOSettings())
        endpoint = serverFromString(tuned, "tcp:0:interface=127.0.0.1:backlog=321")
        port = await endpoint.listen(Factory.forProtocol(Protocol))
        self.addCleanup(port.stopListening)
        self.assertIsInstance(port, Port)
        self.assertEqual(port.backlog, 321)
        if shutil.which("ss") is not None:
            from tests.relay.test_backlog import listen_backlog

            self.assertEqual(listen_backlog(port.getHost().port), 321)

    def test_adoptStreamPort(self) -> None:
        """
        A listening TCP socket handed over (as a multi-process relay's
        workers would get it) becomes nfltr's L{Port} with the wrapper's
        settings; other families go to the reactor.
        """
        chosen = IOSettings(read_size=100_000)
        tuned = TunedReactor(reactor, chosen)
        sock = socket.socket()
        self.addCleanup(sock.close)
        sock.bind(("127.0.0.1", 0))
        sock.listen(5)
        port = tuned.adoptStreamPort(sock.fileno(), socket.AF_INET, Factory.forProtocol(Protocol))
        self.addCleanup(port.stopListening)
        self.assertIsInstance(port, Port)
        self.assertIs(port.settings, chosen)
        self.assertEqual(port.getHost().port, sock.getsockname()[1])


class ConnectTests(TestCase):
    """
    nfltr's client connections: an IP address literal is connected to with
    no resolution step, a name is resolved as in Twisted, a refusal is
    reported, and a lost connection's connector lets go of it.
    """

    def outcome(self, host: str, port: int) -> Deferred[tuple[str, Any]]:
        tuned = TunedReactor(reactor, IOSettings())
        d: Deferred[tuple[str, Any]] = Deferred()

        class Closer(Protocol):
            def connectionMade(self) -> None:
                self.transport.loseConnection()

        class Watch(_ClientFactory):
            def clientConnectionFailed(self, connector: object, reason: Any) -> None:
                d.callback(("failed", reason))

            def clientConnectionLost(self, connector: object, reason: Any) -> None:
                d.callback(("lost", connector))

        tuned.connectTCP(host, port, Watch(Closer))
        return d

    def listening(self) -> int:
        port = reactor.listenTCP(0, Factory.forProtocol(Protocol), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        return int(port.getHost().port)

    async def test_literalConnects(self) -> None:
        """
        An IP address literal connects without the L{Deferred} Twisted
        makes for its resolution; once the connection is lost the connector has no
        transport any more.
        """
        made: list[object] = []
        original = defer.succeed

        def counting(result: Any) -> Deferred[Any]:
            made.append(result)
            return original(result)

        port = self.listening()
        self.patch(defer, "succeed", counting)
        kind, connector = await self.outcome("127.0.0.1", port)
        self.assertEqual(kind, "lost")
        self.assertEqual(made, [])  # Twisted's resolveAddress makes one
        await deferLater(reactor, 0, lambda: None)  # clientConnectionLost fired d
        self.assertIsNone(connector.transport)

    async def test_nameResolved(self) -> None:
        """
        A name still goes through the reactor's resolver.
        """
        kind, _ = await self.outcome("localhost", self.listening())
        self.assertEqual(kind, "lost")

    async def test_refused(self) -> None:
        """
        A refused literal is reported as the connection's failure.
        """
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        kind, reason = await self.outcome("127.0.0.1", port)
        self.assertEqual(kind, "failed")
        self.assertTrue(reason.check(error.ConnectionRefusedError))


class _ClientFactory(Factory):
    def __init__(self, protocol: type[Protocol]) -> None:
        self.protocol = protocol

    def startedConnecting(self, connector: object) -> None:
        pass

    def clientConnectionFailed(self, connector: object, reason: object) -> None:
        pass

    def clientConnectionLost(self, connector: object, reason: object) -> None:
        pass


class TuneProcessTests(SynchronousTestCase):
    """
    L{tune_process} applies the environment's settings once.
    """

    def setUp(self) -> None:
        self.malloc: list[bool] = []
        self.patch(module, "tune_malloc", lambda: self.malloc.append(True) or True)

    def test_wrapsRealReactor(self) -> None:
        """
        The real reactor comes back wrapped, with the settings of the
        environment, which it carries; malloc is tuned.
        """
        tuned = tune_process(reactor, {"NFLTR_READ_SIZE": "131072"})
        self.assertIsInstance(tuned, TunedReactor)
        self.assertIs(tuned.reactor, reactor)
        self.assertEqual(tuned.settings.read_size, 131072)
        self.assertIs(io_settings(tuned), tuned.settings)
        self.assertEqual(self.malloc, [True])
        self.assertIs(tune_process(tuned, {}), tuned)

    def test_fakeReactorsUnwrapped(self) -> None:
        """
        A reactor that is not a real one (tests' fakes) is returned as it
        is, so that it keeps recording listens and connects.
        """
        for fake in (Clock(), MemoryReactorClock()):
            self.assertIs(tune_process(fake, {}), fake)

    def test_noMallocTuning(self) -> None:
        """
        C{NFLTR_MALLOC_TUNING=0} leaves malloc alone.
        """
        tune_process(Clock(), {"NFLTR_MALLOC_TUNING": "0"})
        self.assertEqual(self.malloc, [])

    def test_badValue(self) -> None:
        """
        A value that is not understood is logged as a warning and the
        defaults are used.
        """
        events: list[dict[str, object]] = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)
        tuned = tune_process(reactor, {"NFLTR_WRITE_NOW": "sometimes"})
        self.assertEqual(tuned.settings, IOSettings())
        warnings = [e for e in events if e.get("log_level") == LogLevel.warn]
        self.assertEqual(len(warnings), 1)
        self.assertIn("NFLTR_WRITE_NOW", str(warnings[0]["error"]))


class HeapTrimmerChoiceTests(SynchronousTestCase):
    """
    L{heap_trimmer}: a trimmer for a tuned reactor on glibc, unless
    C{NFLTR_HEAP_TRIM=0}; none for tests' fakes.
    """

    def test_tunedReactor(self) -> None:
        """
        A tuned real reactor on glibc gets a trimmer on that reactor, not
        started.
        """
        if trimmable_libc() is None:
            raise self.skipTest("not glibc 2.33 or later")
        tuned = TunedReactor(reactor, IOSettings())
        trimmer = heap_trimmer(tuned)
        assert trimmer is not None
        self.assertIs(trimmer.clock, tuned)
        self.assertFalse(trimmer.running)

    def test_off(self) -> None:
        """
        C{NFLTR_HEAP_TRIM=0}, a fake reactor or a C library that cannot
        trim: no trimmer.
        """
        off = TunedReactor(reactor, IOSettings.from_environ({"NFLTR_HEAP_TRIM": "0"}))
        self.assertIsNone(heap_trimmer(off))
        self.assertIsNone(heap_trimmer(Clock()))
        self.assertIsNone(heap_trimmer(TunedReactor(reactor, IOSettings()), object()))
