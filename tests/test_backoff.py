"""
Tests for L{nfltr.backoff}: the reconnect schedule, as a pure function and as
a tracker of outages, with hypothesis over attempts, times and jitter.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.backoff import (
    ATTEMPTS_AT_FLOOR,
    EARLY_CAP,
    EARLY_PERIOD,
    FLOOR,
    HOLD,
    JITTER,
    LATE_CAP,
    ReconnectSchedule,
    base_delay,
)

attempts = st.integers(min_value=1, max_value=10_000)
outages = st.floats(min_value=0, max_value=1e7, allow_nan=False)
randoms = st.floats(min_value=0, max_value=1, exclude_max=True)


class BaseDelayTests(SynchronousTestCase):
    """
    L{base_delay}: the schedule before jitter.
    """

    def test_firstEightAtFloor(self) -> None:
        """
        The first 8 attempts of an outage wait 250 ms whatever came before;
        the ninth waits twice the eighth.
        """
        self.assertEqual([base_delay(n, 0, 99.0) for n in range(1, 9)], [0.25] * 8)
        self.assertEqual(base_delay(ATTEMPTS_AT_FLOOR + 1, 0, FLOOR), 0.5)

    def test_earlyCap(self) -> None:
        """
        During the first minute the delay doubles up to 1 s and stays there.
        """
        self.assertEqual(base_delay(10, 1, 0.5), 1.0)
        self.assertEqual(base_delay(11, 59.9, 1.0), 1.0)

    def test_lateCap(self) -> None:
        """
        After the first minute the delay doubles from where it was, up to
        30 s.
        """
        self.assertEqual(base_delay(70, EARLY_PERIOD, 1.0), 2.0)
        self.assertEqual(base_delay(74, 100, 16.0), 30.0)
        self.assertEqual(base_delay(75, 1000, 30.0), 30.0)

    def test_badAttempt(self) -> None:
        """
        Attempt numbers start at 1; 0 is a caller's mistake.
        """
        self.assertRaises(ValueError, base_delay, 0, 0, FLOOR)

    @given(attempts, outages, st.floats(min_value=FLOOR, max_value=LATE_CAP))
    def test_bounds(self, attempt: int, outage: float, previous: float) -> None:
        """
        Every delay lies between the floor and the cap in force, and after
        the floor is twice the previous one unless a cap holds it.
        """
        cap = EARLY_CAP if outage < EARLY_PERIOD else LATE_CAP
        delay = base_delay(attempt, outage, previous)
        self.assertGreaterEqual(delay, FLOOR)
        self.assertLessEqual(delay, cap)
        if attempt > ATTEMPTS_AT_FLOOR:
            self.assertEqual(delay, min(2 * previous, cap))


class ScheduleTests(SynchronousTestCase):
    """
    L{ReconnectSchedule}: outages, jitter and reset.
    """

    def test_sequence(self) -> None:
        """
        Without jitter, failures one delay apart get the documented sequence:
        eight times 250 ms, then 0.5 s and 1 s, and 1 s until a minute has
        passed, then doubling to 30 s.
        """
        schedule = ReconnectSchedule(rand=lambda: 0.0)
        now, delays = 100.0, []
        while now < 100 + 200:
            delay = schedule.next_delay(now)
            delays.append(delay)
            now += delay
        times = _times(100.0, delays)
        self.assertEqual(delays[:10], [0.25] * 8 + [0.5, 1.0])
        early = [d for d, t in zip(delays, times, strict=True) if t - 100 < EARLY_PERIOD]
        self.assertEqual(set(early[9:]), {EARLY_CAP})
        late = delays[len(early):]
        self.assertEqual(late[:6], [2.0, 4.0, 8.0, 16.0, 30.0, 30.0])
        self.assertEqual(set(late[4:]), {LATE_CAP})

    @given(st.lists(randoms, min_size=1, max_size=60), st.floats(0, 1e6))
    def test_jitter(self, values: list[float], start: float) -> None:
        """
        Jitter only shortens a delay, by at most 20 %, so no delay exceeds
        its cap and none is shorter than 200 ms.
        """
        feed = iter(values)
        schedule = ReconnectSchedule(rand=lambda: next(feed))
        plain = ReconnectSchedule(rand=lambda: 0.0)
        now = start
        for r in values:
            delay = schedule.next_delay(now)
            base = plain.next_delay(now)
            self.assertAlmostEqual(delay, base * (1 - JITTER * r))
            self.assertLessEqual(delay, base)
            self.assertGreaterEqual(delay, FLOOR * (1 - JITTER))
            now += delay

    def test_jitterSpreads(self) -> None:
        """
        Different random draws give different delays for the same attempt.
        """
        low = ReconnectSchedule(rand=lambda: 0.0).next_delay(0)
        high = ReconnectSchedule(rand=lambda: 0.99).next_delay(0)
        self.assertEqual(low, FLOOR)
        self.assertLess(high, low)

    def test_heldConnectionResets(self) -> None:
        """
        After a connection that stayed up L{HOLD} seconds, the next loss
        starts a new outage at 250 ms.
        """
        schedule = ReconnectSchedule(rand=lambda: 0.0)
        for n in range(20):
            schedule.next_delay(float(n))
        self.assertEqual(schedule.next_delay(100.0), 2.0)
        schedule.connected(200.0)
        self.assertEqual(schedule.next_delay(200.0 + HOLD), FLOOR)
        self.assertEqual(schedule.attempts, 1)
        self.assertEqual(schedule.outage_start, 200.0 + HOLD)

    @given(st.floats(min_value=0, max_value=HOLD - 0.001))
    def test_shortConnectionContinues(self, upFor: float) -> None:
        """
        A connection that drops before L{HOLD} seconds continues the outage:
        the attempt count and the outage's start are kept.
        """
        schedule = ReconnectSchedule(rand=lambda: 0.0)
        for n in range(12):
            schedule.next_delay(float(n))
        schedule.connected(500.0)
        self.assertEqual(schedule.next_delay(500.0 + upFor), 2.0)
        self.assertEqual(schedule.attempts, 13)
        self.assertEqual(schedule.outage_start, 0.0)

    def test_connectedOnlyOnce(self) -> None:
        """
        A held connection resets one outage only: failures after it count
        again from the first attempt and then grow.
        """
        schedule = ReconnectSchedule(rand=lambda: 0.0)
        schedule.connected(0.0)
        delays = [schedule.next_delay(HOLD + n) for n in range(10)]
        self.assertEqual(delays, [0.25] * 8 + [0.5, 1.0])

    def test_reset(self) -> None:
        """
        L{ReconnectSchedule.reset} forgets the outage.
        """
        schedule = ReconnectSchedule(rand=lambda: 0.0)
        for n in range(30):
            schedule.next_delay(float(n * 10))
        self.assertEqual(schedule.next_delay(400.0), LATE_CAP)
        schedule.reset()
        self.assertEqual(schedule.next_delay(1000.0), FLOOR)


def _times(start: float, delays: list[float]) -> list[float]:
    """
    When each delay was asked for, if each attempt happened right after the
    previous delay.
    """
    times, now = [], start
    for delay in delays:
        times.append(now)
        now += delay
    return times
