"""
Tests for L{nfltr.relay.handover}: a draining replica asks its agents to
move and waits for them; real dialer links over iosim on a L{Clock}.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.handover import HANDOVER_POLL, hand_over
from nfltr.wire.messages import client_target
from nfltr.wire.moving import moving_message

from ..link.twisted_helpers import RecordingHandler
from .helpers import RelayHarness
from .test_link_handler import Recorder

A_KEY, B_KEY, C_KEY = "aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"


class HandOverTests(SynchronousTestCase):
    """
    Two agents and a client on one relay.
    """

    def setUp(self) -> None:
        self.h = RelayHarness()
        keyA, keyB = self.h.store.addKey(A_KEY, "acme"), self.h.store.addKey(B_KEY, "acme")
        self.webSide = Recorder()
        self.web = self.h.agent(keyA, "web", handler=RecordingHandler(lambda s: self.webSide))
        self.db = self.h.agent(keyB, "db", ports=(5432,))
        self.client = self.h.client(self.h.store.addKey(C_KEY, "acme"))

    def elapse(self, seconds: float) -> None:
        while seconds > 1e-9:
            self.h.clock.advance(min(HANDOVER_POLL, seconds))
            self.h.run()
            seconds -= HANDOVER_POLL

    def test_movedAgents(self) -> None:
        """
        Each agent (not the client) is sent C{moving}; its link still takes
        sessions; the hand-over fires once every agent drained its link
        itself, before the wait is over.
        """
        d = hand_over(self.h.relay, 5.0, self.h.clock)
        self.h.run()
        self.assertEqual(self.web.handler.controls[-1], moving_message())
        self.assertEqual(self.db.handler.controls[-1], moving_message())
        self.assertNotIn(moving_message(), self.client.handler.controls)
        visitor = Recorder()
        self.client.link.openSession(client_target("web", 3000), visitor, b"still here")
        self.h.run()
        self.assertEqual(self.webSide.received, b"still here")
        self.web.link.drain()
        self.elapse(1.0)
        self.assertNoResult(d)
        self.db.link.drain()
        self.elapse(2 * HANDOVER_POLL)
        self.successResultOf(d)
        self.assertIn("every agent moved to another replica", self.h.messages())

    def test_waitRunsOut(self) -> None:
        """
        An agent that does not move: the hand-over fires after the wait,
        saying so, and the agent's link is untouched (the drain follows).
        """
        d = hand_over(self.h.relay, 2.0, self.h.clock)
        self.h.run()
        self.db.link.drain()
        self.elapse(2.0 - HANDOVER_POLL)
        self.assertNoResult(d)
        self.elapse(2 * HANDOVER_POLL)
        self.successResultOf(d)
        self.assertTrue(self.web.relayLink.canOpen())
        self.assertIn("1 agent(s) did not move within 2s: their links drain", self.h.messages())

    def test_nothingToHandOver(self) -> None:
        """
        No agent, or no wait: the hand-over fires at once, sending nothing.
        """
        self.successResultOf(hand_over(self.h.relay, 0, self.h.clock))
        self.assertNotIn(moving_message(), self.web.handler.controls)
        for dialer in (self.web, self.db):
            dialer.link.drain()
        self.h.run()
        self.successResultOf(hand_over(self.h.relay, 5.0, self.h.clock))
