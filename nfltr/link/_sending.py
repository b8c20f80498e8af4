# -*- test-case-name: tests.link.test_flow -*-
"""
The sending half of a L{LinkConnection}: credit, send queues, fairness, and
the bounds on what waits to be sent.

A session sends while it has both its own credit (granted by the peer per
session) and connection credit (the peer's budget over all sessions).  What
exceeds either waits in the session's queue.  Sessions blocked only by the
connection budget wait in C{_ready}, an insertion-ordered set served round
robin, one frame each, when connection credit returns: no event walks all
sessions.

Three link-wide conditions make every session that leaves bytes queued ask
its producer to pause (its write returns "over high water", as its own
high-water mark does), and only those sessions are resumed, with
L{SessionWritable}, once none of them holds:

  - B{held}: the transport is full (L{Sender.hold}); DATA waits in the
    session queues, not in the transport, until L{Sender.release};
  - B{queue limit}: the bytes in all session queues went over
    C{config.send_queue_limit}; the condition ends at half of it;
  - B{pressure}: the process is over its memory limit
    (L{Sender.set_pressure}, from L{nfltr.link.memory.LinkMemory}).
"""

from __future__ import annotations

from typing import Any

from ._config import LinkConfig
from ._errors import ErrorCode, RemoteProtocolError
from ._events import SessionClosed, SessionWritable
from ._frames import MAX_PAYLOAD, FrameType, encode_fin, pack_header
from ._session import SessionState

_DATA = int(FrameType.DATA)


class Sender:
    """
    Credit accounting and outgoing frames.

    @ivar _out: encoded frames (and payload slices) not yet handed out.
    @ivar _send_conn_credit: bytes the peer's budget still admits.
    @ivar _peer_window: the peer's per-session window.
    @ivar _ready: sessions with queued data and session credit, waiting for
        connection credit (or for the transport, while held).
    @ivar _queued: the bytes in all session send queues.
    @ivar _holding: DATA is held: the transport is full.
    @ivar _pressure: the process is over its memory limit.
    @ivar _queue_over: C{_queued} went over the queue limit and has not been
        back at half of it since.
    @ivar _throttled: the sessions asked to pause for one of the link-wide
        conditions of the module, to resume once none holds.
    """

    def __init__(self, config: LinkConfig) -> None:
        self.config = config
        self._out: list[bytes | memoryview] = []
        self._sessions: dict[int, SessionState] = {}
        self._ready: dict[int, None] = {}
        self._send_conn_credit = 0
        self._peer_window = 0
        self._peer_budget = 0
        self._queued = 0
        self._holding = False
        self._pressure = False
        self._queue_over = False
        self._queue_limit = config.queue_limit
        self._throttled: dict[int, None] = {}

    def data_to_send(self) -> bytes:
        """
        Everything queued for the peer, as one string; empties the queue.
        """
        out = self._out
        if not out:
            return b""
        self._out = []
        return b"".join(out)  # one bytes item comes back as it is, uncopied

    def _enqueue(self, s: SessionState, data: bytes) -> bool:
        """
        Queue C{data} on C{s} and send what the credit allows: the path of
        data that cannot leave at once as one frame (see
        L{LinkConnection.send_if_open}).

        @return: whether C{s}'s producer should pause: its queue is over the
            high-water mark, or it left bytes queued while a link-wide
            condition of the module holds.
        """
        n = len(data)
        if n == 0:
            return s.over_high
        s.pending.append(data)
        s.pending_bytes += n
        self._queued += n
        self._flush_session(s, None)
        if s.pending_bytes > self.config.high_water:
            s.over_high = True
        elif s.pending:
            if self._queued > self._queue_limit:
                self._queue_over = True
            if (self._holding or self._pressure or self._queue_over) and not s.over_high:
                s.over_high = True
                self._throttled[s.session_id] = None
        return s.over_high

    def _flush_session(self, s: SessionState, events: list[Any] | None, frames: int = -1) -> None:
        """
        Send what credit allows from C{s}'s queue (at most C{frames} frames
        if C{frames} >= 0), then its FIN if it was asked for and due.
        """
        out = self._out
        pending = s.pending
        while (
            pending and frames != 0 and s.send_credit > 0 and self._send_conn_credit > 0
            and not self._holding
        ):
            chunk = pending[0]
            n = min(len(chunk), s.send_credit, self._send_conn_credit, MAX_PAYLOAD)
            if n == len(chunk):
                pending.popleft()
            else:
                view = chunk if isinstance(chunk, memoryview) else memoryview(chunk)
                pending[0] = view[n:]
                chunk = view[:n]
            out += (pack_header(_DATA, 0, s.session_id, n), chunk)
            s.send_credit -= n
            s.sent += n
            self._send_conn_credit -= n
            s.pending_bytes -= n
            self._queued -= n
            frames -= 1
        if pending:
            if s.send_credit > 0:
                self._ready[s.session_id] = None
        elif s.fin_queued and not s.fin_sent:
            s.fin_sent = True
            out.append(encode_fin(s.session_id))
            if s.fin_received:
                self._remove(s)
                if events is not None:
                    events.append(SessionClosed(s.session_id))
                return
        if (
            s.over_high and s.pending_bytes <= self.config.high_water // 2
            and s.session_id not in self._throttled
        ):
            s.over_high = False
            if events is not None:
                events.append(SessionWritable(s.session_id))

    def _grant_conn(self, increment: int, events: list[Any]) -> None:
        if self._send_conn_credit + increment > self._peer_budget:
            raise RemoteProtocolError(
                ErrorCode.FLOW_CONTROL_ERROR,
                f"connection WINDOW of {increment} pushes the credit over the peer's "
                f"budget of {self._peer_budget}",
            )
        self._send_conn_credit += increment
        self._serve_ready(events, None)

    def _serve_ready(self, events: list[Any], limit: int | None) -> None:
        """
        Serve the ready sessions in turn, one frame each, while connection
        credit lasts and the transport is not full (and until C{limit}
        bytes were sent, if given).
        """
        ready = self._ready
        start = self._queued
        while ready and self._send_conn_credit > 0 and not self._holding:
            if limit is not None and start - self._queued >= limit:
                return
            sid = next(iter(ready))
            del ready[sid]
            s = self._sessions.get(sid)
            if s is not None:
                self._flush_session(s, events, frames=1)

    # -- the link-wide conditions (see the module) ---------------------------

    @property
    def window(self) -> int:
        """
        The session window in force each way: the smaller of the two
        sides' (0 before the peer's hello).
        """
        return self._peer_window

    @property
    def queued_bytes(self) -> int:
        """
        The bytes waiting in all session send queues.
        """
        return self._queued

    @property
    def holding(self) -> bool:
        """
        Whether DATA is held (L{hold}).
        """
        return self._holding

    def hold(self) -> None:
        """
        The transport is full: send no DATA (it waits in the session
        queues) until L{release}.  Every other frame still goes out.
        """
        self._holding = True

    def release(self, limit: int) -> list[Any]:
        """
        The transport drained: send DATA again, at most C{limit} bytes of
        what waited (round robin over the sessions, one frame each); call
        again while L{has_backlog} and the transport takes more.

        @return: the events of the sessions served (L{SessionWritable},
            L{SessionClosed}), and the resumption of the paused ones.
        """
        self._holding = False
        events: list[Any] = []
        self._serve_ready(events, limit)
        self._wake(events)
        return events

    def has_backlog(self) -> bool:
        """
        Whether queued DATA could be sent now (credit is there).
        """
        return bool(self._ready) and self._send_conn_credit > 0 and not self._holding

    def set_pressure(self, pressed: bool) -> list[Any]:
        """
        Set or clear the memory pressure condition of the module.

        @return: the resumption of paused sessions, when it cleared.
        """
        self._pressure = pressed
        events: list[Any] = []
        if not pressed:
            self._wake(events)
        return events

    def wake(self) -> list[Any]:
        """
        Resume the sessions paused for a link-wide condition if none holds
        any more (checked by L{receive_data} and L{release} themselves; call
        after the queues shrank otherwise, a session reset say).
        """
        events: list[Any] = []
        self._wake(events)
        return events

    def _wake(self, events: list[Any]) -> None:
        throttled = self._throttled
        if not throttled or self._holding or self._pressure:
            return
        if self._queue_over:
            if self._queued > self._queue_limit // 2:
                return
            self._queue_over = False
        half = self.config.high_water // 2
        sessions = self._sessions
        for sid in throttled:
            s = sessions.get(sid)
            if s is not None and s.over_high and s.pending_bytes <= half:
                s.over_high = False
                events.append(SessionWritable(sid))
        throttled.clear()

    def _remove(self, s: SessionState) -> None:
        """
        Forget a session; L{LinkConnection} defines it.
        """
        raise NotImplementedError  # pragma: no cover
