"""
Tests for L{nfltr.agent._expiry}: C{--idle-expiry}.
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent._expiry import IdleExpiry, parse_idle_expiry
from nfltr.agent._settings import ConfigError


class ParseTests(SynchronousTestCase):
    """
    L{parse_idle_expiry}.
    """

    def test_units(self) -> None:
        """
        Seconds by default; s, m, h and d units.
        """
        self.assertEqual(
            [parse_idle_expiry(t) for t in ("90", "90s", "30m", "1.5h", "7d")],
            [90.0, 90.0, 1800.0, 5400.0, 604800.0],
        )

    def test_bad(self) -> None:
        """
        Zero, negatives, unknown units and more than a year are refused.
        """
        for text in ("0", "-5m", "5w", "", "366d", "m"):
            self.assertRaises(ConfigError, parse_idle_expiry, text)


class IdleExpiryTests(SynchronousTestCase):
    """
    L{IdleExpiry} on a clock.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.busy = False
        self.expired: list[float] = []
        self.expiry = IdleExpiry(self.clock, 60, lambda: self.busy,
                                 lambda: self.expired.append(self.clock.seconds()))
        self.expiry.start()

    def test_expiresWhenIdle(self) -> None:
        """
        With no session at all, it expires after the idle time, once.
        """
        self.clock.advance(59)
        self.assertEqual(self.expired, [])
        self.clock.advance(1)
        self.assertEqual(self.expired, [60])
        self.clock.advance(600)
        self.assertEqual(self.expired, [60])

    def test_sessionsPostpone(self) -> None:
        """
        A session start counts the idle time from then; a session still
        open when the time is up postpones it again.
        """
        self.clock.advance(50)
        self.expiry.touched()
        self.clock.advance(59)
        self.assertEqual(self.expired, [])
        self.busy = True
        self.clock.advance(1)
        self.assertEqual(self.expired, [])
        self.busy = False
        self.clock.advance(60)
        self.assertEqual(self.expired, [170])

    def test_stop(self) -> None:
        """
        A stopped watcher never fires.
        """
        self.expiry.stop()
        self.clock.advance(3600)
        self.assertEqual(self.expired, [])
