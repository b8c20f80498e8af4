"""
Tests for L{nfltr.store.CommandTimes}, the histogram of the Redis
directory's call durations.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.store import COMMAND_TIME_BOUNDS, CommandTimes, ICommandTimes


class CommandTimesTests(SynchronousTestCase):
    """
    Durations counted by bound.
    """

    def test_interface(self) -> None:
        """
        It provides L{ICommandTimes}.
        """
        verifyObject(ICommandTimes, CommandTimes())

    def test_counts(self) -> None:
        """
        A duration is counted under the first bound at or above it (and in
        every count after: the counts are cumulative, +Inf last); the sum
        adds them up.
        """
        times = CommandTimes((0.001, 0.01))
        for seconds in (0.0005, 0.001, 0.005, 3.0):
            times.observe(seconds)
        self.assertEqual(times.cumulative(), [2, 3, 4])
        self.assertAlmostEqual(times.total, 3.0065)

    @given(st.lists(st.floats(min_value=0, max_value=100, allow_nan=False)))
    def test_anyDurations(self, durations: list[float]) -> None:
        """
        Whatever the durations, the counts never decrease and the last is
        how many there were.
        """
        times = CommandTimes()
        for seconds in durations:
            times.observe(seconds)
        counts = times.cumulative()
        self.assertEqual(len(counts), len(COMMAND_TIME_BOUNDS) + 1)
        self.assertEqual(counts, sorted(counts))
        self.assertEqual(counts[-1], len(durations))
