"""
Resource budgets of a relay, with generous bounds (the figures themselves are
measured by C{python -m bench.budgets} and written in docs/benchmarks.md).
"""

from __future__ import annotations

from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from bench.budgets import measure

KiB = 1024


class BudgetTests(SynchronousTestCase):
    """
    Memory and descriptors per idle agent and per open session.
    """

    def test_budgets(self) -> None:
        """
        30 idle agents and 300 idle sessions: each agent costs the relay one
        descriptor and well under 512 KiB; a session no descriptor (sessions
        are multiplexed on the links) and well under 32 KiB.
        """
        tmp = Path(self.mktemp()).absolute()
        tmp.mkdir(parents=True)
        figures = measure(30, 300, tmp)
        self.assertEqual(round(figures["fds_per_agent"]), 1, figures)
        self.assertLess(figures["fds_per_session"], 0.05, figures)
        self.assertLess(figures["rss_per_agent"], 512 * KiB, figures)
        self.assertLess(figures["rss_per_session"], 32 * KiB, figures)
