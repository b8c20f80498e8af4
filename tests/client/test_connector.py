"""
Tests for L{nfltr.client.TcpConnector}: local connections through the test
relay to a real agent (L{nfltr.agent.AgentService}) serving fake services,
all in memory on a Clock, with real TLS end to end.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, error
from twisted.internet.address import IPv4Address
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import AgentService, agent_options, prepare_agent
from nfltr.client import PENDING_TIMEOUT, TcpConnector, connect_options, explain
from nfltr.client import _connector as connectorModule
from nfltr.client._probe import PLAIN_SETTLE
from nfltr.link import ErrorCode, RefusalReason
from nfltr.link.twisted import SessionResetError
from nfltr.resume.twisted import RecordsBroken
from nfltr.tls import PinMismatch, TunnelTLSBroken
from nfltr.wire.messages import NOT_FOUND_CODE, NOT_FOUND_REASON, welcome
from tests.agent.helpers import (
    ADDRESS,
    AnswersAtEnd,
    Asker,
    Echo,
    FakeServices,
    LogCapture,
    Network,
    PausableTransport,
    Recorder,
    TestRelay,
)

KEY = "nfk_client-key"
RELAY_PIN = "sha256:" + "11" * 32
MARKER = b"client plaintext marker 91c2"


class FakePort:
    """
    A listening port that listens nowhere.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.stopped = False

    def getHost(self) -> IPv4Address:
        return IPv4Address("TCP", "127.0.0.1", self.port)

    def stopListening(self) -> None:
        self.stopped = True


class ClientFixture:
    """
    The test relay, agent C{box} sharing 3000 (echo) and 3001 (nothing
    listens), and a connector for C{AGENT:PORT}.
    """

    def __init__(
        self, case: SynchronousTestCase, agent: str = "box", port: int = 3000,
        e2ee: bool = True, pin: str | None = None, wait: bool = False,
    ) -> None:
        self.case = case
        self.network = Network()
        self.relay = TestRelay(self.network)
        self.logs = LogCapture(case)
        agentOptions = agent_options(
            ["3000", "3001"],
            {"name": "box", "e2ee": str(e2ee), "state-dir": case.mktemp(),
             "relay-pin": RELAY_PIN, "key": "nfk_agent"},
            environ={},
        )
        self.setup = prepare_agent(agentOptions)
        self.services = FakeServices(self.network, {3000: Echo})
        self.agent = AgentService(
            self.network.clock, self.setup, lambda line: None, endpoint=self.relay.endpoint(),
            connector=self.services,
        )
        self.agent.startService()
        self.network.run()
        values: dict[str, str | None] = {
            "relay-pin": RELAY_PIN, "key": KEY, "e2ee": str(e2ee),
            "pin": (pin or self.setup.fingerprint) if e2ee else None,
            "wait": "1" if wait else None,
        }
        self.options = connect_options(agent, port, values, environ={})
        self.endpoint = self.relay.endpoint()
        self.announced: list[str] = []
        self.fatal: list[str] = []
        self.listens: list[Any] = []
        self.listenResult: Any = None
        self.connector = TcpConnector(
            self.network.clock, self.options, self.announced.append, self.fatal.append,
            endpoint=self.endpoint, listen=self._listen,
        )

    def _listen(self, factory: Any) -> Any:
        self.listens.append(factory)
        if self.listenResult is not None:
            return self.listenResult
        self.port = FakePort(43210)
        return defer.succeed(self.port)

    def start(self) -> None:
        """
        Start the connector and let its probe at start finish (the probe's
        connections to the services are kept apart, in C{probed}).
        """
        self.connector.startService()
        self.network.run()
        self.network.advance(PLAIN_SETTLE)
        services = self.services.services
        self.probed = {port: services.pop(port) for port in list(services)}

    def user(self, greeting: bytes = b"") -> Recorder:
        """
        A local connection to the connector's listener, from a user who
        writes C{greeting}.
        """
        user = Recorder(greeting)
        local = self.connector.localFactory.buildProtocol(ADDRESS)
        self.network.join(local, user, serverIO=PausableTransport(local, isServer=True))
        return user

    def clientRelayReceived(self) -> bytes:
        """
        Every byte the relay received from the connector.
        """
        return b"".join(b"".join(io.received) for io in self.endpoint.relayIOs)


class ListenTests(SynchronousTestCase):
    """
    The listener opens once the relay welcomed us.
    """

    def test_listenAfterWelcome(self) -> None:
        """
        The connector listens once the relay welcomed it, and announces the
        port it got; a later reconnect does not listen again.
        """
        f = ClientFixture(self)
        f.relay.policy = lambda app: None  # the relay keeps us waiting
        f.start()
        self.assertEqual(f.listens, [])
        f.relay.policy = lambda app: welcome("acme", None)
        f.endpoint.cut()
        f.network.advance(1)
        self.assertEqual(len(f.listens), 1)
        self.assertEqual(f.announced, ["listening on 127.0.0.1:43210"])
        f.endpoint.cut()
        f.network.advance(1)
        self.assertEqual(f.endpoint.attempts, 3)
        self.assertEqual(len(f.listens), 1)

    def test_fatalRefusal(self) -> None:
        """
        A relay that refuses our key for good: one fatal line, never a
        listener, never a retry.
        """
        f = ClientFixture(self)
        f.relay.policy = lambda app: (RefusalReason.UNAUTHORIZED, "invalid API key")
        f.start()
        f.network.advance(60)
        self.assertEqual(f.fatal, ["relay refused: invalid API key"])
        self.assertEqual(f.listens, [])
        self.assertEqual(f.endpoint.attempts, 1)

    def test_listenFails(self) -> None:
        """
        A listening address that cannot be used ends the connector with one
        line naming it, and the link is closed.
        """
        f = ClientFixture(self)
        f.listenResult = defer.fail(error.CannotListenError("127.0.0.1", 0, "address in use"))
        f.start()
        f.network.advance(10)
        self.assertEqual(len(f.fatal), 1)
        self.assertTrue(f.fatal[0].startswith("cannot listen on 127.0.0.1:0: "), f.fatal[0])
        self.assertIn("address in use", f.fatal[0])
        self.assertIsNone(f.connector.dialler.link)
        self.assertEqual(f.endpoint.attempts, 1)

    def test_stop(self) -> None:
        """
        Stopping stops listening and closes the link.
        """
        f = ClientFixture(self)
        f.start()
        d = f.connector.stopService()
        f.network.run()
        self.successResultOf(d)
        self.assertTrue(f.port.stopped)
        self.assertIsNone(f.connector.dialler.link)


class TunnelTests(SynchronousTestCase):
    """
    Local connections become sessions to the agent's service.
    """

    def test_e2eeRoundTrip(self) -> None:
        """
        Bytes from a local connection reach the service and come back; the
        relay receives only ciphertext from the connector.
        """
        f = ClientFixture(self)
        f.start()
        user = f.user(MARKER)
        f.network.run()
        self.assertEqual(user.received, MARKER)
        self.assertEqual(f.services.services[3000][0].received, MARKER)
        self.assertNotIn(MARKER, f.clientRelayReceived())
        self.assertEqual(f.relay.hellos[-1]["role"], "client")
        self.assertEqual(f.relay.hellos[-1]["key"], KEY)

    def test_e2eeResumes(self) -> None:
        """
        A later local connection resumes the end-to-end TLS session of an
        earlier one (the agent's tickets, the connector's memory), and its
        bytes still go through end to end.
        """
        f = ClientFixture(self)
        f.start()
        first = f.user(MARKER)
        f.network.run()
        second = f.user(MARKER)
        f.network.run()
        self.assertEqual((first.received, second.received), (MARKER, MARKER))
        assert f.options.agent_tls is not None
        memory = f.options.agent_tls.sessions
        assert memory is not None
        self.assertGreaterEqual(memory.resumed, 1)
        self.assertNotIn(MARKER, f.clientRelayReceived())

    def test_plainRoundTrip(self) -> None:
        """
        Without end-to-end TLS the bytes travel as they are.
        """
        f = ClientFixture(self, e2ee=False)
        f.start()
        user = f.user(MARKER)
        f.network.run()
        self.assertEqual(user.received, MARKER)
        self.assertIn(MARKER, f.clientRelayReceived())

    def test_halfCloseE2EE(self) -> None:
        """
        A user who sends a request, half-closes and waits gets the answer
        the service wrote after it saw the end of the request, end to end;
        everything then closes cleanly.
        """
        self.halfClose(e2ee=True)

    def test_halfClosePlain(self) -> None:
        """
        The same without end-to-end TLS.
        """
        self.halfClose(e2ee=False)

    def halfClose(self, e2ee: bool) -> None:
        f = ClientFixture(self, e2ee=e2ee)
        f.services.factories[3000] = AnswersAtEnd
        f.start()
        user = Asker(b"question")
        local = f.connector.localFactory.buildProtocol(ADDRESS)
        f.network.join(local, user)
        f.network.run()
        self.assertEqual(user.received, b"answer to question")
        assert user.lost is not None
        self.assertTrue(user.lost.check(error.ConnectionDone), user.lost)
        service = f.services.services[3000][0]
        assert service.lost is not None
        self.assertTrue(service.lost.check(error.ConnectionDone), service.lost)
        self.assertEqual(f.logs.lines(), [])

    def test_oneLinkManyConnections(self) -> None:
        """
        Many local connections share the connector's one link.
        """
        f = ClientFixture(self)
        f.start()
        users = [f.user(b"u%d" % n) for n in range(6)]
        f.network.run()
        self.assertEqual([u.received for u in users], [b"u%d" % n for n in range(6)])
        self.assertEqual(f.endpoint.attempts, 1)
        self.assertEqual(len(f.services.services[3000]), 6)

    def test_extraLinksAtTheSessionLimit(self) -> None:
        """
        When the relay lets a link carry 2 sessions, 9 local connections at
        once make the connector open extra links (3 at most) instead of
        refusing: the first 8 flow over the 4 links; the 9th waits, and
        flows once one of the others ends.
        """
        from nfltr.client._connector import MAX_EXTRA_LINKS
        from nfltr.link import LinkConfig

        f = ClientFixture(self)
        f.relay.config = LinkConfig(max_sessions=2)
        f.start()

        def settle() -> None:
            for _ in range(5):
                f.network.run()
                f.network.clock.advance(0.01)

        users = [f.user(b"u%d" % n) for n in range(9)]
        settle()
        self.assertEqual(len(f.connector.extra), MAX_EXTRA_LINKS)
        self.assertEqual(f.endpoint.attempts, 1 + MAX_EXTRA_LINKS)
        self.assertEqual([u.received for u in users[:8]], [b"u%d" % n for n in range(8)])
        self.assertEqual(users[8].received, b"")
        users[0].transport.abortConnection()
        settle()
        self.assertEqual(users[8].received, b"u8")

    def test_userCloses(self) -> None:
        """
        A user who closes ends the service's connection too, and nothing is
        logged as a failure.
        """
        f = ClientFixture(self)
        f.start()
        user = f.user(b"bye")
        f.network.run()
        user.transport.loseConnection()
        f.network.run()
        self.assertIsNotNone(f.services.services[3000][0].lost)
        self.assertEqual(f.logs.lines(), [])


class FailureTests(SynchronousTestCase):
    """
    A session that fails is one line for the user, and the local connection
    is closed.  (The check at start would stop the connector first: these
    run with C{--wait}, and the lines of the check are left out.)
    """

    def clientLines(self, f: ClientFixture) -> list[str]:
        """
        The connector's warnings (the agent, in the same process, logs its
        own).
        """
        return [
            line for line in f.logs.lines()
            if line.startswith(f.connector.where) and not line.endswith("(--wait)")
        ]

    def assertOneLine(self, f: ClientFixture, user: Recorder, line: str) -> None:
        self.assertIsNotNone(user.lost)
        self.assertEqual(self.clientLines(f), [line])

    def test_unknownAgent(self) -> None:
        """
        An agent that does not exist (or is not ours): "no such agent or
        port (or not yours)".
        """
        f = ClientFixture(self, agent="nobody", wait=True)
        f.start()
        user = f.user(b"hi")
        f.network.run()
        self.assertOneLine(f, user, "nobody:3000: no such agent or port (or not yours)")

    def test_unsharedPort(self) -> None:
        """
        A port the agent does not share gets the same line.
        """
        f = ClientFixture(self, port=4000, wait=True)
        f.start()
        user = f.user(b"hi")
        f.network.run()
        self.assertOneLine(f, user, "box:4000: no such agent or port (or not yours)")

    def test_pinMismatch(self) -> None:
        """
        A pin that does not match the agent's key: the fingerprint message,
        and the service never sees the user's bytes.
        """
        wrong = "sha256:" + "33" * 32
        f = ClientFixture(self, pin=wrong, wait=True)
        f.start()
        user = f.user(MARKER)
        f.network.run()
        self.assertOneLine(
            f, user,
            f"box:3000: agent certificate fingerprint {f.setup.fingerprint} "
            f"does not match --pin {wrong}",
        )
        self.assertEqual(f.services.services[3000][0].received, b"")

    def test_serviceRefused(self) -> None:
        """
        Nothing listens on the agent's side: "the agent's service refused
        the connection"; a burst of them is one line.
        """
        f = ClientFixture(self, port=3001, wait=True)
        f.start()
        users = [f.user(b"hi") for _ in range(4)]
        f.network.run()
        for user in users:
            self.assertIsNotNone(user.lost)
        self.assertEqual(
            self.clientLines(f), ["box:3001: the agent's service refused the connection"]
        )


class PendingTests(SynchronousTestCase):
    """
    Connections accepted while the link is down wait for it, a while.
    """

    def outage(self) -> ClientFixture:
        f = ClientFixture(self)
        f.start()
        f.endpoint.refuse = True
        f.endpoint.cut()
        f.network.run()
        self.assertIsNone(f.connector.dialler.link)
        return f

    def test_waitThenFlow(self) -> None:
        """
        A connection made during an outage, with bytes already written,
        goes through once the link is back; nothing is lost.
        """
        f = self.outage()
        user = f.user(MARKER)
        f.network.advance(2)
        self.assertEqual(user.received, b"")
        self.assertIsNone(user.lost)
        f.endpoint.refuse = False
        f.network.advance(2)
        self.assertEqual(user.received, MARKER)

    def test_expire(self) -> None:
        """
        A connection that waited L{PENDING_TIMEOUT} seconds is closed, with
        one line saying why.
        """
        f = self.outage()
        user = f.user(b"hi")
        f.network.advance(PENDING_TIMEOUT - 0.5, step=0.25)
        self.assertIsNone(user.lost)
        f.network.advance(0.5, step=0.25)
        self.assertIsNotNone(user.lost)
        self.assertEqual(
            [line for line in f.logs.lines() if "local connection" in line],
            [f"no link to the relay after {PENDING_TIMEOUT:g}s: closed a local connection"],
        )

    def test_bounded(self) -> None:
        """
        Beyond L{connectorModule.MAX_PENDING} waiting connections, a new
        one is closed at once.
        """
        self.patch(connectorModule, "MAX_PENDING", 2)
        f = self.outage()
        users = [f.user() for _ in range(3)]
        f.network.run()
        self.assertEqual([u.lost is not None for u in users], [False, False, True])

    def test_userLeavesWhileWaiting(self) -> None:
        """
        A waiting connection that the user closes is forgotten: nothing is
        opened for it when the link returns.
        """
        f = self.outage()
        user = f.user()
        f.network.run()
        user.transport.loseConnection()
        f.network.run()
        f.endpoint.refuse = False
        f.network.advance(2)
        self.assertEqual(f.services.services, {})


class ExplainTests(SynchronousTestCase):
    """
    L{explain}: the line for each way a session ends.
    """

    def test_lines(self) -> None:
        """
        Not found, refused service, pin mismatch, other resets and bytes
        altered on the way (a TLS record, a resumable session's record) each
        get their line; a clean close, a cancel and a lost connection none.
        """
        cases = [
            (SessionResetError(NOT_FOUND_CODE, NOT_FOUND_REASON),
             "a:1: no such agent or port (or not yours)"),
            (SessionResetError(ErrorCode.CONNECT_FAILED, "x"),
             "a:1: the agent's service refused the connection"),
            (PinMismatch("agent", "sha256:aa", "sha256:bb"),
             "a:1: agent certificate fingerprint sha256:aa does not match --pin sha256:bb"),
            (SessionResetError(ErrorCode.GOING_AWAY, "drain timeout"),
             "a:1: the session was reset (drain timeout)"),
            (SessionResetError(ErrorCode.CANCEL, "aborted"), None),
            (error.ConnectionDone(), None),
            (error.ConnectionLost("link lost"), None),
            (TunnelTLSBroken([("SSL routines", "", "decryption failed or bad record mac")]),
             "a:1: a session's end-to-end TLS failed (decryption failed or bad record mac): its "
             "bytes were altered between here and the agent; the session was reset"),
            (RecordsBroken("bad resumable session: unknown record type 128"),
             "a:1: bad resumable session: unknown record type 128: altered on the way; the "
             "session was reset"),
        ]
        for exception, line in cases:
            self.assertEqual(explain(Failure(exception), "a:1"), line, exception)
