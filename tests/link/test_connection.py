"""
Tests for L{nfltr.link.LinkConnection}: the handshake, every connection
state, every session state against every session frame, the peer's
violations (each with its own code and a GOAWAY carrying it), late frames,
GOAWAY and drain, and the application's actions.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import (
    DIALER,
    LISTENER,
    MAGIC,
    PREAMBLE,
    VERSION,
    ControlReceived,
    DataReceived,
    ErrorCode,
    FinReceived,
    FrameType,
    GoAwayReceived,
    LinkConfig,
    LinkConnection,
    LinkEstablished,
    LocalProtocolError,
    RemoteProtocolError,
    SessionClosed,
    SessionOpened,
    SessionReset,
    State,
)
from nfltr.link._control import encode_message, hello_message
from nfltr.link._frames import (
    MAX_PAYLOAD,
    MAX_TARGET,
    VIEW_MIN,
    Frame,
    decode_goaway,
    encode_accept,
    encode_control,
    encode_fin,
    encode_goaway,
    encode_open,
    encode_ping,
    encode_reset,
    encode_window,
)
from nfltr.link._liveness import DEFAULT_KEEPALIVE

from .helpers import (
    ConnectionPair,
    FakeClock,
    assert_link_error,
    feed,
    frames_of,
    raw_frame,
    three_ways,
    without_preamble,
)


def hello_frame(role: str = DIALER, **overrides: Any) -> bytes:
    """
    A valid hello CONTROL frame from C{role}, with fields overridden.
    """
    keepalive = DEFAULT_KEEPALIVE if role == DIALER else None
    message = hello_message(role, 65536, 1 << 20, 16, keepalive, {})
    message.update(overrides)
    return encode_control(encode_message(message))


def open_listener(config: LinkConfig | None = None) -> tuple[LinkConnection, FakeClock]:
    """
    A listener that has received a valid preamble and hello, output drained.
    """
    clock = FakeClock()
    conn = LinkConnection(LISTENER, config, clock=clock)
    events = conn.receive_data(PREAMBLE + hello_frame())
    assert [type(e) for e in events] == [LinkEstablished]
    conn.data_to_send()
    return conn, clock


def types(events: list[Any]) -> list[type]:
    return [type(e) for e in events]


class HandshakeTests(SynchronousTestCase):
    """
    The preamble and hello exchange, and the states it goes through.
    """

    def test_dialer_speaks_first(self) -> None:
        """
        A new dialer queues its preamble and hello; a new listener queues
        nothing until the dialer's preamble arrives.
        """
        clock = FakeClock()
        dialer = LinkConnection(DIALER, clock=clock, app_hello={"key": "k1"})
        listener = LinkConnection(LISTENER, clock=clock)
        self.assertIs(dialer.state, State.PREAMBLE)
        self.assertIs(listener.state, State.PREAMBLE)
        out = dialer.data_to_send()
        [hello] = frames_of(without_preamble(out))
        self.assertEqual((hello.type, hello.session_id), (FrameType.CONTROL, 0))
        self.assertEqual(listener.data_to_send(), b"")
        self.assertEqual(dialer.data_to_send(), b"")

    def test_states(self) -> None:
        """
        Each side goes PREAMBLE, HELLO (preamble seen), OPEN (hello seen).
        """
        pair = ConnectionPair()
        pair.pull(DIALER)
        pair.deliver(DIALER, len(PREAMBLE))
        self.assertIs(pair.listener.state, State.HELLO)
        self.assertFalse(pair.listener.established)
        pair.deliver(DIALER)
        self.assertIs(pair.listener.state, State.OPEN)
        pair.pull(LISTENER)
        pair.deliver(LISTENER, len(PREAMBLE) - 1)
        self.assertIs(pair.dialer.state, State.PREAMBLE)
        pair.deliver(LISTENER, 1)
        self.assertIs(pair.dialer.state, State.HELLO)
        pair.deliver(LISTENER)
        self.assertIs(pair.dialer.state, State.OPEN)
        self.assertTrue(pair.dialer.established and pair.listener.established)

    def test_listener_answers_preamble(self) -> None:
        """
        The listener answers the dialer's preamble with its own preamble and
        hello, before the dialer's hello arrived.
        """
        listener = LinkConnection(LISTENER, clock=FakeClock())
        self.assertEqual(listener.receive_data(PREAMBLE), [])
        out = listener.data_to_send()
        [hello] = frames_of(without_preamble(out))
        self.assertEqual(hello.type, FrameType.CONTROL)

    def test_established_events(self) -> None:
        """
        Each side reports one L{LinkEstablished} carrying the peer's hello:
        role, limits, keepalive (the dialer's only) and application fields.
        """
        pair = ConnectionPair(
            LinkConfig(session_window=8192, max_sessions=7),
            LinkConfig(session_window=4096, connection_budget=40960, max_sessions=3),
            dialer_hello={"key": "secret"}, listener_hello={"relay": "r1"},
        ).establish()
        [at_listener] = pair.events[LISTENER]
        [at_dialer] = pair.events[DIALER]
        self.assertIsInstance(at_listener, LinkEstablished)
        hello = at_listener.hello
        self.assertEqual(
            (hello.role, hello.window, hello.budget, hello.max_sessions, hello.app),
            ("dialer", 8192, 8192 * 7, 7, {"key": "secret"}),
        )
        self.assertEqual(hello.keepalive, DEFAULT_KEEPALIVE)
        hello = at_dialer.hello
        self.assertEqual(
            (hello.role, hello.window, hello.budget, hello.max_sessions, hello.app),
            ("listener", 4096, 40960, 3, {"relay": "r1"}),
        )
        self.assertIsNone(hello.keepalive)
        self.assertEqual(pair.listener.peer, pair.events[LISTENER][0].hello)

    def test_handshake_three_ways(self) -> None:
        """
        The dialer's preamble and hello establish the listener whole, one
        byte at a time, and with trailing data.
        """
        data = LinkConnection(DIALER, clock=FakeClock()).data_to_send()
        for mode, chunks, _ in three_ways(data):
            listener = LinkConnection(LISTENER, clock=FakeClock())
            self.assertEqual(types(feed(listener, chunks)), [LinkEstablished], mode)
            self.assertTrue(listener.established, mode)

    def test_listener_output_three_ways(self) -> None:
        """
        The listener's answer establishes the dialer fed each of the three
        ways.
        """
        listener = LinkConnection(LISTENER, clock=FakeClock())
        listener.receive_data(LinkConnection(DIALER, clock=FakeClock()).data_to_send())
        data = listener.data_to_send()
        for mode, chunks, _ in three_ways(data):
            dialer = LinkConnection(DIALER, clock=FakeClock())
            self.assertEqual(types(feed(dialer, chunks)), [LinkEstablished], mode)

    def test_frames_after_hello_in_same_chunk(self) -> None:
        """
        Frames that follow the hello in the same chunk are processed once
        the link is open.
        """
        listener = LinkConnection(LISTENER, clock=FakeClock())
        events = listener.receive_data(
            PREAMBLE + hello_frame() + encode_open(1, b"svc", b"hi")
        )
        self.assertEqual(types(events), [LinkEstablished, SessionOpened])

    def test_bad_role(self) -> None:
        """
        A role other than dialer or listener is refused.
        """
        self.assertRaises(LocalProtocolError, LinkConnection, "relay", clock=FakeClock())


class HandshakeErrorTests(SynchronousTestCase):
    """
    A peer that does not complete the handshake properly.
    """

    def test_bad_magic_listener(self) -> None:
        """
        HTTP instead of the magic is C{BAD_MAGIC}, three ways; nothing at all
        is sent back.
        """
        for _mode, chunks, _ in three_ways(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"):
            listener = LinkConnection(LISTENER, clock=FakeClock())
            assert_link_error(self, listener, chunks, ErrorCode.BAD_MAGIC, goaway=False)

    def test_bad_magic_at_first_wrong_byte(self) -> None:
        """
        The magic is checked byte by byte: the first wrong byte fails, even
        before a whole preamble arrived.
        """
        listener = LinkConnection(LISTENER, clock=FakeClock())
        self.assertEqual(listener.receive_data(MAGIC[:3]), [])
        assert_link_error(self, listener, [b"X"], ErrorCode.BAD_MAGIC, goaway=False)

    def test_bad_magic_dialer(self) -> None:
        """
        A dialer answered with garbage fails with C{BAD_MAGIC} and adds
        nothing to its output.
        """
        dialer = LinkConnection(DIALER, clock=FakeClock())
        dialer.data_to_send()
        assert_link_error(self, dialer, [b"SSH-2.0-x\r\n"], ErrorCode.BAD_MAGIC, goaway=False)

    def test_unsupported_version_listener(self) -> None:
        """
        A listener sent another version answers with its own preamble and a
        GOAWAY carrying C{UNSUPPORTED_VERSION}, and nothing else.
        """
        for mode, chunks, _ in three_ways(MAGIC + bytes([VERSION + 1]) + hello_frame()):
            listener = LinkConnection(LISTENER, clock=FakeClock())
            e = self.assertRaises(RemoteProtocolError, feed, listener, chunks)
            self.assertEqual(e.code, ErrorCode.UNSUPPORTED_VERSION, mode)
            out = listener.data_to_send()
            [goaway] = frames_of(without_preamble(out))
            last, code, _ = decode_goaway(goaway.payload)
            self.assertEqual((goaway.type, last, code), (FrameType.GOAWAY, 0, 9), mode)
            self.assertRaises(LocalProtocolError, listener.receive_data, b"")

    def test_unsupported_version_dialer(self) -> None:
        """
        A dialer answered with another version fails with a message naming
        both versions, and tells the peer with a GOAWAY.
        """
        dialer = LinkConnection(DIALER, clock=FakeClock())
        dialer.data_to_send()
        e = assert_link_error(
            self, dialer, [MAGIC + bytes([7])], ErrorCode.UNSUPPORTED_VERSION
        )
        self.assertIn("version 7", e.reason)
        self.assertIn(f"version {VERSION}", e.reason)

    def test_frames_before_hello(self) -> None:
        """
        Any frame but CONTROL (or GOAWAY) before the hello is
        C{PROTOCOL_ERROR}; the listener's output is its preamble, its hello,
        then the GOAWAY.
        """
        bad = {
            FrameType.OPEN: encode_open(1, b"svc"),
            FrameType.DATA: raw_frame(FrameType.DATA, 1, b"x"),
            FrameType.FIN: encode_fin(1),
            FrameType.RESET: encode_reset(1, ErrorCode.CANCEL),
            FrameType.WINDOW: encode_window(0, 1),
            FrameType.PING: encode_ping(b"12345678"),
            FrameType.PONG: encode_ping(b"12345678", pong=True),
            FrameType.ACCEPT: encode_accept(1),
        }
        self.assertEqual(set(bad) | {FrameType.CONTROL, FrameType.GOAWAY}, set(FrameType))
        for ftype, frame in bad.items():
            listener = LinkConnection(LISTENER, clock=FakeClock())
            e = self.assertRaises(RemoteProtocolError, listener.receive_data, PREAMBLE + frame)
            self.assertEqual(e.code, ErrorCode.PROTOCOL_ERROR, ftype)
            self.assertIn(ftype.name, e.reason)
            frames = frames_of(without_preamble(listener.data_to_send()))
            self.assertEqual(
                [f.type for f in frames], [FrameType.CONTROL, FrameType.GOAWAY], ftype
            )

    def test_goaway_before_hello(self) -> None:
        """
        A GOAWAY instead of the hello (the peer refusing the link, e.g. on
        its handshake timeout) is reported with the peer's own code and
        reason, and the link counts as drained.
        """
        dialer = LinkConnection(DIALER, clock=FakeClock())
        events = dialer.receive_data(
            PREAMBLE + encode_goaway(0, ErrorCode.TIMEOUT, "no hello within 10s")
        )
        self.assertEqual(events, [GoAwayReceived(0, ErrorCode.TIMEOUT, "no hello within 10s")])
        self.assertTrue(dialer.is_drained())
        self.assertFalse(dialer.can_open())

    def test_control_before_hello(self) -> None:
        """
        A control message other than hello first is C{PROTOCOL_ERROR}.
        """
        listener = LinkConnection(LISTENER, clock=FakeClock())
        listener.receive_data(PREAMBLE)
        listener.data_to_send()
        assert_link_error(
            self, listener, [encode_control(b'{"type":"auth"}')], ErrorCode.PROTOCOL_ERROR
        )

    def test_hello_wrong_role(self) -> None:
        """
        A listener that receives a listener's hello fails with
        C{PROTOCOL_ERROR}.
        """
        listener = LinkConnection(LISTENER, clock=FakeClock())
        listener.receive_data(PREAMBLE)
        listener.data_to_send()
        e = assert_link_error(
            self, listener, [hello_frame(LISTENER)], ErrorCode.PROTOCOL_ERROR
        )
        self.assertIn("listener", e.reason)

    def test_hello_bad_field(self) -> None:
        """
        A hello with an invalid field is C{PROTOCOL_ERROR}, three ways.
        """
        data = PREAMBLE + hello_frame(window=12)
        for _mode, chunks, _ in three_ways(data):
            listener = LinkConnection(LISTENER, clock=FakeClock())
            assert_link_error(self, listener, chunks, ErrorCode.PROTOCOL_ERROR)

    def test_hello_not_json(self) -> None:
        """
        A first CONTROL frame that is not JSON is C{PROTOCOL_ERROR}.
        """
        listener = LinkConnection(LISTENER, clock=FakeClock())
        assert_link_error(
            self, listener, [PREAMBLE + encode_control(b"\xff{")], ErrorCode.PROTOCOL_ERROR
        )

    def test_second_hello(self) -> None:
        """
        A second hello on an open link is C{PROTOCOL_ERROR}.
        """
        listener, _ = open_listener()
        e = assert_link_error(self, listener, [hello_frame()], ErrorCode.PROTOCOL_ERROR)
        self.assertIn("second hello", e.reason)


class LinkErrorTests(SynchronousTestCase):
    """
    Violations on an open link: each with its code, a GOAWAY carrying it
    and the last peer session accepted, and the sticky error state.
    """

    def check(self, data: bytes, code: ErrorCode, before: int = 0) -> RemoteProtocolError:
        """
        Feed C{data} to an open listener three ways; all must fail with
        C{code}.
        """
        error = None
        for mode, chunks, _ in three_ways(data):
            listener, _ = open_listener(LinkConfig(session_window=4096, connection_budget=8192))
            events: list[Any] = []
            try:
                for chunk in chunks:
                    events += listener.receive_data(chunk)
            except RemoteProtocolError as e:
                error = e
                events += e.events
            else:
                self.fail(f"{mode}: no error")
            self.assertEqual(error.code, code, mode)
            self.assertEqual(len(events), before, mode)
            frames = frames_of(listener.data_to_send())
            goaway = frames[-1]
            self.assertEqual(goaway.type, FrameType.GOAWAY, mode)
            self.assertEqual(decode_goaway(goaway.payload)[1], code, mode)
            self.assertRaises(LocalProtocolError, listener.receive_data, b"")
        assert error is not None
        return error

    def test_unknown_frame_type(self) -> None:
        """
        An unknown frame type is C{UNKNOWN_FRAME_TYPE}.
        """
        self.check(raw_frame(99, 0, b"abc"), ErrorCode.UNKNOWN_FRAME_TYPE)

    def test_oversize_from_header(self) -> None:
        """
        A DATA header declaring more than C{MAX_PAYLOAD} fails on its own,
        before any body byte.
        """
        self.check(raw_frame(FrameType.DATA, 1, length=MAX_PAYLOAD + 1), ErrorCode.FRAME_SIZE_ERROR)

    def test_wrong_fixed_size(self) -> None:
        """
        A WINDOW frame of 5 bytes is C{FRAME_SIZE_ERROR}.
        """
        self.check(raw_frame(FrameType.WINDOW, 0, b"\0\0\0\1\0"), ErrorCode.FRAME_SIZE_ERROR)

    def test_unknown_session(self) -> None:
        """
        DATA, FIN, RESET or WINDOW for a session never opened (either
        parity) is C{UNKNOWN_SESSION}.
        """
        for frame in [
            raw_frame(FrameType.DATA, 1, b"x"), encode_fin(3), encode_reset(5, 0),
            encode_window(7, 1), raw_frame(FrameType.DATA, 2, b"x"), encode_fin(4),
        ]:
            self.check(frame, ErrorCode.UNKNOWN_SESSION)

    def test_unknown_session_after_others(self) -> None:
        """
        Events decoded before the fault travel with the error, and GOAWAY
        names the highest session the peer opened.
        """
        data = encode_open(1, b"a") + encode_open(5, b"b") + raw_frame(FrameType.DATA, 7, b"x")
        self.check(data, ErrorCode.UNKNOWN_SESSION, before=2)
        listener, _ = open_listener()
        self.assertRaises(RemoteProtocolError, listener.receive_data, data)
        goaway = frames_of(listener.data_to_send())[-1]
        self.assertEqual(decode_goaway(goaway.payload)[0], 5)

    def test_open_wrong_parity(self) -> None:
        """
        A listener given an even OPEN id (its own parity) fails with
        C{PROTOCOL_ERROR}; so does a dialer given an odd one.
        """
        self.check(encode_open(2, b"svc"), ErrorCode.PROTOCOL_ERROR)
        pair = ConnectionPair().establish()
        pair.pull(DIALER)
        assert_link_error(self, pair.dialer, [encode_open(1, b"svc")], ErrorCode.PROTOCOL_ERROR)

    def test_open_reused_id(self) -> None:
        """
        Reusing a session id is C{PROTOCOL_ERROR}, while the session lives
        and after it closed.
        """
        self.check(encode_open(1, b"a") + encode_open(1, b"a"), ErrorCode.PROTOCOL_ERROR, 1)
        self.check(
            encode_open(1, b"a") + encode_reset(1, 0) + encode_open(1, b"a"),
            ErrorCode.PROTOCOL_ERROR, 2,
        )

    def test_open_not_increasing(self) -> None:
        """
        A lower id after a higher one is C{PROTOCOL_ERROR}.
        """
        self.check(encode_open(5, b"a") + encode_open(3, b"a"), ErrorCode.PROTOCOL_ERROR, 1)

    def test_open_bad_target(self) -> None:
        """
        An OPEN whose target is empty, too long or not UTF-8 is
        C{PROTOCOL_ERROR}.
        """
        self.check(raw_frame(FrameType.OPEN, 1, b"\x00\x00"), ErrorCode.PROTOCOL_ERROR)
        self.check(encode_open(1, b"x" * (MAX_TARGET + 1)), ErrorCode.PROTOCOL_ERROR)
        self.check(encode_open(1, b"\xff\xfe"), ErrorCode.PROTOCOL_ERROR)

    def test_session_frames_on_session_zero(self) -> None:
        """
        OPEN, DATA, FIN and RESET on session 0 are C{PROTOCOL_ERROR}.
        """
        for frame in [
            encode_open(0, b"a"), raw_frame(FrameType.DATA, 0, b"x"), encode_fin(0),
            encode_reset(0, 0),
        ]:
            self.check(frame, ErrorCode.PROTOCOL_ERROR)

    def test_link_frames_on_a_session(self) -> None:
        """
        PING, PONG, GOAWAY and CONTROL on a session other than 0 are
        C{PROTOCOL_ERROR}.
        """
        for ftype, payload in [
            (FrameType.PING, b"12345678"), (FrameType.PONG, b"12345678"),
            (FrameType.GOAWAY, b"\0" * 8), (FrameType.CONTROL, b'{"type":"x"}'),
        ]:
            self.check(encode_open(1, b"a") + raw_frame(ftype, 1, payload),
                       ErrorCode.PROTOCOL_ERROR, 1)

    def test_window_zero(self) -> None:
        """
        A WINDOW with a zero increment is C{PROTOCOL_ERROR}, on the link or
        a session.
        """
        self.check(encode_window(0, 0), ErrorCode.PROTOCOL_ERROR)
        self.check(encode_open(1, b"a") + encode_window(1, 0), ErrorCode.PROTOCOL_ERROR, 1)

    def test_control_not_json(self) -> None:
        """
        A control message that is not a JSON object with a type is
        C{PROTOCOL_ERROR}.
        """
        for payload in [b"", b"[1]", b'{"kind":"x"}', b"\xff"]:
            self.check(encode_control(payload), ErrorCode.PROTOCOL_ERROR)

    def test_ping_flood(self) -> None:
        """
        Each PING is answered with a PONG echoing it, up to a burst of four
        times the rate; the next one is C{ENHANCE_YOUR_CALM}; tokens refill
        at the rate per second.
        """
        listener, clock = open_listener(LinkConfig(ping_rate=2))
        for i in range(8):
            self.assertEqual(listener.receive_data(encode_ping(b"%08d" % i)), [])
        pongs = frames_of(listener.data_to_send())
        self.assertEqual(
            pongs, [Frame(FrameType.PONG, 0, 0, b"%08d" % i) for i in range(8)]
        )
        clock.advance(0.5)
        listener.receive_data(encode_ping(b"refilled"))
        self.assertEqual(frames_of(listener.data_to_send())[0].payload, b"refilled")
        e = assert_link_error(
            self, listener, [encode_ping(b"toomuch!")], ErrorCode.ENHANCE_YOUR_CALM
        )
        self.assertIn("PING", e.reason)


class SessionStateTests(SynchronousTestCase):
    """
    Every session frame in every session state, as the listener sees
    frames about session 1 (opened by the dialer).
    """

    SID = 1
    STATES = ("idle", "open", "half-closed local", "half-closed remote", "closed", "reset")
    FRAMES = {
        FrameType.OPEN: encode_open(SID, b"svc"),
        FrameType.DATA: raw_frame(FrameType.DATA, SID, b"abc"),
        FrameType.FIN: encode_fin(SID),
        FrameType.RESET: encode_reset(SID, ErrorCode.CANCEL, "bye"),
        FrameType.WINDOW: encode_window(SID, 10),
    }
    ERR = ErrorCode
    # state -> frame type -> (event types, frames the listener sends) or an error code
    EXPECTED: dict[str, dict[FrameType, Any]] = {
        "idle": {
            FrameType.OPEN: ([SessionOpened], []),
            FrameType.DATA: ERR.UNKNOWN_SESSION,
            FrameType.FIN: ERR.UNKNOWN_SESSION,
            FrameType.RESET: ERR.UNKNOWN_SESSION,
            FrameType.WINDOW: ERR.UNKNOWN_SESSION,
        },
        "open": {
            FrameType.OPEN: ERR.PROTOCOL_ERROR,
            FrameType.DATA: ([DataReceived], []),
            FrameType.FIN: ([FinReceived], []),
            FrameType.RESET: ([SessionReset], []),
            FrameType.WINDOW: ([], []),
        },
        "half-closed local": {
            FrameType.OPEN: ERR.PROTOCOL_ERROR,
            FrameType.DATA: ([DataReceived], []),
            FrameType.FIN: ([FinReceived, SessionClosed], []),
            FrameType.RESET: ([SessionReset], []),
            FrameType.WINDOW: ([], []),
        },
        "half-closed remote": {
            FrameType.OPEN: ERR.PROTOCOL_ERROR,
            FrameType.DATA: ([SessionReset], [(FrameType.RESET, ERR.SESSION_CLOSED)]),
            FrameType.FIN: ([SessionReset], [(FrameType.RESET, ERR.SESSION_CLOSED)]),
            FrameType.RESET: ([SessionReset], []),
            FrameType.WINDOW: ([], []),
        },
        "closed": {
            FrameType.OPEN: ERR.PROTOCOL_ERROR,
            FrameType.DATA: ([], []),
            FrameType.FIN: ([], []),
            FrameType.RESET: ([], []),
            FrameType.WINDOW: ([], []),
        },
    }
    EXPECTED["reset"] = EXPECTED["closed"]

    def listener_in(self, state: str) -> ConnectionPair:
        """
        A pair whose listener holds session 1 in C{state}; the listener has
        sent 10 bytes on it where it can, so a WINDOW of 10 is in bounds.
        """
        pair = ConnectionPair().establish()
        if state == "idle":
            return pair
        sid = pair.dialer.open_session("svc")
        self.assertEqual(sid, self.SID)
        pair.exchange()
        pair.listener.send_data(sid, b"0123456789")
        if state in ("half-closed local", "closed"):
            pair.listener.send_fin(sid)
        if state in ("half-closed remote", "closed"):
            pair.dialer.send_fin(sid)
        if state == "reset":
            pair.dialer.reset_session(sid)
        pair.exchange()
        pair.pull(LISTENER)
        live = state in ("open", "half-closed local", "half-closed remote")
        self.assertEqual(pair.listener.session_count, 1 if live else 0, state)
        return pair

    def test_matrix_complete(self) -> None:
        """
        The table covers every state and every session frame type.
        """
        self.assertEqual(set(self.EXPECTED), set(self.STATES))
        for row in self.EXPECTED.values():
            self.assertEqual(set(row), set(self.FRAMES))

    def test_matrix(self) -> None:
        """
        Each (state, frame) pair gives exactly the events, frames sent back
        or link error in the table; a session error leaves the link open.
        """
        for state, row in self.EXPECTED.items():
            for ftype, expected in row.items():
                where = f"{ftype.name} in {state}"
                pair = self.listener_in(state)
                listener = pair.listener
                if isinstance(expected, ErrorCode):
                    assert_link_error(self, listener, [self.FRAMES[ftype]], expected)
                    continue
                events = listener.receive_data(self.FRAMES[ftype])
                want_events, want_frames = expected
                self.assertEqual(types(events), want_events, where)
                sent = [
                    (f.type, int.from_bytes(f.payload[:4], "big"))
                    for f in frames_of(listener.data_to_send())
                ]
                self.assertEqual(sent, want_frames, where)
                self.assertIs(listener.state, State.OPEN, where)

    def test_window_after_our_fin_ignored(self) -> None:
        """
        Once our FIN left, WINDOWs for the session are ignored, even one that
        would overflow: there is nothing left to send with them.
        """
        pair = self.listener_in("half-closed local")
        self.assertEqual(pair.listener.receive_data(encode_window(self.SID, 0xFFFFFFFF)), [])
        self.assertEqual(pair.listener.data_to_send(), b"")
        self.assertEqual(pair.listener.session_count, 1)

    def test_remote_reset_event(self) -> None:
        """
        A RESET from the peer reports its code and reason, marked remote.
        """
        pair = self.listener_in("open")
        [event] = pair.listener.receive_data(self.FRAMES[FrameType.RESET])
        self.assertEqual(event, SessionReset(self.SID, ErrorCode.CANCEL, "bye", True))
        self.assertEqual(pair.listener.session_count, 0)

    def test_data_after_fin(self) -> None:
        """
        DATA after the peer's FIN resets the session with C{SESSION_CLOSED}
        (reported as reset by us); the link and other sessions go on.
        """
        pair = ConnectionPair().establish()
        a = pair.dialer.open_session("a")
        b = pair.dialer.open_session("b")
        pair.dialer.send_fin(a)
        pair.exchange()
        [event] = pair.inject(LISTENER, raw_frame(FrameType.DATA, a, b"late"))
        self.assertEqual(event.session_id, a)
        self.assertEqual(event.code, ErrorCode.SESSION_CLOSED)
        self.assertFalse(event.remote)
        pair.dialer.send_data(b, b"still fine")
        pair.exchange()
        self.assertIn(DataReceived(b, b"still fine"), pair.events[LISTENER])
        resets = [e for e in pair.events[DIALER] if isinstance(e, SessionReset)]
        self.assertEqual([(e.session_id, e.code, e.remote) for e in resets],
                         [(a, ErrorCode.SESSION_CLOSED, True)])

    def test_full_life(self) -> None:
        """
        A session opened with first bytes, used both ways, half-closed each
        way, ends with L{SessionClosed} on both sides and is gone.
        """
        pair = ConnectionPair().establish()
        sid = pair.dialer.open_session("web:80", b"GET / HTTP/1.0\r\n\r\n")
        pair.exchange()
        self.assertEqual(
            pair.events[LISTENER][1:], [SessionOpened(sid, "web:80", b"GET / HTTP/1.0\r\n\r\n")]
        )
        pair.listener.send_data(sid, b"HTTP/1.0 200 OK\r\n\r\n")
        self.assertFalse(pair.listener.send_fin(sid))
        pair.exchange()
        self.assertEqual(
            pair.events[DIALER][1:],
            [DataReceived(sid, b"HTTP/1.0 200 OK\r\n\r\n"), FinReceived(sid)],
        )
        self.assertEqual(pair.dialer.session_count, 1)
        self.assertTrue(pair.dialer.is_open(sid))
        self.assertTrue(pair.dialer.send_fin(sid))
        self.assertEqual(pair.dialer.session_count, 0)
        self.assertFalse(pair.dialer.is_open(sid))
        pair.exchange()
        self.assertEqual(pair.events[LISTENER][-2:], [FinReceived(sid), SessionClosed(sid)])
        self.assertEqual(pair.listener.session_count, 0)

    def test_ids(self) -> None:
        """
        The dialer opens odd ids and the listener even ids, each increasing.
        """
        pair = ConnectionPair().establish()
        self.assertEqual([pair.dialer.open_session("a") for _ in range(3)], [1, 3, 5])
        self.assertEqual([pair.listener.open_session("b") for _ in range(3)], [2, 4, 6])
        pair.exchange()
        opened = [e.session_id for e in pair.events[LISTENER] if isinstance(e, SessionOpened)]
        self.assertEqual(opened, [1, 3, 5])
        opened = [e.session_id for e in pair.events[DIALER] if isinstance(e, SessionOpened)]
        self.assertEqual(opened, [2, 4, 6])

    def test_session_limit(self) -> None:
        """
        The peer's limit stops C{open_session}; an OPEN over our own limit
        is refused with a C{SESSION_LIMIT} RESET and the link lives.
        """
        pair = ConnectionPair(listener_config=LinkConfig(max_sessions=2)).establish()
        pair.dialer.open_session("a")
        pair.dialer.open_session("b")
        self.assertFalse(pair.dialer.can_open())
        e = self.assertRaises(LocalProtocolError, pair.dialer.open_session, "c")
        self.assertIn("limit", str(e))
        pair.exchange()
        events = pair.inject(LISTENER, encode_open(5, b"c", b"xyz"))
        self.assertEqual(events, [])
        [reset] = frames_of(pair.listener.data_to_send())
        self.assertEqual((reset.type, reset.session_id), (FrameType.RESET, 5))
        self.assertEqual(int.from_bytes(reset.payload[:4], "big"), ErrorCode.SESSION_LIMIT)
        self.assertIs(pair.listener.state, State.OPEN)


class LateFrameTests(SynchronousTestCase):
    """
    Frames for sessions that were open and are gone are dropped silently.
    """

    def test_after_local_reset(self) -> None:
        """
        DATA, FIN, WINDOW and RESET for a session this side reset are dropped
        without an event or a reply.
        """
        pair = ConnectionPair().establish()
        sid = pair.dialer.open_session("svc")
        pair.exchange()
        pair.listener.reset_session(sid, ErrorCode.CANCEL, "no")
        pair.pull(LISTENER)
        for frame in [raw_frame(FrameType.DATA, sid, b"late"), encode_window(sid, 5),
                      encode_fin(sid), encode_reset(sid, 0)]:
            self.assertEqual(pair.listener.receive_data(frame), [])
        self.assertEqual(pair.listener.data_to_send(), b"")

    def test_late_data_returns_connection_credit(self) -> None:
        """
        Late DATA still counts against the connection budget and is given
        back: enough of it makes the receiver send a connection WINDOW, and
        the sender never runs dry.
        """
        config = LinkConfig(session_window=4096, connection_budget=4096)
        pair = ConnectionPair(listener_config=config).establish()
        sid = pair.dialer.open_session("svc")
        pair.exchange()
        pair.listener.reset_session(sid)
        pair.pull(LISTENER)
        for _ in range(4):
            pair.inject(LISTENER, raw_frame(FrameType.DATA, sid, b"x" * 1024))
        windows = [f for f in frames_of(pair.listener.data_to_send())
                   if f.type == FrameType.WINDOW]
        self.assertEqual(
            [(f.session_id, int.from_bytes(f.payload, "big")) for f in windows],
            [(0, 2048), (0, 2048)],
        )
        # Without the credit back, a fifth KiB would overrun the budget.
        pair.inject(LISTENER, raw_frame(FrameType.DATA, sid, b"x" * 1024))

    def test_late_frames_after_close_on_dialer(self) -> None:
        """
        The dialer also drops frames for its own sessions once closed.
        """
        pair = ConnectionPair().establish()
        sid = pair.dialer.open_session("svc")
        pair.dialer.send_fin(sid)
        pair.exchange()
        pair.listener.send_fin(sid)
        pair.exchange()
        self.assertEqual(pair.dialer.session_count, 0)
        self.assertEqual(pair.dialer.receive_data(raw_frame(FrameType.DATA, sid, b"z")), [])
        self.assertEqual(pair.dialer.receive_data(encode_reset(sid, 1)), [])


class GoAwayTests(SynchronousTestCase):
    """
    GOAWAY drains a link: sessions in flight finish, new ones are refused.
    """

    def test_open_sessions_finish(self) -> None:
        """
        After the listener's GOAWAY, the dialer learns the last session the
        listener accepted, and sessions already open carry data both ways and
        close cleanly; then the link is drained.
        """
        pair = ConnectionPair().establish()
        sid = pair.dialer.open_session("svc", b"hi")
        pair.exchange()
        self.assertFalse(pair.listener.is_drained())
        pair.listener.goaway(reason="maintenance")
        self.assertTrue(pair.listener.goaway_sent)
        new = pair.exchange()
        self.assertEqual(new[DIALER], [GoAwayReceived(sid, ErrorCode.NO_ERROR, "maintenance")])
        self.assertTrue(pair.dialer.goaway_received)
        self.assertFalse(pair.dialer.is_drained())
        pair.dialer.send_data(sid, b"more")
        pair.listener.send_data(sid, b"answer")
        pair.dialer.send_fin(sid)
        pair.listener.send_fin(sid)
        new = pair.exchange()
        self.assertEqual(new[LISTENER], [DataReceived(sid, b"more"), FinReceived(sid),
                                         SessionClosed(sid)])
        self.assertEqual(new[DIALER], [DataReceived(sid, b"answer"), FinReceived(sid),
                                       SessionClosed(sid)])
        self.assertTrue(pair.listener.is_drained())
        self.assertTrue(pair.dialer.is_drained())

    def test_no_new_sessions_either_way(self) -> None:
        """
        After a GOAWAY neither side may open a session: C{can_open} is false
        and C{open_session} raises L{LocalProtocolError}.
        """
        pair = ConnectionPair().establish()
        pair.listener.goaway()
        pair.exchange()
        for conn in (pair.dialer, pair.listener):
            self.assertFalse(conn.can_open())
            e = self.assertRaises(LocalProtocolError, conn.open_session, "svc")
            self.assertIn("GOAWAY", str(e))

    def test_peer_open_refused(self) -> None:
        """
        An OPEN that arrives after our GOAWAY is refused with a
        C{GOING_AWAY} RESET, and its first bytes' connection credit comes
        back (here half a window: a connection WINDOW).
        """
        pair = ConnectionPair(listener_config=LinkConfig(session_window=4096)).establish()
        pair.listener.goaway()
        pair.pull(LISTENER)
        events = pair.inject(LISTENER, encode_open(1, b"svc", b"x" * 2048))
        self.assertEqual(events, [])
        frames = frames_of(pair.listener.data_to_send())
        self.assertEqual([(f.type, f.session_id) for f in frames],
                         [(FrameType.RESET, 1), (FrameType.WINDOW, 0)])
        self.assertEqual(int.from_bytes(frames[0].payload[:4], "big"), ErrorCode.GOING_AWAY)
        self.assertEqual(int.from_bytes(frames[1].payload, "big"), 2048)
        self.assertEqual(pair.listener.session_count, 0)
        self.assertTrue(pair.listener.is_drained())

    def test_crossing_open(self) -> None:
        """
        A session the dialer opened while the GOAWAY was on its way is reset
        on both sides with C{GOING_AWAY}; the earlier session survives.
        """
        pair = ConnectionPair().establish()
        first = pair.dialer.open_session("a")
        pair.exchange()
        pair.listener.goaway()
        pair.pull(LISTENER)
        late = pair.dialer.open_session("b")
        pair.pull(DIALER)
        at_listener = pair.deliver(DIALER)
        at_dialer = pair.deliver(LISTENER)
        self.assertEqual(at_listener, [])
        self.assertEqual(
            at_dialer,
            [SessionReset(late, ErrorCode.GOING_AWAY, "", True),
             GoAwayReceived(first, ErrorCode.NO_ERROR, "")],
        )
        pair.exchange()
        self.assertEqual(pair.dialer.session_count, 1)
        self.assertEqual(pair.listener.session_count, 1)

    def test_sessions_above_last_reset(self) -> None:
        """
        Sessions this side opened above the GOAWAY's last id are reset, with
        C{GOING_AWAY}, before the L{GoAwayReceived} event; the others stay.
        """
        pair = ConnectionPair().establish()
        sids = [pair.dialer.open_session("s") for _ in range(3)]
        pair.exchange()
        events = pair.inject(DIALER, encode_goaway(sids[0], ErrorCode.NO_ERROR, "bye"))
        self.assertEqual(
            events,
            [SessionReset(sids[1], ErrorCode.GOING_AWAY, "bye", True),
             SessionReset(sids[2], ErrorCode.GOING_AWAY, "bye", True),
             GoAwayReceived(sids[0], ErrorCode.NO_ERROR, "bye")],
        )
        self.assertEqual(pair.dialer.session_count, 1)

    def test_error_goaway_received(self) -> None:
        """
        A GOAWAY with an error code ends every session with that code.
        """
        pair = ConnectionPair().establish()
        sid = pair.dialer.open_session("s")
        pair.exchange()
        events = pair.inject(DIALER, encode_goaway(sid, ErrorCode.INTERNAL_ERROR, "oops"))
        self.assertEqual(types(events), [GoAwayReceived, SessionReset])
        self.assertEqual(events[1].code, ErrorCode.INTERNAL_ERROR)
        self.assertIn("INTERNAL_ERROR oops", events[1].reason)
        self.assertTrue(pair.dialer.is_drained())

    def test_goaway_once(self) -> None:
        """
        A second graceful GOAWAY sends nothing more.
        """
        pair = ConnectionPair().establish()
        pair.listener.goaway()
        pair.listener.goaway()
        frames = frames_of(pair.listener.data_to_send())
        self.assertEqual([f.type for f in frames], [FrameType.GOAWAY])

    def test_goaway_with_error_ends_link(self) -> None:
        """
        A GOAWAY with an error code puts this side in its error state.
        """
        pair = ConnectionPair().establish()
        pair.dialer.goaway(ErrorCode.INTERNAL_ERROR, "shutting down")
        self.assertIs(pair.dialer.state, State.ERROR)
        [frame] = frames_of(pair.dialer.data_to_send())
        self.assertEqual(
            decode_goaway(frame.payload), (0, ErrorCode.INTERNAL_ERROR, "shutting down")
        )
        self.assertRaises(LocalProtocolError, pair.dialer.receive_data, b"")
        pair.dialer.goaway()
        self.assertEqual(pair.dialer.data_to_send(), b"")

    def test_not_drained_without_goaway(self) -> None:
        """
        A link with no sessions is not drained until a GOAWAY went.
        """
        pair = ConnectionPair().establish()
        self.assertFalse(pair.dialer.is_drained())
        self.assertFalse(pair.listener.is_drained())


class ActionTests(SynchronousTestCase):
    """
    The application's actions, and their misuse.
    """

    def test_not_open_yet(self) -> None:
        """
        Sessions cannot be opened or used before the link is open.
        """
        dialer = LinkConnection(DIALER, clock=FakeClock())
        self.assertFalse(dialer.can_open())
        self.assertRaises(LocalProtocolError, dialer.open_session, "svc")
        self.assertRaises(LocalProtocolError, dialer.send_data, 1, b"x")
        self.assertRaises(LocalProtocolError, dialer.send_fin, 1)

    def test_bad_targets(self) -> None:
        """
        An empty target and one over C{MAX_TARGET} bytes are refused.
        """
        pair = ConnectionPair().establish()
        self.assertRaises(LocalProtocolError, pair.dialer.open_session, "")
        self.assertRaises(LocalProtocolError, pair.dialer.open_session, "é" * (MAX_TARGET // 2 + 1))
        self.assertEqual(pair.dialer.open_session("é" * (MAX_TARGET // 2)), 1)

    def test_unknown_session(self) -> None:
        """
        Sending on a session that is not open raises; resetting one that
        never existed raises, one that is gone is ignored.
        """
        pair = ConnectionPair().establish()
        self.assertRaises(LocalProtocolError, pair.dialer.send_data, 1, b"x")
        self.assertRaises(LocalProtocolError, pair.dialer.reset_session, 1)
        sid = pair.dialer.open_session("svc")
        pair.dialer.reset_session(sid)
        pair.dialer.reset_session(sid)
        frames = frames_of(pair.dialer.data_to_send())
        self.assertEqual([f.type for f in frames], [FrameType.OPEN, FrameType.RESET])

    def test_data_after_fin(self) -> None:
        """
        Writing after our own FIN raises; a second FIN is a no-op.
        """
        pair = ConnectionPair().establish()
        sid = pair.dialer.open_session("svc")
        pair.dialer.send_fin(sid)
        self.assertRaises(LocalProtocolError, pair.dialer.send_data, sid, b"x")
        self.assertFalse(pair.dialer.send_fin(sid))
        frames = frames_of(pair.dialer.data_to_send())
        self.assertEqual([f.type for f in frames], [FrameType.OPEN, FrameType.FIN])

    def test_send_if_open(self) -> None:
        """
        C{send_if_open} sends as C{send_data} does; on a session that is
        gone, or a link that is not open, it drops the data and returns
        C{False}; after our FIN it raises.
        """
        pair = ConnectionPair().establish()
        sid = pair.dialer.open_session("svc")
        self.assertFalse(pair.dialer.send_if_open(sid, b"abc"))
        self.assertFalse(pair.dialer.send_if_open(sid, b""))
        pair.dialer.reset_session(sid)
        self.assertFalse(pair.dialer.send_if_open(sid, b"dropped"))
        frames = frames_of(pair.dialer.data_to_send())
        self.assertEqual(
            [(f.type, f.payload) for f in frames[:2]],
            [(FrameType.OPEN, b"\x00\x03svc"), (FrameType.DATA, b"abc")],
        )
        self.assertEqual([f.type for f in frames[2:]], [FrameType.RESET])
        fin = pair.dialer.open_session("svc")
        pair.dialer.send_fin(fin)
        self.assertRaises(LocalProtocolError, pair.dialer.send_if_open, fin, b"x")
        other = pair.listener.open_session("back")
        pair.exchange()
        pair.dialer.goaway(ErrorCode.INTERNAL_ERROR, "bye")
        self.assertTrue(pair.dialer.is_open(other))
        self.assertFalse(pair.dialer.send_if_open(other, b"x"))
        self.assertEqual(
            [f.type for f in frames_of(pair.dialer.data_to_send())], [FrameType.GOAWAY]
        )

    def test_reset_drops_queue(self) -> None:
        """
        Resetting a session drops what it had queued: only the RESET goes
        out, with our code and reason.
        """
        pair = ConnectionPair(listener_config=LinkConfig(session_window=4096)).establish()
        sid = pair.dialer.open_session("svc")
        pair.dialer.send_data(sid, b"x" * 10000)
        pair.pull(DIALER)
        pair.dialer.reset_session(sid, ErrorCode.CONNECT_FAILED, "refused by service")
        [frame] = frames_of(pair.dialer.data_to_send())
        self.assertEqual(frame, Frame(FrameType.RESET, 0, sid,
                                      b"\x00\x00\x00\x0frefused by service"))
        pair.inject(DIALER, encode_window(0, 4096))
        self.assertEqual(pair.dialer.data_to_send(), b"")

    def test_control_messages(self) -> None:
        """
        Application control messages travel both ways as
        L{ControlReceived}; the hello type is reserved.
        """
        pair = ConnectionPair().establish()
        pair.dialer.send_control({"type": "share", "name": "blog"})
        pair.listener.send_control({"type": "refused", "reason": "limit"})
        new = pair.exchange()
        self.assertEqual(new[LISTENER], [ControlReceived({"type": "share", "name": "blog"})])
        self.assertEqual(new[DIALER], [ControlReceived({"type": "refused", "reason": "limit"})])
        self.assertRaises(LocalProtocolError, pair.dialer.send_control, {"type": "hello"})

    def test_control_before_open(self) -> None:
        """
        A dialer may send control messages right away (after its hello); a
        listener only once it has answered the preamble.
        """
        clock = FakeClock()
        dialer = LinkConnection(DIALER, clock=clock)
        dialer.send_control({"type": "auth"})
        listener = LinkConnection(LISTENER, clock=clock)
        self.assertRaises(LocalProtocolError, listener.send_control, {"type": "x"})
        events = listener.receive_data(dialer.data_to_send())
        self.assertEqual(types(events), [LinkEstablished, ControlReceived])
        listener.send_control({"type": "welcome"})
        self.assertEqual(
            types(dialer.receive_data(listener.data_to_send())),
            [LinkEstablished, ControlReceived],
        )

    def test_connection_lost(self) -> None:
        """
        Losing the transport ends every open session with an error, never a
        clean close, and the link is closed for good.
        """
        pair = ConnectionPair().establish()
        a = pair.dialer.open_session("a")
        b = pair.dialer.open_session("b")
        events = pair.dialer.connection_lost()
        self.assertEqual(
            events,
            [SessionReset(a, ErrorCode.INTERNAL_ERROR, "link connection lost", True),
             SessionReset(b, ErrorCode.INTERNAL_ERROR, "link connection lost", True)],
        )
        self.assertIs(pair.dialer.state, State.CLOSED)
        self.assertEqual(pair.dialer.session_count, 0)
        self.assertRaises(LocalProtocolError, pair.dialer.receive_data, b"")
        self.assertEqual(pair.dialer.tick(), [])
        self.assertIsNone(pair.dialer.next_deadline())
        self.assertRaises(LocalProtocolError, pair.dialer.open_session, "c")
        self.assertRaises(LocalProtocolError, pair.dialer.send_control, {"type": "x"})


class SessionBytesTests(SynchronousTestCase):
    """
    L{LinkConnection.session_bytes}: the payload each session carried, for
    the relay's listings.
    """

    def test_counted(self) -> None:
        """
        Bytes of OPEN and DATA frames count, each way and per session;
        bytes queued beyond the credit count once they leave; a session
        that is gone reads (0, 0).
        """
        from nfltr.link import LinkConfig

        pair = ConnectionPair(LinkConfig(session_window=1024)).establish()
        sid = pair.dialer.open_session("svc", b"hello")
        other = pair.dialer.open_session("svc")
        pair.exchange()
        pair.dialer.send_data(sid, b"x" * 2000)  # 1019 fit the window now
        pair.listener.send_data(sid, b"y" * 7)
        pair.exchange()
        self.assertEqual(pair.dialer.session_bytes(sid), (1024, 7))
        self.assertEqual(pair.listener.session_bytes(sid)[0], 7)
        self.assertEqual(pair.dialer.session_bytes(other), (0, 0))
        self.assertEqual(pair.dialer.session_bytes(99), (0, 0))


class CoalescedDataTests(SynchronousTestCase):
    """
    The DATA frames of one session that one input brings, when one of them
    is large, come as one L{DataReceived} carrying C{bytes}.
    """

    def test_runOfOneSession(self) -> None:
        """
        Consecutive large DATA frames of a session are one event, their
        payloads joined in order, as C{bytes}; a frame of another session,
        or another event, ends a run.
        """
        pair = ConnectionPair().establish()
        a = pair.dialer.open_session("svc")
        b = pair.dialer.open_session("svc")
        pair.exchange()
        big = [bytes([n]) * VIEW_MIN for n in range(4)]
        for piece in big[:2]:
            pair.dialer.send_data(a, piece)
        pair.dialer.send_data(b, big[2])
        pair.dialer.send_data(a, big[3])
        pair.dialer.send_fin(a)
        pair.dialer.send_data(b, b"small")
        events = pair.send(DIALER)
        self.assertEqual(events, [
            DataReceived(a, big[0] + big[1]), DataReceived(b, big[2]), DataReceived(a, big[3]),
            FinReceived(a), DataReceived(b, b"small"),
        ])
        for event in events:
            if isinstance(event, DataReceived):
                self.assertIs(type(event.data), bytes)

    def test_smallFrames(self) -> None:
        """
        An input of small DATA frames only gives one event per frame.
        """
        pair = ConnectionPair().establish()
        sid = pair.dialer.open_session("svc")
        pair.exchange()
        pair.dialer.send_data(sid, b"one")
        pair.dialer.send_data(sid, b"two")
        self.assertEqual(pair.send(DIALER), [DataReceived(sid, b"one"), DataReceived(sid, b"two")])

    def test_splitInput(self) -> None:
        """
        A large frame that spans inputs, and one that ends in the second
        input, arrive whole and in order whatever the split.
        """
        pair = ConnectionPair().establish()
        sid = pair.dialer.open_session("svc")
        pair.exchange()
        pair.dialer.send_data(sid, b"a" * VIEW_MIN)
        pair.dialer.send_data(sid, b"b" * VIEW_MIN)
        pair.pull(DIALER)
        first = pair.deliver(DIALER, VIEW_MIN // 2)
        rest = pair.deliver(DIALER)
        self.assertEqual(b"".join(e.data for e in first + rest), b"a" * VIEW_MIN + b"b" * VIEW_MIN)
        self.assertTrue(all(type(e.data) is bytes for e in first + rest))

    def test_credit(self) -> None:
        """
        Coalesced bytes are consumed like the frames they came in: credit
        goes back as for separate frames.
        """
        pair = ConnectionPair(LinkConfig(session_window=4 * VIEW_MIN)).establish()
        sid = pair.dialer.open_session("svc")
        pair.exchange()
        pair.dialer.send_data(sid, b"z" * (2 * VIEW_MIN))
        pair.dialer.send_data(sid, b"z" * (2 * VIEW_MIN))
        [event] = pair.send(DIALER)
        self.assertEqual(len(event.data), 4 * VIEW_MIN)
        self.assertTrue(pair.listener.consumed(sid, len(event.data)))
        pair.send(LISTENER)
        self.assertFalse(pair.dialer.send_data(sid, b"z" * (4 * VIEW_MIN)))
        self.assertEqual(len(pair.send(DIALER)[0].data), 4 * VIEW_MIN)
