"""
Tests for L{nfltr.tls._resume}: TLS 1.3 resumption on the end-to-end tunnel
leg, real pyOpenSSL on both ends of link sessions joined by iosim on a Clock.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from OpenSSL import SSL
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.tls import (
    TICKET_LIFETIME,
    ClientTLS,
    E2EETLSFactory,
    E2EETLSProtocol,
    ResumingServerTLS,
    ResumptionError,
    SessionMemory,
    client_creator,
    ensure_self_signed,
    resuming_client,
    resuming_server,
    server_context_factory,
    session_reused,
)
from nfltr.tls._resume import OP_ALLOW_NO_DHE_KEX, TICKET_OPTIONS, TICKETS, check_options
from nfltr.tls._tickets import num_tickets
from tests.link.twisted_helpers import LinkPair, RecordingHandler
from tests.test_e2ee import App

ROOT = Path(__file__).resolve().parent.parent


class Probe(App):
    """
    An L{App} that notes, at its first bytes, whether its TLS connection
    resumed a session.
    """

    reused: bool | None = None

    def dataReceived(self, data: bytes) -> None:
        if self.reused is None:
            self.reused = session_reused(self.transport._tlsConnection)
        super().dataReceived(data)


class AnyServer(ClientTLS):
    """
    A client that accepts any server key: it can hold one agent's ticket and
    offer it to another.
    """

    def check(self, cert: Any, error: int, depth: int, ok: bool) -> None:
        return None


class Tunnel:
    """
    Agents' resuming TLS servers on the listener side of a link, a
    connector's resuming client on the dialer side.

    @ivar servers: the accepting factory of each target, by target.
    """

    def __init__(self, case: SynchronousTestCase, lifetime: int = TICKET_LIFETIME) -> None:
        self.case = case
        self.identity = ensure_self_signed(case.mktemp(), "agent")
        self.creator = resuming_server(self.identity.cert, self.identity.key, lifetime)
        self.serverApps: list[Probe] = []
        self.pair = LinkPair(listenerHandler=RecordingHandler(self._accept))
        self.servers: dict[str, E2EETLSFactory] = {
            "tcp:1": E2EETLSFactory(self.creator, False, self.pair.clock),
        }
        self.client = resuming_client("agent", self.identity.fingerprint)
        self.clientFactory = E2EETLSFactory(self.client, True, self.pair.clock)

    def _accept(self, session: Any) -> E2EETLSProtocol:
        app = Probe(answer=b"answer")
        self.serverApps.append(app)
        return self.servers[session.target].wrap(app)

    def wait(self, seconds: int) -> None:
        """
        Let C{seconds} pass, a second at a time, the link kept alive.
        """
        for _ in range(seconds):
            self.pair.clock.advance(1)
            self.pair.run()

    def exchange(self, target: str = "tcp:1", clientFactory: Any = None) -> tuple[Probe, Probe]:
        """
        One connection: a request, a half-close, an answer; the client's
        and the server's applications.
        """
        client = Probe()
        factory = clientFactory or self.clientFactory
        self.pair.dialer.openSession(target, factory.wrap(client))
        client.transport.write(b"request")
        client.transport.loseWriteConnection()
        self.pair.run()
        self.case.assertEqual(client.received, b"answer")
        return client, self.serverApps[-1]


class ResumptionTests(SynchronousTestCase):
    """
    A connector's second connection to an agent resumes; stale and foreign
    sessions fall back to a full handshake.
    """

    def test_secondConnectionResumes(self) -> None:
        """
        The first connection is a full handshake on both ends, the second
        resumes on both ends, with the session the first got.
        """
        tunnel = Tunnel(self)
        first = tunnel.exchange()
        self.assertEqual((first[0].reused, first[1].reused), (False, False))
        self.assertIsNotNone(tunnel.client.sessions and tunnel.client.sessions.session)
        second = tunnel.exchange()
        self.assertEqual((second[0].reused, second[1].reused), (True, True))
        memory = tunnel.client.sessions
        assert memory is not None
        self.assertEqual((memory.offered, memory.resumed), (1, 1))

    def test_staleTicket(self) -> None:
        """
        Once the ticket lifetime has passed on the clock, the server's
        context (and ticket key) is replaced: the old ticket does not open,
        the connection is a full handshake and succeeds, and the one after
        resumes again.
        """
        tunnel = Tunnel(self, lifetime=60)
        tunnel.exchange()
        tunnel.wait(60)
        stale = tunnel.exchange()
        self.assertEqual((stale[0].reused, stale[1].reused), (False, False))
        self.assertEqual(tunnel.creator.rotations, 1)
        again = tunnel.exchange()
        self.assertEqual((again[0].reused, again[1].reused), (True, True))

    def test_beforeLifetime(self) -> None:
        """
        Just before the lifetime has passed the context is kept and the
        ticket still resumes.
        """
        tunnel = Tunnel(self, lifetime=60)
        tunnel.exchange()
        tunnel.wait(59)
        second = tunnel.exchange()
        self.assertEqual((second[0].reused, second[1].reused), (True, True))
        self.assertEqual(tunnel.creator.rotations, 0)

    def test_foreignTicket(self) -> None:
        """
        A ticket from another agent (another key, another ticket key),
        offered to this one, does not resume: a full handshake, and the
        connection succeeds.
        """
        tunnel = Tunnel(self)
        other = ensure_self_signed(self.mktemp(), "other")
        tunnel.servers["tcp:2"] = E2EETLSFactory(
            resuming_server(other.cert, other.key), False, tunnel.pair.clock
        )
        anyServer = AnyServer(tunnel.client.context, "agent", ca_path=None,
                              pin=tunnel.identity.fingerprint, role="agent")
        anyServer.sessions = SessionMemory()
        factory = E2EETLSFactory(anyServer, True, tunnel.pair.clock)
        tunnel.exchange("tcp:2", factory)
        client, server = tunnel.exchange("tcp:1", factory)
        self.assertEqual((client.reused, server.reused), (False, False))
        self.assertEqual(anyServer.sessions.offered, 1)
        again = tunnel.exchange("tcp:1", factory)
        self.assertEqual((again[0].reused, again[1].reused), (True, True))

    def test_restartedAgent(self) -> None:
        """
        The same agent key behind a new server creator (an agent restarted:
        a new ticket key) does not open the old ticket: a full handshake
        that succeeds.
        """
        tunnel = Tunnel(self)
        tunnel.exchange()
        restarted = resuming_server(tunnel.identity.cert, tunnel.identity.key)
        tunnel.servers["tcp:2"] = E2EETLSFactory(restarted, False, tunnel.pair.clock)
        client, server = tunnel.exchange("tcp:2")
        self.assertEqual((client.reused, server.reused), (False, False))

    def test_plainServerIgnoresTicket(self) -> None:
        """
        A server without resumption (nfltr's default contexts) issues no
        ticket: the resuming client keeps nothing and every connection is a
        full handshake.
        """
        tunnel = Tunnel(self)
        plain = server_context_factory(tunnel.identity.cert, tunnel.identity.key)
        tunnel.servers["tcp:3"] = E2EETLSFactory(plain, False, tunnel.pair.clock)
        for _ in range(2):
            client, server = tunnel.exchange("tcp:3")
            self.assertEqual((client.reused, server.reused), (False, False))

    def test_tls12Refused(self) -> None:
        """
        A client limited to TLS 1.2 cannot connect to a resuming server
        (TLS 1.2 resumption would have no new key exchange): the handshake
        fails and the server's application sees no byte.
        """
        tunnel = Tunnel(self)
        old = client_creator("agent", pin=tunnel.identity.fingerprint, role="agent")
        old.context.set_max_proto_version(SSL.TLS1_2_VERSION)
        client = Probe()
        factory = E2EETLSFactory(old, True, tunnel.pair.clock)
        tunnel.pair.dialer.openSession("tcp:1", factory.wrap(client))
        client.transport.write(b"request")
        tunnel.pair.run()
        self.assertIsNotNone(client.lost)
        self.assertEqual(client.received, b"")
        self.assertEqual([app.received for app in tunnel.serverApps], [b""])

    def test_creatorInterface(self) -> None:
        """
        The resuming server creator provides Twisted's server creator
        interface.
        """
        tunnel = Tunnel(self)
        self.assertTrue(verifyObject(IOpenSSLServerConnectionCreator, tunnel.creator))


class SettingsTests(SynchronousTestCase):
    """
    What the resuming contexts allow and refuse.
    """

    def test_noPskWithoutDHE(self) -> None:
        """
        A context that would resume without a new key exchange (psk_ke) is
        refused; nfltr's ticket options do not allow it.
        """
        self.assertFalse(TICKET_OPTIONS & OP_ALLOW_NO_DHE_KEX)
        context = SSL.Context(SSL.TLS_METHOD)
        context.set_options(OP_ALLOW_NO_DHE_KEX)
        self.assertRaises(ResumptionError, check_options, context)

    def test_lifetimeAtLeastASecond(self) -> None:
        """
        A ticket lifetime under a second is refused.
        """
        identity = ensure_self_signed(self.mktemp(), "agent")
        self.assertRaises(ResumptionError, resuming_server, identity.cert, identity.key, 0)

    def test_ticketLifetimeInContext(self) -> None:
        """
        The context's session timeout (the tickets' lifetime) is the
        creator's lifetime.
        """
        identity = ensure_self_signed(self.mktemp(), "agent")
        creator = resuming_server(identity.cert, identity.key, 120)
        self.assertEqual(creator.context.get_timeout(), 120)

    def test_noTicketContextRefused(self) -> None:
        """
        A maker that returns a context with C{OP_NO_TICKET} (nfltr's
        default) is refused rather than silently not resuming.
        """
        identity = ensure_self_signed(self.mktemp(), "agent")
        plain = server_context_factory(identity.cert, identity.key)
        self.assertRaises(ResumptionError, ResumingServerTLS, lambda: plain.context)


class ProductionConfigTests(SynchronousTestCase):
    """
    Resumption with nfltr's OpenSSL configuration (C{NumTickets = 0} for
    every context), as the agent and tcp-connect run.
    """

    def test_numTickets(self) -> None:
        """
        A resuming context sends one ticket; nfltr's other contexts are
        left as the process configured them.
        """
        identity = ensure_self_signed(self.mktemp(), "agent")
        creator = resuming_server(identity.cert, identity.key)
        self.assertTrue(creator.available)
        self.assertEqual(num_tickets(creator.context), TICKETS)
        plain = server_context_factory(identity.cert, identity.key)
        self.assertNotEqual(num_tickets(plain.context), None)

    def test_resumesWhenConfigured(self) -> None:
        """
        In a process that imported L{nfltr.tls} first (its OpenSSL
        configuration applies), a second connection resumes on both ends.
        """
        script = (
            "import nfltr.tls, sys\n"
            "assert nfltr.tls.OPENSSL_CONFIGURED\n"
            "from twisted.trial import runner, reporter\n"
            "name = 'tests.test_tls_resume.ResumptionTests.test_secondConnectionResumes'\n"
            "suite = runner.TestLoader().loadByName(name)\n"
            "result = reporter.Reporter(sys.stdout)\n"
            "suite.run(result)\n"
            "sys.exit(0 if result.wasSuccessful() and result.successes == 1 else 1)\n"
        )
        env = {k: v for k, v in os.environ.items() if k != "OPENSSL_CONF"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        work = Path(self.mktemp())
        work.mkdir(parents=True)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env=env, cwd=work, timeout=120, check=False)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
