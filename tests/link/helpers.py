"""
Shared helpers for the link codec's tests.

L{ConnectionPair} wires a real dialer L{LinkConnection} to a real listener
and shuttles their output both ways (after h11's C{tests/helpers.py}), with a
tap that decodes every byte each side emits.  L{three_ways} splits an input
the three ways every decoder test runs: whole, one byte at a time, and
followed by trailing data.  L{FakeClock} is the only time source: no test
sleeps or reads the real clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import (
    DIALER,
    LISTENER,
    PREAMBLE,
    ErrorCode,
    FrameType,
    LinkConfig,
    LinkConnection,
    LocalProtocolError,
    RemoteProtocolError,
    State,
)
from nfltr.link._frames import HEADER, HEADER_SIZE, DecodeError, Frame, FrameDecoder, decode_goaway

# What follows an input in the "trailing data" mode: the first bytes of a
# PING header, a frame that is not complete and must stay buffered.
TRAILING = bytes([FrameType.PING, 0, 0, 0, 0])


class FakeClock:
    """
    A list-backed time source: calling it returns the last element of
    C{times}; tests move time only by appending.
    """

    def __init__(self, start: float = 100.0) -> None:
        self.times = [start]

    def __call__(self) -> float:
        return self.times[-1]

    def advance(self, seconds: float) -> None:
        """
        Move time forward by C{seconds}.
        """
        self.times.append(self.times[-1] + seconds)

    def set(self, when: float) -> None:
        """
        Move time to C{when}.
        """
        self.times.append(when)


def raw_frame(ftype: int, session_id: int, payload: bytes = b"", flags: int = 0,
              length: int | None = None) -> bytes:
    """
    Build one frame by hand, any type, any declared length.
    """
    size = len(payload) if length is None else length
    return HEADER.pack(ftype, flags, session_id, size) + payload


def frames_of(data: bytes) -> list[Frame]:
    """
    Decode complete frames (no preamble); fail if bytes are left over.
    """
    decoder = FrameDecoder()
    frames = decoder.feed(data)
    if decoder.buffered():
        raise AssertionError(f"{decoder.buffered()} bytes of an incomplete frame")
    return frames


def without_preamble(data: bytes) -> bytes:
    """
    Strip the preamble from the start of a side's first output.
    """
    if not data.startswith(PREAMBLE):
        raise AssertionError(f"output does not start with the preamble: {data[:16]!r}")
    return data[len(PREAMBLE):]


def three_ways(data: bytes, trailing: bytes = TRAILING) -> list[tuple[str, list[bytes], int]]:
    """
    The three ways to feed C{data}: whole, one byte at a time, and followed by
    C{trailing} in the same chunk.

    @return: C{(mode, chunks, trailing length)} for each mode.
    """
    return [
        ("whole", [data], 0),
        ("one byte at a time", [data[i : i + 1] for i in range(len(data))], 0),
        ("with trailing data", [data + trailing], len(trailing)),
    ]


def decode_three_ways(test: SynchronousTestCase, data: bytes, expected: Sequence[Frame]) -> None:
    """
    Assert that C{data} decodes to C{expected} fed whole, one byte at a time
    and with trailing data, which stays buffered.
    """
    for mode, chunks, extra in three_ways(data):
        decoder = FrameDecoder()
        frames: list[Frame] = []
        for chunk in chunks:
            frames += decoder.feed(chunk)
        test.assertEqual([tuple(f) for f in frames], [tuple(f) for f in expected], mode)
        test.assertEqual(decoder.buffered(), extra, mode)


def decode_error_three_ways(
    test: SynchronousTestCase, data: bytes, code: ErrorCode, before: int = 0
) -> None:
    """
    Assert that C{data} fails to decode with C{code} fed each of the three
    ways, after exactly C{before} good frames, holding at most one header.
    """
    for mode, chunks, _ in three_ways(data):
        decoder = FrameDecoder()
        frames: list[Frame] = []
        error = None
        for chunk in chunks:
            try:
                frames += decoder.feed(chunk)
            except DecodeError as e:
                frames += e.frames
                error = e.error
                break
        test.assertIsNotNone(error, mode)
        assert error is not None
        test.assertEqual(error.code, code, mode)
        test.assertEqual(len(frames), before, mode)
        test.assertLessEqual(decoder.buffered(), HEADER_SIZE, mode)


def feed(conn: LinkConnection, chunks: Sequence[bytes]) -> list[Any]:
    """
    Feed C{chunks} to C{conn} one by one; return all the events.
    """
    events: list[Any] = []
    for chunk in chunks:
        events += conn.receive_data(chunk)
    return events


def goaway_codes(frames: Sequence[Frame]) -> list[int]:
    """
    The error codes of the GOAWAY frames among C{frames}.
    """
    return [decode_goaway(f.payload)[1] for f in frames if f.type == FrameType.GOAWAY]


def assert_link_error(
    test: SynchronousTestCase, conn: LinkConnection, chunks: Sequence[bytes], code: ErrorCode,
    goaway: bool = True,
) -> RemoteProtocolError:
    """
    Feed C{chunks} to C{conn}: it must raise L{RemoteProtocolError} with
    C{code}, queue a GOAWAY carrying C{code} as its last frame (unless
    C{goaway} is false: then nothing at all), and fail stickily.
    """
    error = test.assertRaises(RemoteProtocolError, feed, conn, chunks)
    test.assertEqual(error.code, code)
    test.assertIs(conn.state, State.ERROR)
    out = conn.data_to_send()
    if goaway:
        if out.startswith(PREAMBLE):
            out = out[len(PREAMBLE):]
        frames = frames_of(out)
        test.assertEqual(frames[-1].type, FrameType.GOAWAY)
        test.assertEqual(goaway_codes(frames), [code])
    else:
        test.assertEqual(out, b"")
    test.assertRaises(LocalProtocolError, conn.receive_data, b"")
    test.assertRaises(LocalProtocolError, conn.receive_data, b"\x00")
    return error


class _Tap:
    """
    Decodes everything one side emits: its preamble, then frames.
    """

    def __init__(self) -> None:
        self.preamble = bytearray()
        self.decoder = FrameDecoder()
        self.frames: list[Frame] = []

    def see(self, data: bytes) -> list[Frame]:
        need = len(PREAMBLE) - len(self.preamble)
        if need > 0:
            self.preamble += data[:need]
            data = data[need:]
        frames = self.decoder.feed(data) if data else []
        self.frames += frames
        return frames


class ConnectionPair:
    """
    A real dialer wired to a real listener, sharing one L{FakeClock}.

    Output is first pulled from a side into its in-flight buffer (and decoded
    by that side's tap), then delivered, whole or in part, to the other side.

    @ivar events: every event each side reported, by role.
    @ivar taps: what each side sent, decoded when pulled, by role.
    @ivar arrived: what each side sent, decoded when delivered, by role.
    """

    def __init__(
        self, dialer_config: LinkConfig | None = None, listener_config: LinkConfig | None = None,
        *, clock: FakeClock | None = None, dialer_hello: dict[str, Any] | None = None,
        listener_hello: dict[str, Any] | None = None,
    ) -> None:
        self.clock = clock if clock is not None else FakeClock()
        self.dialer = LinkConnection(
            DIALER, dialer_config, clock=self.clock, app_hello=dialer_hello
        )
        self.listener = LinkConnection(
            LISTENER, listener_config, clock=self.clock, app_hello=listener_hello
        )
        self.conns = {DIALER: self.dialer, LISTENER: self.listener}
        self.events: dict[str, list[Any]] = {DIALER: [], LISTENER: []}
        self.taps = {DIALER: _Tap(), LISTENER: _Tap()}
        self.arrived = {DIALER: _Tap(), LISTENER: _Tap()}
        self.in_flight = {DIALER: bytearray(), LISTENER: bytearray()}

    @staticmethod
    def other(role: str) -> str:
        """
        The other role.
        """
        return LISTENER if role == DIALER else DIALER

    def pull(self, role: str) -> list[Frame]:
        """
        Take what C{role} has to send into its in-flight buffer.

        @return: the frames it emitted.
        """
        data = self.conns[role].data_to_send()
        self.in_flight[role] += data
        return self.taps[role].see(data)

    def deliver(self, role: str, size: int | None = None) -> list[Any]:
        """
        Deliver C{size} bytes (default: all) of C{role}'s in-flight output
        to the other side.

        @return: the events the other side reported.
        """
        buf = self.in_flight[role]
        size = len(buf) if size is None else min(size, len(buf))
        data = bytes(buf[:size])
        del buf[:size]
        if not data:
            return []
        self.arrived[role].see(data)
        peer = self.other(role)
        events = self.conns[peer].receive_data(data)
        self.events[peer] += events
        return events

    def send(self, role: str) -> list[Any]:
        """
        Pull and deliver everything C{role} has to send.

        @return: the events the other side reported.
        """
        self.pull(role)
        return self.deliver(role)

    def exchange(self) -> dict[str, list[Any]]:
        """
        Shuttle bytes both ways until neither side has anything to send.

        @return: the new events of each side, by role.
        """
        new: dict[str, list[Any]] = {DIALER: [], LISTENER: []}
        while True:
            self.pull(DIALER)
            self.pull(LISTENER)
            if not self.in_flight[DIALER] and not self.in_flight[LISTENER]:
                return new
            new[LISTENER] += self.deliver(DIALER)
            new[DIALER] += self.deliver(LISTENER)

    def establish(self) -> ConnectionPair:
        """
        Run the handshake; both sides must report the link established.
        """
        self.exchange()
        if not (self.dialer.established and self.listener.established):
            raise AssertionError("the handshake did not complete")
        return self

    def inject(self, role: str, data: bytes) -> list[Any]:
        """
        Feed hand-made bytes to C{role} as if its peer had sent them.
        """
        events = self.conns[role].receive_data(data)
        self.events[role] += events
        return events

    def sent_by(self, role: str) -> list[Frame]:
        """
        Everything C{role} has emitted so far, pulled and decoded.
        """
        self.pull(role)
        return self.taps[role].frames


def small_config(window: int = 4096, budget: int | None = None, **kwargs: Any) -> LinkConfig:
    """
    A config with a small window, so that credit runs out in a few frames.
    """
    return LinkConfig(session_window=window, connection_budget=budget, **kwargs)
