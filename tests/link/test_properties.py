"""
Property tests (hypothesis) for the link codec.

  - Any valid frame sequence, split at any points, decodes to the same
    frames.
  - Random bytes raise nothing but L{RemoteProtocolError} from
    C{receive_data}, which then leaves the connection failed for good with a
    GOAWAY carrying the error's code.
  - Under random interleavings of writes, partial deliveries, consumption
    (hence grants), FINs and RESETs over several sessions both ways, no
    sender ever has more bytes in flight than the receiver's window (per
    session) or budget (per connection), judged from the bytes on the wire;
    and once everything is consumed, all data arrives, in order.
"""

from __future__ import annotations

import itertools
import struct
from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import (
    DIALER,
    LISTENER,
    MAGIC,
    MAX_PAYLOAD,
    PREAMBLE,
    DataReceived,
    ErrorCode,
    FinReceived,
    FrameType,
    LinkConfig,
    LinkConnection,
    LocalProtocolError,
    RemoteProtocolError,
    SessionClosed,
    SessionOpened,
    SessionReset,
    State,
)
from nfltr.link._control import encode_message, hello_message
from nfltr.link._frames import DecodeError, Frame, FrameDecoder, decode_open, encode_control
from nfltr.link._liveness import DEFAULT_KEEPALIVE

from .helpers import ConnectionPair, FakeClock, goaway_codes, raw_frame

SETTINGS = settings(
    max_examples=300, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_FIXED = {
    FrameType.FIN: 0, FrameType.ACCEPT: 0, FrameType.WINDOW: 4, FrameType.PING: 8,
    FrameType.PONG: 8,
}
_MIN = {FrameType.OPEN: 2, FrameType.RESET: 4, FrameType.GOAWAY: 8}


@st.composite
def valid_frames(draw: Any) -> Frame:
    """
    Any frame the decoder must accept: a known type, any flags and session
    id, a payload of an allowed size for the type.
    """
    ftype = draw(st.sampled_from(list(FrameType)))
    if ftype in _FIXED:
        payload = draw(st.binary(min_size=_FIXED[ftype], max_size=_FIXED[ftype]))
    else:
        payload = draw(st.binary(min_size=_MIN.get(ftype, 0), max_size=300))
    flags = draw(st.integers(0, 255))
    sid = draw(st.integers(0, 2**32 - 1))
    return Frame(int(ftype), flags, sid, payload)


def splits(data: bytes, cuts: list[int]) -> list[bytes]:
    """
    Cut C{data} at the given offsets (any order, repeats allowed).
    """
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def dialer_prefix() -> bytes:
    """
    A valid preamble and dialer hello.
    """
    hello = hello_message("dialer", 4096, 8192, 4, DEFAULT_KEEPALIVE, {})
    return PREAMBLE + encode_control(encode_message(hello))


# Frames near the valid ones: every type number 0..11, small ids, payloads
# that are often, not always, of a valid size (some plausible OPENs, WINDOWs
# and control messages), and now and then an oversize length.
near_payloads = st.one_of(
    st.binary(max_size=40),
    st.integers(0, 2**32 - 1).map(lambda n: struct.pack("!I", n)),
    st.binary(min_size=8, max_size=8),
    st.tuples(st.binary(min_size=1, max_size=8), st.binary(max_size=20)).map(
        lambda t: struct.pack("!H", len(t[0])) + t[0] + t[1]
    ),
    st.sampled_from([b'{"type":"x"}', b'{"type":"hello"}', b"{}", b"[]", b'{"type":"a\\n"}']),
)
near_frames = st.builds(
    lambda t, f, s, p, big: raw_frame(t, s, p, flags=f, length=MAX_PAYLOAD + 1 if big else None),
    st.integers(0, 11), st.integers(0, 255), st.integers(0, 9), near_payloads,
    st.integers(0, 9).map(lambda n: n == 0),
)


class SplitTests(SynchronousTestCase):
    """
    Decoding does not depend on how the input is split.
    """

    @SETTINGS
    @given(st.lists(valid_frames(), max_size=12), st.lists(st.integers(0, 10**6), max_size=30))
    def test_any_split(self, frames: list[Frame], cuts: list[int]) -> None:
        """
        Valid frames, concatenated and cut anywhere, decode to themselves,
        with nothing left buffered.
        """
        data = b"".join(raw_frame(f.type, f.session_id, f.payload, f.flags) for f in frames)
        decoder = FrameDecoder()
        out: list[Frame] = []
        for chunk in splits(data, cuts):
            out += decoder.feed(chunk)
        self.assertEqual([tuple(f) for f in out], [tuple(f) for f in frames])
        self.assertEqual(decoder.buffered(), 0)

    @SETTINGS
    @given(st.binary(min_size=1, max_size=MAX_PAYLOAD), st.lists(st.integers(0, 10**6)))
    def test_large_data(self, body: bytes, cuts: list[int]) -> None:
        """
        A DATA frame of any size up to C{MAX_PAYLOAD}, cut anywhere, decodes
        whole.
        """
        decoder = FrameDecoder()
        out: list[Frame] = []
        for chunk in splits(raw_frame(FrameType.DATA, 1, body), cuts):
            out += decoder.feed(chunk)
        self.assertEqual(out, [Frame(FrameType.DATA, 0, 1, body)])


def header_valid(ftype: int, length: int) -> bool:
    """
    The spec's header rules, written out independently of the decoder.
    """
    if ftype not in (1, 2, 3, 4, 5, 6, 7, 8, 9) or length > 65536:
        return False
    fixed = {3: 0, 5: 4, 6: 8, 7: 8}
    minimum = {1: 2, 4: 4, 8: 8}
    if ftype in fixed:
        return length == fixed[ftype]
    return length >= minimum.get(ftype, 0)


class HeaderPropertyTests(SynchronousTestCase):
    """
    The decoder judges every header by the header alone, as the spec says.
    """

    @SETTINGS
    @given(st.integers(0, 255), st.integers(0, 255), st.integers(0, 2**32 - 1),
           st.one_of(st.integers(0, 70), st.integers(65530, 65540), st.integers(0, 2**32 - 1)))
    def test_header_verdict(self, ftype: int, flags: int, sid: int, length: int) -> None:
        """
        Ten header bytes, whole or one at a time, are refused at once exactly
        when the spec's rules reject them; an accepted header leaves exactly
        its 10 bytes buffered (unless the frame is already complete).
        """
        head = struct.pack("!BBII", ftype, flags, sid, length)
        for chunks in ([head], [head[i : i + 1] for i in range(10)]):
            decoder = FrameDecoder()
            try:
                frames: list[Frame] = []
                for chunk in chunks:
                    frames += decoder.feed(chunk)
            except DecodeError as e:
                self.assertFalse(header_valid(ftype, length))
                self.assertIn(e.error.code,
                              (ErrorCode.UNKNOWN_FRAME_TYPE, ErrorCode.FRAME_SIZE_ERROR))
                self.assertLessEqual(decoder.buffered(), 10)
            else:
                self.assertTrue(header_valid(ftype, length))
                if length:
                    self.assertEqual((frames, decoder.buffered()), ([], 10))
                else:
                    self.assertEqual(frames, [Frame(ftype, flags, sid, b"")])


class FuzzTests(SynchronousTestCase):
    """
    Whatever the peer sends, C{receive_data} raises only
    L{RemoteProtocolError}, after which the connection is sticky.
    """

    def feed_garbage(self, conn: LinkConnection, chunks: list[bytes]) -> None:
        """
        Feed C{chunks}; any error must be L{RemoteProtocolError}, leave the
        link in ERROR with a GOAWAY carrying its code last in the output
        (none after C{BAD_MAGIC}), and later input must raise
        L{LocalProtocolError}.  The output always decodes.
        """
        error = None
        for chunk in chunks:
            try:
                conn.receive_data(chunk)
            except RemoteProtocolError as e:
                error = e
                break
        out = conn.data_to_send()
        if out.startswith(PREAMBLE):
            out = out[len(PREAMBLE):]
        decoder = FrameDecoder()
        frames = decoder.feed(out)
        self.assertEqual(decoder.buffered(), 0)
        if error is None:
            self.assertNotIn(conn.state, (State.ERROR, State.CLOSED))
            return
        self.assertIs(conn.state, State.ERROR)
        if error.code == ErrorCode.BAD_MAGIC:
            self.assertEqual(goaway_codes(frames), [])
        else:
            self.assertEqual(frames[-1].type, FrameType.GOAWAY)
            self.assertEqual(goaway_codes(frames)[-1], error.code)
        self.assertRaises(LocalProtocolError, conn.receive_data, b"x")
        self.assertRaises(LocalProtocolError, conn.receive_data, b"")

    @SETTINGS
    @given(st.binary(max_size=3000), st.lists(st.integers(0, 10**6), max_size=20))
    def test_random_bytes_listener(self, data: bytes, cuts: list[int]) -> None:
        """
        Random bytes to a fresh listener.
        """
        listener = LinkConnection(LISTENER, clock=FakeClock())
        self.feed_garbage(listener, splits(data, cuts))

    @SETTINGS
    @given(st.binary(max_size=3000), st.lists(st.integers(0, 10**6), max_size=20))
    def test_random_bytes_after_magic(self, data: bytes, cuts: list[int]) -> None:
        """
        The magic then random bytes (a random version, then garbage).
        """
        listener = LinkConnection(LISTENER, clock=FakeClock())
        self.feed_garbage(listener, splits(MAGIC + data, cuts))

    @SETTINGS
    @given(st.binary(max_size=3000), st.lists(st.integers(0, 10**6), max_size=20))
    def test_random_bytes_after_hello(self, data: bytes, cuts: list[int]) -> None:
        """
        A valid preamble and hello, then random bytes.
        """
        listener = LinkConnection(LISTENER, clock=FakeClock())
        listener.receive_data(dialer_prefix())
        self.feed_garbage(listener, splits(data, cuts))

    @SETTINGS
    @given(st.lists(near_frames, max_size=25), st.lists(st.integers(0, 10**6), max_size=20))
    def test_near_valid_frames_listener(self, frames: list[bytes], cuts: list[int]) -> None:
        """
        A valid preamble and hello, then frames of every type number with
        small ids and mostly plausible payloads.
        """
        listener = LinkConnection(LISTENER, clock=FakeClock())
        listener.receive_data(dialer_prefix())
        self.feed_garbage(listener, splits(b"".join(frames), cuts))

    @SETTINGS
    @given(st.lists(near_frames, max_size=25), st.lists(st.integers(0, 10**6), max_size=20))
    def test_near_valid_frames_dialer(self, frames: list[bytes], cuts: list[int]) -> None:
        """
        The same against an established dialer with open sessions.
        """
        pair = ConnectionPair(LinkConfig(session_window=4096)).establish()
        for target in "abc":
            pair.dialer.open_session(target, b"x" * 100)
        pair.exchange()
        self.feed_garbage(pair.dialer, splits(b"".join(frames), cuts))

    @SETTINGS
    @given(st.dictionaries(
        st.sampled_from(["type", "role", "window", "budget", "max_sessions", "app",
                         "keepalive", "version"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
            lambda inner: st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["interval", "timeout", "preset"]), inner),
            max_leaves=6,
        ),
    ))
    def test_random_hello(self, fields: dict[str, Any]) -> None:
        """
        A hello with random field values is accepted or refused with
        C{PROTOCOL_ERROR}, never another exception.
        """
        message = hello_message("dialer", 4096, 8192, 4, DEFAULT_KEEPALIVE, {})
        message.update(fields)
        try:
            payload = encode_message(message)
        except ValueError:
            payload = repr(message).encode()
        listener = LinkConnection(LISTENER, clock=FakeClock())
        self.feed_garbage(listener, [PREAMBLE + encode_control(payload)])


def _ops() -> Any:
    side = st.sampled_from([DIALER, LISTENER])
    index = st.integers(0, 4)
    return st.lists(
        st.one_of(
            st.tuples(st.just("write"), side, index, st.integers(1, 20000)),
            st.tuples(st.just("deliver"), side, st.integers(1, 40000)),
            st.tuples(st.just("consume"), side, index, st.integers(1, 20000)),
            st.tuples(st.just("fin"), side, index),
            st.tuples(st.just("reset"), side, index),
        ),
        max_size=80,
    )


_PATTERN = bytes(range(251)) * 400


class _FlowModel:
    """
    Drives a L{ConnectionPair} and checks credit on the wire.

    @ivar sent: bytes each sender emitted, per C{(sender, session)}; session
        0 is the total.
    @ivar granted: credit the receiver's WINDOWs gave each sender, counted
        when they arrive at the sender.
    """

    def __init__(self, test: SynchronousTestCase, dconf: LinkConfig, lconf: LinkConfig,
                 opens: list[tuple[str, int]]) -> None:
        self.test = test
        self.pair = ConnectionPair(dconf, lconf).establish()
        self.limits = {
            DIALER: (lconf.session_window, lconf.budget),
            LISTENER: (dconf.session_window, dconf.budget),
        }
        self.sent: dict[tuple[str, int], int] = defaultdict(int)
        self.granted: dict[tuple[str, int], int] = defaultdict(int)
        self.written: dict[tuple[str, int], bytearray] = defaultdict(bytearray)
        self.received: dict[tuple[str, int], bytearray] = defaultdict(bytearray)
        self.unconsumed: dict[tuple[str, int], int] = defaultdict(int)
        self.known: set[tuple[str, int]] = set()
        self.closed: set[tuple[str, int]] = set()
        self.fins: set[tuple[str, int]] = set()
        self.fin_received: set[tuple[str, int]] = set()
        self.reset: set[int] = set()
        self.counter = 0
        self.sessions: list[int] = []
        for role, first in opens:
            data = self.pattern(first)
            sid = self.pair.conns[role].open_session(f"svc{len(self.sessions)}", data)
            self.written[(role, sid)] += data
            self.known.add((role, sid))
            self.sessions.append(sid)
        self.pull()

    def pattern(self, n: int) -> bytes:
        start = self.counter % 251
        self.counter += n
        return _PATTERN[start : start + n] if n <= len(_PATTERN) - 251 else bytes(n)

    def pull(self) -> None:
        for role in (DIALER, LISTENER):
            for f in self.pair.pull(role):
                if f.type == FrameType.DATA:
                    n = len(f.payload)
                elif f.type == FrameType.OPEN:
                    n = len(decode_open(f.payload)[1])
                else:
                    continue
                self.sent[(role, f.session_id)] += n
                self.sent[(role, 0)] += n
                self.check(role, f.session_id)

    def check(self, sender: str, sid: int) -> None:
        window, budget = self.limits[sender]
        in_flight = self.sent[(sender, sid)] - self.granted[(sender, sid)]
        self.test.assertLessEqual(in_flight, window, f"{sender} session {sid}")
        in_flight = self.sent[(sender, 0)] - self.granted[(sender, 0)]
        self.test.assertLessEqual(in_flight, budget, f"{sender} connection")

    def deliver(self, role: str, size: int | None = None) -> None:
        peer = self.pair.other(role)
        before = len(self.pair.arrived[role].frames)
        events = self.pair.deliver(role, size)
        for f in self.pair.arrived[role].frames[before:]:
            if f.type == FrameType.WINDOW:
                self.granted[(peer, f.session_id)] += int.from_bytes(f.payload, "big")
        for e in events:
            self.on_event(peer, e)
        self.pull()

    def on_event(self, role: str, e: Any) -> None:
        if isinstance(e, SessionOpened):
            self.known.add((role, e.session_id))
            self.received[(role, e.session_id)] += e.first_bytes
            self.unconsumed[(role, e.session_id)] += len(e.first_bytes)
        elif isinstance(e, DataReceived):
            self.received[(role, e.session_id)] += e.data
            self.unconsumed[(role, e.session_id)] += len(e.data)
        elif isinstance(e, FinReceived):
            self.fin_received.add((role, e.session_id))
        elif isinstance(e, SessionClosed):
            self.closed.add((role, e.session_id))
        elif isinstance(e, SessionReset):
            self.closed.add((role, e.session_id))
            self.reset.add(e.session_id)

    def run(self, op: tuple[Any, ...]) -> None:
        kind, role = op[0], op[1]
        conn = self.pair.conns[role]
        if kind == "deliver":
            self.deliver(role, op[2])
            return
        if not self.sessions:
            return
        sid = self.sessions[op[2] % len(self.sessions)]
        key = (role, sid)
        if kind == "consume":
            n = min(op[3], self.unconsumed[key])
            if n:
                conn.consumed(sid, n)
                self.unconsumed[key] -= n
        elif key in self.closed or key not in self.known:
            return
        elif kind == "reset":
            conn.reset_session(sid)
            self.closed.add(key)
            self.reset.add(sid)
        elif key in self.fins:
            return
        elif kind == "write":
            data = self.pattern(op[3])
            conn.send_data(sid, data)
            self.written[key] += data
        elif kind == "fin":
            self.fins.add(key)
            if conn.send_fin(sid):
                self.closed.add(key)
        self.pull()

    def finish(self) -> None:
        """
        Consume everything and shuttle until quiet.
        """
        for _ in range(10000):
            for key, n in list(self.unconsumed.items()):
                if n:
                    self.pair.conns[key[0]].consumed(key[1], n)
                    self.unconsumed[key] = 0
            self.pull()
            if not any(self.pair.in_flight.values()) and not any(self.unconsumed.values()):
                return
            self.deliver(DIALER)
            self.deliver(LISTENER)
        self.test.fail("the link never went quiet")

    def verify(self) -> None:
        for (role, sid), data in self.written.items():
            got = bytes(self.received[(self.pair.other(role), sid)])
            if sid in self.reset:
                self.test.assertEqual(got, bytes(data[: len(got)]), f"{role} {sid}")
                continue
            self.test.assertEqual(got, bytes(data), f"{role} session {sid}")
            if (role, sid) in self.fins:
                self.test.assertIn((self.pair.other(role), sid), self.fin_received)


class CreditPropertyTests(SynchronousTestCase):
    """
    Credit is never exceeded, and everything arrives in order.
    """

    @SETTINGS
    @given(
        st.sampled_from([1024, 4096, 70000]),
        st.sampled_from([1, 2, 3]),
        st.sampled_from([1024, 8192]),
        st.sampled_from([1, 4]),
        st.lists(st.tuples(st.sampled_from([DIALER, LISTENER]), st.integers(0, 9000)),
                 min_size=1, max_size=5),
        _ops(),
    )
    def test_credit(self, lwin: int, lmul: int, dwin: int, dmul: int,
                    opens: list[tuple[str, int]], ops: list[tuple[Any, ...]]) -> None:
        """
        Random writes, partial deliveries, consumption, FINs and RESETs on up
        to five sessions both ways: every sender's bytes in flight stay
        within the receiver's window and budget; once all is consumed every
        byte written arrives, in order, with its FIN.
        """
        model = _FlowModel(
            self,
            LinkConfig(session_window=dwin, connection_budget=dwin * dmul),
            LinkConfig(session_window=lwin, connection_budget=lwin * lmul),
            opens,
        )
        for op in ops:
            model.run(op)
        model.finish()
        model.verify()
