"""
Tests for the link's flow control: per-session credit, the connection
budget, send queues, FIN ordering, watermarks and fairness.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import (
    DIALER,
    LISTENER,
    MAX_PAYLOAD,
    DataReceived,
    ErrorCode,
    FinReceived,
    FrameType,
    LinkConfig,
    LocalProtocolError,
    SessionClosed,
    SessionOpened,
    SessionReset,
    SessionWritable,
    State,
)
from nfltr.link._frames import Frame, decode_open, encode_open, encode_window

from .helpers import ConnectionPair, assert_link_error, frames_of, raw_frame, small_config


def received(events: list[Any], sid: int) -> bytes:
    """
    The bytes a side received on session C{sid}, first bytes included.
    """
    out = bytearray()
    for e in events:
        if isinstance(e, SessionOpened) and e.session_id == sid:
            out += e.first_bytes
        elif isinstance(e, DataReceived) and e.session_id == sid:
            out += e.data
    return bytes(out)


def data_bytes(frames: list[Frame], sid: int | None = None) -> int:
    """
    How many session bytes C{frames} carry (OPEN first bytes and DATA).
    """
    total = 0
    for f in frames:
        if sid is not None and f.session_id != sid:
            continue
        if f.type == FrameType.DATA:
            total += len(f.payload)
        elif f.type == FrameType.OPEN:
            total += len(decode_open(f.payload)[1])
    return total


def windows(frames: list[Frame]) -> list[tuple[int, int]]:
    """
    The C{(session id, increment)} of each WINDOW among C{frames}.
    """
    return [
        (f.session_id, int.from_bytes(f.payload, "big"))
        for f in frames if f.type == FrameType.WINDOW
    ]


class CreditTests(SynchronousTestCase):
    """
    A sender never exceeds the credit it was granted; credit returns when
    the receiver reports bytes consumed, one WINDOW per half window.
    """

    def setUp(self) -> None:
        self.pair = ConnectionPair(listener_config=small_config(4096)).establish()
        self.sid = self.pair.dialer.open_session("svc")

    def test_window_limits_sender(self) -> None:
        """
        With a 4096-byte window, the dialer puts exactly 4096 bytes on the
        wire and queues the rest.
        """
        self.pair.dialer.send_data(self.sid, b"x" * 10000)
        self.assertEqual(data_bytes(self.pair.sent_by(DIALER)), 4096)
        self.pair.exchange()
        self.assertEqual(len(received(self.pair.events[LISTENER], self.sid)), 4096)

    def test_credit_on_consumption_not_receipt(self) -> None:
        """
        Receiving sends no WINDOW; consuming half a window sends one for the
        session and one for the connection, each of half a window, and the
        sender then sends exactly that much more.
        """
        pair, sid = self.pair, self.sid
        pair.dialer.send_data(sid, b"x" * 10000)
        pair.exchange()
        self.assertEqual(windows(pair.sent_by(LISTENER)), [])
        pair.listener.consumed(sid, 2047)
        self.assertEqual(windows(frames_of(pair.listener.data_to_send())), [])
        pair.listener.consumed(sid, 1)
        frames = pair.sent_by(LISTENER)
        self.assertEqual(windows(frames), [(0, 2048), (sid, 2048)])
        before = data_bytes(pair.sent_by(DIALER))
        pair.exchange()
        self.assertEqual(data_bytes(pair.sent_by(DIALER)) - before, 2048)

    def test_consumed_says_when_a_window_is_queued(self) -> None:
        """
        C{consumed} returns C{True} exactly when it queued a WINDOW: for the
        session, for the connection, or (a session that is gone) for the
        connection alone.
        """
        pair, sid = self.pair, self.sid
        pair.dialer.send_data(sid, b"x" * 4096)
        pair.exchange()
        self.assertFalse(pair.listener.consumed(sid, 2047))
        self.assertTrue(pair.listener.consumed(sid, 1))
        self.assertEqual(windows(pair.sent_by(LISTENER)), [(0, 2048), (sid, 2048)])
        self.assertFalse(pair.listener.consumed(sid, 0))
        pair.listener.reset_session(sid)
        self.assertFalse(pair.listener.consumed(sid, 2047))
        self.assertTrue(pair.listener.consumed(sid, 1))
        self.assertEqual(windows(pair.sent_by(LISTENER)), [(0, 2048), (sid, 2048), (0, 2048)])

    def test_all_data_arrives_in_order(self) -> None:
        """
        Consuming everything received, repeatedly, brings the whole write
        through, in order.
        """
        pair, sid = self.pair, self.sid
        payload = bytes(range(256)) * 100
        pair.dialer.send_data(sid, payload)
        done = 0
        for _ in range(100):
            pair.exchange()
            got = received(pair.events[LISTENER], sid)
            if len(got) > done:
                pair.listener.consumed(sid, len(got) - done)
                done = len(got)
        self.assertEqual(received(pair.events[LISTENER], sid), payload)

    def test_open_first_bytes_use_credit(self) -> None:
        """
        First bytes given to C{open_session} ride in the OPEN as far as the
        window allows; the rest waits for credit as DATA.
        """
        sid = self.pair.dialer.open_session("web", b"y" * 5000)
        frames = [f for f in self.pair.sent_by(DIALER) if f.session_id == sid]
        self.assertEqual([f.type for f in frames], [FrameType.OPEN])
        self.assertEqual(decode_open(frames[0].payload), (b"web", b"y" * 4096))

    def test_first_bytes_over_frame_size(self) -> None:
        """
        First bytes that do not fit one frame fill the OPEN to
        C{MAX_PAYLOAD} and follow as DATA frames of at most C{MAX_PAYLOAD}.
        """
        pair = ConnectionPair(listener_config=LinkConfig(session_window=1 << 20)).establish()
        sid = pair.dialer.open_session("web", b"z" * 200000)
        frames = pair.sent_by(DIALER)
        self.assertEqual([f.type for f in frames][-4:],
                         [FrameType.OPEN, FrameType.DATA, FrameType.DATA, FrameType.DATA])
        self.assertEqual(len(frames[-4].payload), MAX_PAYLOAD)
        self.assertTrue(all(len(f.payload) <= MAX_PAYLOAD for f in frames))
        pair.exchange()
        self.assertEqual(received(pair.events[LISTENER], sid), b"z" * 200000)

    def test_connection_budget_limits_sender(self) -> None:
        """
        Over all sessions, the sender puts no more than the peer's budget on
        the wire.
        """
        pair = ConnectionPair(listener_config=small_config(4096, 6144)).establish()
        a = pair.dialer.open_session("a")
        b = pair.dialer.open_session("b")
        pair.dialer.send_data(a, b"a" * 4096)
        pair.dialer.send_data(b, b"b" * 4096)
        frames = pair.sent_by(DIALER)
        self.assertEqual(data_bytes(frames, a), 4096)
        self.assertEqual(data_bytes(frames, b), 2048)

    def test_stuck_reader_holds_only_its_session(self) -> None:
        """
        With the default budget, a session whose reader stops does not slow
        another: 100 KiB flow through B while A sits on a full window.
        """
        pair = ConnectionPair(listener_config=LinkConfig(session_window=4096)).establish()
        a = pair.dialer.open_session("a", b"a" * 8192)
        b = pair.dialer.open_session("b")
        pair.dialer.send_data(b, b"b" * 102400)
        done = 0
        for _ in range(200):
            pair.exchange()
            got = len(received(pair.events[LISTENER], b))
            if got > done:
                pair.listener.consumed(b, got - done)
                done = got
        self.assertEqual(done, 102400)
        self.assertEqual(len(received(pair.events[LISTENER], a)), 4096)

    def test_consumed_more_than_received(self) -> None:
        """
        Reporting more bytes consumed than were received is a local error.
        """
        self.pair.exchange()
        self.assertRaises(LocalProtocolError, self.pair.listener.consumed, self.sid, 1)

    def test_consumed_nothing(self) -> None:
        """
        Zero or negative counts are ignored.
        """
        self.pair.listener.consumed(self.sid, 0)
        self.pair.listener.consumed(self.sid, -5)
        self.assertEqual(self.pair.listener.data_to_send(), b"")

    def test_consumed_after_peer_fin(self) -> None:
        """
        Once the peer sent FIN, consuming returns connection credit only: no
        session WINDOW for a sender that is done.
        """
        pair, sid = self.pair, self.sid
        pair.dialer.send_data(sid, b"x" * 4096)
        pair.dialer.send_fin(sid)
        pair.exchange()
        pair.listener.consumed(sid, 4096)
        self.assertEqual(windows(pair.sent_by(LISTENER)), [(0, 4096)])

    def test_consumed_after_session_gone(self) -> None:
        """
        Bytes consumed after their session ended still return connection
        credit.
        """
        pair, sid = self.pair, self.sid
        pair.dialer.send_data(sid, b"x" * 3000)
        pair.dialer.reset_session(sid)
        pair.exchange()
        self.assertEqual(pair.listener.session_count, 0)
        pair.listener.consumed(sid, 3000)
        self.assertEqual(windows(pair.sent_by(LISTENER)), [(0, 3000)])


class CreditViolationTests(SynchronousTestCase):
    """
    A peer that exceeds its credit, or grants too much.
    """

    def listener(self, window: int = 4096, budget: int | None = None) -> ConnectionPair:
        pair = ConnectionPair(listener_config=small_config(window, budget)).establish()
        pair.pull(LISTENER)
        return pair

    def test_data_beyond_session_credit(self) -> None:
        """
        DATA over a session's credit resets that session alone with
        C{FLOW_CONTROL_ERROR}; the link lives, and the bytes count as
        consumed at once: here enough of them to send a connection WINDOW.
        """
        pair = self.listener(4096, 8192)
        pair.inject(LISTENER, encode_open(1, b"a", b"x" * 4000))
        pair.inject(LISTENER, encode_open(3, b"b"))
        [event] = pair.inject(LISTENER, raw_frame(FrameType.DATA, 1, b"x" * 2100))
        self.assertEqual((event.session_id, event.code, event.remote),
                         (1, ErrorCode.FLOW_CONTROL_ERROR, False))
        frames = frames_of(pair.listener.data_to_send())
        self.assertEqual([(f.type, f.session_id) for f in frames],
                         [(FrameType.WINDOW, 0), (FrameType.RESET, 1)])
        self.assertEqual(int.from_bytes(frames[1].payload[:4], "big"),
                         ErrorCode.FLOW_CONTROL_ERROR)
        self.assertEqual(windows(frames), [(0, 2100)])
        self.assertIs(pair.listener.state, State.OPEN)
        # The budget left: 8192 - 4000 (held by session 1) - 2100 + 2100.
        pair.inject(LISTENER, raw_frame(FrameType.DATA, 3, b"y" * 4096))
        pair.inject(LISTENER, encode_open(5, b"c", b"z" * 96))
        assert_link_error(self, pair.listener, [raw_frame(FrameType.DATA, 5, b"z")],
                          ErrorCode.FLOW_CONTROL_ERROR)

    def test_data_beyond_connection_budget(self) -> None:
        """
        DATA over the connection budget, even within its session's credit,
        is a link-level C{FLOW_CONTROL_ERROR}.
        """
        pair = self.listener(4096, 8192)
        pair.inject(LISTENER, encode_open(1, b"a", b"x" * 4096))
        pair.inject(LISTENER, encode_open(3, b"b", b"x" * 4000))
        pair.inject(LISTENER, encode_open(5, b"c"))
        e = assert_link_error(
            self, pair.listener, [raw_frame(FrameType.DATA, 5, b"z" * 97)],
            ErrorCode.FLOW_CONTROL_ERROR,
        )
        self.assertIn("budget", e.reason)

    def test_open_first_bytes_over_window(self) -> None:
        """
        An OPEN whose first bytes exceed the window is a link-level
        C{FLOW_CONTROL_ERROR}.
        """
        pair = self.listener(4096, 65536)
        assert_link_error(self, pair.listener, [encode_open(1, b"a", b"x" * 4097)],
                          ErrorCode.FLOW_CONTROL_ERROR)

    def test_session_window_overflow(self) -> None:
        """
        A WINDOW that would raise a session's credit over the peer's window
        resets that session with C{FLOW_CONTROL_ERROR}; the link lives.
        """
        pair = ConnectionPair(listener_config=small_config(4096)).establish()
        sid = pair.dialer.open_session("svc", b"x" * 4096)
        pair.exchange()
        self.assertEqual(pair.inject(DIALER, encode_window(sid, 4096)), [])
        [event] = pair.inject(DIALER, encode_window(sid, 1))
        self.assertEqual((event.session_id, event.code, event.remote),
                         (sid, ErrorCode.FLOW_CONTROL_ERROR, False))
        frames = frames_of(pair.dialer.data_to_send())
        self.assertEqual([(f.type, f.session_id) for f in frames], [(FrameType.RESET, sid)])
        self.assertIs(pair.dialer.state, State.OPEN)

    def test_connection_window_overflow(self) -> None:
        """
        A connection WINDOW that would raise the credit over the peer's
        budget is a link-level C{FLOW_CONTROL_ERROR} (GOAWAY).
        """
        pair = ConnectionPair(listener_config=small_config(4096, 8192)).establish()
        sid = pair.dialer.open_session("svc", b"x" * 4096)
        pair.exchange()
        self.assertEqual(pair.inject(DIALER, encode_window(0, 4096)), [])
        self.assertEqual(sid, 1)
        assert_link_error(self, pair.dialer, [encode_window(0, 1)], ErrorCode.FLOW_CONTROL_ERROR)

    def test_huge_increment(self) -> None:
        """
        The largest u32 increment overflows both scopes.
        """
        pair = ConnectionPair().establish()
        sid = pair.dialer.open_session("svc")
        pair.exchange()
        [event] = pair.inject(DIALER, encode_window(sid, 0xFFFFFFFF))
        self.assertEqual(event.code, ErrorCode.FLOW_CONTROL_ERROR)
        assert_link_error(self, pair.dialer, [encode_window(0, 0xFFFFFFFF)],
                          ErrorCode.FLOW_CONTROL_ERROR)


class FinOrderingTests(SynchronousTestCase):
    """
    FIN leaves after every byte written before it, however long those wait.
    """

    def test_fin_waits_for_queued_data(self) -> None:
        """
        A FIN asked for while data waits for credit goes out right after the
        last DATA frame, and the receiver sees all the data, then the FIN.
        """
        pair = ConnectionPair(listener_config=small_config(4096)).establish()
        sid = pair.dialer.open_session("svc")
        payload = bytes(range(256)) * 40
        pair.dialer.send_data(sid, payload)
        self.assertFalse(pair.dialer.send_fin(sid))
        self.assertNotIn(FrameType.FIN, [f.type for f in pair.sent_by(DIALER)])
        done = 0
        for _ in range(20):
            pair.exchange()
            got = len(received(pair.events[LISTENER], sid))
            if got > done:
                pair.listener.consumed(sid, got - done)
                done = got
        kinds = [f.type for f in pair.sent_by(DIALER) if f.session_id == sid]
        self.assertEqual(kinds[-1], FrameType.FIN)
        self.assertEqual(kinds.count(FrameType.FIN), 1)
        session_events = [e for e in pair.events[LISTENER]
                          if getattr(e, "session_id", None) == sid]
        self.assertEqual(session_events[-1], FinReceived(sid))
        self.assertEqual(received(pair.events[LISTENER], sid), payload)

    def test_close_when_queued_fin_leaves(self) -> None:
        """
        If the peer's FIN came first, the session closes when our queued FIN
        finally leaves: L{SessionClosed} comes with the WINDOW that let it.
        """
        pair = ConnectionPair(listener_config=small_config(4096)).establish()
        sid = pair.dialer.open_session("svc", b"x" * 6144)
        pair.dialer.send_fin(sid)
        pair.exchange()
        pair.listener.send_fin(sid)
        new = pair.exchange()
        self.assertEqual(new[DIALER], [FinReceived(sid)])
        self.assertEqual(pair.dialer.session_count, 1)
        pair.listener.consumed(sid, 4096)
        new = pair.exchange()
        self.assertEqual(new[DIALER], [SessionClosed(sid)])
        self.assertEqual(new[LISTENER][-2:], [FinReceived(sid), SessionClosed(sid)])
        self.assertEqual(pair.dialer.session_count, 0)

    def test_send_fin_closes(self) -> None:
        """
        C{send_fin} returns true when it closes the session (the peer's FIN
        came and nothing was queued).
        """
        pair = ConnectionPair().establish()
        sid = pair.dialer.open_session("svc")
        pair.exchange()
        pair.listener.send_fin(sid)
        pair.exchange()
        self.assertTrue(pair.dialer.send_fin(sid))
        self.assertEqual(pair.dialer.session_count, 0)


class WatermarkTests(SynchronousTestCase):
    """
    A session's queue asks its producer to pause above the high-water mark
    and reports L{SessionWritable} once at or below half of it.
    """

    def setUp(self) -> None:
        self.pair = ConnectionPair(
            LinkConfig(send_high_water=65536), small_config(4096)
        ).establish()
        self.sid = self.pair.dialer.open_session("svc")
        self.pair.exchange()

    def test_high_water(self) -> None:
        """
        Queueing up to the mark is fine; one byte over asks for a pause, and
        stays so for further writes.
        """
        dialer, sid = self.pair.dialer, self.sid
        self.assertFalse(dialer.send_data(sid, b"x" * 4096))
        self.assertFalse(dialer.send_data(sid, b"x" * 65536))
        self.assertFalse(dialer.is_over_high(sid))
        self.assertTrue(dialer.send_data(sid, b"x"))
        self.assertTrue(dialer.is_over_high(sid))
        self.assertTrue(dialer.send_data(sid, b""))
        self.assertFalse(dialer.is_over_high(sid + 2))

    def test_writable_at_low_water(self) -> None:
        """
        L{SessionWritable} comes once, with the WINDOW that brings the queue
        to exactly half the mark (32768 bytes), not with the one before
        (34816 bytes).
        """
        pair, sid = self.pair, self.sid
        self.assertTrue(pair.dialer.send_data(sid, b"x" * (4096 + 67584)))
        pair.exchange()
        queued = 67584
        writable = []
        while queued > 0:
            pair.listener.consumed(sid, 2048)
            new = pair.exchange()
            queued -= 2048
            writable += [queued for e in new[DIALER] if e == SessionWritable(sid)]
        self.assertEqual(writable, [32768])

    def test_default_high_water(self) -> None:
        """
        Without C{send_high_water}, the mark is the sender's own session
        window.
        """
        pair = ConnectionPair(
            LinkConfig(session_window=65536), small_config(4096)
        ).establish()
        sid = pair.dialer.open_session("svc")
        self.assertFalse(pair.dialer.send_data(sid, b"x" * (4096 + 65536)))
        self.assertTrue(pair.dialer.send_data(sid, b"x"))


class FairnessTests(SynchronousTestCase):
    """
    Sessions waiting for connection credit share it round robin, one frame
    each.
    """

    def test_round_robin(self) -> None:
        """
        Three sessions queued behind an exhausted budget get one full frame
        each in turn as connection credit returns.
        """
        window = 4 * MAX_PAYLOAD
        pair = ConnectionPair(listener_config=small_config(window, window)).establish()
        a = pair.dialer.open_session("a", b"a" * window)
        others = [pair.dialer.open_session(name) for name in "bcd"]
        for sid in others:
            pair.dialer.send_data(sid, b"q" * 3 * MAX_PAYLOAD)
        pair.exchange()
        start = len(pair.sent_by(DIALER))
        for _ in range(5):
            pair.listener.consumed(a, window // 2)
            pair.listener.consumed(a, 0)
            pair.exchange()
        order = [f.session_id for f in pair.sent_by(DIALER)[start:] if f.type == FrameType.DATA]
        b, c, d = others
        self.assertEqual(order[:9], [b, c, d, b, c, d, b, c, d])
        sizes = {len(f.payload) for f in pair.sent_by(DIALER)[start:]
                 if f.type == FrameType.DATA}
        self.assertEqual(sizes, {MAX_PAYLOAD})

    def test_reset_session_leaves_queue(self) -> None:
        """
        A session reset while waiting for credit gives its turn away.
        """
        window = 2 * MAX_PAYLOAD
        pair = ConnectionPair(listener_config=small_config(window, window)).establish()
        a = pair.dialer.open_session("a", b"a" * window)
        b = pair.dialer.open_session("b", b"b" * MAX_PAYLOAD)
        c = pair.dialer.open_session("c", b"c" * MAX_PAYLOAD)
        pair.dialer.reset_session(b)
        pair.exchange()
        start = len(pair.sent_by(DIALER))
        pair.listener.consumed(a, window // 2)
        pair.exchange()
        order = [f.session_id for f in pair.sent_by(DIALER)[start:] if f.type == FrameType.DATA]
        self.assertEqual(order, [c])
        resets = [e for e in pair.events[LISTENER] if isinstance(e, SessionReset)]
        self.assertEqual([e.session_id for e in resets], [b])
