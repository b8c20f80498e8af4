# -*- test-case-name: tests.store.test_command_times -*-
"""
L{CommandTimes}: how long the Redis directory took to answer, as the counts
of a histogram with fixed bounds (L{COMMAND_TIME_BOUNDS}), for the relay's
C{/metrics}.  A call is counted when it ends, answered or failed (a timed-out
call counts the command timeout).  Memory is fixed: one count per bound.
"""

from __future__ import annotations

from bisect import bisect_left

from zope.interface import implementer

from nfltr.store.interfaces import ICommandTimes

#: The histogram's upper bounds, in seconds (the last, +Inf, is implied).
COMMAND_TIME_BOUNDS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)


@implementer(ICommandTimes)
class CommandTimes:
    """
    Counts of call durations by bound.
    """

    def __init__(self, bounds: tuple[float, ...] = COMMAND_TIME_BOUNDS) -> None:
        self.bounds = bounds
        # One count per bound, plus one for the durations above the last.
        self._counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self._counts[bisect_left(self.bounds, seconds)] += 1
        self.total += max(seconds, 0.0)

    def cumulative(self) -> list[int]:
        counts, running = [], 0
        for count in self._counts:
            running += count
            counts.append(running)
        return counts
