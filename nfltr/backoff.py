# -*- test-case-name: tests.test_backoff -*-
"""
The one reconnect schedule of every nfltr dialler (ARCHITECTURE, "Reconnect").

Sans-I/O: the caller says when things happen (C{now}, in seconds, from its
clock) and gets back how long to wait; randomness is injected.

The schedule, for the n-th attempt of an outage (n counts from 1):

  - 250 ms for the first 8 attempts (L{FLOOR}, L{ATTEMPTS_AT_FLOOR});
  - then each delay twice the previous one: 0.5 s, 1 s, ...;
  - capped at 1 s while the outage is younger than a minute
    (L{EARLY_CAP}, L{EARLY_PERIOD}) and at 30 s after (L{LATE_CAP}), so a
    long outage goes on 1 s, 1 s, ..., then 2 s, 4 s, ... up to 30 s;
  - each delay is shortened by up to L{JITTER} of itself, at random, so
    agents cut off together do not return together; a delay never exceeds
    its cap.

An outage starts at the first failure after a connection that held; a
connection holds once it stayed up L{HOLD} seconds.  A connection that drops
sooner continues the outage where it was, so a relay that accepts and at
once drops a dialler does not reset the dialler to 250 ms each time.
"""

from __future__ import annotations

import random
from collections.abc import Callable

FLOOR = 0.25
ATTEMPTS_AT_FLOOR = 8
EARLY_CAP = 1.0
EARLY_PERIOD = 60.0
LATE_CAP = 30.0
JITTER = 0.2
HOLD = 10.0


def base_delay(attempt: int, outage: float, previous: float) -> float:
    """
    The delay before attempt number C{attempt} (from 1) of an outage that
    began C{outage} seconds ago, before jitter, given the C{previous}
    attempt's (ignored for the first L{ATTEMPTS_AT_FLOOR} attempts).

    @raise ValueError: C{attempt} is below 1.
    """
    if attempt < 1:
        raise ValueError(f"attempt {attempt} must be 1 or more")
    if attempt <= ATTEMPTS_AT_FLOOR:
        return FLOOR
    cap = EARLY_CAP if outage < EARLY_PERIOD else LATE_CAP
    return min(max(2 * previous, FLOOR), cap)


class ReconnectSchedule:
    """
    Tracks one dialler's outages and says how long to wait before each
    attempt.

    @ivar attempts: attempts made in the current outage (0 when none).
    @ivar outage_start: when the current outage began, or L{None}.
    """

    def __init__(self, rand: Callable[[], float] = random.random) -> None:
        """
        @param rand: returns a float in [0, 1), for the jitter.
        """
        self._rand = rand
        self.attempts = 0
        self.outage_start: float | None = None
        self._base = FLOOR
        self._up_since: float | None = None

    def connected(self, now: float) -> None:
        """
        A connection was established (for a dialler: welcomed) at C{now}.
        """
        self._up_since = now

    def next_delay(self, now: float) -> float:
        """
        An attempt failed, or an established connection was lost, at
        C{now}: how many seconds to wait before the next attempt.
        """
        up_since, self._up_since = self._up_since, None
        if up_since is not None and now - up_since >= HOLD:
            self.reset()
        if self.outage_start is None:
            self.outage_start = now
        self.attempts += 1
        self._base = base_delay(self.attempts, now - self.outage_start, self._base)
        return self._base * (1.0 - JITTER * self._rand())

    def reset(self) -> None:
        """
        Forget the current outage: the next delay is the first of a new one.
        """
        self.attempts = 0
        self.outage_start = None
        self._base = FLOOR
