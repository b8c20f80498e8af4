# -*- test-case-name: tests.relay.test_udp_route -*-
"""
Tests for L{nfltr.relay.udp_route}: a client's datagram sessions through the
relay, driven by real links over iosim on a Clock.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import RefusalReason
from nfltr.udp import DatagramSession, LinkDatagramOpener, SessionTable
from nfltr.wire.messages import NOT_FOUND_CODE, NOT_FOUND_REASON, TcpShare, agent_hello
from nfltr.wire.udp import UdpShare, udp_target
from tests.link.twisted_helpers import RecordingHandler

from .helpers import RelayHarness, lost_reason
from .test_link_handler import Recorder

A_KEY, A2_KEY, B_KEY = "aaaaaaaaaaaa", "a2a2a2a2a2a2", "bbbbbbbbbbbb"


def echo(session: Any) -> DatagramSession:
    """
    An agent's datagram session that answers each datagram with itself.
    """
    proto = DatagramSession(print)
    proto.deliver = proto.send
    return proto


class UDPRouteTests(SynchronousTestCase):
    """
    Datagram sessions reach an agent's declared UDP ports, for its account.
    """

    def setUp(self) -> None:
        self.h = RelayHarness()
        self.keyA = self.h.store.addKey(A_KEY, "acme")
        self.keyA2 = self.h.store.addKey(A2_KEY, "acme")
        self.keyB = self.h.store.addKey(B_KEY, "bravo")
        self.agentHandler = RecordingHandler(echo)
        hello = agent_hello(self.keyA, "dns", [TcpShare(3000)])
        hello["udp"] = [UdpShare(53).to_json()]
        self.agent = self.h.dial(hello, self.agentHandler)

    def test_welcomeListsFeature(self) -> None:
        """
        The agent's welcome lists the C{udp} feature.
        """
        self.assertIn("udp", self.agent.controls[0]["features"])

    def test_echoThroughRelay(self) -> None:
        """
        A client's datagrams reach the agent as C{udp:53} and the answers
        come back, boundaries kept, to the visitor they belong to.
        """
        client = self.h.client(self.keyA2)
        replies: list[tuple[bytes, Any]] = []
        table = SessionTable(
            LinkDatagramOpener(lambda: client.link, lambda a: udp_target(53, "dns")),
            self.h.clock, lambda p, a: replies.append((p, a)),
        )
        table.datagramReceived(b"query", ("127.0.0.1", 5000))
        table.datagramReceived(b"q2", ("127.0.0.1", 5000))
        table.datagramReceived(b"other", ("127.0.0.1", 5001))
        self.h.run()
        self.assertEqual([s.target for s in self.agentHandler.sessions], ["udp:53"] * 2)
        self.assertEqual(sorted(replies), [
            (b"other", ("127.0.0.1", 5001)), (b"q2", ("127.0.0.1", 5000)),
            (b"query", ("127.0.0.1", 5000)),
        ])

    def test_refusals(self) -> None:
        """
        Another account, an unknown agent and an undeclared port are all
        refused with the not-found code and reason; the agent sees no
        session.
        """
        attempts = [(self.keyB, "udp:dns:53"), (self.keyA2, "udp:nope:53"),
                    (self.keyA2, "udp:dns:54")]
        ends = []
        for key, target in attempts:
            client = self.h.client(key)
            recorder = Recorder()
            client.link.openSession(target, recorder)
            self.h.run()
            ends.append(lost_reason(recorder.lost))
        self.assertEqual(ends, [(NOT_FOUND_CODE, NOT_FOUND_REASON)] * len(attempts))
        self.assertEqual(self.agentHandler.sessions, [])

    def test_badDeclarationRefused(self) -> None:
        """
        An agent whose C{udp} list is invalid is refused as C{invalid}.
        """
        hello = agent_hello(self.keyA2, "bad", [])
        hello["udp"] = [{"port": 0}]
        dialer = self.h.dial(hello)
        self.assertEqual(dialer.controls[0]["reason"], RefusalReason.INVALID.value)
