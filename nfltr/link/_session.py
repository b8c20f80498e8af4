# -*- test-case-name: tests.link.test_connection -*-
"""
The state of one session inside a L{LinkConnection}.
"""

from __future__ import annotations

from collections import deque

#: L{SessionState.accept}: nothing to answer or wait for (no C{WANT_ACCEPT}).
NO_ACCEPT = 0
#: This side opened it with C{WANT_ACCEPT}: "opening (local)" until ACCEPT.
AWAITING = 1
#: The peer's ACCEPT arrived.
ACCEPTED = 2
#: The peer opened it with C{WANT_ACCEPT}: this side owes ACCEPT or RESET.
OWED = 3
#: This side sent its ACCEPT.
ANSWERED = 4


class SessionState:
    """
    One session's credit, send queue and half-close flags.

    @ivar local: C{True} if this side opened it.
    @ivar send_credit: bytes this side may still send before a WINDOW.
    @ivar recv_credit: bytes the peer may still send before our WINDOW.
    @ivar recv_ungranted: bytes consumed since our last WINDOW.
    @ivar pending: data written beyond the credit, oldest first; L{None}
        while nothing waits (an idle session holds no queue: an empty
        C{deque} is about 600 bytes).
    @ivar pending_bytes: the total size of C{pending}.
    @ivar fin_queued: the application asked for FIN; it leaves once
        C{pending} is empty.
    @ivar over_high: C{pending_bytes} went over the high-water mark and no
        L{SessionWritable} has been reported since.
    @ivar sent: payload bytes this side sent in DATA (and OPEN) frames.
    @ivar received: payload bytes it accepted from the peer.
    @ivar accept: where it is in the acceptance of its OPEN: L{NO_ACCEPT},
        L{AWAITING}, L{ACCEPTED}, L{OWED} or L{ANSWERED}.
    """

    __slots__ = (
        "session_id", "local", "send_credit", "recv_credit", "recv_ungranted", "pending",
        "pending_bytes", "fin_queued", "fin_sent", "fin_received", "over_high", "sent",
        "received", "accept",
    )

    def __init__(self, session_id: int, local: bool, send_credit: int, recv_credit: int) -> None:
        self.session_id = session_id
        self.local = local
        self.send_credit = send_credit
        self.recv_credit = recv_credit
        self.recv_ungranted = 0
        self.pending: deque[bytes | memoryview] | None = None
        self.pending_bytes = 0
        self.fin_queued = False
        self.fin_sent = False
        self.fin_received = False
        self.over_high = False
        self.sent = 0
        self.received = 0
        self.accept = NO_ACCEPT
