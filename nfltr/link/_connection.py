# -*- test-case-name: tests.link.test_connection -*-
"""
L{LinkConnection}: the sans-I/O state machine of one link.

It is fed the bytes received from the peer (L{LinkConnection.receive_data})
and returns events; the application's actions (open a session, send, FIN,
RESET, GOAWAY, consumed bytes) queue frames that L{LinkConnection.data_to_send}
hands out.  Time comes from a callable given at construction; timers are the
caller's: it calls L{LinkConnection.tick} at L{LinkConnection.next_deadline}.

Session ids: the dialer opens odd ids, the listener even ids, each side in
increasing order.  A frame for a session that was open once and is gone is
dropped; a frame for an id that was never opened is a link error.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from ._config import LinkConfig
from ._control import HELLO, Hello, decode_message, encode_message, hello_message, parse_hello
from ._errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from ._events import (
    LinkEstablished,
    LinkTimedOut,
    SessionClosed,
    SessionReset,
    coalesce_data,
)
from ._frames import (
    MAGIC,
    MAX_PAYLOAD,
    MAX_TARGET,
    PREAMBLE,
    PREAMBLE_SIZE,
    VERSION,
    WANT_ACCEPT,
    DecodeError,
    Frame,
    FrameDecoder,
    FrameType,
    encode_control,
    encode_goaway,
    encode_open,
    encode_ping,
    encode_reset,
    pack_header,
)
from ._liveness import LivenessTracker
from ._receiving import Receiver
from ._session import AWAITING, OWED, SessionState
from ._state import State

Event = Any
DIALER = "dialer"
LISTENER = "listener"
_MAX_SESSION_ID = (1 << 32) - 1
_PING = struct.Struct("!Q")
_DATA = int(FrameType.DATA)


_OPEN = State.OPEN


class LinkConnection(Receiver):
    """
    One end of a link.

    @ivar state: the connection's L{State}.
    @ivar peer: the peer's L{Hello}, once it arrived.
    @ivar goaway_sent: this side sent GOAWAY (no new sessions either way).
    @ivar goaway_received: the peer sent GOAWAY.
    """

    def __init__(
        self, role: str, config: LinkConfig | None = None, *,
        clock: Callable[[], float], app_hello: dict[str, Any] | None = None,
        accepts: bool = True,
    ) -> None:
        """
        @param accepts: announce C{accepts} in the hello (a test's older peer
            does not).
        """
        if role not in (DIALER, LISTENER):
            raise LocalProtocolError(f"role must be {DIALER!r} or {LISTENER!r}")
        super().__init__(config or LinkConfig())
        self.role = role
        self._clock = clock
        self._app_hello = dict(app_hello or {})
        self._accepts = accepts
        self.state = State.PREAMBLE
        self.peer: Hello | None = None
        self._decoder = FrameDecoder()
        self._preamble = bytearray()
        self._local_parity = 1 if role == DIALER else 0
        self._next_local = 1 if role == DIALER else 2
        self._highest_peer = 0
        self._peer_open = 0
        self._local_open = 0
        self._budget = self.config.budget
        self._recv_conn_credit = self._budget
        self._recv_conn_ungranted = 0
        # Consumed bytes go back in one WINDOW per half window: per session,
        # and for the connection per half the smaller of window and budget.
        self._session_grant = self.config.session_window // 2
        self._conn_grant = min(self.config.session_window, self._budget) // 2
        self.goaway_sent = False
        self.goaway_received = False
        now = clock()
        self._handshake_deadline = now + self.config.handshake_timeout
        self._liveness: LivenessTracker | None = None
        # When the last bytes arrived, until the tracker is told (see
        # _tracker): receive_data only records it.
        self._received_at: float | None = None
        self._ping_payload: bytes | None = None
        self._ping_count = 0
        self._ping_tokens = 4 * self.config.ping_rate
        self._ping_refill_at = now
        if role == DIALER:
            self._out += [PREAMBLE, self._hello_frame()]

    # -- inspection ---------------------------------------------------------

    @property
    def established(self) -> bool:
        """
        Both hellos have been exchanged and the link is usable.
        """
        return self.state is State.OPEN

    @property
    def session_count(self) -> int:
        """
        How many sessions are open, either way.
        """
        return len(self._sessions)

    def session_bytes(self, sid: int) -> tuple[int, int]:
        """
        The payload bytes session C{sid} sent and received so far ((0, 0)
        once it is gone), for listings.
        """
        s = self._sessions.get(sid)
        return (0, 0) if s is None else (s.sent, s.received)

    def can_open(self) -> bool:
        """
        Whether L{open_session} would succeed now.
        """
        return (
            self.state is State.OPEN and not self.goaway_sent and not self.goaway_received
            and self.peer is not None and self._local_open < self.peer.max_sessions
            and self._next_local <= _MAX_SESSION_ID
        )

    def is_drained(self) -> bool:
        """
        A GOAWAY went either way and no session is left.
        """
        return (self.goaway_sent or self.goaway_received) and not self._sessions

    # -- receiving ----------------------------------------------------------

    def receive_data(self, data: bytes | memoryview) -> list[Event]:
        """
        Process bytes from the peer.  C{data} may be a view of a buffer its
        owner reuses once this returns: nothing returned or kept refers to
        it.

        @return: the events they caused, in order.
        @raise RemoteProtocolError: the peer broke the protocol; a GOAWAY is
            queued, the connection is in L{State.ERROR}, and the error's
            C{events} hold the events decoded before the fault.
        @raise LocalProtocolError: the connection already failed or closed.
        """
        if self.state in (State.ERROR, State.CLOSED):
            raise LocalProtocolError(f"receive_data on a link that is {self.state.value}")
        events: list[Event] = []
        now = self._clock()
        try:
            self._received_at = now
            if self.state is State.PREAMBLE:
                data = self._receive_preamble(data)
            if data:
                try:
                    frames, error = self._decoder.feed(data), None
                except DecodeError as e:
                    frames, error = e.frames, e.error
                try:
                    for frame in frames:
                        if frame.type == _DATA and self.state is _OPEN:
                            self._on_data(frame, events)
                        else:
                            self._dispatch(frame, events, now)
                finally:
                    if self._decoder.viewed:
                        events[:] = coalesce_data(events)
                if error is not None:
                    raise error
            if self._throttled:
                self._wake(events)
        except RemoteProtocolError as e:
            self._fail(e.code, e.reason)
            e.events = events
            raise
        return events

    def _receive_preamble(self, data: bytes | memoryview) -> bytes | memoryview:
        buf = self._preamble
        need = PREAMBLE_SIZE - len(buf)
        buf += data[:need]
        n = min(len(buf), len(MAGIC))
        if buf[:n] != MAGIC[:n]:
            raise RemoteProtocolError(
                ErrorCode.BAD_MAGIC, "the peer does not speak the link protocol"
            )
        if len(buf) < PREAMBLE_SIZE:
            return b""
        version = buf[-1]
        if version != VERSION:
            if self.role == LISTENER:
                self._out.append(PREAMBLE)
            raise RemoteProtocolError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"the peer speaks link version {version}; this side speaks version {VERSION}",
            )
        self.state = State.HELLO
        if self.role == LISTENER:
            self._out += [PREAMBLE, self._hello_frame()]
        return data[need:]

    def _hello_frame(self) -> bytes:
        c = self.config
        keepalive = c.keepalive if self.role == DIALER else None
        message = hello_message(
            self.role, c.session_window, c.budget, c.max_sessions, keepalive, self._app_hello,
            self._accepts,
        )
        return encode_control(encode_message(message))

    def _dispatch(self, frame: Frame, events: list[Event], now: float) -> None:
        # DATA on an open link is handled by receive_data's loop itself.
        ftype = frame.type
        if self.state is State.HELLO:
            if ftype == FrameType.GOAWAY:
                # The peer refuses the link before its hello (its handshake
                # timeout, say): report its code rather than a bare
                # "expected hello".
                self._on_goaway(frame, events, now)
                return
            if ftype != FrameType.CONTROL:
                raise RemoteProtocolError(
                    ErrorCode.PROTOCOL_ERROR,
                    f"expected hello, got a {FrameType(ftype).name} frame",
                )
            self._on_hello(frame, events, now)
        elif ftype in _SESSION_HANDLERS:
            if frame.session_id == 0:
                raise RemoteProtocolError(
                    ErrorCode.PROTOCOL_ERROR, f"{FrameType(ftype).name} frame on session 0"
                )
            _SESSION_HANDLERS[ftype](self, frame, events)
        else:
            if frame.session_id != 0 and ftype != FrameType.WINDOW:
                raise RemoteProtocolError(
                    ErrorCode.PROTOCOL_ERROR,
                    f"{FrameType(ftype).name} frame on session {frame.session_id}",
                )
            _LINK_HANDLERS[ftype](self, frame, events, now)

    def _on_hello(self, frame: Frame, events: list[Event], now: float) -> None:
        message = decode_message(frame.payload)
        expect = LISTENER if self.role == DIALER else DIALER
        hello = parse_hello(message, expect)
        self.peer = hello
        # Never more credit than this side would grant: a peer announcing
        # 2**30 must not make us write a GiB for it.  Both sides clamp alike,
        # so the window in force is the smaller of the two each way, and
        # credit comes back at half of it (see consumed).
        c = self.config
        window = min(hello.window, c.session_window)
        budget = min(hello.budget, self._budget)
        self._send_conn_credit = budget
        self._peer_budget = budget
        self._peer_window = window
        self._session_grant = window // 2
        self._conn_grant = window // 2
        keepalive = hello.keepalive if hello.keepalive is not None else self.config.keepalive
        self._liveness = LivenessTracker(keepalive, now)
        self.state = State.OPEN
        events.append(LinkEstablished(hello))

    # -- the application's actions -----------------------------------------

    def _check_open(self) -> None:
        if self.state is not State.OPEN:
            raise LocalProtocolError(f"the link is {self.state.value}")

    def open_session(self, target: str, first_bytes: bytes = b"", want_accept: bool = False,
                     ) -> int:
        """
        Open a session to C{target}, sending C{first_bytes} with the OPEN as
        far as the credit allows (the rest follows as DATA).  With
        C{want_accept}, towards a peer whose hello said C{accepts}, the OPEN
        is flagged C{WANT_ACCEPT}: L{awaits_accept} until the peer's
        L{SessionAccepted} (or its reset).

        @return: the new session id.
        @raise LocalProtocolError: the link is not open, a GOAWAY went either
            way, the peer's session limit is reached, or the target is bad.
        """
        self._check_open()
        if not self.can_open():
            raise LocalProtocolError(
                "no new sessions on this link: " + (
                    "a GOAWAY was exchanged" if self.goaway_sent or self.goaway_received
                    else "the peer's session limit is reached"
                )
            )
        raw = target.encode("utf-8")
        if not 0 < len(raw) <= MAX_TARGET:
            raise LocalProtocolError(f"target must be 1..{MAX_TARGET} bytes of UTF-8")
        sid = self._next_local
        self._next_local += 2
        s = SessionState(sid, True, self._peer_window, self.config.session_window)
        assert self.peer is not None  # can_open
        flags = WANT_ACCEPT if want_accept and self.peer.accepts else 0
        if flags:
            s.accept = AWAITING
        self._sessions[sid] = s
        self._local_open += 1
        room = min(MAX_PAYLOAD - 2 - len(raw), s.send_credit, self._send_conn_credit)
        first = first_bytes[: max(room, 0)] if not self._holding else b""
        if first:  # else the credit stays the int object shared by every session
            s.send_credit -= len(first)
            s.sent += len(first)
            self._send_conn_credit -= len(first)
        self._out.append(encode_open(sid, raw, first, flags))
        if len(first) < len(first_bytes):
            self.send_data(sid, first_bytes[len(first):])
        return sid

    def _local_session(self, sid: int) -> SessionState:
        self._check_open()
        s = self._sessions.get(sid)
        if s is None:
            raise LocalProtocolError(f"session {sid} is not open")
        return s

    def send_data(self, sid: int, data: bytes) -> bool:
        """
        Send C{data} on a session, queueing what exceeds its credit.

        @return: C{True} if the session's queue is over the high-water mark:
            pause whatever produces its data until L{SessionWritable}.
        @raise LocalProtocolError: the session is not open or was FINed.
        """
        self._local_session(sid)
        return self.send_if_open(sid, data)

    def send_if_open(self, sid: int, data: bytes, head: bytes | None = None) -> bool:
        """
        L{send_data}, except that a session that is gone (a frame received
        earlier ended it) or a link that is not open drops C{data} and
        returns C{False} instead of raising.

        @param head: bytes sent before C{data}, in the same frame when both
            fit the credit (without joining them: a record header and its
            payload).
        @raise LocalProtocolError: the session was FINed.
        """
        s = self._sessions.get(sid)
        if s is None or self.state is not _OPEN:
            return False
        if s.fin_queued:
            raise LocalProtocolError(f"session {sid}: data after FIN")
        if s.accept == OWED:
            self.accept_session(sid)
        n = len(data) if head is None else len(head) + len(data)
        if n <= s.send_credit and n <= self._send_conn_credit and n <= MAX_PAYLOAD \
                and n and not s.pending and not self._holding:
            # Within the credit and nothing queued before: one frame now.
            s.send_credit -= n
            s.sent += n
            self._send_conn_credit -= n
            if head is None:
                self._out += (pack_header(_DATA, 0, sid, n), data)
            else:
                self._out += (pack_header(_DATA, 0, sid, n), head, data)
            return s.over_high
        return self._enqueue(s, data if head is None else head + data)

    def is_open(self, sid: int) -> bool:
        """
        Whether session C{sid} is open (in either direction).
        """
        return sid in self._sessions

    def is_over_high(self, sid: int) -> bool:
        """
        Whether a session's send queue is over its high-water mark (its
        producer should be paused until L{SessionWritable}).
        """
        s = self._sessions.get(sid)
        return s is not None and s.over_high

    def send_fin(self, sid: int) -> bool:
        """
        Half-close a session: FIN follows the data already queued.

        @return: C{True} if this closed the session (the peer's FIN had come
            and nothing was queued).
        """
        s = self._local_session(sid)
        if s.fin_queued:
            return False
        if s.accept == OWED:
            self.accept_session(sid)
        s.fin_queued = True
        events: list[Event] = []
        self._flush_session(s, events)
        return any(isinstance(e, SessionClosed) for e in events)

    def reset_session(self, sid: int, code: int = ErrorCode.CANCEL, reason: str = "") -> None:
        """
        Abort a session; queued data is dropped.  A session that is already
        gone is ignored.
        """
        if self.state is not State.OPEN:
            return
        s = self._sessions.get(sid)
        if s is None:
            if not self._was_opened(sid):
                raise LocalProtocolError(f"session {sid} was never opened")
            return
        self._remove(s)
        self._out.append(encode_reset(sid, code, reason))

    def send_control(self, message: dict[str, Any]) -> None:
        """
        Send an application control message.
        """
        if self.state in (State.ERROR, State.CLOSED) or (
            self.role == LISTENER and self.state is State.PREAMBLE
        ):
            raise LocalProtocolError(f"cannot send control messages: link {self.state.value}")
        if message.get("type") == HELLO:
            raise LocalProtocolError("the hello is sent by the link itself")
        try:
            self._out.append(encode_control(encode_message(message)))
        except ValueError as e:
            raise LocalProtocolError(f"cannot send control message: {e}") from None

    def goaway(self, code: int = ErrorCode.NO_ERROR, reason: str = "") -> None:
        """
        Stop accepting sessions: open ones may finish; the peer learns the
        last session id this side accepted.  A non-zero code ends the link.
        """
        if self.state is State.CLOSED or self.state is State.ERROR:
            return
        if self.goaway_sent and code == ErrorCode.NO_ERROR:
            return
        self.goaway_sent = True
        if self.state is State.PREAMBLE and self.role == LISTENER:
            # Not known to be a link yet: nothing to tell, just stop.
            self.state = State.ERROR if code != ErrorCode.NO_ERROR else self.state
            return
        self._out.append(encode_goaway(self._highest_peer, code, reason))
        if code != ErrorCode.NO_ERROR:
            self.state = State.ERROR

    def _fail(self, code: ErrorCode, reason: str) -> None:
        if self.state in (State.ERROR, State.CLOSED):
            return
        if code != ErrorCode.BAD_MAGIC:
            if self.state is State.PREAMBLE and self.role == LISTENER and not self._out:
                self._out.append(PREAMBLE)
            self._out.append(encode_goaway(self._highest_peer, code, reason))
        self.state = State.ERROR

    # -- time ---------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """
        When L{tick} should next be called, or C{None}.
        """
        if self.state in (State.ERROR, State.CLOSED):
            return None
        liveness = self._tracker()
        if liveness is None:
            return self._handshake_deadline
        return liveness.deadline()

    def tick(self) -> list[Event]:
        """
        Act on the clock: send a PING, or declare the link dead.
        """
        if self.state in (State.ERROR, State.CLOSED):
            return []
        now = self._clock()
        liveness = self._tracker()
        if liveness is None:
            if now < self._handshake_deadline:
                return []
            why = f"no hello within {self.config.handshake_timeout:g}s"
            self._fail(ErrorCode.TIMEOUT, why)
            return [LinkTimedOut(why)]
        action = liveness.poll(now)
        if action == "dead":
            ka = liveness.keepalive
            why = f"nothing received for {ka.interval + ka.timeout:g}s ({ka.describe()})"
            self._fail(ErrorCode.TIMEOUT, why)
            return [LinkTimedOut(why)]
        if action == "ping":
            self._ping_count += 1
            self._ping_payload = _PING.pack(self._ping_count)
            self._out.append(encode_ping(self._ping_payload))
        return []

    def _tracker(self) -> LivenessTracker | None:
        """
        The liveness tracker (C{None} before the hello), told of the last
        read first.
        """
        liveness = self._liveness
        if liveness is not None and self._received_at is not None:
            liveness.received(self._received_at)
        self._received_at = None
        return liveness

    def connection_lost(self) -> list[Event]:
        """
        The transport is gone: every session ends.

        @return: a L{SessionReset} for each session that was still open.
        """
        events = [
            SessionReset(sid, ErrorCode.INTERNAL_ERROR, "link connection lost", True)
            for sid in self._sessions
        ]
        self._sessions.clear()
        self._ready.clear()
        self._throttled.clear()
        self._queued = 0
        self.state = State.CLOSED
        return events


_SESSION_HANDLERS: dict[int, Callable[[Receiver, Frame, list[Event]], None]] = {
    FrameType.OPEN: Receiver._on_open,
    FrameType.FIN: Receiver._on_fin,
    FrameType.RESET: Receiver._on_reset,
    FrameType.DATA: Receiver._on_data,
    FrameType.ACCEPT: Receiver._on_accept,
}
_LINK_HANDLERS: dict[int, Callable[[Receiver, Frame, list[Event], float], None]] = {
    FrameType.WINDOW: Receiver._on_window,
    FrameType.PING: Receiver._on_ping,
    FrameType.PONG: Receiver._on_pong,
    FrameType.GOAWAY: Receiver._on_goaway,
    FrameType.CONTROL: Receiver._on_control,
}
