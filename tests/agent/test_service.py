"""
Tests for L{nfltr.agent.AgentService} and L{nfltr.agent.AgentSessions}: an
agent on the test relay, serving sessions the relay opens from fake local
services, with real TLS end to end.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet import error
from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.protocol import Protocol
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from nfltr.agent import AgentService, ServiceConnector, agent_options, prepare_agent
from nfltr.agent._local import CANCELLED
from nfltr.link import ErrorCode
from nfltr.link.twisted import SessionResetError
from nfltr.tls import E2EETLSFactory, PinMismatch, client_creator
from nfltr.wire.messages import NOT_FOUND_CODE, NOT_FOUND_REASON
from tests.link.twisted_helpers import Streamer

from .helpers import Echo, FakeServices, LogCapture, Network, Recorder, TestRelay

KEY = "nfk_agent-key"
RELAY_PIN = "sha256:" + "11" * 32
MiB = 1024 * 1024
MARKER = b"plaintext marker 7f3a"


class AgentFixture:
    """
    An agent named C{box} sharing ports 3000 (an echo service) and 3001
    (nothing listens), on the test relay.
    """

    def __init__(
        self, case: SynchronousTestCase, e2ee: bool = True,
        services: dict[int, Any] | None = None,
    ) -> None:
        self.network = Network()
        self.relay = TestRelay(self.network)
        self.endpoint = self.relay.endpoint()
        self.services = FakeServices(self.network, services or {3000: Echo})
        self.logs = LogCapture(case)
        self.fatal: list[str] = []
        self.announced: list[str] = []
        options = agent_options(
            ["3000", "3001"],
            {"name": "box", "e2ee": str(e2ee), "state-dir": case.mktemp(), "relay-pin": RELAY_PIN,
             "key": KEY},
            environ={},
        )
        self.setup = prepare_agent(options)
        self.agent = AgentService(
            self.network.clock, self.setup, self.announced.append, self.fatal.append,
            endpoint=self.endpoint, connector=self.services,
        )
        self.agent.startService()
        self.network.run()
        self.link = self.relay.agents["box"]

    def open(self, target: str, app: Protocol, pin: str | None = None) -> Any:
        """
        Open a session from the relay to the agent, carrying C{app} over
        end-to-end TLS pinned to the agent's key (or C{pin}), or plainly.
        """
        if self.setup.fingerprint is None:
            return self.link.openSession(target, app)
        creator = client_creator("box", pin=pin or self.setup.fingerprint, role="agent")
        tls = E2EETLSFactory(creator, True, self.network.clock).wrap(app)
        return self.link.openSession(target, tls)

    def relayReceived(self) -> bytes:
        """
        Every byte the relay received from the agent.
        """
        return b"".join(self.endpoint.relayIOs[0].received)


class SessionTests(SynchronousTestCase):
    """
    Sessions become connections to the local service.
    """

    def test_e2eeEcho(self) -> None:
        """
        End to end, bytes reach the service in the clear and come back, and
        the relay receives only ciphertext.
        """
        f = AgentFixture(self)
        client = Recorder(MARKER)
        f.open("tcp:3000", client)
        f.network.run()
        self.assertEqual(client.received, MARKER)
        self.assertEqual(f.services.services[3000][0].received, MARKER)
        self.assertNotIn(MARKER, f.relayReceived())
        self.assertGreater(len(f.relayReceived()), 1000)

    def test_plainEcho(self) -> None:
        """
        With C{--e2ee false} the session carries the service's bytes as they
        are.
        """
        f = AgentFixture(self, e2ee=False)
        client = Recorder(MARKER)
        f.open("tcp:3000", client)
        f.network.run()
        self.assertEqual(client.received, MARKER)
        self.assertIn(MARKER, f.relayReceived())

    def test_closeTravels(self) -> None:
        """
        A service that writes and closes at once: every byte arrives and
        the session ends cleanly, end to end.
        """

        class WriteAndClose(Recorder):
            def connectionMade(self) -> None:
                self.transport.write(b"y" * 300_000)
                self.transport.loseConnection()

        f = AgentFixture(self, services={3000: WriteAndClose})
        client = _Answering()
        f.open("tcp:3000", client)
        f.network.run()
        self.assertEqual(client.received, b"y" * 300_000)
        assert client.lost is not None
        self.assertTrue(client.lost.check(error.ConnectionDone), client.lost)

    def test_bulkAndBackpressure(self) -> None:
        """
        4 MiB from the service to a reader that stops: the agent stops
        reading the service's socket instead of buffering; once the reader
        resumes, every byte arrives intact.
        """
        size = 4 * MiB
        f = AgentFixture(self, services={3000: lambda: Streamer(7, size)})
        client = Streamer(None, 0, 7, size, stuck=True)
        session = f.open("tcp:3000", client)
        f.network.run()
        serviceSide = f.services.transports[0]
        self.assertTrue(serviceSide.paused)
        self.assertLess(client.received, size)
        session.resumeProducing()
        f.network.run()
        self.assertEqual(client.received, size)
        self.assertEqual(client.hash.hexdigest(), client.expected)
        self.assertTrue(serviceSide.noDelay)

    def test_manySessions(self) -> None:
        """
        Several sessions at once each reach their own service connection.
        """
        f = AgentFixture(self)
        clients = [Recorder(b"n%d" % n) for n in range(5)]
        for client in clients:
            f.open("tcp:3000", client)
        f.network.run()
        self.assertEqual([c.received for c in clients], [b"n%d" % n for n in range(5)])
        self.assertEqual(len(f.services.services[3000]), 5)

    def test_wrongPin(self) -> None:
        """
        A peer that pins another key fails with L{PinMismatch}; the service
        sees no byte and its connection is closed.
        """
        f = AgentFixture(self)
        client = Recorder(MARKER)
        f.open("tcp:3000", client, pin="sha256:" + "22" * 32)
        f.network.run()
        assert client.lost is not None
        self.assertTrue(client.lost.check(PinMismatch), client.lost)
        service = f.services.services[3000][0]
        self.assertEqual(service.received, b"")
        self.assertIsNotNone(service.lost)


class RefusalTests(SynchronousTestCase):
    """
    Sessions the agent cannot serve.
    """

    def test_unsharedPort(self) -> None:
        """
        A session for a port the agent does not share, or a malformed
        target, is refused with the not-found code and reason, and no
        service is contacted.
        """
        f = AgentFixture(self)
        for target in ("tcp:4000", "tcp:box:3000", "udp:3000", "tcp:0"):
            client = Recorder()
            f.link.openSession(target, client)
            f.network.run()
            assert client.lost is not None
            self.assertTrue(client.lost.check(SessionResetError), target)
            self.assertEqual(
                (client.lost.value.code, client.lost.value.reason),
                (NOT_FOUND_CODE, NOT_FOUND_REASON),
            )
        self.assertEqual(f.services.services, {})

    def test_serviceRefuses(self) -> None:
        """
        A shared port where nothing listens resets the session with
        C{CONNECT_FAILED}, saying so; a burst of such sessions is one
        warning.
        """
        f = AgentFixture(self)
        clients = [Recorder() for _ in range(3)]
        for client in clients:
            f.open("tcp:3001", client)
        f.network.run()
        for client in clients:
            assert client.lost is not None
            self.assertTrue(client.lost.check(SessionResetError), client.lost)
            self.assertEqual(client.lost.value.code, ErrorCode.CONNECT_FAILED)
            self.assertEqual(
                client.lost.value.reason, "service on port 3001 refused the connection"
            )
        self.assertEqual(f.logs.lines(), ["service on port 3001 refused the connection"])

    def test_sessionGoneBeforeService(self) -> None:
        """
        A session that ends while the agent still connects to the service
        cancels that connection attempt, quietly.
        """
        attempts: list[Any] = []

        class Slow:
            dial = attempts.append

        f = AgentFixture(self)
        f.agent.sessions.connector = Slow()
        session = f.open("tcp:3000", Recorder())
        f.network.run()
        self.assertEqual([(a.port, a.outcome) for a in attempts], [(3000, None)])
        session.abortConnection()
        f.network.run()
        self.assertEqual(attempts[0].outcome, CANCELLED)
        self.assertEqual(f.logs.lines(), [])

    def test_serviceSilent(self) -> None:
        """
        A service that does not answer within the connector's timeout: the
        session is reset with C{CONNECT_FAILED}, saying so, and ::1 is not
        tried.
        """
        f = AgentFixture(self)
        reactor = MemoryReactorClock()
        connector = f.agent.sessions.connector = ServiceConnector(reactor, timeout=5)
        client = Recorder()
        f.open("tcp:3000", client)
        f.network.run()
        self.assertEqual(reactor.tcpClients[0][:2], ("127.0.0.1", 3000))
        reactor.advance(5)
        f.network.run()
        assert client.lost is not None
        self.assertTrue(client.lost.check(SessionResetError), client.lost)
        self.assertEqual(
            (client.lost.value.code, client.lost.value.reason),
            (ErrorCode.CONNECT_FAILED, "service on port 3000 did not answer"),
        )
        self.assertTrue(reactor.connectors[0].stoppedConnecting)
        self.assertEqual(len(reactor.tcpClients), 1)
        self.assertEqual(f.logs.lines(), ["service on port 3000 did not answer"])
        connector.stop()

class ConnectorUseTests(SynchronousTestCase):
    """
    How the agent uses its connector to local services.
    """

    def test_attemptLetsGo(self) -> None:
        """
        Once its connection to the service is gone, a session's connection
        attempt (which the TCP connector keeps) holds on to the session no
        more.
        """
        f = AgentFixture(self, e2ee=False)
        reactor = MemoryReactorClock()
        f.agent.sessions.connector = ServiceConnector(reactor)
        f.open("tcp:3000", Recorder())
        f.network.run()
        attempt = reactor.tcpClients[0][2]
        service = attempt.buildProtocol(None)
        service.makeConnection(StringTransport())
        self.assertIsNotNone(attempt.session)
        attempt.clientConnectionLost(reactor.connectors[0], Failure(error.ConnectionDone()))
        self.assertIsNone(attempt.session)

    def test_targetSpeltOtherwise(self) -> None:
        """
        A shared port's target with a leading zero is still that port.
        """
        f = AgentFixture(self, e2ee=False)
        client = Recorder(MARKER)
        f.open("tcp:03000", client)
        f.network.run()
        self.assertEqual(client.received, MARKER)

    def test_stopStopsConnector(self) -> None:
        """
        Stopping the agent stops its connector (and its timer).
        """
        f = AgentFixture(self)
        f.agent.stopService()
        f.network.advance(60)
        self.assertTrue(f.services.stopped)


class OwnerTests(SynchronousTestCase):
    """
    A running agent holds its name in its state directory.
    """

    def test_secondAgentOfOneName(self) -> None:
        """
        A second agent of the same name and state directory stops at start with one line
        naming the first one's pid, and never dials; once the first stopped, the name is free.
        """
        f = AgentFixture(self)
        second = AgentService(
            f.network.clock, f.setup, f.announced.append, f.fatal.append,
            endpoint=f.endpoint, connector=f.services,
        )
        second.startService()
        [line] = f.fatal
        self.assertIn("agent box (state directory", line)
        self.assertIn(f"(pid {os.getpid()})", line)
        self.assertIsNone(second.owner)
        f.agent.stopService()
        f.network.advance(60)
        self.assertIsNone(f.agent.owner)
        third = AgentService(
            f.network.clock, f.setup, f.announced.append, f.fatal.append,
            endpoint=f.endpoint, connector=f.services,
        )
        third.startService()
        self.assertEqual(len(f.fatal), 1)
        self.assertIsNotNone(third.owner)
        third.stopService()
        f.network.advance(60)


class AnnounceTests(SynchronousTestCase):
    """
    What the agent tells its user at start.
    """

    def test_e2eeCommand(self) -> None:
        """
        The agent announces its fingerprint and, for each port, the exact
        tcp-connect command, with the pin and the relay's trust, never the
        key.
        """
        f = AgentFixture(self)
        fp = f.setup.fingerprint
        self.assertEqual(f.announced[0], f"agent box: end-to-end key fingerprint {fp}")
        self.assertRegex(
            f.announced[1],
            f"nfltr tcp-connect box 3000 --listen 127\\.0\\.0\\.1:[0-9]+ --pin {fp} "
            f"--relay localhost:8443 --relay-pin {RELAY_PIN}$",
        )  # the port listened on: see tests.agent.test_announce
        self.assertIn("tcp-connect box 3001", f.announced[2])
        self.assertNotIn(KEY, "\n".join(f.announced))
        self.assertNotIn(KEY, f.logs.allText())

    def test_plainCommand(self) -> None:
        """
        Without end-to-end TLS the agent says the relay can read the
        sessions, and the command says C{--e2ee false}.
        """
        f = AgentFixture(self, e2ee=False)
        self.assertIn("the relay can read them", f.announced[0])
        self.assertIn("--e2ee false", f.announced[1])
        self.assertNotIn("--pin", f.announced[1])

    def test_hello(self) -> None:
        """
        The agent's hello names it and its shares with their mode.
        """
        f = AgentFixture(self)
        hello = f.relay.hellos[0]
        self.assertEqual((hello["role"], hello["name"], hello["key"]), ("agent", "box", KEY))
        self.assertEqual(hello["tcp"], [{"port": 3000, "e2ee": True}, {"port": 3001, "e2ee": True}])

    def test_stop(self) -> None:
        """
        Stopping the service closes the link to the relay.
        """
        f = AgentFixture(self)
        d = f.agent.stopService()
        f.network.run()
        self.successResultOf(d)
        self.assertNotIn("box", f.relay.agents)

    def test_stopDrains(self) -> None:
        """
        Stopping the agent drains: the relay can open no more sessions, a
        session in flight goes on carrying bytes to and from the service,
        and one still open after the agent's drain timeout (30 s) is reset;
        then the link is closed.
        """
        f = AgentFixture(self)
        client = Recorder(MARKER)
        f.open("tcp:3000", client)
        f.network.run()
        d = f.agent.stopService()
        f.network.run()
        self.assertFalse(f.link.canOpen())
        client.transport.write(b" again")
        f.network.advance(29)
        self.assertEqual(client.received, MARKER + b" again")
        self.assertNoResult(d)
        self.assertIsNone(client.lost)
        f.network.advance(1)
        self.successResultOf(d)
        self.assertNotIn("box", f.relay.agents)
        assert client.lost is not None
        self.assertTrue(client.lost.check(SessionResetError), client.lost)
        self.assertEqual(client.lost.value.code, ErrorCode.GOING_AWAY)


@implementer(IHalfCloseableProtocol)
class _Answering(Recorder):
    """
    A half-closeable peer that closes once its input ended.
    """

    def readConnectionLost(self) -> None:
        self.transport.loseConnection()

    def writeConnectionLost(self) -> None:
        pass
