"""
Tests for L{nfltr.link._liveness} and the link's timers: presets, parsing,
the tracker, and C{tick}/C{next_deadline} on a connection.

Time is a L{FakeClock}; "exactly" means at the computed float and not at
the float just below it (C{math.nextafter}).
"""

from __future__ import annotations

import math
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import (
    DEFAULT_KEEPALIVE,
    DIALER,
    LISTENER,
    PREAMBLE,
    PRESETS,
    ErrorCode,
    FrameType,
    Keepalive,
    LinkConfig,
    LinkConnection,
    LinkTimedOut,
    PongReceived,
    State,
    parse_duration,
    parse_keepalive,
)
from nfltr.link._frames import decode_goaway, encode_ping
from nfltr.link._liveness import LivenessTracker

from .helpers import ConnectionPair, FakeClock, frames_of, goaway_codes, without_preamble

# Start times whose sums with the presets' values round differently
# depending on the order of the additions.
STARTS = [0.0, 100.0, 1022.6, 1019.1, 7.7] + [1000 + i * 0.1 for i in range(40)]


def before(t: float) -> float:
    """
    The largest float below C{t}.
    """
    return math.nextafter(t, -math.inf)


class PresetTests(SynchronousTestCase):
    """
    The named presets and their values.
    """

    def test_values(self) -> None:
        """
        The presets are exactly fast 1.5/3, default 5/10, nat 10/20,
        datacenter 15/30 and mobile 15/45 seconds, each named after its key.
        """
        self.assertEqual(
            {name: (ka.interval, ka.timeout, ka.preset) for name, ka in PRESETS.items()},
            {
                "fast": (1.5, 3.0, "fast"),
                "default": (5.0, 10.0, "default"),
                "nat": (10.0, 20.0, "nat"),
                "datacenter": (15.0, 30.0, "datacenter"),
                "mobile": (15.0, 45.0, "mobile"),
            },
        )

    def test_default(self) -> None:
        """
        The default preset is the default of L{LinkConfig}.
        """
        self.assertIs(DEFAULT_KEEPALIVE, PRESETS["default"])
        self.assertIs(LinkConfig().keepalive, DEFAULT_KEEPALIVE)

    def test_bounds(self) -> None:
        """
        An interval outside 0.5..300 s, or a timeout below the interval or
        over 600 s, is refused; the bounds themselves are accepted.
        """
        Keepalive(0.5, 0.5)
        Keepalive(300, 600)
        for interval, timeout in [(0.4, 1), (301, 400), (5, 4.9), (5, 601), (math.nan, 5),
                                  (5, math.inf)]:
            self.assertRaises(ValueError, Keepalive, interval, timeout)

    def test_describe(self) -> None:
        """
        C{describe} names the preset (or "custom") and both values.
        """
        self.assertEqual(PRESETS["fast"].describe(), "fast (interval 1.5s, timeout 3s)")
        self.assertEqual(Keepalive(2, 7).describe(), "custom (interval 2s, timeout 7s)")


class ParseDurationTests(SynchronousTestCase):
    """
    L{parse_duration} reads seconds, milliseconds and minutes.
    """

    def test_forms(self) -> None:
        """
        Bare numbers are seconds; C{ms}, C{s} and C{m} suffixes scale;
        blanks around are allowed.
        """
        for text, seconds in [("1.5", 1.5), ("1.5s", 1.5), ("500ms", 0.5), ("2m", 120.0),
                              (" 3 s ", 3.0), ("0", 0.0)]:
            self.assertEqual(parse_duration(text), seconds, text)

    def test_errors(self) -> None:
        """
        Anything else is a ValueError that gives examples.
        """
        for text in ["", "s", "abc", "-1s", "1h", "1e3", ".5", "1.5.2", "5 s s"]:
            e = self.assertRaises(ValueError, parse_duration, text)
            self.assertIn("500ms", str(e))


class ParseKeepaliveTests(SynchronousTestCase):
    """
    L{parse_keepalive} reads a preset name or C{interval=D,timeout=D}.
    """

    def test_presets(self) -> None:
        """
        Every preset name gives that preset.
        """
        for name, ka in PRESETS.items():
            self.assertIs(parse_keepalive(name), ka)

    def test_custom(self) -> None:
        """
        Custom values, in either order, with blanks and units.
        """
        self.assertEqual(parse_keepalive("interval=2s,timeout=4s"), Keepalive(2.0, 4.0))
        self.assertEqual(parse_keepalive("timeout=1m, interval = 750ms"), Keepalive(0.75, 60.0))
        self.assertIsNone(parse_keepalive("interval=2,timeout=4").preset)

    def test_unknown(self) -> None:
        """
        An unknown name or key is refused with a message naming the presets.
        """
        for text in ["slow", "", "interval=2s,timeout=4s,extra=1", "interval=2s,interval=3s",
                     "interval:2s,timeout=4s"]:
            e = self.assertRaises(ValueError, parse_keepalive, text)
            self.assertIn("fast, default, nat, datacenter, mobile", str(e), text)

    def test_incomplete(self) -> None:
        """
        One of the two values alone is refused.
        """
        e = self.assertRaises(ValueError, parse_keepalive, "interval=2s")
        self.assertIn("both", str(e))

    def test_out_of_bounds(self) -> None:
        """
        Values outside the protocol's bounds, or not durations, are refused.
        """
        for text in ["interval=100ms,timeout=1s", "interval=5s,timeout=1s", "interval=x,timeout=1"]:
            self.assertRaises(ValueError, parse_keepalive, text)


class TrackerTests(SynchronousTestCase):
    """
    L{LivenessTracker} on its own.
    """

    def test_schedule(self) -> None:
        """
        PING at last_rx + interval, dead at last_rx + interval + timeout;
        nothing at the instants just before.
        """
        ka = Keepalive(2.0, 5.0)
        tracker = LivenessTracker(ka, 10.0)
        self.assertEqual(tracker.deadline(), 12.0)
        self.assertIsNone(tracker.poll(before(12.0)))
        self.assertEqual(tracker.poll(12.0), "ping")
        self.assertEqual(tracker.ping_sent_at, 12.0)
        self.assertEqual(tracker.deadline(), 17.0)
        self.assertIsNone(tracker.poll(16.0))
        self.assertIsNone(tracker.poll(before(17.0)))
        self.assertEqual(tracker.poll(17.0), "dead")

    def test_one_ping_per_silence(self) -> None:
        """
        While a PING is unanswered, no second one is sent.
        """
        tracker = LivenessTracker(Keepalive(2.0, 5.0), 0.0)
        self.assertEqual(tracker.poll(2.0), "ping")
        self.assertIsNone(tracker.poll(3.0))
        self.assertIsNone(tracker.poll(6.9))

    def test_received_restarts(self) -> None:
        """
        Receiving anything, even at the instant the PING left, restarts the
        schedule from that instant.
        """
        tracker = LivenessTracker(Keepalive(2.0, 5.0), 0.0)
        self.assertEqual(tracker.poll(2.0), "ping")
        tracker.received(2.0)
        self.assertEqual(tracker.deadline(), 4.0)
        self.assertEqual(tracker.poll(4.0), "ping")

    def test_late_poll(self) -> None:
        """
        A poll long after the last byte, without a PING before, finds the
        peer dead.
        """
        tracker = LivenessTracker(Keepalive(2.0, 5.0), 0.0)
        self.assertEqual(tracker.poll(7.0), "dead")

    def test_exact_deadlines(self) -> None:
        """
        For every preset and many start times, polling at C{deadline()}
        acts, and polling just before does not, despite float rounding.
        """
        for name, ka in PRESETS.items():
            for start in STARTS:
                where = f"{name} from {start!r}"
                tracker = LivenessTracker(ka, start)
                ping_at = tracker.deadline()
                self.assertEqual(ping_at, start + ka.interval, where)
                self.assertIsNone(tracker.poll(before(ping_at)), where)
                self.assertEqual(tracker.poll(ping_at), "ping", where)
                dead_at = tracker.deadline()
                self.assertEqual(dead_at, start + ka.interval + ka.timeout, where)
                self.assertIsNone(tracker.poll(before(dead_at)), where)
                self.assertEqual(tracker.poll(dead_at), "dead", where)


class ConnectionLivenessTests(SynchronousTestCase):
    """
    C{tick} and C{next_deadline} on an established link.
    """

    def silent(self, keepalive: Keepalive, start: float) -> tuple[LinkConnection, FakeClock]:
        """
        An established dialer whose peer then says nothing.
        """
        clock = FakeClock(start)
        pair = ConnectionPair(LinkConfig(keepalive=keepalive), clock=clock).establish()
        pair.dialer.data_to_send()
        return pair.dialer, clock

    def test_silent_peer_every_preset(self) -> None:
        """
        For every preset: a PING goes out exactly at last_rx + interval, the
        link is declared dead exactly at last_rx + interval + timeout, with
        C{LinkTimedOut} and a GOAWAY carrying C{TIMEOUT}; nothing earlier.
        """
        for name, ka in PRESETS.items():
            for start in STARTS:
                where = f"{name} from {start!r}"
                dialer, clock = self.silent(ka, start)
                ping_at = start + ka.interval
                self.assertEqual(dialer.next_deadline(), ping_at, where)
                clock.set(before(ping_at))
                self.assertEqual(dialer.tick(), [], where)
                self.assertEqual(dialer.data_to_send(), b"", where)
                clock.set(ping_at)
                self.assertEqual(dialer.tick(), [], where)
                [ping] = frames_of(dialer.data_to_send())
                self.assertEqual(ping.type, FrameType.PING, where)
                dead_at = start + ka.interval + ka.timeout
                self.assertEqual(dialer.next_deadline(), dead_at, where)
                clock.set(before(dead_at))
                self.assertEqual(dialer.tick(), [], where)
                self.assertEqual(dialer.data_to_send(), b"", where)
                clock.set(dead_at)
                [event] = dialer.tick()
                self.assertIsInstance(event, LinkTimedOut, where)
                self.assertIn(ka.describe(), event.reason)
                self.assertEqual(goaway_codes(frames_of(dialer.data_to_send())),
                                 [ErrorCode.TIMEOUT], where)
                self.assertIs(dialer.state, State.ERROR, where)
                self.assertIsNone(dialer.next_deadline(), where)
                self.assertEqual(dialer.tick(), [], where)

    def test_any_bytes_restart(self) -> None:
        """
        Any bytes from the peer, not only a PONG, restart the schedule from
        their arrival.
        """
        clock = FakeClock(100.0)
        pair = ConnectionPair(clock=clock).establish()
        clock.set(103.25)
        pair.listener.send_control({"type": "note"})
        pair.send(LISTENER)
        self.assertEqual(pair.dialer.next_deadline(), 108.25)

    def test_answering_peer_never_dead(self) -> None:
        """
        Two idle peers whose bytes arrive within the timeout never declare
        each other dead over 200 intervals, at round trips from zero to
        nearly the timeout; when the round trip is shorter than the interval
        each PING's PONG reports it.
        """
        for name, ka in PRESETS.items():
            for one_way in (0.0, 0.125, ka.interval * 0.45, ka.timeout * 0.45):
                where = f"{name}, one way {one_way}"
                events = self.simulate(ka, one_way, until=200 * ka.interval)
                self.assertEqual([e for e in events if isinstance(e, LinkTimedOut)], [], where)
                if 2 * one_way >= ka.interval:
                    continue
                pongs = [e.rtt for e in events if isinstance(e, PongReceived)]
                self.assertGreater(len(pongs), 50, where)
                for measured in pongs:
                    self.assertAlmostEqual(measured, 2 * one_way, places=6, msg=where)

    def simulate(self, ka: Keepalive, delay: float, until: float) -> list[Any]:
        """
        Run an idle pair whose bytes take C{delay} seconds each way, ticking
        each side at its deadline, for C{until} seconds.

        @return: every event either side reported.
        """
        clock = FakeClock(50.0)
        pair = ConnectionPair(LinkConfig(keepalive=ka), clock=clock).establish()
        flights: list[tuple[float, str, bytes]] = []
        events: list[Any] = []
        end = clock() + until
        steps = 0
        while clock() < end:
            steps += 1
            self.assertLess(steps, 100000, "time stands still: a deadline that does not act")
            deadlines = [c.next_deadline() for c in (pair.dialer, pair.listener)]
            nexts = [d for d in deadlines if d is not None]
            nexts += [f[0] for f in flights]
            now = min(nexts)
            clock.set(max(now, clock()))
            for conn in pair.conns.values():
                deadline = conn.next_deadline()
                if deadline is not None and deadline <= clock():
                    events += conn.tick()
            for flight in [f for f in flights if f[0] <= clock()]:
                flights.remove(flight)
                events += pair.conns[pair.other(flight[1])].receive_data(flight[2])
            for role, conn in pair.conns.items():
                data = conn.data_to_send()
                if data:
                    flights.append((clock() + delay, role, data))
            self.assertTrue(pair.dialer.established and pair.listener.established)
        return events

    def test_pong_rtt(self) -> None:
        """
        L{PongReceived} carries the time from our PING to its PONG.
        """
        clock = FakeClock(100.0)
        pair = ConnectionPair(clock=clock).establish()
        clock.set(105.0)
        pair.dialer.tick()
        pair.pull(DIALER)
        clock.set(105.25)
        pair.deliver(DIALER)
        clock.set(105.75)
        self.assertEqual(pair.send(LISTENER), [PongReceived(0.75)])

    def test_unexpected_pongs_ignored(self) -> None:
        """
        A PONG that answers no PING of ours, answers it a second time, or
        echoes other bytes reports nothing.
        """
        clock = FakeClock(100.0)
        pair = ConnectionPair(clock=clock).establish()
        self.assertEqual(pair.inject(DIALER, encode_ping(b"\0" * 7 + b"\1", pong=True)), [])
        clock.set(105.0)
        pair.dialer.tick()
        [ping] = frames_of(pair.dialer.data_to_send())
        self.assertEqual(pair.inject(DIALER, encode_ping(b"other!!!", pong=True)), [])
        self.assertEqual(len(pair.inject(DIALER, encode_ping(ping.payload, pong=True))), 1)
        self.assertEqual(pair.inject(DIALER, encode_ping(ping.payload, pong=True)), [])

    def test_listener_adopts_dialer_keepalive(self) -> None:
        """
        The listener uses the dialer's keepalive, whatever its own config
        says; the dialer keeps its own.
        """
        clock = FakeClock(100.0)
        pair = ConnectionPair(
            LinkConfig(keepalive=PRESETS["fast"]), LinkConfig(keepalive=PRESETS["mobile"]),
            clock=clock,
        ).establish()
        self.assertEqual(pair.listener.peer.keepalive, PRESETS["fast"])
        self.assertEqual(pair.listener.next_deadline(), 101.5)
        self.assertEqual(pair.dialer.next_deadline(), 101.5)
        clock.set(101.5)
        pair.listener.tick()
        clock.set(104.5)
        self.assertEqual([type(e) for e in pair.listener.tick()], [LinkTimedOut])

    def test_custom_keepalive_travels(self) -> None:
        """
        A custom keepalive reaches the listener unchanged.
        """
        ka = Keepalive(2.0, 7.0)
        pair = ConnectionPair(LinkConfig(keepalive=ka)).establish()
        self.assertEqual(pair.listener.peer.keepalive, ka)
        self.assertEqual(pair.listener.next_deadline(), pair.clock() + 2.0)


class HandshakeTimeoutTests(SynchronousTestCase):
    """
    The preamble and hello must arrive within C{handshake_timeout}.
    """

    def test_dialer(self) -> None:
        """
        A dialer never answered times out exactly at start + timeout, and
        sends GOAWAY C{TIMEOUT} after its preamble and hello.
        """
        clock = FakeClock(100.0)
        dialer = LinkConnection(DIALER, LinkConfig(handshake_timeout=2.5), clock=clock)
        self.assertEqual(dialer.next_deadline(), 102.5)
        clock.set(before(102.5))
        self.assertEqual(dialer.tick(), [])
        clock.set(102.5)
        [event] = dialer.tick()
        self.assertIsInstance(event, LinkTimedOut)
        self.assertIn("2.5s", event.reason)
        frames = frames_of(without_preamble(dialer.data_to_send()))
        self.assertEqual([f.type for f in frames], [FrameType.CONTROL, FrameType.GOAWAY])
        self.assertEqual(decode_goaway(frames[1].payload)[1], ErrorCode.TIMEOUT)
        self.assertIs(dialer.state, State.ERROR)

    def test_listener_without_preamble(self) -> None:
        """
        A listener that got nothing times out and answers with its preamble
        and a GOAWAY C{TIMEOUT}.
        """
        clock = FakeClock(100.0)
        listener = LinkConnection(LISTENER, clock=clock)
        self.assertEqual(listener.next_deadline(), 110.0)
        clock.set(110.0)
        self.assertEqual([type(e) for e in listener.tick()], [LinkTimedOut])
        out = listener.data_to_send()
        self.assertEqual(goaway_codes(frames_of(without_preamble(out))), [ErrorCode.TIMEOUT])

    def test_listener_without_hello(self) -> None:
        """
        A listener that got the preamble but no hello times out after it
        sent its own preamble and hello.
        """
        clock = FakeClock(100.0)
        listener = LinkConnection(LISTENER, clock=clock)
        listener.receive_data(PREAMBLE)
        clock.set(110.0)
        self.assertEqual([type(e) for e in listener.tick()], [LinkTimedOut])
        frames = frames_of(without_preamble(listener.data_to_send()))
        self.assertEqual([f.type for f in frames], [FrameType.CONTROL, FrameType.GOAWAY])

    def test_established_in_time(self) -> None:
        """
        Once established, the handshake deadline no longer applies: the next
        deadline is the keepalive's.
        """
        clock = FakeClock(100.0)
        pair = ConnectionPair(clock=clock)
        clock.set(109.0)
        pair.establish()
        self.assertEqual(pair.dialer.next_deadline(), 114.0)
        clock.set(110.0)
        self.assertEqual(pair.dialer.tick(), [])
        self.assertEqual(pair.listener.tick(), [])
        self.assertTrue(pair.dialer.established)
