"""
Tests for draining links in L{nfltr.relay.link_handler}: a revoked key reaches
them, and a peer's drain is bounded by L{Relay.peerDrainTimeout}; real
dialer links over iosim on a L{Clock}.
"""

from __future__ import annotations

from twisted.internet import error
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import ErrorCode, RefusalReason
from nfltr.wire.messages import client_target, data_hello

from ..link.twisted_helpers import RecordingHandler
from .helpers import RelayHarness, lost_reason
from .test_link_handler import Recorder

A_KEY, A2_KEY = "aaaaaaaaaaaa", "a2a2a2a2a2a2"
REVOKED = {"type": "refused", "reason": RefusalReason.REVOKED.value,
           "message": f"API key {A_KEY} was revoked"}


class _Tunnel(SynchronousTestCase):
    """
    Alice's agent (key A) and her client (key A2) with one session open
    through the relay.
    """

    def setUp(self) -> None:
        self.h = RelayHarness()
        self.keyA = self.h.store.addKey(A_KEY, "acme")
        self.keyA2 = self.h.store.addKey(A2_KEY, "acme")
        self.agentSide = Recorder()
        self.agentHandler = RecordingHandler(lambda session: self.agentSide)
        self.agent = self.h.agent(self.keyA, "web", handler=self.agentHandler)
        self.client = self.h.client(self.keyA2)
        self.clientSide = Recorder()
        self.session = self.client.link.openSession(
            client_target("web", 3000), self.clientSide, b"ping"
        )
        self.h.run()
        self.assertEqual(self.agentSide.received, b"ping")

    def elapse(self, seconds: float, step: float = 1.0) -> None:
        """
        Let C{seconds} pass in steps, the links pumped after each (their
        keepalives answered, as on a live network).
        """
        while seconds > 0:
            self.h.clock.advance(min(step, seconds))
            self.h.run()
            seconds -= step

    def assertCut(self, recorder: Recorder) -> None:
        self.assertIsNotNone(recorder.lost)
        self.assertFalse(recorder.lost.check(error.ConnectionDone))

    def flows(self) -> bool:
        """
        Whether bytes the client writes still reach the agent's service.
        """
        before = len(self.agentSide.received)
        self.session.write(b"more")
        self.h.run()
        return len(self.agentSide.received) > before


class RevokeDrainingTests(_Tunnel):
    """
    L{Relay.revoke} reaches links that are draining.
    """

    def test_drainingAgent(self) -> None:
        """
        An agent draining (GOAWAY) with a session in flight is still closed
        when its key is revoked: it is told C{revoked}, the session is cut
        on both sides and data stops.
        """
        self.agent.link.drain()
        self.h.run()
        self.assertTrue(self.flows())
        self.assertEqual(self.h.relay.revoke(A_KEY), 1)
        self.h.run()
        self.assertEqual(self.agent.controls[-1], REVOKED)
        self.assertTrue(self.agent.closed)
        self.assertCut(self.agentSide)
        self.assertCut(self.clientSide)
        self.assertFalse(self.flows())

    def test_drainingClient(self) -> None:
        """
        A client draining with a session in flight is closed when its key
        is revoked.
        """
        self.client.link.drain()
        self.h.run()
        self.assertEqual(self.h.relay.revoke(A2_KEY), 1)
        self.h.run()
        self.assertTrue(self.client.closed)
        self.assertCut(self.clientSide)

    def test_dataConnections(self) -> None:
        """
        Revoking the agent's key closes its extra data connections too,
        also once its first link drains.
        """
        token = self.agent.controls[0]["data_token"]
        data = self.h.dial(data_hello(self.keyA, token), RecordingHandler(lambda s: Recorder()))
        self.assertEqual(data.controls[0]["type"], "welcome")
        self.assertEqual(len(self.h.relay.directory.linksFor(A_KEY)), 2)
        self.agent.link.drain()
        self.h.run()
        self.h.relay.revoke(A_KEY)
        self.h.run()
        self.assertTrue(data.closed)
        self.assertTrue(self.agent.closed)
        self.assertEqual(self.h.relay.directory.linksFor(A_KEY), [])


class PeerDrainLimitTests(_Tunnel):
    """
    A peer's drain lasts at most L{Relay.peerDrainTimeout} seconds.
    """

    def test_boundedDrain(self) -> None:
        """
        An agent that drains and never finishes its session: until the
        limit the session flows; at the limit the relay resets it (the
        client sees C{GOING_AWAY}), closes the link and logs why once.
        """
        limit = self.h.relay.peerDrainTimeout
        assert limit is not None
        self.agent.link.drain()
        self.h.run()
        self.elapse(limit - 0.1)
        self.assertTrue(self.flows())
        self.assertFalse(self.agent.closed)
        self.elapse(0.1)
        self.assertTrue(self.agent.closed)
        self.assertEqual(lost_reason(self.clientSide.lost)[0], ErrorCode.GOING_AWAY)
        self.assertFalse(self.flows())
        lines = [m for m in self.h.messages() if "still draining" in m]
        self.assertEqual(len(lines), 1, lines)
        self.assertIn(f"after {limit:g}s", lines[0])

    def test_drainFinishingInTime(self) -> None:
        """
        A drain that ends before the limit (its last session closed) is
        not acted on at the limit.
        """
        self.agent.link.drain()
        self.h.run()
        self.session.loseConnection()
        self.agentSide.transport.loseConnection()
        self.h.run()
        self.assertTrue(self.agent.closed)
        limit = self.h.relay.peerDrainTimeout
        assert limit is not None
        self.elapse(limit + 1)
        self.assertEqual([m for m in self.h.messages() if "still draining" in m], [])
        self.assertFalse(self.client.closed)

    def test_noLimit(self) -> None:
        """
        With C{peerDrainTimeout} L{None}, a drain lasts as long as the peer
        wants.
        """
        self.h.relay.peerDrainTimeout = None
        self.agent.link.drain()
        self.h.run()
        self.elapse(3600, step=5.0)
        self.assertFalse(self.agent.closed)
        self.assertTrue(self.flows())
