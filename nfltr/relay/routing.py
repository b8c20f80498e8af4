# -*- test-case-name: tests.relay.test_handler -*-
"""
Join a client's session to a new session on an agent's link.

The two sessions are spliced (L{nfltr.splice}): bytes, backpressure and
half-close travel both ways.  When one side's session is reset (the agent
could not reach its service, the client gave up), the other side's session
is reset with the same code and reason (through L{nfltr.wire.peerText}: one
peer's words reach the other as one short printable line), so the client
learns why; when one side's link is lost, the other side's session is reset
with C{CANCEL}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error
from twisted.python.failure import Failure

from nfltr.link import ErrorCode
from nfltr.link.twisted import LinkSession, LinkUnavailable, SessionResetError
from nfltr.streams import SpliceEnd
from nfltr.wire import peerText

AGENT_UNAVAILABLE = "agent unavailable (draining, or at its session limit)"


class SessionEnd(SpliceEnd):
    """
    One end of a spliced pair of link sessions.  Ends the other session the
    way this one ended: cleanly, with the same reset, or with C{CANCEL}
    naming C{lostReason}.

    @ivar lostReason: the reason given to the other side when this side's
        session ends with an error that is not a reset.
    """

    def __init__(self, lostReason: str) -> None:
        super().__init__()
        self.lostReason = lostReason

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        """
        Pass a reset on with its code and reason, then close as a splice end
        does.
        """
        other = self.other
        if not reason.check(error.ConnectionDone) and other is not None and (
            other.connected and not other.closed
        ):
            abortWith = getattr(other.transport, "abortWith", None)
            if abortWith is not None:
                value = reason.value
                if isinstance(value, SessionResetError):
                    code, why = value.code, peerText(value.reason)
                else:
                    code, why = ErrorCode.CANCEL, self.lostReason
                if self.joined:
                    other.transport.unregisterProducer()
                # Closed first: the other end's connectionLost, which the
                # abort may call at once, must not act on this end.
                self.closed = True
                abortWith(code, why)
        super().connectionLost(reason)


def join_sessions(clientSession: LinkSession, agentLink: Any, target: str) -> bool:
    """
    Open C{target} on C{agentLink} and splice it to C{clientSession}, which
    the client opened and nobody accepted yet.  If no session can be opened
    on the agent's link, reset the client's with C{GOING_AWAY}: not the
    service's refusal (C{CONNECT_FAILED}), which only the agent can report.

    @return: whether the sessions were joined.
    """
    clientEnd, agentEnd = SessionEnd("client link lost"), SessionEnd("agent link lost")
    clientEnd.other, agentEnd.other = agentEnd, clientEnd
    try:
        agentLink.openSession(target, agentEnd)
    except LinkUnavailable:
        clientSession.abortWith(ErrorCode.GOING_AWAY, AGENT_UNAVAILABLE)
        return False
    if agentEnd.closed:
        # The link went away while the OPEN was being prepared.
        clientSession.abortWith(ErrorCode.GOING_AWAY, AGENT_UNAVAILABLE)
        return False
    clientSession.accept(clientEnd)
    return True
