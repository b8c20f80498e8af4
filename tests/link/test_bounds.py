"""
Tests for the codec's bounds on what it holds for a peer: send credit
clamped to this side's own window and budget, DATA held while the transport
is full, the link-wide send queue limit, and memory pressure.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import (
    MAX_PAYLOAD,
    DataReceived,
    FrameType,
    LinkConfig,
    SessionOpened,
    SessionWritable,
)
from nfltr.link._config import MAX_WINDOW
from nfltr.link._frames import Frame, encode_window

from .helpers import ConnectionPair, small_config
from .test_flow import data_bytes, received, windows

KiB = 1024
MiB = 1024 * KiB


def writable(events: list[Any]) -> list[int]:
    """
    The sessions C{events} say may write again.
    """
    return [e.session_id for e in events if isinstance(e, SessionWritable)]


def data_frames(frames: list[Frame]) -> list[Frame]:
    """
    The DATA frames among C{frames}.
    """
    return [f for f in frames if f.type == FrameType.DATA]


class ClampTests(SynchronousTestCase):
    """
    A side never takes more send credit than it would grant: a peer that
    announces a window and budget of 2**30 gets this side's own.
    """

    def setUp(self) -> None:
        huge = LinkConfig(session_window=MAX_WINDOW, connection_budget=MAX_WINDOW)
        self.pair = ConnectionPair(dialer_config=huge, listener_config=small_config(
            8 * KiB, 32 * KiB
        )).establish()

    def test_sessionCreditClamped(self) -> None:
        """
        The listener (window 8 KiB) sends at most 8 KiB on a session the
        huge-window dialer opened before the dialer returns credit.
        """
        pair = self.pair
        sid = pair.dialer.open_session("svc")
        pair.exchange()
        pair.listener.send_data(sid, b"x" * (100 * KiB))
        self.assertEqual(data_bytes(pair.sent_by("listener"), sid), 8 * KiB)

    def test_budgetClamped(self) -> None:
        """
        Over many sessions, the listener sends at most its own budget (32
        KiB) before the dialer returns connection credit.
        """
        pair = self.pair
        sids = [pair.dialer.open_session(f"svc:{n}") for n in range(10)]
        pair.exchange()
        for sid in sids:
            pair.listener.send_data(sid, b"y" * (8 * KiB))
        self.assertEqual(data_bytes(pair.sent_by("listener")), 32 * KiB)

    def test_legitimatePeerUnaffected(self) -> None:
        """
        With the clamp on both sides and different windows, 1 MiB crosses
        each way on one session: the side with the larger window returns
        credit at half the smaller window, so nobody stalls.
        """
        pair = self.pair
        sid = pair.dialer.open_session("svc")
        pair.exchange()
        up, down = bytes(range(256)) * 4096, bytes(range(255, -1, -1)) * 4096
        pair.dialer.send_data(sid, up)
        pair.listener.send_data(sid, down)
        shuttle(pair)
        self.assertEqual(received(pair.events["listener"], sid), up)
        self.assertEqual(received(pair.events["dialer"], sid), down)

    def test_windowOverClampIsReset(self) -> None:
        """
        A session WINDOW that would raise the credit over the clamped window
        (though not over the announced one) resets the session.
        """
        pair = self.pair
        sid = pair.dialer.open_session("svc")
        pair.exchange()
        pair.listener.send_data(sid, b"w" * (100 * KiB))
        pair.pull("listener")
        pair.inject("listener", encode_window(sid, 8 * KiB + 1))
        self.assertFalse(pair.listener.is_open(sid))


def shuttle(pair: ConnectionPair, rounds: int = 10_000) -> None:
    """
    Exchange until quiet, each side consuming at once what it received.
    """
    for _ in range(rounds):
        new = pair.exchange()
        if not new["dialer"] and not new["listener"]:
            return
        for role, conn in (("dialer", pair.dialer), ("listener", pair.listener)):
            for e in new[role]:
                if isinstance(e, DataReceived):
                    conn.consumed(e.session_id, len(e.data))
                elif isinstance(e, SessionOpened) and e.first_bytes:
                    conn.consumed(e.session_id, len(e.first_bytes))
    raise AssertionError("the pair never went quiet")


class HoldTests(SynchronousTestCase):
    """
    While held (the transport is full), DATA waits in the session queues and
    sessions that write are told to pause; release sends it and resumes
    them.
    """

    def setUp(self) -> None:
        self.pair = ConnectionPair().establish()
        self.conn = self.pair.dialer
        self.sids = [self.conn.open_session(f"svc:{n}") for n in range(3)]
        self.pair.exchange()

    def test_heldDataStaysQueued(self) -> None:
        """
        A write within credit while held sends nothing, asks its producer to
        pause, and counts as queued.
        """
        self.conn.hold()
        self.assertTrue(self.conn.send_data(self.sids[0], b"a" * 1000))
        self.assertEqual(data_frames(self.pair.sent_by("dialer")), [])
        self.assertEqual(self.conn.queued_bytes, 1000)

    def test_controlFramesStillLeave(self) -> None:
        """
        Held, a WINDOW still goes out (only DATA is held).
        """
        self.conn.hold()
        self.pair.listener.send_data(self.sids[0], b"b" * (300 * KiB))
        self.pair.send("listener")
        self.conn.consumed(self.sids[0], 300 * KiB)
        self.assertNotEqual(windows(self.pair.sent_by("dialer")), [])

    def test_releaseSendsAndResumesOnlyWriters(self) -> None:
        """
        Release sends what waited and resumes exactly the sessions that
        wrote while held, once each.
        """
        conn = self.conn
        conn.hold()
        conn.send_data(self.sids[0], b"a" * 1000)
        conn.send_data(self.sids[2], b"c" * 2000)
        events = conn.release(MiB)
        self.assertEqual(writable(events), [self.sids[0], self.sids[2]])
        self.assertEqual(data_bytes(self.pair.sent_by("dialer")), 3000)
        self.assertEqual(conn.queued_bytes, 0)
        self.assertFalse(conn.has_backlog())

    def test_releaseLimitRoundRobin(self) -> None:
        """
        A release sends at most its limit, one frame per session in turn,
        and resumes the sessions that wrote; the rest is the backlog for the
        next call.
        """
        conn = self.conn
        conn.hold()
        for sid in self.sids:
            conn.send_data(sid, b"d" * (3 * MAX_PAYLOAD))
        self.assertEqual(writable(conn.release(2 * MAX_PAYLOAD)), self.sids)
        frames = data_frames(self.pair.sent_by("dialer"))
        self.assertEqual([f.session_id for f in frames], self.sids[:2])
        self.assertTrue(conn.has_backlog())
        self.assertEqual(writable(conn.release(10 * MAX_PAYLOAD)), [])
        self.assertFalse(conn.has_backlog())
        self.assertEqual(conn.queued_bytes, 0)

    def test_creditWhileHeldWaits(self) -> None:
        """
        Connection credit that returns while held does not send DATA; the
        sessions it would serve are sent on release.
        """
        pair = ConnectionPair(listener_config=small_config(4096, 4096)).establish()
        conn = pair.dialer
        sid = conn.open_session("svc")
        pair.exchange()
        conn.send_data(sid, b"e" * 10000)
        self.assertEqual(data_bytes(pair.sent_by("dialer")), 4096)
        conn.hold()
        pair.inject("dialer", encode_window(0, 4096) + encode_window(sid, 4096))
        self.assertEqual(data_bytes(pair.sent_by("dialer")), 4096)
        conn.release(MiB)
        self.assertEqual(data_bytes(pair.sent_by("dialer")), 8192)


class QueueLimitTests(SynchronousTestCase):
    """
    The bytes in all session queues together are bounded: beyond the limit
    every session that queues more is paused, and they resume at half.
    """

    def setUp(self) -> None:
        # Tiny peer credit, so that what is written queues; each session's
        # own high water far above the link's limit.
        config = small_config(
            4096, 8192, send_high_water=4 * MAX_PAYLOAD, send_queue_limit=MAX_PAYLOAD
        )
        self.pair = ConnectionPair(dialer_config=config, listener_config=small_config(
            4096, 8192
        )).establish()
        self.conn = self.pair.dialer
        self.sids = [self.conn.open_session(f"svc:{n}") for n in range(8)]
        self.pair.exchange()
        self.paused: list[int] = []
        for sid in self.sids:
            for _ in range(100):
                if self.conn.send_data(sid, b"q" * 2048):
                    self.paused.append(sid)
                    break

    def test_manySessionsBounded(self) -> None:
        """
        Eight sessions write 2 KiB at a time, each far under its own high
        water: once the total passes the link's limit every writer is
        paused, and the total stays within one write per session of it.
        """
        self.assertEqual(self.paused, self.sids)
        self.assertLessEqual(self.conn.queued_bytes, MAX_PAYLOAD + 8 * 2048)
        self.assertGreater(self.conn.queued_bytes, MAX_PAYLOAD)

    def test_resumedAtHalf(self) -> None:
        """
        The paused sessions resume, once each, when the peer's credit has
        drained the queues to half the limit, not before.
        """
        pair, conn = self.pair, self.conn
        resumed: list[int] = []
        for _ in range(1000):
            pair.pull("dialer")
            for e in pair.deliver("dialer"):
                if isinstance(e, DataReceived):
                    pair.listener.consumed(e.session_id, len(e.data))
            pair.pull("listener")
            now = writable(pair.deliver("listener"))
            if now:
                self.assertLessEqual(conn.queued_bytes, MAX_PAYLOAD // 2)
            resumed += now
            if not conn.queued_bytes:
                break
        self.assertEqual(sorted(resumed), self.sids)


class PressureTests(SynchronousTestCase):
    """
    Under memory pressure, sessions that queue are paused; clearing it
    resumes them.
    """

    def test_pressure(self) -> None:
        """
        A session that leaves bytes queued under pressure is paused, one that
        sends everything is not; the paused one resumes when the pressure
        clears.
        """
        pair = ConnectionPair(listener_config=small_config(4096)).establish()
        conn = pair.dialer
        a, b = conn.open_session("a"), conn.open_session("b")
        pair.exchange()
        conn.set_pressure(True)
        self.assertFalse(conn.send_data(a, b"s" * 100))
        self.assertTrue(conn.send_data(b, b"t" * 5000))
        self.assertEqual(writable(conn.set_pressure(False)), [b])
