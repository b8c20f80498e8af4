# -*- test-case-name: tests.link.test_connection -*-
"""
The receiving half of a L{LinkConnection}: one handler per frame type, and
the accounting of received bytes (per-session credit, the connection
budget, and the WINDOWs that return them as the application consumes).

A frame for a session that was open once and is gone is dropped (DATA still
returns its connection credit); a frame for an id never opened is a link
error.  Session-scope faults reset that session; link-scope faults raise
L{RemoteProtocolError}.
"""

from __future__ import annotations

from typing import Any

from ._control import HELLO, decode_message
from ._errors import ErrorCode, LocalProtocolError, RemoteProtocolError, code_name
from ._events import (
    ControlReceived,
    DataReceived,
    FinReceived,
    GoAwayReceived,
    PongReceived,
    SessionAccepted,
    SessionClosed,
    SessionOpened,
    SessionReset,
)
from ._frames import (
    WANT_ACCEPT,
    Frame,
    FrameType,
    decode_coded,
    decode_goaway,
    decode_open,
    decode_u32,
    encode_accept,
    encode_ping,
    encode_reset,
    encode_window,
    tuple_new,
)
from ._liveness import LivenessTracker
from ._sending import Sender
from ._session import ACCEPTED, ANSWERED, AWAITING, OWED, SessionState
from ._state import State

Event = Any
# A module global: read on every delivered chunk (L{Receiver.consumed}).
_OPEN = State.OPEN


class Receiver(Sender):
    """
    Frame handlers and receive-side credit; L{LinkConnection} holds the
    state they read, declared here.
    """

    goaway_sent: bool
    goaway_received: bool
    state: State
    _budget: int
    _conn_grant: int
    _session_grant: int
    _accepts: bool
    _local_parity: int
    _next_local: int
    _highest_peer: int
    _peer_open: int
    _local_open: int
    _recv_conn_credit: int
    _recv_conn_ungranted: int
    _liveness: LivenessTracker | None
    _ping_payload: bytes | None
    _ping_tokens: float
    _ping_refill_at: float

    def _session(self, frame: Frame) -> SessionState | None:
        """
        The frame's session, C{None} if it is gone.

        @raise RemoteProtocolError: C{UNKNOWN_SESSION}, never opened.
        """
        sid = frame.session_id
        s = self._sessions.get(sid)
        if s is None and not self._was_opened(sid):
            raise RemoteProtocolError(
                ErrorCode.UNKNOWN_SESSION,
                f"{FrameType(frame.type).name} frame for session {sid}, which was never opened",
            )
        return s

    def _was_opened(self, sid: int) -> bool:
        if sid & 1 == self._local_parity:
            return sid < self._next_local
        return sid <= self._highest_peer

    def _on_open(self, frame: Frame, events: list[Event]) -> None:
        sid = frame.session_id
        if sid & 1 == self._local_parity or sid <= self._highest_peer:
            raise RemoteProtocolError(
                ErrorCode.PROTOCOL_ERROR,
                f"OPEN with session id {sid}: wrong parity, reused or not increasing",
            )
        self._highest_peer = sid
        raw_target, first = decode_open(frame.payload)
        try:
            target = raw_target.decode("utf-8")
        except UnicodeDecodeError:
            raise RemoteProtocolError(
                ErrorCode.PROTOCOL_ERROR, "OPEN target is not UTF-8"
            ) from None
        self._take_conn_credit(len(first))
        if len(first) > self.config.session_window:
            raise RemoteProtocolError(
                ErrorCode.FLOW_CONTROL_ERROR, f"OPEN carries {len(first)} bytes, over the window"
            )
        if self.goaway_sent or self._peer_open >= self.config.max_sessions:
            code = ErrorCode.GOING_AWAY if self.goaway_sent else ErrorCode.SESSION_LIMIT
            self._out.append(encode_reset(sid, code, "refused: " + code.name.lower()))
            self._release_conn(len(first))
            return
        window = self.config.session_window
        # Without first bytes, the credit is the int object shared by every session.
        s = SessionState(sid, False, self._peer_window, window - len(first) if first else window)
        s.received = len(first)
        want = bool(frame.flags & WANT_ACCEPT) and self._accepts  # else flags are ignored
        if want:
            s.accept = OWED
        self._sessions[sid] = s
        self._peer_open += 1
        events.append(SessionOpened(sid, target, bytes(first), want))

    def _on_accept(self, frame: Frame, events: list[Event]) -> None:
        s = self._session(frame)
        if s is None:
            return  # gone: this side reset it, or the session ended
        sid = s.session_id
        if s.accept == ACCEPTED:
            raise RemoteProtocolError(
                ErrorCode.PROTOCOL_ERROR, f"a second ACCEPT for session {sid}"
            )
        if s.accept != AWAITING:
            raise RemoteProtocolError(
                ErrorCode.PROTOCOL_ERROR,
                f"ACCEPT for session {sid}, which this side did not open with WANT_ACCEPT",
            )
        if s.received or s.fin_received:
            raise RemoteProtocolError(
                ErrorCode.PROTOCOL_ERROR, f"ACCEPT for session {sid} after its DATA or FIN"
            )
        s.accept = ACCEPTED
        events.append(SessionAccepted(sid))

    def _take_conn_credit(self, n: int) -> None:
        if n > self._recv_conn_credit:
            raise self._over_budget(n)
        self._recv_conn_credit -= n

    def _over_budget(self, n: int) -> RemoteProtocolError:
        return RemoteProtocolError(
            ErrorCode.FLOW_CONTROL_ERROR,
            f"{n} bytes of data exceed the connection budget ({self._recv_conn_credit} left)",
        )

    def _on_data(self, frame: Frame, events: list[Event]) -> None:
        # Runs once per DATA frame: the common case inline, the rest in
        # _refuse_data.
        sid = frame.session_id
        payload = frame.payload
        n = len(payload)
        if sid == 0:
            raise RemoteProtocolError(ErrorCode.PROTOCOL_ERROR, "DATA frame on session 0")
        credit = self._recv_conn_credit - n
        if credit < 0:
            raise self._over_budget(n)
        self._recv_conn_credit = credit
        s = self._sessions.get(sid)
        if s is None or s.fin_received or n > s.recv_credit:
            self._refuse_data(frame, s, events)
            return
        s.recv_credit -= n
        s.received += n
        events.append(tuple_new(DataReceived, (sid, payload)))

    def _refuse_data(self, frame: Frame, s: SessionState | None, events: list[Event]) -> None:
        """
        DATA (already taken from the connection budget) that its session
        cannot take: gone, FINed, or over its credit.  Its budget goes back.
        """
        n = len(frame.payload)
        if s is None:
            self._session(frame)  # raises if the session was never opened
            self._release_conn(n)
        elif s.fin_received:
            self._release_conn(n)
            self._reset_by_us(s, ErrorCode.SESSION_CLOSED, "DATA after FIN", events)
        else:
            self._release_conn(n)
            self._reset_by_us(
                s, ErrorCode.FLOW_CONTROL_ERROR,
                f"{n} bytes of DATA exceed the session's credit of {s.recv_credit}", events,
            )

    def _on_fin(self, frame: Frame, events: list[Event]) -> None:
        s = self._session(frame)
        if s is None:
            return
        if s.fin_received:
            self._reset_by_us(s, ErrorCode.SESSION_CLOSED, "second FIN", events)
            return
        s.fin_received = True
        events.append(FinReceived(s.session_id))
        if s.fin_sent:
            self._remove(s)
            events.append(SessionClosed(s.session_id))

    def _on_reset(self, frame: Frame, events: list[Event]) -> None:
        s = self._session(frame)
        if s is not None:
            code, reason = decode_coded(frame.payload, 0)
            self._remove(s)
            events.append(SessionReset(s.session_id, code, reason, True))

    def _on_window(self, frame: Frame, events: list[Event], now: float) -> None:
        increment = decode_u32(frame.payload)
        if increment == 0:
            raise RemoteProtocolError(ErrorCode.PROTOCOL_ERROR, "WINDOW with a zero increment")
        if frame.session_id == 0:
            self._grant_conn(increment, events)
            return
        s = self._session(frame)
        if s is None or s.fin_sent:
            return
        if s.send_credit + increment > self._peer_window:
            self._reset_by_us(
                s, ErrorCode.FLOW_CONTROL_ERROR,
                f"WINDOW of {increment} pushes the credit over the window {self._peer_window}",
                events,
            )
            return
        s.send_credit += increment
        self._flush_session(s, events)

    def _on_ping(self, frame: Frame, events: list[Event], now: float) -> None:
        rate = self.config.ping_rate
        self._ping_tokens = min(4 * rate, self._ping_tokens + (now - self._ping_refill_at) * rate)
        self._ping_refill_at = now
        if self._ping_tokens < 1:
            raise RemoteProtocolError(
                ErrorCode.ENHANCE_YOUR_CALM, f"more than {rate:g} PINGs per second"
            )
        self._ping_tokens -= 1
        self._out.append(encode_ping(frame.payload, pong=True))

    def _on_pong(self, frame: Frame, events: list[Event], now: float) -> None:
        liveness = self._liveness
        if frame.payload == self._ping_payload and liveness and liveness.ping_sent_at is not None:
            self._ping_payload = None
            events.append(PongReceived(now - liveness.ping_sent_at))

    def _on_goaway(self, frame: Frame, events: list[Event], now: float) -> None:
        last, code, reason = decode_goaway(frame.payload)
        self.goaway_received = True
        for s in [s for s in self._sessions.values() if s.local and s.session_id > last]:
            self._remove(s)
            events.append(SessionReset(s.session_id, ErrorCode.GOING_AWAY, reason, True))
        events.append(GoAwayReceived(last, code, reason))
        if code != ErrorCode.NO_ERROR:
            why = f"link closed by the peer: {code_name(code)} {reason}".rstrip()
            for s in list(self._sessions.values()):
                self._remove(s)
                events.append(SessionReset(s.session_id, code, why, True))

    def _on_control(self, frame: Frame, events: list[Event], now: float) -> None:
        message = decode_message(frame.payload)
        if message["type"] == HELLO:
            raise RemoteProtocolError(ErrorCode.PROTOCOL_ERROR, "a second hello")
        events.append(ControlReceived(message))

    def _reset_by_us(
        self, s: SessionState, code: ErrorCode, reason: str, events: list[Event]
    ) -> None:
        self._out.append(encode_reset(s.session_id, code, reason))
        self._remove(s)
        events.append(SessionReset(s.session_id, code, reason, False))

    def _remove(self, s: SessionState) -> None:
        del self._sessions[s.session_id]
        self._ready.pop(s.session_id, None)
        self._throttled.pop(s.session_id, None)
        self._queued -= s.pending_bytes
        if s.local:
            self._local_open -= 1
        else:
            self._peer_open -= 1

    def _release_conn(self, n: int) -> None:
        """
        Give back the connection budget of C{n} received bytes that no
        session takes (the frame was refused or its session is gone).
        """
        self.consumed(0, n)

    def awaits_accept(self, sid: int) -> bool:
        """
        Whether session C{sid}, opened here with C{want_accept}, still waits
        for the peer's ACCEPT.
        """
        s = self._sessions.get(sid)
        return s is not None and s.accept == AWAITING

    def owes_accept(self, sid: int) -> bool:
        """
        Whether the peer's OPEN of session C{sid} asked for an ACCEPT that
        this side has not sent.
        """
        s = self._sessions.get(sid)
        return s is not None and s.accept == OWED

    def accept_session(self, sid: int) -> bool:
        """
        Answer the peer's OPEN of session C{sid}, flagged C{WANT_ACCEPT},
        with ACCEPT (once; this side's first DATA or FIN sends it
        otherwise).

        @return: whether an ACCEPT was queued (not for a session whose OPEN
            wanted none, already answered, or gone).
        @raise LocalProtocolError: the session was never opened.
        """
        s = self._sessions.get(sid)
        if s is None and not self._was_opened(sid):
            raise LocalProtocolError(f"session {sid} was never opened")
        if s is None or s.accept != OWED or self.state is not State.OPEN:
            return False
        s.accept = ANSWERED
        self._out.append(encode_accept(sid))
        return True

    def consumed(self, sid: int, n: int) -> bool:
        """
        Report that C{n} received bytes of session C{sid} left its queue
        (delivered, or dropped because the session ended).  Credit goes back
        to the peer in one WINDOW per half window, for the connection budget
        and for the session (session 0: the connection budget only).

        @return: whether a WINDOW was queued (L{data_to_send} has it).
        """
        if n <= 0 or self.state is not _OPEN:
            return False
        ungranted = self._recv_conn_ungranted + n
        if ungranted + self._recv_conn_credit > self._budget:
            raise LocalProtocolError("consumed more bytes than were received")
        queued = ungranted >= self._conn_grant
        if queued:
            self._recv_conn_credit += ungranted
            self._out.append(encode_window(0, ungranted))
            ungranted = 0
        self._recv_conn_ungranted = ungranted
        s = self._sessions.get(sid)
        if s is None or s.fin_received:
            return queued
        ungranted = s.recv_ungranted + n
        if ungranted < self._session_grant:
            s.recv_ungranted = ungranted
            return queued
        s.recv_credit += ungranted
        s.recv_ungranted = 0
        self._out.append(encode_window(sid, ungranted))
        return True
