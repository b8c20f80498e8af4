"""
Tests for what L{nfltr.agent.RelayDialler} logs while the relay is down: one
warning when the outage starts, a summary now and then, one line when the
link is back.  On a Clock.
"""

from __future__ import annotations

from twisted.logger import LogLevel
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import RelayDialler
from nfltr.agent._dialler import OUTAGE_SUMMARY_INTERVAL
from nfltr.backoff import ReconnectSchedule
from nfltr.wire.messages import agent_hello

from .helpers import LogCapture, Network, TestRelay
from .test_dialler import Observer


class OutageLogTests(SynchronousTestCase):
    """
    A relay that refuses connections for a while.
    """

    def setUp(self) -> None:
        self.network = Network()
        self.relay = TestRelay(self.network)
        self.endpoint = self.relay.endpoint()
        self.endpoint.refuse = True
        self.observer = Observer()
        self.logs = LogCapture(self)
        self.dialler = RelayDialler(
            self.endpoint, self.network.clock, agent_hello("nfk_k", "box", []), self.observer,
            "relay.example:8443", schedule=ReconnectSchedule(rand=lambda: 0.0),
        )
        self.dialler.start()

    def test_oneWarningThenSummaries(self) -> None:
        """
        Over 2.5 summary intervals of refused connections: one warning
        naming the cause, then one summary line per interval with the
        number of attempts and the time, and nothing else at info or above.
        """
        self.network.advance(OUTAGE_SUMMARY_INTERVAL * 2.5, step=0.25)
        lines = self.logs.lines(LogLevel.info)
        self.assertEqual(len(lines), 3, lines)
        self.assertEqual(
            lines[0], "cannot reach the relay at relay.example:8443: connection refused; retrying"
        )
        for line, interval in zip(lines[1:], (1, 2), strict=True):
            self.assertRegex(
                line,
                "^the relay at relay.example:8443 is still unreachable after [0-9]+ attempts / "
                f"{OUTAGE_SUMMARY_INTERVAL * interval:.0f}s",
            )

    def test_backOnce(self) -> None:
        """
        When the relay takes connections again, one info line says so,
        with how long the outage lasted; the next outage warns again.
        """
        self.network.advance(10, step=0.25)
        self.logs.events.clear()
        self.endpoint.refuse = False
        self.network.advance(2, step=0.25)
        lines = self.logs.lines(LogLevel.info)
        self.assertEqual(len(lines), 1, lines)
        self.assertRegex(lines[0], r"^reconnected to the relay at relay.example:8443 .*after")
        self.logs.events.clear()
        self.endpoint.refuse = True
        self.endpoint.cut()
        self.network.advance(2, step=0.25)
        warnings = self.logs.lines(LogLevel.warn)
        self.assertIn("lost the link to the relay at relay.example:8443", warnings[0])
