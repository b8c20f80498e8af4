"""
Tests for L{nfltr.agent._timeouts}.
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent._timeouts import Timeouts


class TimeoutsTests(SynchronousTestCase):
    """
    L{Timeouts}: many waits, one timer.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.expired: list[str] = []
        self.timeouts: Timeouts[str] = Timeouts(self.clock, 10, self.expired.append)

    def test_expires(self) -> None:
        """
        Items still waiting after the timeout expire, oldest first; those
        discarded do not; each item's wait is its own.
        """
        self.timeouts.add("a")
        self.clock.advance(3)
        self.timeouts.add("b")
        self.timeouts.add("c")
        self.timeouts.discard("c")
        self.clock.advance(7)
        self.assertEqual(self.expired, ["a"])
        self.clock.advance(2.9)
        self.assertEqual(self.expired, ["a"])
        self.clock.advance(0.1)
        self.assertEqual(self.expired, ["a", "b"])
        self.assertEqual(len(self.timeouts), 0)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_addAgain(self) -> None:
        """
        Adding a waiting item starts its wait afresh, behind those added
        before.
        """
        self.timeouts.add("a")
        self.clock.advance(5)
        self.timeouts.add("b")
        self.timeouts.add("a")
        self.clock.advance(9.9)
        self.assertEqual(self.expired, [])
        self.clock.advance(0.1)
        self.assertEqual(self.expired, ["b", "a"])

    def test_oneTimer(self) -> None:
        """
        However many items wait, and however many came and went, one timer
        is armed; once it fired with nothing waiting, none.
        """
        for n in range(50):
            self.timeouts.add(str(n))
            self.clock.advance(0.1)
            self.timeouts.discard(str(n))
        self.timeouts.add("last")
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.timeouts.discard("last")
        self.clock.advance(10)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(self.expired, [])

    def test_addWhileExpiring(self) -> None:
        """
        An item added by the expiry of another gets its whole timeout, and
        the item that waited before it is not delayed by it.
        """
        timeouts: Timeouts[str] = Timeouts(self.clock, 10, self.expireAndAdd)
        self.timeouts = timeouts
        timeouts.add("a")
        self.clock.advance(1)
        timeouts.add("b")
        self.clock.advance(9)
        self.assertEqual(self.expired, ["a"])
        self.clock.advance(1)
        self.assertEqual(self.expired, ["a", "b"])
        self.clock.advance(8.9)
        self.assertEqual(self.expired, ["a", "b"])
        self.clock.advance(0.1)
        self.assertEqual(self.expired, ["a", "b", "a2"])

    def expireAndAdd(self, item: str) -> None:
        self.expired.append(item)
        if item == "a":
            self.timeouts.add("a2")

    def test_stop(self) -> None:
        """
        Stopping forgets the waits and disarms the timer; adding afterwards
        arms it again.
        """
        self.timeouts.add("a")
        self.timeouts.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.clock.advance(10)
        self.assertEqual(self.expired, [])
        self.timeouts.add("b")
        self.clock.advance(10)
        self.assertEqual(self.expired, ["b"])
