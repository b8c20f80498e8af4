# -*- test-case-name: tests.agent.test_timeouts -*-
"""
L{Timeouts}: one timer for many short waits that share a timeout.

A connection attempt to a local service usually succeeds within a
millisecond, yet needs a timeout.  A C{DelayedCall} each (what
C{connectTCP} arms when given a timeout) costs a heap insertion, a
cancellation, and a cancelled entry left in the reactor's heap that every
later C{callLater} compares against until Twisted compacts it.  Here
starting and ending a wait are a dict insertion and removal; the one timer
is armed for the oldest wait and, when it fires, ends the waits that are
due and is armed again for the next.  As every wait is the same length,
insertion order is deadline order (with a clock that does not go back).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

_T = TypeVar("_T", bound=Hashable)


class Timeouts(Generic[_T]):
    """
    Calls C{expired(item)} for each item added and not discarded within
    C{timeout} seconds.

    @ivar timeout: the seconds each item may wait.
    """

    def __init__(self, clock: Any, timeout: float, expired: Callable[[_T], object]) -> None:
        """
        @param clock: an C{IReactorTime}.
        """
        self.clock = clock
        self.timeout = timeout
        self._expired = expired
        self._deadlines: dict[_T, float] = {}
        self._timer: Any = None
        self._firing = False

    def __len__(self) -> int:
        return len(self._deadlines)

    def add(self, item: _T) -> None:
        """
        Start C{item}'s wait (afresh if it was waiting).
        """
        deadlines = self._deadlines
        if item in deadlines:
            del deadlines[item]  # to the end: insertion order is deadline order
        deadlines[item] = self.clock.seconds() + self.timeout
        if self._timer is None and not self._firing:
            self._timer = self.clock.callLater(self.timeout, self._fire)

    def discard(self, item: _T) -> None:
        """
        End C{item}'s wait, if it is waiting.  The timer stays armed: it
        fires at most once per timeout with nothing due, which costs less
        than cancelling and arming it for every item.
        """
        self._deadlines.pop(item, None)

    def stop(self) -> None:
        """
        Forget every wait and disarm the timer (before a test ends, or a
        service stops).
        """
        self._deadlines.clear()
        if self._timer is not None:
            if self._timer.active():
                self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        deadlines = self._deadlines
        now = self.clock.seconds()
        self._firing = True
        try:
            while deadlines:
                item = next(iter(deadlines))
                if deadlines[item] > now:
                    break
                del deadlines[item]
                self._expired(item)
        finally:
            self._firing = False
            if deadlines:
                due = deadlines[next(iter(deadlines))]
                self._timer = self.clock.callLater(max(0.0, due - now), self._fire)
