"""
Tests for the check C{tcp-connect} makes at start (L{nfltr.client._probe}):
one probe session to the agent before listening; an agent that does not
exist or a wrong pin ends the connector with one line, unless C{--wait}.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.client._probe import PLAIN_SETTLE, PROBE_TIMEOUT
from tests.agent.helpers import Echo, Recorder

from .test_connector import ClientFixture


class ProbeTests(SynchronousTestCase):
    """
    What the connector does with the outcome of its probe.
    """

    def test_passes(self) -> None:
        """
        An agent that answers the TLS handshake with the pinned key: the
        connector listens, and the probe's session is closed cleanly.
        """
        f = ClientFixture(self)
        f.connector.startService()
        f.network.run()
        self.assertEqual(f.fatal, [])
        self.assertEqual(f.announced, ["listening on 127.0.0.1:43210"])
        [service] = f.services.services[3000]
        self.assertEqual(service.received, b"")
        self.assertIsNotNone(service.lost)

    def test_plainSettles(self) -> None:
        """
        Without end-to-end TLS, a probe session not refused within
        L{PLAIN_SETTLE} seconds passes.
        """
        f = ClientFixture(self, e2ee=False)
        f.connector.startService()
        f.network.run()
        self.assertEqual(f.announced, [])
        f.network.advance(PLAIN_SETTLE)
        self.assertEqual(f.announced, ["listening on 127.0.0.1:43210"])

    def test_noSuchAgent(self) -> None:
        """
        An agent that does not exist: no listener, one fatal line with the
        relay's refusal in plain words and how to listen anyway; the link
        is closed.
        """
        f = ClientFixture(self, agent="nobody")
        f.start()
        self.assertEqual(f.listens, [])
        self.assertEqual(f.fatal, [
            "nobody:3000: no such agent or port (or not yours) "
            "(--wait listens anyway, until the agent is up)"
        ])
        self.assertIsNone(f.connector.dialler.link)

    def test_noSuchAgentPlain(self) -> None:
        """
        The same without end-to-end TLS: the relay's refusal comes before
        the settle time.
        """
        f = ClientFixture(self, agent="nobody", e2ee=False)
        f.start()
        self.assertEqual(f.listens, [])
        self.assertEqual(len(f.fatal), 1)
        self.assertIn("no such agent or port", f.fatal[0])

    def test_wrongPin(self) -> None:
        """
        A pin that does not match the agent's key: both fingerprints, no
        listener, and the service never hears from us.
        """
        wrong = "sha256:" + "33" * 32
        f = ClientFixture(self, pin=wrong)
        f.start()
        self.assertEqual(f.listens, [])
        self.assertEqual(f.fatal, [
            f"box:3000: agent certificate fingerprint {f.setup.fingerprint} "
            f"does not match --pin {wrong}"
        ])

    def test_plainAgent(self) -> None:
        """
        An agent that does not speak TLS (run with C{--e2ee false}): the
        line says so in words, with no OpenSSL error list.
        """
        f = ClientFixture(self)
        f.agent.sessions.tls = None  # the echo service returns our hello
        f.start()
        self.assertEqual(f.fatal, [
            "box:3000: TLS with the agent failed (unexpected message); an agent run with "
            "--e2ee false needs --e2ee false here"
        ])

    def test_wait(self) -> None:
        """
        With C{--wait}, the refusal is one warning and the connector
        listens anyway.
        """
        f = ClientFixture(self, agent="nobody", wait=True)
        f.start()
        self.assertEqual(f.fatal, [])
        self.assertEqual(f.announced, ["listening on 127.0.0.1:43210"])
        self.assertEqual(f.logs.lines(), [
            "nobody:3000: no such agent or port (or not yours); listening anyway (--wait)"
        ])

    def test_silentAgent(self) -> None:
        """
        An agent whose TLS never answers: after L{PROBE_TIMEOUT} seconds, a
        fatal line saying so.
        """
        f = ClientFixture(self)
        silence(f)
        f.connector.startService()
        f.network.run()
        f.network.advance(PROBE_TIMEOUT)
        self.assertEqual(len(f.fatal), 1, f.fatal)
        self.assertIn(f"the agent did not answer within {PROBE_TIMEOUT:g}s", f.fatal[0])

    def test_linkLostDuringProbe(self) -> None:
        """
        A probe cut by the loss of the link is no verdict: it is made
        again on the next link, which then passes.
        """
        f = ClientFixture(self)
        tls = f.agent.sessions.tls
        silence(f)  # the first probe waits
        f.connector.startService()
        f.network.run()
        f.agent.sessions.tls = tls
        f.services.factories[3000] = Echo
        f.endpoint.cut()
        f.network.advance(1)
        self.assertEqual(f.fatal, [])
        self.assertEqual(f.announced, ["listening on 127.0.0.1:43210"])

    def test_stopWhileProbing(self) -> None:
        """
        Stopping the connector while its probe waits ends the probe with
        no verdict and leaves no timer behind.
        """
        f = ClientFixture(self)
        silence(f)
        f.connector.startService()
        f.network.run()
        f.connector.stopService()
        f.network.advance(PROBE_TIMEOUT)
        self.assertEqual(f.fatal, [])
        self.assertEqual(f.listens, [])


def silence(f: ClientFixture) -> None:
    """
    Make agent C{box} answer no TLS handshake: it passes the probe's bytes
    to a service that never answers.
    """
    f.agent.sessions.tls = None
    f.services.factories[3000] = Recorder
