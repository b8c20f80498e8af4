# -*- test-case-name: tests.link.test_twisted -*-
"""
L{SessionCalls}: what a L{nfltr.link.transport.LinkSession} asks of the
L{nfltr.link.twisted.LinkProtocol} that carries it (data, FIN, reset,
consumed bytes, the answer to an OPEN), each queued on the link's
L{LinkConnection} and flushed as the link flushes.
"""

from __future__ import annotations

from typing import Any

from ._connection import LinkConnection
from ._events import SessionClosed


class SessionCalls:
    """
    The calls of a link's sessions; L{nfltr.link.twisted.LinkProtocol} holds
    the state they read, declared here.
    """

    connection: LinkConnection | None
    _lost: bool
    _flushPending: bool
    _sessions: dict[int, Any]

    def _scheduleFlush(self) -> None:
        raise NotImplementedError  # pragma: no cover

    def _dispatch(self, events: list[Any]) -> None:
        raise NotImplementedError  # pragma: no cover

    def _closeIfDrained(self) -> None:
        raise NotImplementedError  # pragma: no cover

    def sendData(self, sid: int, data: bytes, head: bytes | None = None) -> bool:
        """
        Queue data (after C{head}: L{LinkConnection.send_if_open}) on a session; C{True}: pause.
        """
        conn = self.connection
        if conn is None or self._lost:
            return False
        overHigh = conn.send_if_open(sid, data, head)
        if not self._flushPending:
            self._scheduleFlush()
        return overHigh

    def sendFin(self, sid: int) -> None:
        """
        Half-close a session.
        """
        conn = self.connection
        if conn is None or self._lost or not conn.established:
            return
        if not conn.is_open(sid):
            return  # a frame later in the batch being dispatched ended it
        if conn.send_fin(sid):
            # The peer's FIN is in: the session is closed once the events
            # being dispatched (its data, that FIN) have been delivered.
            self._dispatch([SessionClosed(sid)])
        self._scheduleFlush()
        self._closeIfDrained()

    def resetSession(self, sid: int, code: int, reason: str) -> None:
        """
        Reset a session and forget it.
        """
        self._sessions.pop(sid, None)
        conn = self.connection
        if conn is not None and not self._lost:
            conn.reset_session(sid, code, reason)
            self._dispatch(conn.wake())
            self._scheduleFlush()
            self._closeIfDrained()

    def consumed(self, sid: int, n: int) -> None:
        """
        Bytes of a session left its queue: credit may go back.
        """
        conn = self.connection
        if conn is not None and not self._lost and conn.consumed(sid, n):
            self._scheduleFlush()

    def acceptSession(self, sid: int) -> None:
        """
        Answer the peer's OPEN of a session with ACCEPT, if it asked for
        one and has not had it (L{LinkConnection.accept_session}).
        """
        conn = self.connection
        if conn is not None and not self._lost and conn.established \
                and conn.accept_session(sid):
            self._scheduleFlush()
