# -*- test-case-name: tests.link.test_flow -*-
"""
The sending half of a L{LinkConnection}: credit, send queues, fairness.

A session sends while it has both its own credit (granted by the peer per
session) and connection credit (the peer's budget over all sessions).  What
exceeds either waits in the session's queue.  Sessions blocked only by the
connection budget wait in C{_ready}, an insertion-ordered set served round
robin, one frame each, when connection credit returns: no event walks all
sessions.
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
        connection credit.
    """

    def __init__(self, config: LinkConfig) -> None:
        self.config = config
        self._out: list[bytes | memoryview] = []
        self._sessions: dict[int, SessionState] = {}
        self._ready: dict[int, None] = {}
        self._send_conn_credit = 0
        self._peer_window = 0
        self._peer_budget = 0

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

        @return: whether C{s}'s queue is over the high-water mark.
        """
        n = len(data)
        if n == 0:
            return s.over_high
        s.pending.append(data)
        s.pending_bytes += n
        self._flush_session(s, None)
        if s.pending_bytes > self.config.high_water:
            s.over_high = True
        return s.over_high

    def _flush_session(self, s: SessionState, events: list[Any] | None, frames: int = -1) -> None:
        """
        Send what credit allows from C{s}'s queue (at most C{frames} frames
        if C{frames} >= 0), then its FIN if it was asked for and due.
        """
        out = self._out
        pending = s.pending
        while pending and frames != 0 and s.send_credit > 0 and self._send_conn_credit > 0:
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
            self._send_conn_credit -= n
            s.pending_bytes -= n
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
        if s.over_high and s.pending_bytes <= self.config.high_water // 2:
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
        ready = self._ready
        while ready and self._send_conn_credit > 0:
            sid = next(iter(ready))
            del ready[sid]
            s = self._sessions.get(sid)
            if s is not None:
                self._flush_session(s, events, frames=1)

    def _remove(self, s: SessionState) -> None:
        """
        Forget a session; L{LinkConnection} defines it.
        """
        raise NotImplementedError  # pragma: no cover
